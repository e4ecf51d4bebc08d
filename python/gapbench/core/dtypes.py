"""Element types of the BLAS probes and how numpy holds them. numpy has no bfloat16: bf16 values
are kept as float32 already rounded to bf16 (round to nearest even, as the GPUs do) and packed to
their 16-bit pattern only when handed to native code."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from gapbench.core.hostpar import elementwise, map_chunks
from gapbench.core.names import DType, Precision

P = Precision
#: Unit roundoff of each element type (half the distance from 1 to the next value). tf32 is
#: fp32 storage whose multiplier inputs are rounded to 10 mantissa bits.
UNIT_ROUNDOFF = {P.fp32: 2.0 ** -24, P.tf32: 2.0 ** -11, P.fp16: 2.0 ** -11, P.bf16: 2.0 ** -8}
#: Half the smallest subnormal spacing: the most a correctly rounded tiny result can be off by.
UNDERFLOW = {P.fp32: 2.0 ** -150, P.tf32: 2.0 ** -150, P.fp16: 2.0 ** -25, P.bf16: 2.0 ** -134}
#: fp32 accumulation error per unit of sum|a_j b_j|, in units of ACC_ROUNDOFF = 2^-23 (one fp32
#: ulp at 1), for terms of random sign (the probes' inputs are uniform in [-1, 1]):
#: - round to nearest, any order: even one sequential sum of k terms errs by about
#:   2^-24 sum|a_j b_j| (RMS; partial sums grow as sqrt(j)); 8 times that is RN_FACTOR = 4;
#: - tensor cores truncate the running sum once per 16 products: a bias that grows as about
#:   sqrt(k)/45; TRUNC_FACTOR = 1/20 per sqrt(k) leaves twice that as margin;
#: - never more than the deterministic worst case, k (gamma_k).
ACC_ROUNDOFF = 2.0 ** -23
RN_FACTOR = 4.0
TRUNC_FACTOR = 1.0 / 20
#: tf32 rounds both multiplier inputs (2 u_tf32 per product, random sign): LAMBDA sqrt(k) of
#: them at most, i.e. 2 u_tf32 sum|a_j b_j| min(1, LAMBDA / sqrt(k)).
LAMBDA = 8.0


def _round_bf16(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bf16 (ties to even), returned as float32."""
    return elementwise(_round_bf16, np.asarray(x, dtype=np.float32), np.float32)


def round_to(x: np.ndarray, dtype: DType) -> np.ndarray:
    """x (float32) rounded to `dtype`, held as float32."""
    x, dtype = np.asarray(x, dtype=np.float32), DType(dtype)
    if dtype is DType.fp16:
        return elementwise(lambda c: c.astype(np.float16), x, np.float32)
    if dtype is DType.bf16:
        return round_bf16(x)
    return x


def to_bytes(x: np.ndarray, dtype: DType, into: np.ndarray | None = None) -> np.ndarray:
    """The array as the native code stores it (C-contiguous, element type `dtype`: float32,
    float16, or bf16's bits as uint16), new or (given `into`, a byte buffer) written into the
    first bytes of `into` and returned as a view of them."""
    x, dtype = np.ascontiguousarray(x, dtype=np.float32), DType(dtype)
    if dtype is DType.fp16:
        return elementwise(lambda c: c, x, np.float16, into)
    if dtype is DType.bf16:
        return elementwise(lambda c: (_round_bf16(c).view(np.uint32) >> 16), x, np.uint16, into)
    return x if into is None else elementwise(lambda c: c, x, np.float32, into)


def from_bytes(buf, dtype: DType) -> np.ndarray:
    """Native output bytes (bytes, or a uint8 array as the native cases return them) back to their
    values, exactly, as float32 (every fp16 and bf16 value is a float32 value; `check` widens them
    to float64 chunk by chunk)."""
    dtype = DType(dtype)
    if dtype is DType.fp16:
        return elementwise(lambda c: c, np.frombuffer(buf, dtype=np.float16), np.float32)
    if dtype is DType.bf16:
        u = np.frombuffer(buf, dtype=np.uint16)
        return elementwise(lambda c: c.astype(np.uint32) << 16, u, np.uint32).view(np.float32)
    return np.frombuffer(buf, dtype=np.float32)


@dataclass(frozen=True)
class Expected:
    """What a result is checked against: the float64 result on the rounded inputs (`values`), the
    same op on the inputs' magnitudes (`scale`, e.g. |A| @ |x|: the size of what each output
    sums, which bounds its accumulation error whatever cancels; None where it is |values|, as for
    a copy or an outer product), and the reduction length `k` (terms summed per output; 0 for a
    copy, which must be exact). A copy's values stay in their input's type (float32 holds every
    fp16 and bf16 value exactly): only float64 arithmetic needs float64.

    A case checks several results against one Expected (each implementation's first and last
    timed run): the per-output bound of each (dtype, accumulation) and the reference's squared
    norm are computed once and kept (`memo`)."""
    values: np.ndarray
    scale: np.ndarray | None
    k: int
    memo: dict = field(default_factory=dict, compare=False, repr=False)
    #: the scale's bound is scale * scale_factor + scale_slack (a SharedScale: one float32 magnitude
    #: raised to bound every dtype's; 1 and 0 for a magnitude computed in float64 for this dtype)
    scale_factor: float = 1.0
    scale_slack: float = 0.0

    def bound(self, dtype: Precision, acc: Precision = Precision.fp32) -> np.ndarray:
        """`bound` of every output (float64, flat), computed once per (dtype, acc)."""
        dtype, acc = Precision(dtype), Precision(acc)
        key = ("bound", dtype, acc)
        if key not in self.memo:
            ref = np.asarray(self.values).ravel()
            scale = None if self.scale is None else np.asarray(self.scale).ravel()
            tol = np.empty(ref.size, dtype=np.float64)

            def part(lo, hi):
                sc = None
                if scale is not None:
                    sc = np.asarray(scale[lo:hi], dtype=np.float64)
                    if self.scale_factor != 1.0 or self.scale_slack:
                        sc = sc * self.scale_factor + self.scale_slack
                tol[lo:hi] = bound(ref[lo:hi], sc, dtype, self.k, acc)

            map_chunks(part, ref.size)
            self.memo[key] = tol
        return self.memo[key]

    @property
    def model(self) -> str:
        """The error model in words, for a check's message."""
        return f"k={self.k}"

    def norm2(self) -> float:
        """Sum of the squared reference values (the denominator of the normwise error)."""
        if "norm2" not in self.memo:
            ref = np.asarray(self.values).ravel()
            self.memo["norm2"] = float(sum(map_chunks(lambda lo, hi: _dot(ref[lo:hi]), ref.size)))
        return self.memo["norm2"]


@dataclass(frozen=True)
class Stated(Expected):
    """An Expected whose per-output bound is stated, not derived from a reduction: `tolerance`
    maps a dtype (its name: fp32, fp16, bf16, tf32) to (rtol, atol), and each output must lie
    within atol + rtol |ref| (a user's case, gapbench.benchmarks.blas.usercase)."""
    tolerance: dict = field(default_factory=dict)

    def bound(self, dtype: Precision, acc: Precision = Precision.fp32) -> np.ndarray:
        dtype = Precision(dtype)
        key = ("stated", dtype)
        if key not in self.memo:
            if dtype.value not in self.tolerance:
                raise ValueError(f"no tolerance stated for {dtype.value} (stated: {', '.join(self.tolerance)})")
            rtol, atol = self.tolerance[dtype.value]
            self.memo[key] = np.abs(np.asarray(self.values, dtype=np.float64).ravel()) * float(rtol) + float(atol)
        return self.memo[key]

    @property
    def model(self) -> str:
        return "stated tolerance"


def _dot(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=np.float64)
    return float(np.einsum("i,i->", x, x))  # not BLAS: no thread team inside our threads


def magnitude(reference: Callable[[list[np.ndarray]], np.ndarray], inputs64: list[np.ndarray]) -> np.ndarray:
    """The componentwise scale of a (multi)linear op: the op on |inputs| in float64, e.g.
    |A| @ |x| for A @ x, |W|^T |v| for a VJP, |v| |x|^T for an outer product, |a| for a copy."""
    return np.abs(reference([elementwise(np.abs, np.asarray(a, dtype=np.float64), np.float64) for a in inputs64]))


@dataclass(frozen=True)
class SharedScale:
    """The magnitude of a multilinear op (each output a sum of k products of one element of each of
    its p inputs), computed once per shape in float32 from the unrounded float32 inputs, that bounds
    the float64 magnitude of the inputs as rounded to any of the run's dtypes (`for_dtype`). It
    replaces one float64 product per dtype by one float32 product per shape.

    Why it bounds: rounding to a dtype d gives |round(x)| <= (|x| + s_d)(1 + u_d), s_d its
    UNDERFLOW (subnormal results are off by at most that, normal ones by u_d relative). The values
    are the op on x' = fl(|x| + s), s the largest s_d of the run, so |x| + s <= x' / (1 - u32). The
    float32 sums of non-negative products err by at most gamma_n = n u32 / (1 - n u32) relative
    (n = k + p, any summation order, FMA or not), plus (n) 2^-149 absolute where products underflow.
    So the magnitude on the rounded inputs is at most values x factor(d) + slack, factor(d) =
    (1 + u_d)^p (1 - u32)^-p (1 + gamma_n). Against each dtype's own magnitude that is at most 1.6%
    looser for bf16 (its rounding may lower the inputs by as much as the factor raises them), 0.4%
    for fp16 and 0.2% for fp32 at k = 16384; the faults of tests/test_checks.py are caught either
    way."""
    values: np.ndarray  # float32
    k: int
    p: int

    @property
    def n(self) -> int:
        return self.k + self.p

    @property
    def slack(self) -> float:
        return self.n * 2.0 ** -149

    def factor(self, dtype: Precision | DType) -> float:
        u32 = UNIT_ROUNDOFF[P.fp32]
        nu = self.n * u32
        gamma = nu / (1 - nu)
        return float((1 + UNIT_ROUNDOFF[Precision(dtype)]) ** self.p * (1 - u32) ** -self.p * (1 + gamma))

    def for_dtype(self, dtype: Precision | DType) -> tuple[np.ndarray, float, float]:
        """(values, factor, slack) for `dtype` (Expected's scale, scale_factor, scale_slack)."""
        return self.values, self.factor(dtype), self.slack


def shared_scale(reference: Callable[[list[np.ndarray]], np.ndarray], inputs: list[np.ndarray], k: int,
                 dtypes: Sequence[DType]) -> SharedScale | None:
    """A SharedScale of the op on these unrounded float32 inputs for `dtypes`, or None where it does
    not apply (inputs not float32, a reduction too long for gamma_n, a float32 overflow): the
    caller then computes each dtype's magnitude in float64."""
    if k <= 1 or not inputs or any(np.asarray(a).dtype != np.float32 for a in inputs):
        return None
    p = len(inputs)
    if (k + p) * UNIT_ROUNDOFF[P.fp32] >= 0.5:
        return None
    s = np.float32(max(UNDERFLOW[Precision(d)] for d in dtypes))
    ins = [elementwise(lambda c: np.abs(c) + s, np.asarray(a), np.float32) for a in inputs]
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow means: not here (below)
        values = np.asarray(reference(ins))
    if values.dtype != np.float32:
        values = values.astype(np.float32)
    flat = values.ravel()
    finite = sum(map_chunks(lambda lo, hi: int(np.count_nonzero(np.isfinite(flat[lo:hi]))), flat.size))
    if finite != values.size:
        return None
    return SharedScale(values, int(k), p)


def expected(reference: Callable[[list[np.ndarray]], np.ndarray], inputs: list[np.ndarray], k: int,
             scale: tuple[np.ndarray, float, float] | None = None,
             values64: Callable[[list[np.ndarray]], np.ndarray] | None = None) -> Expected:
    """The reference of an op spec on the rounded inputs, in float64, with its bound's terms. A
    copy (k=0) is its input; one product per output (k=1) has |values| as its scale. `scale`: a
    SharedScale's (values, factor, slack) for these inputs' dtype, instead of their magnitude.
    `values64` (OpSpec.values64): the float64 values straight from these inputs, block by block,
    where no float64 copy of them is needed (k=1, or a shared scale)."""
    if k <= 0:
        return Expected(np.asarray(reference(list(inputs))), None, 0)
    if values64 is not None and (k == 1 or scale is not None):
        values = np.asarray(values64(list(inputs)), dtype=np.float64)
        if k == 1:
            return Expected(values, None, 1)
        return Expected(values, scale[0], int(k), scale_factor=scale[1], scale_slack=scale[2])
    inputs64 = [a if a.dtype == np.float64 else elementwise(lambda c: c, a, np.float64)
                for a in map(np.asarray, inputs)]
    values = np.asarray(reference(inputs64), dtype=np.float64)
    if k == 1:
        return Expected(values, None, 1)
    if scale is not None:
        return Expected(values, scale[0], int(k), scale_factor=scale[1], scale_slack=scale[2])
    return Expected(values, magnitude(reference, inputs64), int(k))


def bound(ref: np.ndarray, scale: np.ndarray | None, dtype: Precision, k: int,
          acc: Precision = Precision.fp32) -> np.ndarray:
    """Per-output bound on |out - ref| for a correct result (inputs already rounded to `dtype`):
        u_out |ref_i| + (1 + u_out) (e_acc + e_in) scale_i + underflow
    u_out: the output's rounding (`dtype`'s unit roundoff; exact copies: 0). e_acc: fp32
    accumulation of k terms, ACC_ROUNDOFF min(k, RN_FACTOR + TRUNC_FACTOR sqrt(k)). e_in: tf32's
    rounding of both multiplier inputs, 2 u_tf32 min(1, LAMBDA / sqrt(k)). acc=fp16/bf16 (a library allowed to add
    partial sums in the output type, cuBLAS's "reduced precision reduction") adds 2 u_acc.
    scale=None: the scale is |ref| (one product per output). Computed in place on one new array."""
    dtype, acc = Precision(dtype), Precision(acc)
    tol = np.abs(np.asarray(ref, dtype=np.float64).ravel())
    if k <= 0:
        return np.zeros_like(tol)  # a copy moves values that are already representable: exact
    u_out = UNIT_ROUNDOFF[dtype]
    c = (1 + u_out) * _per_term(dtype, k, acc)
    if scale is None:
        tol *= u_out + c
    else:
        tol *= u_out
        tol += c * np.asarray(scale, dtype=np.float64).ravel()
    tol += UNDERFLOW[dtype]
    return tol


def _per_term(dtype: Precision, k: int, acc: Precision) -> float:
    """e_acc + e_in of `bound`: the error per unit of scale."""
    root = np.sqrt(k)
    per_term = ACC_ROUNDOFF * min(k, RN_FACTOR + TRUNC_FACTOR * root)
    if dtype is Precision.tf32:
        per_term += 2 * UNIT_ROUNDOFF[Precision.tf32] * min(1.0, LAMBDA / root)
    if acc is not Precision.fp32:
        per_term += 2 * UNIT_ROUNDOFF[acc]
    return float(per_term)


def check(out: np.ndarray, ref, dtype: Precision, *, k: int | None = None, scale: np.ndarray | None = None,
          acc: Precision = Precision.fp32) -> tuple[bool, str]:
    """Is `out` a correct result of the op whose float64 result is `ref` (an Expected, or values with
    k= and scale= given)? Every output must lie within its own bound (see `bound`), so one
    zeroed, dropped or stale output fails even where the normwise error of the whole is small; a
    copy (k=0) must match bit for bit. Computed chunk by chunk on the host's cores
    (gapbench.core.hostpar), with the bounds kept in the Expected for the next check."""
    if not isinstance(ref, Expected):
        if k is None or (scale is None and k > 1):
            raise TypeError("check needs the reduction length k= and the magnitude scale= (see expected())")
        ref = Expected(np.asarray(ref), None if scale is None else np.asarray(scale), int(k))
    exp, k = ref, ref.k
    out = np.asarray(out).ravel()
    values = np.asarray(exp.values).ravel()
    if out.shape != values.shape:
        return False, f"output has {out.size} elements, reference {values.size}"
    if k <= 0:
        return _check_copy(out, values)
    tol = exp.bound(dtype, acc)

    def part(lo, hi):
        # (outputs over their bound, worst error / bound, its index, sum of squared errors);
        # a NaN or infinity makes the worst NaN or infinite: counted apart below
        err = np.array(out[lo:hi], dtype=np.float64)  # a copy: a float64 output must not be overwritten
        err -= values[lo:hi]
        np.abs(err, out=err)
        e2 = float(np.einsum("i,i->", err, err))
        err /= tol[lo:hi]
        i = int(np.argmax(err))
        return int(np.count_nonzero(err > 1.0)), float(err[i]), lo + i, e2

    parts = map_chunks(part, out.size)
    if any(not np.isfinite(p[1]) for p in parts):
        bad = sum(map_chunks(lambda lo, hi: int(np.count_nonzero(~np.isfinite(out[lo:hi]))), out.size))
        if bad:
            return False, f"{bad} of {out.size} outputs not finite (poison left or overflow)"
    nbad = sum(p[0] for p in parts)
    worst, i = max(((p[1], -p[2]) for p in parts), default=(0.0, 0))
    i = -i
    rel = float(np.sqrt(sum(p[3] for p in parts)) / max(np.sqrt(exp.norm2()), 1e-300))
    if nbad:
        o, r = float(out[i]), float(values[i])
        return False, (f"{nbad} of {out.size} outputs outside their bound ({exp.model}), worst [{i}]: "
                       f"{o:.6g} vs {r:.6g} (error {abs(o - r):.2e}, bound {float(tol[i]):.2e}); "
                       f"rel. error {rel:.2e} vs float64")
    return True, f"rel. error {rel:.2e} vs float64; every output within its bound ({exp.model}, worst {worst:.2f} of it)"


def _check_copy(out: np.ndarray, values: np.ndarray) -> tuple[bool, str]:
    """A copy moves values that are already representable: any difference (or NaN) is an error."""

    def part(lo, hi):
        o, r = out[lo:hi], values[lo:hi]
        diff = o != r  # NaN differs from everything
        n = int(np.count_nonzero(diff))
        return n, (lo + int(np.argmax(diff))) if n else -1, int(np.count_nonzero(~np.isfinite(o))) if n else 0

    parts = map_chunks(part, out.size)
    nbad = sum(p[0] for p in parts)
    if not nbad:
        return True, "rel. error 0.00e+00 vs float64; every output within its bound (exact copy, worst 0.00 of it)"
    nonfinite = sum(p[2] for p in parts)
    if nonfinite:
        return False, f"{nonfinite} of {out.size} outputs not finite (poison left or overflow)"
    i = next(p[1] for p in parts if p[0])
    o, r = float(out[i]), float(values[i])
    return False, (f"{nbad} of {out.size} outputs differ from an exact copy, first [{i}]: {o:.6g} vs {r:.6g} "
                   f"(error {abs(o - r):.2e}, bound 0)")
