"""CuPy (NVIDIA GPUs): whether it can run here, and its adapter."""
from __future__ import annotations

import numpy as np

from gapbench.backends.base import Adapter, BackendInfo, gpu_record, installed, unavailable
from gapbench.core.dtypes import to_bytes
from gapbench.core.names import Backend, DType, Family
from gapbench.core.native import staging

INSTALL = "pip install 'gapbench[cupy]'"


#: what a fresh process imports to use this framework (its import is timed as the import phase)
MODULE = "cupy"


def precheck(backend: Backend) -> BackendInfo | None:
    if not installed("cupy"):
        return unavailable(backend, f"cupy not installed (No module named 'cupy'); {INSTALL}")
    return None


def info(backend: Backend) -> BackendInfo:
    try:
        import cupy
    except ImportError as e:
        return unavailable(backend, f"cupy not installed ({e}); {INSTALL}")
    dev: dict = {"cupy": cupy.__version__}
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return unavailable(backend, f"cupy sees no CUDA device ({e})", dev)
    if n < 1:
        return unavailable(backend, "cupy sees no CUDA device", dev)
    props = cupy.cuda.runtime.getDeviceProperties(0)
    dev["name"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    bus = (f"{props['pciDomainID']:04x}:{props['pciBusID']:02x}:{props['pciDeviceID']:02x}.0"
           if "pciBusID" in props else None)
    dev["gpu"] = gpu_record(0, bus)
    return BackendInfo(backend, True, device=dev)


def free_memory(backend: Backend) -> tuple[int | None, str]:
    import cupy

    return int(cupy.cuda.runtime.memGetInfo()[0]), "free device memory (cupy memGetInfo)"


def capacity(backend: Backend) -> tuple[int | None, str]:
    import cupy

    return int(cupy.cuda.runtime.memGetInfo()[1]), "device memory (cupy memGetInfo)"


def allocator_probe(backend: Backend):
    import cupy

    pool = cupy.get_default_memory_pool()
    return lambda: {"cupy_used_bytes": pool.used_bytes(), "cupy_total_bytes": pool.total_bytes()}


class CupyAdapter(Adapter):
    backend = Backend.cupy
    family = Family.cupy
    device_clock = "device_events"
    graph_reason = ""
    can_hold = True

    def __init__(self, backend: Backend = Backend.cupy):
        import cupy

        self.cp = cupy

    def setup_context(self) -> None:
        self.cp.cuda.Device(0).use()
        self.cp.empty(1, dtype=self.cp.float32)
        self.sync()

    def sync(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()

    def from_numpy(self, a):
        return self.cp.asarray(a)

    def to_numpy(self, x):
        return self.cp.asnumpy(x)

    def supports(self, dtype: DType) -> tuple[bool, str]:
        return (DType(dtype) is not DType.bf16, "cupy has no bfloat16 dtype")

    def _spin(self, cycles: int) -> None:  # the fallback of hold.py when the native gate is absent
        if not hasattr(self, "_spin_kernel"):
            self._spin_kernel = self.cp.RawKernel(
                r'extern "C" __global__ void gb_spin(long long c) {'
                r' long long t = clock64(); while (clock64() - t < c) {} }', "gb_spin")
        self._spin_kernel((1,), (1,), (self.cp.int64(cycles),))

    def array(self, a: np.ndarray, dtype: DType):
        dtype = DType(dtype)
        buf = staging().out(a.size * dtype.itemsize) if dtype is not DType.bf16 else None
        if buf is None:
            return self.cp.asarray(np.asarray(a, dtype=np.float32)).astype({DType.fp32: "float32", DType.fp16: "float16"}[dtype])
        host = to_bytes(a, dtype, buf)  # the dtype's own bytes, page-locked: one DMA
        out = self.cp.empty(host.shape, dtype=host.dtype)
        out.set(host)
        # From page-locked memory the copy may still be running when set() returns (seen on an
        # H100: fp32 GEMM inputs half overwritten by the next input staged, caught by verification):
        # the buffer is free only once it is done, on whichever stream it ran.
        self.cp.cuda.runtime.deviceSynchronize()
        return out

    def copy_array(self, x, a: np.ndarray, dtype: DType):
        return x.copy()

    def host_values(self, x) -> np.ndarray:
        return self.cp.asnumpy(x)

    def host_view(self, x) -> np.ndarray:
        """Copied into the page-locked staging buffer (core.native.staging)."""
        buf = staging().out(x.nbytes)
        if buf is None:
            return self.host_values(x)
        dst = buf[:x.nbytes].view(x.dtype).reshape(x.shape)
        x.get(out=dst)
        self.cp.cuda.runtime.deviceSynchronize()  # the values are there once the copy is done
        return dst

    def set_parity_pads(self, on: bool) -> bool:
        return self._stream_hold().set_parity_pads(on)

    @property
    def parity_pads(self) -> bool:
        return getattr(self, "hold", None) is not None and self.hold.parity_pads

    def _stream_hold(self):
        if getattr(self, "hold", None) is None:  # held as for torch (hold.py), one event pair
            from gapbench.backends.hold import StreamHold

            self.hold = StreamHold(self.cp.cuda.Device().id, self._spin)
            self._timing = self.cp.cuda.Event(), self.cp.cuda.Event()
        return self.hold

    @property
    def can_scrub(self) -> bool:
        return self._stream_hold().can_scrub

    def empty_kernel(self):
        """An empty RawKernel, one thread."""
        if not hasattr(self, "_empty_kernel"):
            self._empty_kernel = self.cp.RawKernel(r'extern "C" __global__ void gb_empty() {}', "gb_empty")
        k = self._empty_kernel
        return lambda: k((1,), (1,), ())

    def stream_handle(self):
        return int(self.cp.cuda.get_current_stream().ptr)

    def timing_streams(self, n: int) -> int:
        handles = self._stream_hold().timing_streams(n)
        if not handles:
            return 1
        have = getattr(self, "_streams", [])
        if len(have) < len(handles):  # the same streams every time: CuPy's pool keeps blocks per stream
            self._streams = [self.cp.cuda.ExternalStream(h) for h in handles]
        return len(handles)

    def use_stream(self, i: int) -> None:
        if i == 0 and not getattr(self, "_streams", None):
            return
        self._streams[i].use()

    def time_device(self, fn, inner, held=True, scrub=None):
        cp = self.cp
        hold = self._stream_hold()
        stream = cp.cuda.get_current_stream()
        return hold.time_events(stream.ptr, stream, *self._timing, fn, inner, cp.cuda.get_elapsed_time,
                                held=held, scrub=scrub)

    def time_device_each(self, fn, n, scrub=None):
        hold = self._stream_hold()
        stream = self.cp.cuda.get_current_stream()
        return hold.time_events_each(stream.ptr, stream, *self._timing, fn, n, self.cp.cuda.get_elapsed_time,
                                     scrub=scrub)

    def _captured(self, fn, inner: int):
        """(a CUDA graph of `inner` calls of fn, the last call's output, the stream it was captured
        on), warmed up once on that stream first."""
        stream = self.cp.cuda.Stream(non_blocking=True)
        with stream:
            fn()
            stream.synchronize()
            stream.begin_capture()
            for _ in range(inner):
                out = fn()
            g = stream.end_capture()
        return g, out, stream

    def graph(self, fn, inner):
        cp = self.cp
        g, _, stream = self._captured(fn, inner)
        start, stop = cp.cuda.Event(), cp.cuda.Event()

        def replay() -> float:
            start.record(stream)
            g.launch(stream)
            stop.record(stream)
            stop.synchronize()
            return cp.cuda.get_elapsed_time(start, stop) * 1e-3

        return replay

    def capture(self, fn):
        cp = self.cp
        g, out, stream = self._captured(fn, 1)
        stream.synchronize()

        def replay():
            g.launch(cp.cuda.get_current_stream())  # held and timed on the stream the eager op uses
            return out
        return replay

    op_text = {"add": "cupy.add(a, b, out=c), {n} fp32 element(s)"}

    def empty_like(self, x):
        return self.cp.empty_like(x)

    def add_into(self, a, b, out):
        return self.cp.add(a, b, out=out)

    def poison(self, x):
        x.fill(np.nan)
        return x
