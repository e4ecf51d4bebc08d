"""Every declared op (csrc/ops.def, as gapbench._native binds it) against its OpSpec: the spec
exists and is well formed, its shapes fit its form, its inputs are never all zeros, its work is
what its elements say, and every framework's way of running it (torch-cpu, mlx-cpu here) agrees
with the float64 reference within the op's own error bound on its ragged test shapes. Nothing here
names an op but the hand-computed work of the ops that existed when it was written."""
from __future__ import annotations

import numpy as np
import pytest

from gapbench import ops
from gapbench.backends import registry
from gapbench.core import dtypes
from gapbench.core.names import Backend, DType

SPECS = ops.all_specs()


def _id(s):
    return s.name


def test_every_declared_op_has_its_spec():
    assert [s.name for s in SPECS] == list(ops.declared())
    assert len(set(ops.choices())) == len(ops.choices())
    for group, members in ops.groups().items():
        assert group not in ops.declared() and members and all(m.group == group for m in members)


@pytest.mark.parametrize("spec", SPECS, ids=_id)
def test_spec_is_well_formed(spec):
    assert spec.form in (("n",), ("m", "k"), ("batch", "m", "n", "k"))
    for quick in (True, False):
        assert spec.shapes(quick) and all(spec.fits(s) for s in spec.shapes(quick))
    assert spec.test_shapes and all(spec.fits(s) for s in spec.test_shapes)
    assert spec.frameworks and len({f.row for f in spec.frameworks}) == len(spec.frameworks)
    rng = np.random.default_rng(3)
    shape = spec.shapes(True)[0]
    ins = spec.inputs(shape, rng)
    assert all(a.dtype == np.float32 and np.any(a != 0) for a in ins)  # a result on zeros proves nothing
    ref = spec.reference([a.astype(np.float64) for a in ins])
    assert np.all(np.isfinite(ref)) and spec.reduction(shape) >= 0
    r, w = spec.elements(shape)
    assert w == np.asarray(ref).size and r == sum(a.size for a in ins)
    work = spec.work(shape, DType.fp16)
    assert work["bytes"] == 2.0 * (r + w) and work["flops"] >= 0


@pytest.mark.parametrize("spec", [s for s in SPECS if s.values64 is not None], ids=_id)
def test_values64_is_the_reference(spec):
    """An op's block-by-block float64 reference (values64, from the float32 inputs) gives what its
    reference gives on float64 copies, on its test shapes and its first quick shape, and the
    Expected built from it checks the same as the one built from float64 copies."""
    rng = np.random.default_rng(5)
    for shape in (*spec.test_shapes, spec.shapes(True)[0]):
        ins = spec.inputs(shape, rng)
        want = np.asarray(spec.reference([a.astype(np.float64) for a in ins]), dtype=np.float64)
        got = spec.values64(ins)
        assert got.dtype == np.float64 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * max(float(np.abs(want).max()), 1e-300))
        k = int(spec.reduction(shape))
        shared = spec.shared_scale(ins, shape, [DType.fp32])  # as bench.blas builds it
        exp = spec.expected(ins, shape, scale=shared.for_dtype(DType.fp32) if shared else None)
        out = want.astype(np.float32)
        assert spec.check(out, exp, DType.fp32)[0]
        out.ravel()[0] = np.nan
        assert not spec.check(out, exp, DType.fp32)[0]
        assert k >= 1


#: work by hand on a small shape of each op's form, fp16 (2 bytes): flops, elements read + written
HAND = {
    "copy": ({"n": 10}, 0.0, 10 + 10),
    "gemv": ({"m": 3, "k": 5}, 30.0, 15 + 5 + 3),  # A, x read; y written
    "vjp_dx": ({"m": 3, "k": 5}, 30.0, 15 + 3 + 5),  # W, v read; dx written
    "vjp_dw": ({"m": 3, "k": 5}, 15.0, 3 + 5 + 15),  # v, x read; dW written
    "gemm": ({"batch": 2, "m": 3, "n": 4, "k": 5}, 240.0, 2 * (15 + 20) + 2 * 12),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_work_by_hand(name):
    shape, flops, elements = HAND[name]
    assert ops.get(name).work(shape, DType.fp16) == {"flops": flops, "bytes": 2.0 * elements}


FRAMEWORKS = [Backend.torch_cpu, Backend.mlx_cpu] + [pytest.param(b, marks=pytest.mark.cuda)
                                                     for b in (Backend.torch_cuda, Backend.cupy)]


@pytest.mark.parametrize("backend", FRAMEWORKS, ids=lambda b: b.value)
@pytest.mark.parametrize("spec", SPECS, ids=_id)
def test_framework_rows_agree_with_the_reference(spec, backend):
    info = registry.info(backend)
    if not info.available:
        pytest.skip(f"{backend}: {info.reason}")
    impls = spec.impls(backend.family)
    assert impls, f"{spec.name} has no way to run on {backend.family}"
    ad = registry.make_adapter(backend)
    ad.setup_context()
    rng = np.random.default_rng(7)
    for shape in spec.test_shapes:
        for dtype in [d for d in DType if ad.supports(d)[0]]:
            rounded = [dtypes.round_to(a, dtype) for a in spec.inputs(shape, rng)]
            exp = spec.expected(rounded, shape)
            arrays = [ad.array(a, dtype) for a in rounded]
            for impl in impls:
                got = impl.build(ad, arrays)()
                out = ad.host_values(got)
                ok, detail = spec.check(out, exp, dtype)
                assert ok, (impl.row, dtype, shape, detail)
                # host_view (the bench's read-back: a reused, page-locked buffer on a GPU) gives the same
                view = ad.host_view(got)
                assert view.shape == out.shape and np.array_equal(np.asarray(view, np.float32), np.asarray(out, np.float32))


def test_op_names_parse_once_with_a_clear_error():
    import argparse

    assert [s.name for s in ops.op_list("vjp, gemv,vjp_dx")] == ["vjp_dx", "vjp_dw", "gemv"]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown op 'conv'; choose from copy"):
        ops.op_list("gemv,conv")
    assert ops.get("conv") is None  # a name from another version's file


@pytest.mark.cuda
@pytest.mark.parametrize("backend", [Backend.torch_cuda, Backend.cupy], ids=lambda b: b.value)
def test_staged_copies_are_done_before_the_buffer_is_reused(backend):
    """array() and host_view() go through one page-locked staging buffer (core.native.staging):
    each copy must be over before the next one writes there. Two large arrays staged back to back
    (a race leaves the first one partly holding the second's values, as CuPy's set() did on an
    H100 before its copy was waited for) are read back exactly, through host_values and host_view."""
    info = registry.info(backend)
    if not info.available:
        pytest.skip(f"{backend}: {info.reason}")
    ad = registry.make_adapter(backend)
    ad.setup_context()
    rng = np.random.default_rng(11)
    for dtype in [d for d in DType if ad.supports(d)[0]]:
        xs = [dtypes.round_to(rng.standard_normal((8, 1024, 1024), dtype=np.float32), dtype) for _ in range(3)]
        arrays = [ad.array(x, dtype) for x in xs]
        for x, a in zip(xs, arrays):
            assert np.array_equal(np.asarray(ad.host_values(a), np.float32), x), dtype
        views = [np.asarray(ad.host_view(a), np.float32).copy() for a in arrays]
        assert all(np.array_equal(v, x) for v, x in zip(views, xs)), dtype
