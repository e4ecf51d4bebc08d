"""gapbench's own probes (gapbench._native): native-cpu (always built), native-cuda (built where
the CUDA toolkit was found), native-metal (macOS on Apple Silicon). Each part says itself whether
it can run here and why not; the probes are driven by the benchmarks through gapbench._native."""
from __future__ import annotations

from gapbench.backends.base import BackendInfo, gpu_record, unavailable
from gapbench.core.env import cpu_model
from gapbench.core.names import Backend
from gapbench.core.native import load


def precheck(backend: Backend) -> BackendInfo:
    """Native backends are cheap to check for real."""
    return info(backend)


def info(backend: Backend) -> BackendInfo:
    try:
        n = load()
    except RuntimeError as e:
        return unavailable(backend, str(e))
    if backend is Backend.native_cpu:
        return BackendInfo(backend, True, device={"name": cpu_model(), "build": dict(n.build_info)})
    st = dict(n.cuda.status(0) if backend is Backend.native_cuda else n.metal.status())
    if not st.get("available"):
        return unavailable(backend, st.get("reason", "unavailable"), st)
    if backend is Backend.native_cuda:
        dv = st.get("driver_version", 0)
        st["driver"] = f"CUDA {dv // 1000}.{(dv % 1000) // 10}"
        st["gpu"] = gpu_record(0, st.get("pci_bus_id"))
    return BackendInfo(backend, True, device=st)


def capacity(backend: Backend) -> tuple[int | None, str]:
    """The device's memory as the native part reports it (total: the native probes hold no pool)."""
    dev = info(backend).device
    if backend is Backend.native_cuda and dev.get("total_memory"):
        return int(dev["total_memory"]), "device total memory (gapbench._native.cuda.status)"
    if backend is Backend.native_metal and dev.get("recommended_working_set"):
        return int(dev["recommended_working_set"]), "recommended working set (gapbench._native.metal.status)"
    return None, "unknown"


free_memory = capacity


def allocator_probe(backend: Backend):
    return lambda: {}


def cublas_candidates() -> list[str]:
    """Where a libcublas may be: the nvidia-cublas wheel that torch brings, then CUDA_HOME (the
    native CUDA part opens it at run time: gapbench builds and imports where cuBLAS is absent)."""
    import glob
    import importlib.util
    import os

    paths = []
    try:
        spec = importlib.util.find_spec("nvidia")
        for root in (spec.submodule_search_locations or []) if spec else []:
            paths += sorted(glob.glob(os.path.join(root, "*", "lib", "libcublas.so*")), reverse=True)
    except (ImportError, ValueError):
        pass
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            paths += sorted(glob.glob(os.path.join(home, "lib64", "libcublas.so*")), reverse=True)
    return [p for p in dict.fromkeys(paths) if not p.endswith(".so")] + [p for p in paths if p.endswith(".so")]
