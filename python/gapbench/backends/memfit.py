"""Whether a case fits in memory, asked before anything is allocated: a shape too large for the
machine is a row (or an argument error) that says how much it needs and how much there is, not a
MemoryError traceback or a machine swapping itself to a halt.

Capacity is what the backend's device can still take: available host memory (psutil) for CPU
backends, free device memory for CUDA (torch/cupy) or the device's total where only that is known
(gapbench._native.cuda.status), the recommended working set on Apple GPUs."""
from __future__ import annotations

GB = 1e9


def host_available() -> tuple[int | None, str]:
    """Bytes of host memory available now, and where the figure came from."""
    try:
        import psutil

        return int(psutil.virtual_memory().available), "available host memory (psutil)"
    except Exception as e:  # psutil absent or unreadable: no check rather than a false refusal
        return None, f"host memory unreadable: {e}"


def device_available(backend: str) -> tuple[int | None, str]:
    """Bytes the backend's device can still take, and where the figure came from."""
    from gapbench.backends import registry as bk

    try:
        if bk.device_class_of(backend) == "cpu":
            return host_available()
        if backend == "native-cuda":
            total = bk.info(backend).device.get("total_memory")
            return (int(total), "device total memory (gapbench._native.cuda.status)") if total else (None, "unknown")
        if backend == "torch-cuda":
            import torch

            return int(torch.cuda.mem_get_info()[0]), "free device memory (torch.cuda.mem_get_info)"
        if backend == "cupy-cuda":
            import cupy

            return int(cupy.cuda.runtime.memGetInfo()[0]), "free device memory (cupy memGetInfo)"
        return device_capacity(backend)
    except Exception as e:
        return None, f"device memory unreadable: {e}"


def shortfall(need: float, have: tuple[int | None, str], what: str) -> str:
    """'' when `need` bytes fit in `have` (or `have` is unknown), else the sentence saying not."""
    cap, source = have
    if cap is None or need <= cap:
        return ""
    return (f"does not fit: needs about {need / GB:.3g} GB of {what}, {cap / GB:.3g} GB is there ({source}); "
            "choose a smaller shape")


def device_capacity(backend: str) -> tuple[int | None, str]:
    """Bytes the backend's device can hold, and where that figure came from."""
    try:
        if backend == "torch-cuda":
            import torch

            return int(torch.cuda.mem_get_info()[1]), "torch.cuda.mem_get_info total"
        if backend == "mlx-gpu":
            import mlx.core as mx

            di = mx.device_info()
            for k in ("max_recommended_working_set_size", "memory_size"):
                if di.get(k):
                    return int(di[k]), f"mlx.device_info {k}"
        if backend in ("torch-mps",):  # unified memory: the recommended working set of the GPU
            import torch

            if hasattr(torch.mps, "recommended_max_memory"):
                return int(torch.mps.recommended_max_memory()), "torch.mps.recommended_max_memory"
        import psutil

        return int(psutil.virtual_memory().total), "system memory (psutil)"
    except Exception as e:
        return None, f"unreadable: {e}"
