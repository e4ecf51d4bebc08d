"""MLX (mlx-cpu, mlx-gpu: Metal on a Mac, CUDA on Linux): whether it can run here, and its adapter."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from gapbench.backends.base import Adapter, BackendInfo, gpu_record, installed, unavailable
from gapbench.core.names import Backend, DType, Family


def install_hint() -> str:
    return "pip install mlx" if sys.platform == "darwin" else "pip install 'mlx[cpu]' (or 'mlx[cuda13]' on NVIDIA)"


#: what a fresh process imports to use this framework (its import is timed as the import phase)
MODULE = "mlx.core"


def precheck(backend: Backend) -> BackendInfo | None:
    if not installed("mlx"):
        return unavailable(backend, f"mlx not installed or has no backend (No module named 'mlx'); {install_hint()}")
    return None


def info(backend: Backend) -> BackendInfo:
    try:
        import mlx.core as mx
    except ImportError as e:
        return unavailable(backend, f"mlx not installed or has no backend ({e}); {install_hint()}")
    dev: dict = {"mlx": getattr(mx, "__version__", "?")}
    gpu = backend is Backend.mlx_gpu
    try:
        ok = mx.is_available(mx.gpu if gpu else mx.cpu)
    except Exception as e:
        return unavailable(backend, f"mlx device query failed: {e}", dev)
    if not ok:
        why = ("mlx has no GPU backend here: install 'mlx[cuda13]' on NVIDIA Linux, plain mlx on macOS"
               if gpu else "mlx CPU backend missing: install 'mlx[cpu]'")
        return unavailable(backend, why, dev)
    cls = backend.device_class.value
    try:
        di = mx.device_info() if gpu and hasattr(mx, "device_info") else {}
        dev["name"] = str(di.get("device_name", "")) or ("cpu" if not gpu else cls)
    except Exception:
        dev["name"] = cls
    if gpu and sys.platform.startswith("linux"):  # MLX on CUDA: its device 0 (no bus id from MLX)
        dev["gpu"] = gpu_record(0)
    return BackendInfo(backend, True, device=dev)


def capacity(backend: Backend) -> tuple[int | None, str]:
    if backend is Backend.mlx_gpu:
        import mlx.core as mx

        di = mx.device_info()
        for k in ("max_recommended_working_set_size", "memory_size"):
            if di.get(k):
                return int(di[k]), f"mlx.device_info {k}"
    return None, "unknown"


free_memory = capacity  # MLX reports no free figure: what the device can hold


def allocator_probe(backend: Backend):
    import mlx.core as mx

    return lambda: {"mlx_active_bytes": mx.get_active_memory(), "mlx_peak_bytes": mx.get_peak_memory(),
                    "mlx_cache_bytes": mx.get_cache_memory()}


class MLXAdapter(Adapter):
    graph_reason = "MLX has no user-visible graph replay (mx.compile fuses, it does not replay launches)"

    family = Family.mlx

    def __init__(self, backend: Backend):
        import mlx.core as mx

        self.mx = mx
        self.backend = backend
        self.device = backend.device

    def setup_context(self) -> None:
        mx = self.mx
        mx.set_default_device(mx.cpu if self.backend is Backend.mlx_cpu else mx.gpu)
        mx.eval(mx.array([1.0], dtype=mx.float32))
        mx.synchronize()

    def sync(self) -> None:
        self.mx.synchronize()

    def from_numpy(self, a):
        x = self.mx.array(a)
        self.mx.eval(x)
        return x

    def to_numpy(self, x):
        self.mx.eval(x)
        return np.array(x)

    def dtype_of(self, dtype: DType):
        mx = self.mx
        return {DType.fp32: mx.float32, DType.fp16: mx.float16, DType.bf16: mx.bfloat16}[DType(dtype)]

    def array(self, a: np.ndarray, dtype: DType):
        x = self.mx.array(np.asarray(a, dtype=np.float32)).astype(self.dtype_of(dtype))
        self.mx.eval(x)
        return x

    def host_values(self, x) -> np.ndarray:
        return np.array(x.astype(self.mx.float32))

    def evaluated(self, fn):
        """MLX is lazy: an op is done only when evaluated."""
        mx = self.mx
        return lambda: mx.eval(fn())


    op_text = {"add": "mx.add(a, b) evaluated, {n} fp32 element(s) on {device}"}

    def describe(self, op, **kw):
        return super().describe(op, device=self.device, **kw)

    def empty_like(self, x):
        return self.mx.zeros_like(x)

    def add_into(self, a, b, out):
        # MLX arrays are immutable: each op makes a fresh array, evaluated asynchronously here.
        c = self.mx.add(a, b)
        self.mx.async_eval(c)
        return c

    def poison(self, x):
        return self.mx.full(x.shape, float("nan"), dtype=x.dtype)


def rank_env(nproc: int, device: str, d: Path):
    """What mlx.launch would set, per rank, for `nproc` ranks on this machine (a function of the
    rank for gapbench.core.process.run_ranks): on CPU the ring's hostfile (one 127.0.0.1:port per
    rank, written in `d`) and MLX_RANK; on CUDA NCCL_HOST_IP/NCCL_PORT/MLX_WORLD_SIZE and one
    visible GPU per rank."""
    from gapbench.core.process import free_ports

    ports = free_ports(nproc + 1)
    if device == "cpu":
        hf = d / "mlx-hosts.json"
        hf.write_text(json.dumps([[f"127.0.0.1:{p}"] for p in ports[:nproc]]))
        return lambda r: {"MLX_RANK": str(r), "MLX_HOSTFILE": str(hf), "GAPBENCH_MLX_BACKEND": "ring"}
    return lambda r: {"MLX_RANK": str(r), "MLX_WORLD_SIZE": str(nproc), "NCCL_HOST_IP": "127.0.0.1",
                      "NCCL_PORT": str(ports[-1]), "CUDA_VISIBLE_DEVICES": str(r), "LOCAL_RANK": "0",
                      "GAPBENCH_MLX_BACKEND": "nccl"}
