"""The result check (gapbench.core.dtypes.check) against injected faults: for every dtype and for
gemv, vjp_dx, vjp_dw, gemm and copy shaped problems, correct answers (the exact result rounded to
the dtype, and fp32 accumulations in three orders, one truncating as tensor cores do) pass, and
each of these faults is caught: a dropped row of the reduction, 2 zeroed outputs, a stale
accumulator (a previous result added), one NaN, and an index shifted by one or transposed.
The old normwise bound (OLD_TOLERANCE) lets some of them through: that is what this replaces."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

from gapbench.core import dtypes

#: The bound this check replaces: ||out - ref|| / ||ref|| against float64 (dtypes.py before).
OLD_TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "fp16": 5e-3, "bf16": 3e-2}


def old_check(out, exp: dtypes.Expected, dtype):
    if not np.all(np.isfinite(out)):
        return False, "not finite"
    err = dtypes.rel_error(out, exp.values)
    return err <= OLD_TOLERANCE[dtype], f"rel. error {err:.2e}"


@dataclass
class Problem:
    """One op on uniform(-1, 1) inputs: its float64 reference and each term of its reduction."""
    name: str
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[[list[np.ndarray]], np.ndarray]
    k: int  # terms summed per output (0: a copy)
    term: Callable[[list[np.ndarray], int], np.ndarray] | None = None  # j-th term of every output


def _u(rng, *shape):
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


PROBLEMS = {
    # 2048 outputs of 4096 terms each
    "gemv": Problem("gemv", lambda r: [_u(r, 2048, 4096), _u(r, 4096)], lambda a: a[0] @ a[1], 4096,
                    lambda a, j: a[0][:, j] * a[1][j]),
    # dx = W^T v: 1024 outputs, each a sum over the 16384 rows of W
    "vjp_dx": Problem("vjp_dx", lambda r: [_u(r, 16384, 1024), _u(r, 16384)], lambda a: a[0].T @ a[1], 16384,
                      lambda a, j: a[0][j] * a[1][j]),
    # dW = v x^T: one product per output, nothing summed
    "vjp_dw": Problem("vjp_dw", lambda r: [_u(r, 512), _u(r, 512)], lambda a: np.outer(a[0], a[1]), 1,
                      lambda a, j: np.outer(a[0], a[1])),
    # batched GEMM, 2 x (128 x 2048) @ (2048 x 128)
    "gemm": Problem("gemm", lambda r: [_u(r, 2, 128, 2048), _u(r, 2, 2048, 128)], lambda a: np.matmul(a[0], a[1]),
                    2048, lambda a, j: a[0][:, :, j, None] * a[1][:, None, j, :]),
    "copy": Problem("copy", lambda r: [_u(r, 65536)], lambda a: a[0].copy(), 0),
}


def rounded_inputs(p: Problem, dtype: str, seed: int) -> list[np.ndarray]:
    store = "fp32" if dtype == "tf32" else dtype
    return [dtypes.round_to(a, store).astype(np.float64) for a in p.inputs(np.random.default_rng(seed))]


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


def accumulate(p: Problem, ins: list[np.ndarray], order: str) -> np.ndarray:
    """The op summed in an fp32 accumulator: `sequential` (one running sum, round to nearest) or
    `tensorcore` (exact sums of 16 products added to a running sum that truncates)."""
    acc = np.zeros_like(p.reference(ins), dtype=np.float32)
    step = 1 if order == "sequential" else 16
    for j0 in range(0, p.k, step):
        chunk = sum(p.term(ins, j) for j in range(j0, min(j0 + step, p.k)))
        s = acc.astype(np.float64) + chunk
        acc = s.astype(np.float32) if order == "sequential" else _rz32(s)
    return acc.astype(np.float64)


def correct_answers(p: Problem, dtype: str, ins: list[np.ndarray]) -> dict[str, np.ndarray]:
    store = "fp32" if dtype == "tf32" else dtype
    mul_ins = [to_tf32(a) for a in ins] if dtype == "tf32" else ins
    out = {"exact": p.reference(mul_ins)}
    if p.k > 0:
        out["fp32 blas"] = p.reference([a.astype(np.float32) for a in mul_ins]).astype(np.float64)
        if p.name != "gemm" or dtype != "fp32":  # keeps the fp32-gemm run short; fp16/bf16 cover it
            out["fp32 sequential"] = accumulate(p, mul_ins, "sequential")
        out["fp32 tensor-core (truncating)"] = accumulate(p, mul_ins, "tensorcore")
    return {k: dtypes.round_to(v.astype(np.float32), store).astype(np.float64) for k, v in out.items()}


def faults(p: Problem, ins: list[np.ndarray], exact: np.ndarray, dtype: str) -> dict[str, np.ndarray]:
    """Wrong answers a kernel bug produces, each rounded to the output dtype."""
    store = "fp32" if dtype == "tf32" else dtype
    out: dict[str, np.ndarray] = {}
    if p.k > 1:
        # a reduction that skips one term: the last (a ragged tail) and one of median weight
        # (|v_r| of a VJP row); a term below one output ulp everywhere is invisible to any check
        weight = np.abs(ins[1]).reshape(-1) if p.name in ("gemv", "vjp_dx") else None
        rows = {p.k - 1, int(np.argsort(weight)[weight.size // 2]) if weight is not None else p.k // 2}
        for r in sorted(rows):
            out[f"dropped term {r} of {p.k}"] = exact - p.term(ins, r)
    zeroed = exact.copy().reshape(-1)
    zeroed[[zeroed.size // 2, zeroed.size - 1]] = 0.0  # 2 outputs never written (poison aside)
    out[f"2 of {zeroed.size} outputs zeroed"] = zeroed.reshape(exact.shape)
    prev = p.reference([np.roll(a, 1) for a in ins])  # the result of a previous input set
    out["stale accumulator (+ previous result)"] = exact + prev
    nan = exact.copy().reshape(-1)
    nan[nan.size // 3] = np.nan
    out["one NaN"] = nan.reshape(exact.shape)
    out["index shifted by one"] = np.roll(exact.reshape(-1), 1).reshape(exact.shape)
    if exact.ndim >= 2 and exact.shape[-1] == exact.shape[-2]:
        out["transposed"] = np.swapaxes(exact, -1, -2)
    return {k: dtypes.round_to(v.astype(np.float32), store).astype(np.float64) for k, v in out.items()}


_CACHE: dict = {}


def case(op: str, dtype: str):
    key = (op, dtype)
    if key not in _CACHE:
        p = PROBLEMS[op]
        ins = rounded_inputs(p, dtype, seed=15)
        ref_ins = [to_tf32(a) for a in ins] if dtype == "tf32" else ins
        exp = dtypes.expected(p.reference, ref_ins, p.k)
        _CACHE.clear()  # one case held at a time: the dx inputs alone are 130 MB in float64
        _CACHE[key] = (p, ins, exp)
    return _CACHE[key]


def escaped(checker, op: str, dtype: str) -> list[str]:
    p, ins, exp = case(op, dtype)
    return [name for name, bad in faults(p, ins, exp.values, dtype).items() if checker(bad, exp, dtype)[0]]


DTYPES = ("fp32", "tf32", "fp16", "bf16")
OPS = tuple(PROBLEMS)
CASES = [(op, dt) for op in OPS for dt in DTYPES if dt != "tf32" or op in ("gemm", "gemv")]


@pytest.mark.parametrize("op,dtype", CASES)
def test_correct_answers_pass(op, dtype):
    p, ins, exp = case(op, dtype)
    for name, out in correct_answers(p, dtype, ins).items():
        ok, detail = dtypes.check(out, exp, dtype)
        assert ok, (name, detail)


@pytest.mark.parametrize("op,dtype", CASES)
def test_every_injected_fault_is_caught(op, dtype):
    assert escaped(dtypes.check, op, dtype) == []


def test_the_old_normwise_bound_misses_faults_the_new_check_catches():
    """Run against the old bound, the test above fails: bf16's 3e-2 normwise bound passes a dx that
    skips one of its 16384 rows, and a GEMV that skips one of its 4096 columns."""
    for op in ("vjp_dx", "gemv"):
        missed = escaped(old_check, op, "bf16")
        assert any(name.startswith("dropped term") for name in missed), (op, missed)
    assert escaped(dtypes.check, "vjp_dx", "bf16") == [] and escaped(dtypes.check, "gemv", "bf16") == []


def test_a_copy_must_be_exact():
    x = dtypes.round_to(_u(np.random.default_rng(1), 4096), "bf16").astype(np.float64)
    exp = dtypes.expected(lambda a: a[0].copy(), [x], 0)
    assert dtypes.check(x.copy(), exp, "bf16")[0]
    one_ulp = x.copy()
    one_ulp[7] = np.nextafter(np.float32(x[7]), np.float32(np.inf))  # fp32 neighbour: not even a bf16 value
    assert not dtypes.check(one_ulp, exp, "bf16")[0]


def test_bound_is_hand_computable():
    # k = 4 terms, |ref| = 1, sum|a_j b_j| = 2, bf16: u = 2^-8; fp32 accumulation of 4 terms is
    # min(4, 4 + sqrt(4)/20) = 4 ulps of 2^-23; the bound is 2^-8 + (1 + 2^-8) * 4 * 2^-23 * 2 + 2^-134
    b = dtypes.bound(np.array([1.0]), np.array([2.0]), "bf16", 4)
    assert b[0] == pytest.approx(2.0 ** -8 + (1 + 2.0 ** -8) * 8 * 2.0 ** -23, rel=1e-12)
    # the check needs the reduction length and the scale: no silent default
    with pytest.raises(TypeError):
        dtypes.check(np.ones(3), np.ones(3), "fp32")


def test_magnitude_is_the_op_on_absolute_inputs():
    A = np.array([[1.0, -2.0], [-3.0, 4.0]])
    x = np.array([-1.0, 1.0])
    np.testing.assert_array_equal(dtypes.magnitude(lambda a: a[0] @ a[1], [A, x]), [3.0, 7.0])
    np.testing.assert_array_equal(dtypes.magnitude(lambda a: a[0].T @ a[1], [A, x]), [4.0, 6.0])
