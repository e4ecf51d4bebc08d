"""gemm: the Metal kernel on the CPU against float64 in every dtype, batched and ragged."""
import numpy as np
import pytest

from gapbench.core.names import DType
from gapbench.core import dtypes
from gapbench.ops import gemm
from metal_kernels import DT_CODE, build, inputs, poisoned_output, ptr

DRIVER = r"""
extern "C" void run(int dt, const void* A, const void* B, void* C, unsigned b, unsigned m, unsigned n, unsigned k) {
  by_dtype(dt, [&]<class T>() {
    uint mm = m, nn = n, kk = k;
    for (uint z = 0; z < b; ++z)
      for (uint y = 0; y < m + 2; ++y)      // two rows and columns past the edge: must not write
        for (uint x = 0; x < n + 2; ++x) {
          uint3 pos; pos.x = x; pos.y = y; pos.z = z;
          gemm_naive<T>((const T*)A, (const T*)B, (T*)C, mm, nn, kk, pos);
        }
  });
}

// v2 as Metal dispatches it: ceil(n/32) x ceil(m/32) x b threadgroups of 128 threads.
extern "C" void run_simd(int dt, const void* A, const void* B, void* C, unsigned b, unsigned m, unsigned n,
                         unsigned k) {
  by_dtype(dt, [&]<class T>() {
    uint mm = m, nn = n, kk = k;
    uint3 groups;
    groups.x = (n + 31) / 32; groups.y = (m + 31) / 32; groups.z = b;
    gb_cpu::dispatch_threadgroups(groups, 128, [&](uint3 g, uint tid, uint sg, uint) {
      gemm_simd<T>((const T*)A, (const T*)B, (T*)C, mm, nn, kk, g, tid, sg);
    });
  });
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build("gemm", DRIVER, tmp_path_factory.mktemp("gemm"))


@pytest.mark.parametrize("dtype", list(DType))
@pytest.mark.parametrize("b,m,n,k", [(1, 1, 1, 1), (2, 5, 7, 3), (3, 16, 24, 40), (2, 70, 33, 50)])
@pytest.mark.parametrize("entry", ["run", "run_simd"])
def test_metal_gemm_matches_float64(lib, dtype, b, m, n, k, entry):
    """v1 (one thread per output) and v2 (simdgroup 8x8 fragments from threadgroup tiles, partial
    tiles on every edge in the last shape)."""
    rng = np.random.default_rng()
    (A, B), (A64, B64) = inputs([rng.uniform(-1, 1, (b, m, k)).astype(np.float32),
                                  rng.uniform(-1, 1, (b, k, n)).astype(np.float32)], dtype)
    C = poisoned_output(b * m * n, dtype)
    getattr(lib, entry)(DT_CODE[dtype], ptr(A), ptr(B), ptr(C), b, m, n, k)
    ok, detail = dtypes.check(dtypes.from_bytes(C.tobytes(), dtype), dtypes.expected(lambda a: np.matmul(*a), [A64, B64], k), dtype)
    assert ok, detail


def test_declared_work():
    assert gemm.SPEC.work({"batch": 2, "m": 3, "n": 4, "k": 5}, "bf16")["flops"] == 2 * 2 * 3 * 4 * 5
