"""Access to the compiled extension, gapbench._native, with the reason when it is missing, and the
mapping of gapbench's op / dtype / impl / cache names to the extension's enums (the names are the
enum members' names: no integer codes are kept on the Python side)."""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable

import numpy as np

from gapbench.core.names import CacheMode, DType

_native: ModuleType | None = None
_error: str | None = None


def load() -> ModuleType:
    """The extension module; raises RuntimeError saying how to build it when it is absent."""
    global _native, _error
    if _native is not None:
        return _native
    if _error is None:
        try:
            _native = importlib.import_module("gapbench._native")
            return _native
        except ImportError as e:  # a source checkout on sys.path instead of an install
            _error = (f"gapbench._native is not importable ({e}); install the package with "
                      "`pip install .` from the repository root")
    raise RuntimeError(_error)


def build_info() -> dict:
    try:
        return dict(load().build_info)
    except RuntimeError as e:
        return {"error": str(e)}


def _member(enum_name: str, name: str) -> Any:
    enum = getattr(load(), enum_name)
    try:
        return getattr(enum, name)  # works for enum.Enum (pybind11 >= 3) and py::enum_ alike
    except AttributeError:
        names = [n for n in dir(enum) if not n.startswith("_") and isinstance(getattr(enum, n), enum)]
        raise ValueError(f"unknown {enum_name} {name!r}; choose from {', '.join(names)}") from None


def op(name: str) -> Any:
    """_native.Op for an op name (copy, gemv, vjp_dx, vjp_dw, gemm)."""
    return _member("Op", name)


def dtype(dt: DType) -> Any:
    """_native.DType for an element type."""
    return _member("DType", dt.value if isinstance(dt, DType) else DType.parse(dt).value)


def impl(name: str) -> Any:
    """_native.Impl for reference, dispatch, vendor or vendor_tf32."""
    return _member("Impl", name)


def cache(mode: CacheMode) -> Any:
    """_native.Cache for an L2 mode (hot, cold_clean, cold_dirty)."""
    return _member("Cache", mode.value if isinstance(mode, CacheMode) else CacheMode.parse(mode).value)


def kernel(name: str) -> Any:
    """The _native.Kernel member of a strategy name (csrc/ops.def's CUDA kernels)."""
    return _member("Kernel", name)


def kernels_of(op_name: str, lab: bool = False) -> list[str]:
    """The CUDA kernels csrc/ops.def declares for an op, reference first, by strategy name; with
    `lab`, then the lab's kernels of the op that never shipped (csrc/lab.def)."""
    from gapbench.core import opdecl

    return list(opdecl.get(op_name).kernels) + (list(opdecl.lab_kernels().get(op_name, ())) if lab else [])


def launch_kernel(name: str) -> Any:
    """_native.LaunchKernel for null or add1."""
    return _member("LaunchKernel", name)


def not_applicable() -> type[Exception]:
    """The extension's NotApplicable exception class (a ValueError)."""
    return load().NotApplicable


def tool(name: str):
    """The installed standalone program gapbench/bin/<name> (the plain C++ loops, the lab's
    binaries), or None where it was not built or is not executable."""
    import os
    from importlib import resources
    from pathlib import Path

    path = Path(str(resources.files("gapbench").joinpath("bin", name)))
    return path if path.is_file() and os.access(path, os.X_OK) else None


class Staging:
    """One reused host buffer for copies to and from the device: `out(n)` is a contiguous uint8
    array of at least n bytes, page-locked where `alloc` gives that (the CUDA part's
    pinned_bytes: a copy from or into it is one DMA, where one through pageable memory goes
    through the driver's staging buffer, and a read into a fresh array also faults in its
    pages), grown as needed and otherwise kept. Each use is synchronous and over before the
    next: an upload is on the device once its call returns, and a read-back's values are
    checked before anything reads again. None where `alloc` fails (no driver, no CUDA part):
    the caller then copies as it would without it."""

    GRAIN = 16 * 2**20

    def __init__(self, alloc: Callable[[int], np.ndarray]):
        self._alloc, self._buf, self.failed = alloc, None, ""

    def out(self, nbytes: int) -> np.ndarray | None:
        if self._buf is not None and self._buf.nbytes >= nbytes:
            return self._buf
        if self.failed:
            return None
        self._buf = None  # freed before the bigger one is pinned
        try:
            self._buf = self._alloc(-(-max(nbytes, 1) // self.GRAIN) * self.GRAIN)
        except (RuntimeError, MemoryError, AttributeError) as e:
            self.failed = f"{type(e).__name__}: {e}"
        return self._buf


_staging: Staging | None = None


def staging() -> Staging:
    """The process's host staging buffer (Staging over gapbench's own cuda.pinned_bytes), shared by
    the native CUDA cases and the CUDA frameworks' adapters."""
    global _staging
    if _staging is None:
        _staging = Staging(lambda n: load().cuda.pinned_bytes(n))
    return _staging


_streams: dict[int, object] = {}


def timing_streams(device: int, n: int) -> list[int]:
    """The cudaStream_t (as ints) of the process's first n timing streams of `device`: blocking
    streams (cuda/gate.h Streams) made once and kept until the process ends, on which every CUDA row
    of a bench.blas case times, one stream a paired round, the native case (use_stream_handle) and
    torch's and CuPy's rows (their external streams) alike. Kept for the process: a framework's
    current stream and its allocator's blocks refer to them after any one case or adapter is gone.
    [] for n <= 1. RuntimeError where the CUDA part cannot make them (no GPU, no driver)."""
    if n <= 1:
        return []
    if device not in _streams:
        _streams[device] = load().cuda.Streams(device, load().cuda.TIMING_STREAMS)
    made = _streams[device]
    if n > len(made):
        raise ValueError(f"{n} timing streams asked for, {len(made)} made (cuda/blas.h kTimingStreams)")
    return [made.handle(i) for i in range(n)]
