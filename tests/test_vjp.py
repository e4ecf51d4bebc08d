"""vjp: the Metal kernels (dx = W^T v, dW = v x^T) on the CPU against float64 in every dtype."""
import numpy as np
import pytest

from gapbench.core.names import DType
from gapbench.core import dtypes
from gapbench.ops import vjp_dw, vjp_dx
from metal_kernels import DT_CODE, build, inputs, poisoned_output, ptr

DRIVER = r"""
extern "C" void run_dx(int dt, const void* W, const void* v, void* dx, unsigned m, unsigned k, unsigned grid) {
  by_dtype(dt, [&]<class T>() {
    uint mm = m, kk = k;
    for (uint g = 0; g < grid; ++g) vjp_dx_col<T>((const T*)W, (const T*)v, (T*)dx, mm, kk, g);
  });
}
extern "C" void run_dw(int dt, const void* v, const void* x, void* dW, unsigned m, unsigned k, unsigned grid) {
  by_dtype(dt, [&]<class T>() {
    uint mm = m, kk = k;
    for (uint g = 0; g < grid; ++g) vjp_dw_elem<T>((const T*)v, (const T*)x, (T*)dW, mm, kk, g);
  });
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build("vjp", DRIVER, tmp_path_factory.mktemp("vjp"))


@pytest.mark.parametrize("dtype", list(DType))
@pytest.mark.parametrize("m,k", [(1, 1), (9, 31), (128, 64), (300, 17)])
def test_metal_vjp_matches_float64(lib, dtype, m, k):
    rng = np.random.default_rng()
    W = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    v = rng.uniform(-1, 1, m).astype(np.float32)
    x = rng.uniform(-1, 1, k).astype(np.float32)
    (Wb, vb, xb), (W64, v64, x64) = inputs([W, v, x], dtype)
    dx = poisoned_output(k + 3, dtype)
    lib.run_dx(DT_CODE[dtype], ptr(Wb), ptr(vb), ptr(dx), m, k, k + 3)
    out = dtypes.from_bytes(dx.tobytes(), dtype)
    ok, detail = dtypes.check(out[:k], dtypes.expected(lambda a: a[0].T @ a[1], [W64, v64], m), dtype)
    assert ok, "dx: " + detail
    assert np.all(np.isnan(out[k:]))
    dW = poisoned_output(m * k + 3, dtype)
    lib.run_dw(DT_CODE[dtype], ptr(vb), ptr(xb), ptr(dW), m, k, m * k + 3)
    out = dtypes.from_bytes(dW.tobytes(), dtype)
    ok, detail = dtypes.check(out[: m * k], dtypes.expected(lambda a: np.outer(*a), [v64, x64], 1), dtype)
    assert ok, "dW: " + detail
    assert np.all(np.isnan(out[m * k:]))


def test_declared_work():
    s = {"m": 8, "k": 4}
    assert vjp_dx.SPEC.work(s, "fp16") == {"flops": 64.0, "bytes": 2.0 * (32 + 8 + 4)}
    assert vjp_dw.SPEC.work(s, "fp16") == {"flops": 32.0, "bytes": 2.0 * (8 + 4 + 32)}
