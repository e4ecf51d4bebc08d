"""copy: the Metal kernel on the CPU (every dtype, bit-exact), and the shipped source assembly
that Metal's run-time compiler gets (local includes inlined)."""
import numpy as np
import pytest

from conftest import ROOT
from gapbench.core.names import DType
from gapbench.core import dtypes
from gapbench.core import metal_cpu
from metal_kernels import DT_CODE, build, inputs, poisoned_output, ptr

DRIVER = r"""
extern "C" void run(int dt, const void* src, void* dst, unsigned n, unsigned grid) {
  by_dtype(dt, [&]<class T>() {
    uint nn = n;
    for (uint g = 0; g < grid; ++g) copy_elem<T>((const T*)src, (T*)dst, nn, g);
  });
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build("copy", DRIVER, tmp_path_factory.mktemp("copy"))


@pytest.mark.parametrize("dtype", list(DType))
def test_metal_copy_is_exact(lib, dtype):
    n = 1001
    (src,), (ref,) = inputs([np.random.default_rng().uniform(-3, 3, n).astype(np.float32)], dtype)
    dst = poisoned_output(n + 7, dtype)
    lib.run(DT_CODE[dtype], ptr(src), ptr(dst), n, n + 7)
    out = dtypes.from_bytes(dst.tobytes(), dtype)
    np.testing.assert_array_equal(out[:n], ref)
    assert np.all(np.isnan(out[n:]))


@pytest.mark.parametrize("name", ["copy", "gemv", "vjp", "gemm"])
def test_runtime_source_is_self_contained(name):
    src = metal_cpu.metal_source(ROOT / "metal" / f"{name}.metal")
    assert '#include "' not in src and "#define GB_INSTANTIATE" in src
    assert "GB_INSTANTIATE_ALL(" in src.split("#define GB_INSTANTIATE_ALL", 1)[1].split("\n", 4)[-1]
    for dt in ("float", "half", "bfloat"):  # every kernel exists in every dtype
        assert f'base "_{dt}"' in src
