"""Whether a case fits in memory, asked before anything is allocated: a shape too large for the
machine is a row (or an argument error) that says how much it needs and how much there is, not a
MemoryError traceback or a machine swapping itself to a halt.

Capacity is what the backend's device can still take: available host memory (psutil) for CPU
backends, free device memory for CUDA (torch/cupy) or the device's total where only that is known
(gapbench._native.cuda.status), the recommended working set on Apple GPUs."""
from __future__ import annotations

from gapbench.core.names import Backend, DeviceClass

GB = 1e9


def host_available() -> tuple[int | None, str]:
    """Bytes of host memory available now, and where the figure came from."""
    try:
        import psutil

        return int(psutil.virtual_memory().available), "available host memory (psutil)"
    except Exception as e:  # psutil absent or unreadable: no check rather than a false refusal
        return None, f"host memory unreadable: {e}"


def device_available(backend: Backend) -> tuple[int | None, str]:
    """Bytes the backend's device can still take, and where the figure came from."""
    from gapbench.backends import registry

    try:
        if backend.device_class is DeviceClass.cpu:
            return host_available()
        return registry.module(backend).free_memory(backend)
    except Exception as e:
        return None, f"device memory unreadable: {e}"


def shortfall(need: float, have: tuple[int | None, str], what: str) -> str:
    """'' when `need` bytes fit in `have` (or `have` is unknown), else the sentence saying not."""
    cap, source = have
    if cap is None or need <= cap:
        return ""
    return (f"does not fit: needs about {need / GB:.3g} GB of {what}, {cap / GB:.3g} GB is there ({source}); "
            "choose a smaller shape")


def device_capacity(backend: Backend) -> tuple[int | None, str]:
    """Bytes the backend's device can hold, and where that figure came from (the host's memory for
    CPU backends and where the framework reports nothing)."""
    from gapbench.backends import registry

    try:
        cap = (None, "") if backend.device_class is DeviceClass.cpu else registry.module(backend).capacity(backend)
        if cap[0] is not None:
            return cap
        import psutil

        return int(psutil.virtual_memory().total), "system memory (psutil)"
    except Exception as e:
        return None, f"unreadable: {e}"
