"""Helpers for the tests that run gapbench's Metal kernels on the CPU (metal/compat/metal_cpu.h)."""
import ctypes

import numpy as np

from conftest import ROOT
from gapbench.core.names import DType
from gapbench.core import dtypes
from gapbench.core import metal_cpu

DT_CODE = {"fp32": 0, "fp16": 1, "bf16": 2}
DISPATCH = """
template <class F> void by_dtype(int dt, F&& f) {
  if (dt == 0) f.template operator()<float>();
  else if (dt == 1) f.template operator()<half>();
  else f.template operator()<bfloat>();
}
"""


def build(name: str, driver: str, tmp) -> ctypes.CDLL:
    return metal_cpu.build(ROOT / "metal" / f"{name}.metal", "#include GB_METAL_FILE\n" + DISPATCH + driver, tmp,
                           std="c++20")


def inputs(arrays, dtype):
    """Rounded float32 arrays -> (buffers the kernel reads, float64 values of what it reads)."""
    bufs = [np.ascontiguousarray(dtypes.to_bytes(a, dtype)) for a in arrays]
    return bufs, [dtypes.round_to(a, dtype).astype(np.float64) for a in arrays]


def poisoned_output(count, dtype):
    return np.full(count * DType(dtype).itemsize, 0xFF, dtype=np.uint8)  # NaN in every format


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)
