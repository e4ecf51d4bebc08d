"""The result check (gapbench.core.dtypes.check, through each op's error model) against injected
faults, for every declared op (gapbench.ops) and dtype, on the op's own fault shape: correct answers
(the exact result rounded to the dtype, the op evaluated in float32, and, for a multilinear op, fp32
accumulations in two orders, one truncating as tensor cores do) pass, and each of these faults is
caught: a dropped term of the reduction, 2 zeroed outputs, a stale accumulator (a previous result
added), one NaN, and an index shifted by one or transposed. A new op is covered by declaring its
`fault_shape` and `term` (or `dropped`): nothing here names an op. The old normwise bound
(OLD_TOLERANCE) lets some of the faults through: that is what this check replaces."""
from __future__ import annotations

import numpy as np
import pytest

from gapbench import ops
from gapbench.core import dtypes
from gapbench.core.names import DType, Precision
from gapbench.ops.spec import Bound

#: The bound this check replaces: ||out - ref|| / ||ref|| against float64 (dtypes.py before).
OLD_TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "fp16": 5e-3, "bf16": 3e-2}


def rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    out, ref = np.asarray(out, dtype=np.float64).ravel(), np.asarray(ref, dtype=np.float64).ravel()
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


def old_check(spec, out, exp: dtypes.Expected, precision):
    if not np.all(np.isfinite(out)):
        return False, "not finite"
    err = rel_error(out, exp.values)
    return err <= OLD_TOLERANCE[precision.value], f"rel. error {err:.2e}"


def new_check(spec, out, exp, precision):
    return spec.check(out, exp, precision)


def rounded_inputs(spec, precision: Precision, seed: int) -> list[np.ndarray]:
    store = DType.fp32 if precision is Precision.tf32 else DType(precision.value)
    shape = spec.fault_shape
    return [dtypes.round_to(a, store).astype(np.float64) for a in spec.inputs(shape, np.random.default_rng(seed))]


def to_tf32(x: np.ndarray) -> np.ndarray:
    """fp32 values rounded to tf32's 10 mantissa bits (nearest, ties away), as float64."""
    u = np.asarray(x, np.float32).view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


def _rz32(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding toward zero (a truncating accumulator)."""
    y = x.astype(np.float32)
    over = np.abs(y.astype(np.float64)) > np.abs(x)
    y[over] = np.nextafter(y[over], np.float32(0))
    return y


def accumulate(spec, ins: list[np.ndarray], k: int, order: str) -> np.ndarray:
    """A multilinear op summed term by term in an fp32 accumulator: `sequential` (one running sum,
    round to nearest) or `tensorcore` (exact sums of 16 products added to a running sum that
    truncates)."""
    acc = np.zeros_like(spec.reference(ins), dtype=np.float32)
    step = 1 if order == "sequential" else 16
    for j0 in range(0, k, step):
        chunk = sum(spec.term(ins, j) for j in range(j0, min(j0 + step, k)))
        s = acc.astype(np.float64) + chunk
        acc = s.astype(np.float32) if order == "sequential" else _rz32(s)
    return acc.astype(np.float64)


def _store(precision: Precision, x: np.ndarray) -> np.ndarray:
    store = DType.fp32 if precision is Precision.tf32 else DType(precision.value)
    return dtypes.round_to(np.asarray(x).astype(np.float32), store).astype(np.float64)


def correct_answers(spec, precision: Precision, ins: list[np.ndarray], k: int) -> dict[str, np.ndarray]:
    mul_ins = [to_tf32(a) for a in ins] if precision is Precision.tf32 else ins
    out = {"exact": spec.reference(mul_ins)}
    if k > 0:
        out["fp32 evaluation"] = np.asarray(spec.reference([a.astype(np.float32) for a in mul_ins])).astype(np.float64)
        if spec.term is not None and k > 1:
            if precision is not Precision.fp32 or spec.bound is not Bound.compute:  # keeps the fp32-GEMM run short
                out["fp32 sequential"] = accumulate(spec, mul_ins, k, "sequential")
            out["fp32 tensor-core (truncating)"] = accumulate(spec, mul_ins, k, "tensorcore")
    return {name: _store(precision, v) for name, v in out.items()}


def _dropped_terms(spec, ins, exact, k: int) -> list[int]:
    """The last term (a ragged tail) and one of median effect among a sample: a term below one
    output ulp everywhere is invisible to any check."""
    sample = sorted(set(np.linspace(0, k - 1, min(k, 33)).astype(int).tolist()))
    effect = {j: float(np.mean(np.abs(spec.drop(ins, j) - exact))) for j in sample}
    median = sorted(sample, key=lambda j: effect[j])[len(sample) // 2]
    return sorted({k - 1, median})


def faults(spec, ins: list[np.ndarray], exact: np.ndarray, precision: Precision, k: int) -> dict[str, np.ndarray]:
    """Wrong answers a kernel bug produces, each rounded to the output dtype."""
    out: dict[str, np.ndarray] = {}
    if k > 1:
        for j in _dropped_terms(spec, ins, exact, k):
            out[f"dropped term {j} of {k}"] = spec.drop(ins, j)
    zeroed = exact.copy().reshape(-1)
    zeroed[[zeroed.size // 2, zeroed.size - 1]] = 0.0  # 2 outputs never written (poison aside)
    out[f"2 of {zeroed.size} outputs zeroed"] = zeroed.reshape(exact.shape)
    prev = spec.reference([np.roll(a, 1) for a in ins])  # the result of a previous input set
    out["stale accumulator (+ previous result)"] = exact + prev
    nan = exact.copy().reshape(-1)
    nan[nan.size // 3] = np.nan
    out["one NaN"] = nan.reshape(exact.shape)
    out["index shifted by one"] = np.roll(exact.reshape(-1), 1).reshape(exact.shape)
    if exact.ndim >= 2 and exact.shape[-1] == exact.shape[-2]:
        out["transposed"] = np.swapaxes(exact, -1, -2)
    return {name: _store(precision, v) for name, v in out.items()}


_CACHE: dict = {}


def case(spec, precision: Precision):
    key = (spec.name, precision)
    if key not in _CACHE:
        ins = rounded_inputs(spec, precision, seed=15)
        ref_ins = [to_tf32(a) for a in ins] if precision is Precision.tf32 else ins
        exp = spec.expected(ref_ins, spec.fault_shape)
        _CACHE.clear()  # one case held at a time: the dx inputs alone are 130 MB in float64
        _CACHE[key] = (ins, exp)
    return _CACHE[key]


def escaped(checker, spec, precision: Precision) -> list[str]:
    ins, exp = case(spec, precision)
    return [name for name, bad in faults(spec, ins, exp.values, precision, exp.k).items()
            if checker(spec, bad, exp, precision)[0]]


CASES = [(spec, p) for spec in ops.all_specs() for p in Precision if p is not Precision.tf32 or spec.tf32_row]


def _id(c):
    return c.name if hasattr(c, "form") else c.value


@pytest.mark.parametrize("spec,precision", CASES, ids=_id)
def test_correct_answers_pass(spec, precision):
    ins, exp = case(spec, precision)
    for name, out in correct_answers(spec, precision, ins, exp.k).items():
        ok, detail = spec.check(out, exp, precision)
        assert ok, (name, detail)


@pytest.mark.parametrize("spec,precision", CASES, ids=_id)
def test_every_injected_fault_is_caught(spec, precision):
    assert escaped(new_check, spec, precision) == []


def test_every_op_declares_a_fault_model():
    for spec in ops.all_specs():
        assert spec.fits(spec.fault_shape), spec.name
        k = spec.reduction(spec.fault_shape)
        assert k <= 1 or spec.term is not None or spec.dropped is not None, spec.name


def test_the_old_normwise_bound_misses_faults_the_new_check_catches():
    """Run against the old bound, the test above fails: bf16's 3e-2 normwise bound passes a dx that
    skips one of its 16384 rows, and a GEMV that skips one of its 4096 columns."""
    for name in ("vjp_dx", "gemv"):
        spec = ops.get(name)
        missed = escaped(old_check, spec, Precision.bf16)
        assert any(m.startswith("dropped term") for m in missed), (name, missed)
        assert escaped(new_check, spec, Precision.bf16) == []


def test_a_copy_must_be_exact():
    x = dtypes.round_to(np.random.default_rng(1).uniform(-1, 1, 4096).astype(np.float32), DType.bf16)
    exp = dtypes.expected(lambda a: a[0].copy(), [x.astype(np.float64)], 0)
    assert dtypes.check(x.astype(np.float64), exp, Precision.bf16)[0]
    one_ulp = x.astype(np.float64)
    one_ulp[7] = np.nextafter(np.float32(x[7]), np.float32(np.inf))  # fp32 neighbour: not even a bf16 value
    assert not dtypes.check(one_ulp, exp, Precision.bf16)[0]


def test_bound_is_hand_computable():
    # k = 4 terms, |ref| = 1, sum|a_j b_j| = 2, bf16: u = 2^-8; fp32 accumulation of 4 terms is
    # min(4, 4 + sqrt(4)/20) = 4 ulps of 2^-23; the bound is 2^-8 + (1 + 2^-8) * 4 * 2^-23 * 2 + 2^-134
    b = dtypes.bound(np.array([1.0]), np.array([2.0]), Precision.bf16, 4)
    assert b[0] == pytest.approx(2.0 ** -8 + (1 + 2.0 ** -8) * 8 * 2.0 ** -23, rel=1e-12)
    # the check needs the reduction length and the scale: no silent default
    with pytest.raises(TypeError):
        dtypes.check(np.ones(3), np.ones(3), Precision.fp32)


def test_magnitude_is_the_op_on_absolute_inputs():
    A = np.array([[1.0, -2.0], [-3.0, 4.0]])
    x = np.array([-1.0, 1.0])
    np.testing.assert_array_equal(dtypes.magnitude(lambda a: a[0] @ a[1], [A, x]), [3.0, 7.0])
    np.testing.assert_array_equal(dtypes.magnitude(lambda a: a[0].T @ a[1], [A, x]), [4.0, 6.0])


# --- the magnitude computed once per shape (bench.blas): dtypes.SharedScale ---------------------

def _reducing_shape(spec):
    """A test shape of the op that sums more than one term per output, or None."""
    return next((s for s in spec.test_shapes if spec.reduction(s) > 1), None)


def _shares(spec) -> bool:
    shape = _reducing_shape(spec)
    return shape is not None and spec.shared_scale(spec.inputs(shape, np.random.default_rng(0)), shape,
                                                   list(DType)) is not None


SHARED = [(spec, p) for spec, p in CASES if _shares(spec)]


def shared_case(spec, precision: Precision):
    """The case as bench.blas builds it: the inputs drawn once per shape, their magnitude computed
    once in float32 for every dtype of the run (SharedScale), each dtype's reference in float64."""
    key = ("shared", spec.name, precision)
    if key not in _CACHE:
        raw = spec.inputs(spec.fault_shape, np.random.default_rng(15))
        shared = spec.shared_scale(raw, spec.fault_shape, list(DType))
        store = DType.fp32 if precision is Precision.tf32 else DType(precision.value)
        ins = [dtypes.round_to(a, store).astype(np.float64) for a in raw]
        ref_ins = [to_tf32(a) for a in ins] if precision is Precision.tf32 else ins
        exp = spec.expected(ref_ins, spec.fault_shape, scale=shared.for_dtype(precision))
        _CACHE.clear()
        _CACHE[key] = (ins, exp)
    return _CACHE[key]


def test_the_shared_magnitude_applies_to_the_multilinear_reductions():
    assert {spec.name for spec, _ in SHARED} >= {"gemv", "vjp_dx", "gemm"}
    assert all(spec.scale is None and spec.tolerance is None for spec, _ in SHARED)


@pytest.mark.parametrize("spec,precision", SHARED, ids=_id)
def test_every_injected_fault_is_caught_with_the_shared_magnitude(spec, precision):
    ins, exp = shared_case(spec, precision)
    assert exp.scale_factor > 1.0
    caught = [name for name, bad in faults(spec, ins, exp.values, precision, exp.k).items()
              if not spec.check(bad, exp, precision)[0]]
    assert len(caught) == len(faults(spec, ins, exp.values, precision, exp.k)) and any(
        c.startswith("dropped term") for c in caught)


@pytest.mark.parametrize("spec", sorted({s for s, _ in SHARED}, key=lambda s: s.name), ids=_id)
def test_the_shared_magnitude_bounds_each_dtypes_own_and_is_tight(spec):
    """For every dtype: values x factor + slack >= the float64 magnitude of the inputs as rounded to
    that dtype, output by output, and at most 2% above it (plus the absolute +s; bf16's rounding
    can lower its own by 2^-8 a factor where the bound raises it by as much). Half the inputs are scaled into fp16's
    subnormal range (where rounding is absolute, not relative) and a few are tiny or zero."""
    rng = np.random.default_rng(3)
    for shape in [s for s in spec.test_shapes if spec.reduction(s) > 1]:
        raw = spec.inputs(shape, rng)
        raw[0].reshape(-1)[::2] *= np.float32(1e-6)  # fp16 subnormals: below 6.1e-5
        raw[0].reshape(-1)[1:8] = np.float32(0.0)
        raw[-1].reshape(-1)[::3] *= np.float32(3e-8)
        k = int(spec.reduction(shape))
        shared = spec.shared_scale(raw, shape, list(DType))
        for dt in DType:
            rounded = [dtypes.round_to(a, dt).astype(np.float64) for a in raw]
            own = dtypes.magnitude(spec.reference, rounded).ravel()
            vals, factor, slack = shared.for_dtype(dt)
            bound = vals.astype(np.float64).ravel() * factor + slack
            assert np.all(bound >= own), (spec.name, shape, dt, float(np.max(own - bound)))
            # above it by at most 2%, plus what the +s of every input adds to each term (absolute)
            s_ = dtypes.UNDERFLOW[Precision.fp16]
            extra = k * s_ * (sum(float(np.max(np.abs(a))) for a in raw) + s_)
            assert np.all(bound <= (own + extra) * 1.02), (spec.name, shape, dt)


def test_the_shared_magnitude_steps_aside_where_it_cannot_bound():
    gemv = ops.get("gemv")
    shape = _reducing_shape(gemv)
    raw = gemv.inputs(shape, np.random.default_rng(1))
    assert gemv.shared_scale([a.astype(np.float64) for a in raw], shape, list(DType)) is None  # not float32
    huge = [raw[0] * np.float32(1e30), raw[1] * np.float32(1e30)]  # |A| |x| overflows float32
    assert gemv.shared_scale(huge, shape, list(DType)) is None
    assert ops.get("rmsnorm").shared_scale(raw, shape, list(DType)) is None  # its own scale
    assert ops.get("copy").shared_scale(raw[:1], {"n": raw[0].size}, list(DType)) is None  # k = 0


def test_staging_buffer_is_kept_grown_and_falls_back():
    """core.native.Staging: one read-back buffer, kept while it is big enough, replaced by a bigger
    one when not (the old one let go first), and None for good once allocation fails."""
    from gapbench.core.native import Staging

    made = []

    def alloc(n):
        made.append(n)
        return np.zeros(n, np.uint8)

    st = Staging(alloc)
    a = st.out(100)
    assert a.nbytes >= 100 and st.out(a.nbytes) is a and made == [Staging.GRAIN]
    b = st.out(a.nbytes + 1)
    assert b is not a and b.nbytes >= a.nbytes + 1 and len(made) == 2

    def refuse(n):
        raise RuntimeError("cudaErrorInsufficientDriver")

    none = Staging(refuse)
    assert none.out(10) is None and "InsufficientDriver" in none.failed and none.out(1) is None


@pytest.mark.parametrize("dtype", list(DType))
def test_to_bytes_into_a_staging_buffer_is_the_same_bytes(dtype):
    """dtypes.to_bytes(x, dtype, into): the bytes a new array gets, written into the first bytes of
    a reused buffer (the page-locked staging buffer of core.native) and returned as a view of them."""
    x = dtypes.round_to(np.random.default_rng(2).standard_normal((3, 1000, 700), dtype=np.float32), dtype)
    buf = np.full(x.size * 4 + 64, 0x5A, np.uint8)
    got = dtypes.to_bytes(x, dtype, buf)
    want = dtypes.to_bytes(x, dtype)
    assert got.shape == x.shape and got.dtype == want.dtype and np.shares_memory(got, buf)
    assert got.tobytes() == want.tobytes()
    assert np.all(buf[got.nbytes:] == 0x5A)  # nothing past the array's own bytes
    with pytest.raises(ValueError, match="cannot hold"):
        dtypes.to_bytes(x, dtype, np.zeros(x.size, np.uint8))
