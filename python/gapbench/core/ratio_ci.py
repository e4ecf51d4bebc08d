"""The intervals of gapbench compare's ratios B/A: the bootstrap of one run a side's medians, the t
interval on several fresh processes a side (`gapbench run --repeat N`), and what that interval must
add for what a side's processes share (gapbench.core.compare says which applies to a row)."""
from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np

from gapbench.core.noise import Z95, NoiseModel, is_heavy, row_class, t_quantile
from gapbench.core.result import OK, Record, Run

#: the most prior weight (degrees of freedom) the noise model's rms gets in a --repeat interval
K0 = 4
BOOTSTRAP = 2000


def draw_counts(idx: np.ndarray) -> np.ndarray:
    """How many times each index was drawn, per resample: (draws x size) counts from a
    (draws x size) array of indices."""
    n, m = idx.shape
    return np.bincount((idx + m * np.arange(n)[:, None]).ravel(), minlength=n * m).reshape(n, m)


def resampled_medians(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """np.median(x[idx], axis=1) for the resamples whose draw_counts(idx) are `counts`, the same
    numbers, without sorting each resample: a resample's median is an order statistic of x (or the
    mean of two, for an even size), found from how many times each rank of x was drawn. numpy's
    median partitions every row of the (draws x size) array and took nearly all of a comparison's
    time (1 s of 1.1 for 302 rows; the calibration judges thousands of pairs)."""
    x = np.asarray(x, dtype=np.float64)
    m = x.size
    order = np.argsort(x, kind="stable")
    xs = x[order]
    cum = counts[:, order].cumsum(axis=1, dtype=np.int32)
    lower = xs[np.argmax(cum > (m - 1) // 2, axis=1)]
    if m % 2:
        return lower
    return (lower + xs[np.argmax(cum > m // 2, axis=1)]) / 2


#: resamples of at most this many draws in all (both sides) are remembered (_bootstrap_counts):
#: a BLAS row has 10-40 samples a side; launch rows with thousands are drawn afresh, not kept
CACHED_DRAWS = 2000 * 128


def _draws(seed: int, n: int, size_a: int, size_b: int) -> tuple[np.ndarray, np.ndarray]:
    """The resamples median_ratio_ci draws, as counts per index (draw_counts): they depend only on
    the seed, the number of draws and the two sizes."""
    rng = np.random.default_rng(seed)
    return tuple(draw_counts(rng.integers(0, m, (n, m))).astype(np.int32) for m in (size_a, size_b))


_cached_draws = functools.lru_cache(maxsize=128)(_draws)


def _bootstrap_counts(seed: int, n: int, size_a: int, size_b: int) -> tuple[np.ndarray, np.ndarray]:
    """_draws, kept for small sizes: rows of equal sizes share them (the kept arrays are never
    written: resampled_medians only reads them)."""
    if n * (size_a + size_b) <= CACHED_DRAWS:
        return _cached_draws(seed, n, size_a, size_b)
    return _draws(seed, n, size_a, size_b)


def median_ratio_cis(a: np.ndarray, b: np.ndarray, n: int = BOOTSTRAP, seed: int = 0,
                     confidences: Sequence[float] = (0.95, 0.90)) -> tuple[float, tuple[tuple[float, float], ...]]:
    """(median(b) / median(a), ((lo, hi) per confidence)): the ratio of medians and its
    percentile-bootstrap intervals from one set of resamples, each side resampled with replacement
    on its own (the two runs are independent)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ca, cb = _bootstrap_counts(seed, n, a.size, b.size)
    ma, mb = resampled_medians(a, ca), resampled_medians(b, cb)
    r = mb / ma
    qs = np.quantile(r, [p for c in confidences for p in ((1 - c) / 2, (1 + c) / 2)])
    return float(np.median(b) / np.median(a)), tuple((float(qs[2 * i]), float(qs[2 * i + 1]))
                                                     for i in range(len(confidences)))


def median_ratio_ci(a: np.ndarray, b: np.ndarray, n: int = BOOTSTRAP, seed: int = 0,
                    confidence: float = 0.95) -> tuple[float, float, float]:
    """(median(b) / median(a), lo, hi): median_ratio_cis at one confidence."""
    ratio, ((lo, hi),) = median_ratio_cis(a, b, n, seed, (confidence,))
    return ratio, lo, hi


def beyond_processes(model: NoiseModel, device: str, cls, one_start: bool, single_scale: float | None,
                      ratio: float, lo: float, hi: float, covers: str, z: float = Z95) -> tuple[float, float, str]:
    """(lo, hi, what it covers) of a --repeat interval widened for what the processes of one side
    share, where the noise model knows it (else as it came):
    - across machine starts, the start's own term (NoiseModel.start_term: another host, another GPU
      unit), added in quadrature: the processes of one start all ran on it, so their spread never
      sees it (held out, 3-vs-3 groups of two H200 starts called 1.3% of BLAS rows faster or slower
      without it, GEMVs of two units 5% apart);
    - a heavy-tailed class (host-bound, single-sample) keeps at least one run a side's half-width:
      processes started one after another share what ran before them (within one H200 start
      the host-bound launch rows of two groups of three differed 1.4-1.5x).
    `z`: the normal quantile of the interval's level (Z95; Z90 for the 90% one "same" is judged by,
    with `single_scale` the model's 90% scale)."""
    half = max(math.log(hi / ratio), math.log(ratio / lo))
    notes = []
    if not one_start:
        term = model.start_term(device, cls)
        if term > 0:
            half = math.sqrt(half ** 2 + (z * term) ** 2)
            notes.append(f"+ machine starts +-{100 * math.expm1(z * term):.2g}%")
    if is_heavy(cls) and single_scale is not None and z * single_scale > half:
        half = min(z * single_scale, 10.0)
        notes.append(f"at least one run a side's +-{100 * math.expm1(half):.2g}% (heavy-tailed class)")
    if not notes:
        return lo, hi, covers
    return ratio * math.exp(-half), ratio * math.exp(half), f"{covers} {'; '.join(notes)}"


def own_processes(r: Record) -> list[float]:
    """The medians of the fresh processes a row was timed in within its run (bench.blas
    --processes: `params.process_medians_s`, its run's own process first); [] where there is one."""
    m = (r.params or {}).get("process_medians_s") or []
    return [float(x) for x in m] if len(m) >= 2 else []


def process_spread(a: Run, b: Run) -> dict[tuple, float]:
    """Per row class (noise.row_class without the row), the pooled variance of the log medians of
    the processes each row of the two runs was timed in (own_processes): what a run's processes
    show of a row's move (ratio_ci.run_term takes the rest from the noise model)."""
    ss: dict[tuple, list[float]] = {}
    for run in (a, b):
        for r in run.records:
            m = own_processes(r) if r.status == OK and r.samples_s else []
            if m:
                x = np.log(np.asarray(m))
                acc = ss.setdefault(row_class(r, r.median())[:6], [0.0, 0.0])
                acc[0] += float(((x - x.mean()) ** 2).sum())
                acc[1] += x.size - 1
    return {k: v[0] / v[1] for k, v in ss.items() if v[1] > 0}


def run_term(model: NoiseModel, device: str, cls, process_var: float | None) -> float:
    """The part of a row's move between two runs of one machine start that the processes of one run
    share (log scale, rms a run): bench.blas --processes K starts its processes one after another
    within a minute, so what moves a whole run (the host's state then; a run's short rows moved
    together by about 0.5% rms on the H100 start of 2026-11-27 08:4x) is not in their spread. The
    noise model's within-start rms s of the row's shifts (NoiseModel.prior) is the move of one
    process a side, so a process varies by s^2 / 2 in all; what the run's processes do not show of it is the run's own term:
    sqrt(max(s^2 / 2 - process_var, 0)), with process_var the pooled variance of the log process
    medians of the row's class in both runs (many rows, so many degrees of freedom). 0 where the
    model has no scale for the row."""
    fit = model.prior(device, cls, True)
    if fit is None or process_var is None:
        return 0.0
    s = fit[0]
    return math.sqrt(max(s * s / 2 - process_var, 0.0))


def within_run(term: float, ratio: float, lo: float, hi: float, covers: str,
               z: float = Z95) -> tuple[float, float, str]:
    """(lo, hi, what it covers) of an interval on one run's processes a side widened for each run's
    own term (run_term), in quadrature: two runs, so 2 term^2 on the log ratio (`z` as in
    beyond_processes)."""
    if term <= 0:
        return lo, hi, covers
    half = max(math.log(hi / ratio), math.log(ratio / lo))
    half = min(math.sqrt(half ** 2 + 2 * (z * term) ** 2), 10.0)
    return (ratio * math.exp(-half), ratio * math.exp(half),
            f"{covers} + each run's own +-{100 * math.expm1(z * term):.2g}%")


def process_ratio_ci(a_meds: Sequence[float], b_meds: Sequence[float], prior_scale: float | None = None,
                     k0: int = K0, confidence: float = 0.95) -> tuple[float, float, float]:
    """(B/A of the geometric means of the processes' medians, lo, hi): a 95% t interval on the log
    medians of several fresh processes a side, with the pooled variance of the processes. It covers
    the spread between processes (placement, clocks, allocator state), which one run's samples never
    see. `prior_scale`: the noise model's rms shift of the row's class (of a difference of two single
    runs, so s^2 / 2 per run), pooled in as k0 extra degrees of freedom (at most the number of
    groups it was fitted on); without it, the processes alone (at least two a side). `confidence`
    0.90: the 90% interval "same" is judged by."""
    la, lb = np.log(np.asarray(a_meds, dtype=np.float64)), np.log(np.asarray(b_meds, dtype=np.float64))
    na, nb = la.size, lb.size
    ss = float(((la - la.mean()) ** 2).sum() + ((lb - lb.mean()) ** 2).sum())
    df = na + nb - 2
    if prior_scale is not None:
        ss += k0 * prior_scale ** 2 / 2
        df += k0
    if df < 1:
        raise ValueError("a between-process interval needs at least two processes a side, or a noise model")
    d = float(lb.mean() - la.mean())
    se = math.sqrt(ss / df * (1 / na + 1 / nb))
    half = t_quantile(df, confidence) * se
    return math.exp(d), math.exp(d - half), math.exp(d + half)
