"""gemv: the Metal kernels on the CPU against float64 (every dtype, poisoned outputs), and the
op's declared work. The CUDA variants are checked on a GPU by tests/test_blas.py."""
import numpy as np
import pytest

from gapbench.core.names import DType
from gapbench.core import dtypes
from gapbench.ops import gemv
from metal_kernels import DT_CODE, build, inputs, poisoned_output, ptr

DRIVER = r"""
extern "C" void run(int dt, const void* A, const void* x, void* y, unsigned m, unsigned k, unsigned grid) {
  by_dtype(dt, [&]<class T>() {
    uint mm = m, kk = k;
    for (uint g = 0; g < grid; ++g) gemv_row<T>((const T*)A, (const T*)x, (T*)y, mm, kk, g);
  });
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build("gemv", DRIVER, tmp_path_factory.mktemp("gemv"))


@pytest.mark.parametrize("dtype", list(DType))
@pytest.mark.parametrize("m,k", [(1, 1), (7, 33), (64, 256), (33, 1000)])
def test_metal_gemv_row_matches_float64(lib, dtype, m, k):
    rng = np.random.default_rng()
    (A, x), (A64, x64) = inputs([rng.uniform(-1, 1, (m, k)).astype(np.float32), rng.uniform(-1, 1, k).astype(np.float32)], dtype)
    grid = m + 5  # threads past m must not write
    y = poisoned_output(m + 5, dtype)
    lib.run(DT_CODE[dtype], ptr(A), ptr(x), ptr(y), m, k, grid)
    out = dtypes.from_bytes(y.tobytes(), dtype)
    ok, detail = dtypes.check(out[:m], dtypes.expected(lambda a: a[0] @ a[1], [A64, x64], k), dtype)
    assert ok, detail
    assert np.all(np.isnan(out[m:]))


def test_declared_work():
    w = gemv.SPEC.work({"m": 100, "k": 50}, "fp32")
    assert w == {"flops": 2 * 100 * 50, "bytes": 4 * (100 * 50 + 50 + 100)}
