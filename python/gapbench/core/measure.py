"""The measurement core: adaptive sampling of one arm, and paired, interleaved rounds of several.

An `Arm` is a name and a function `sample(n) -> sequence of n per-run seconds` (invalid runs,
e.g. a release-gate timeout, already dropped). Everything here is pure Python over those numbers;
time is read from an injectable `clock`, so the rules are tested with synthetic arms and a fake
clock (tests/test_measure.py).

Stopping rule (`adaptive`, and per arm and per ratio in `paired`): after at least `min_samples`
values, stop when the distribution-free 95% interval of the median (gapbench.core.stats.median_ci) has
a half-width of at most `rel_hw` of the median AND the sample shows no drift; otherwise stop at
`max_samples` or when the wall-clock `budget_s` (warm-up, the arm's own overhead and ours
included) cannot fit another batch. The record keeps the samples, the achieved half-width, the
drift statistic, whether it converged, and why it stopped (`Stop`).

Why this rather than nvbench's criteria. nvbench's `stdrel` stops when the relative standard
deviation of the samples falls under a threshold, or when that noise estimate itself stops moving
("noise has stabilised"); `entropy` stops when the entropy of the observed values stops growing.
Both measure the spread of the distribution, which does not shrink as samples accumulate, and
the standard deviation is dominated by outliers. The interval of the median measures the
precision of the reported number itself: it narrows as 1/sqrt(n) for any stationary
distribution, ignores a minority of outliers, and needs no distributional assumption. What it
does assume is that the samples are exchangeable; a slow clock or thermal drift breaks that while
the interval still narrows. Hence the drift guard: split the values in time order into halves and
compare their medians. Under stationarity their difference has a 95% bound of about twice the
full sample's half-width h (each half's median has twice the variance), so drift is declared
when |median(2nd half) - median(1st half)| > max(2h, rel_hw * median): larger than its own noise
and larger than the tolerance. We chose a split-half test over "the last two checks agree"
because successive checks share almost all their samples, so they agree even under steady drift.
A drifting arm keeps sampling and, if the drift persists, ends at the budget marked unconverged.
In `paired` the guard applies to the ratios (a drift common to both arms cancels in them, and is
recorded per arm without blocking convergence).

Optional stopping. Stopping when an interval is narrow selects for chance-narrow ones: with the
plain 95% order-statistic interval, identical lognormal arms with 2-3% noise saw their reported
ratio interval cover 1.0 in only 93.3% of 1,500 simulated runs. So every interval here (the one
the rule checks and the one reported) is the order-statistic interval at INTERVAL_CONFIDENCE
(97%), which after the rule's optional stopping covers in at least 95% of runs at noise levels of
1-3% (tests/test_measure.py simulates it). It is reported as a 95% interval, the coverage it keeps;
it costs about a quarter more rounds than the plain one. A coarse timer makes ties; they only
widen the closed interval, but a median known to one timer tick is not more precise than the
tick: time batches of runs where a run is near the resolution.

Verdicts compare a speed ratio's interval with a practical-equivalence band of +-LEVEL_BAND
(1%): "faster" only when the whole interval lies above 1 + band, "slower" below 1 - band, "level"
otherwise. The interval covers the round-to-round noise of this run only, not what differs
between runs (clocks, where the allocator put the buffers), so a sub-1% difference within one run
is not one we can promise a re-run reproduces; it is reported, not claimed. band=0 gives the
plain "interval excludes 1" verdict.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Iterable, Sequence

import numpy as np

from gapbench.core import stats
from gapbench.core.sampling import Arm, Caller, MeasureError, warm_up, warm_up_pairing

__all__ = ["Arm", "MeasureError"]  # defined in gapbench.core.sampling, used with the rest from here

#: Practical-equivalence band for verdicts: ratios within 1 +- LEVEL_BAND are "level".
LEVEL_BAND = 0.01
#: The order-statistic confidence of every interval computed here: 97%, so that after optional
#: stopping the reported interval still covers the true value in >= 95% of runs (module docstring).
INTERVAL_CONFIDENCE = 0.97


class Stop(str, Enum):
    converged = "converged"
    budget = "budget"
    max_samples = "max_samples"


class Verdict(str, Enum):
    faster = "faster"
    level = "level"
    slower = "slower"


@dataclass
class Measurement:
    """One arm's values (seconds; in `paired`, one value per round) and their median's interval."""
    name: str
    samples: list[float]
    median: float
    lo: float
    hi: float
    rel_hw: float  # achieved half-width of the 95% interval over the median
    drift: float  # (median of 2nd half - median of 1st half) / median, in time order
    converged: bool
    reason: Stop
    n_warmup: int = 0
    wall_s: float = 0.0

    @property
    def ci(self) -> tuple[float, float]:
        return self.lo, self.hi

    @property
    def n(self) -> int:
        return len(self.samples)

    def to_dict(self, samples: bool = True) -> dict:
        d = {"name": self.name, "n": self.n, "median": self.median, "lo": _num(self.lo), "hi": _num(self.hi),
             "rel_hw": _num(self.rel_hw), "drift": self.drift, "converged": self.converged,
             "reason": self.reason.value, "n_warmup": self.n_warmup, "wall_s": self.wall_s}
        if samples:
            d["samples"] = _compact(self.samples)
        return d

    @classmethod
    def from_dict(cls, d: dict, samples: Iterable[float] | None = None) -> "Measurement":
        vals = d["samples"] if samples is None else samples
        return cls(name=d["name"], samples=[float(x) for x in vals], median=d["median"], lo=_unnum(d["lo"], -1),
                   hi=_unnum(d["hi"], 1), rel_hw=_unnum(d["rel_hw"], 1), drift=d["drift"],
                   converged=d["converged"], reason=Stop(d["reason"]), n_warmup=d.get("n_warmup", 0),
                   wall_s=d.get("wall_s", 0.0))


@dataclass(frozen=True)
class Ratio:
    """Speed of `num` relative to `den`: the median over rounds of t_den / t_num (> 1: num is
    faster), its 95% interval, and the verdict the interval supports."""
    num: str
    den: str
    median: float
    lo: float
    hi: float
    rel_hw: float
    drift: float
    n_rounds: int
    verdict: Verdict

    @property
    def ci(self) -> tuple[float, float]:
        return self.lo, self.hi

    def to_dict(self) -> dict:
        return {"num": self.num, "den": self.den, "median": self.median, "lo": _num(self.lo), "hi": _num(self.hi),
                "rel_hw": _num(self.rel_hw), "drift": self.drift, "n_rounds": self.n_rounds,
                "verdict": self.verdict.value}


def verdict(lo: float, hi: float, band: float = LEVEL_BAND) -> Verdict:
    """Faster if the speed ratio's interval lies wholly above 1 + band, slower if wholly below
    1 - band, level otherwise (see the module docstring for the band)."""
    if lo > 1.0 + band:
        return Verdict.faster
    if hi < 1.0 - band:
        return Verdict.slower
    return Verdict.level


@dataclass
class PairedResult:
    arms: dict[str, Measurement]
    per_round: dict[str, list[float]]  # per arm, one statistic per round (nan: no valid sample)
    k: int  # runs per arm per round
    seed: int
    pairs: list[tuple[str, str]]
    reason: Stop
    converged: bool
    rel_hw: float
    wall_s: float
    #: [min, max] SM clock read after the rounds (ClockWatch), None without a watch
    clock_mhz: list | None = None
    #: rounds dropped because the clock read below ClockWatch.low of its maximum
    low_clock_dropped: int = 0

    @property
    def n_rounds(self) -> int:
        return len(next(iter(self.per_round.values()))) if self.per_round else 0

    def ratio(self, num: str, den: str, band: float = LEVEL_BAND) -> Ratio:
        """Speed of arm `num` relative to arm `den` from the rounds where both had a value."""
        for name in (num, den):
            if name not in self.per_round:
                raise KeyError(f"no arm named {name!r}; arms: {', '.join(self.per_round)}")
        return _ratio(num, den, self.per_round[num], self.per_round[den], self.rel_hw, band)

    def to_dict(self) -> dict:
        return {"k": self.k, "seed": self.seed, "n_rounds": self.n_rounds, "reason": self.reason.value,
                "converged": self.converged, "rel_hw": self.rel_hw, "wall_s": self.wall_s,
                "pairs": [list(p) for p in self.pairs],
                "arms": {n: m.to_dict(samples=False) for n, m in self.arms.items()},
                "per_round": {n: _compact(v) for n, v in self.per_round.items()},
                "ratios": [self.ratio(a, b).to_dict() for a, b in self.pairs]}

    @classmethod
    def from_dict(cls, d: dict) -> "PairedResult":
        per_round = {n: [math.nan if x is None else float(x) for x in v] for n, v in d["per_round"].items()}
        arms = {n: Measurement.from_dict(m, [x for x in per_round[n] if not math.isnan(x)])
                for n, m in d["arms"].items()}
        return cls(arms=arms, per_round=per_round, k=d["k"], seed=d["seed"], pairs=[tuple(p) for p in d["pairs"]],
                   reason=Stop(d["reason"]), converged=d["converged"], rel_hw=d["rel_hw"], wall_s=d["wall_s"])


def adaptive(arm: Arm, *, rel_hw: float = 0.01, min_samples: int = 10, max_samples: int = 100_000,
             budget_s: float = 2.0, warmup: int = 2, warmup_s: float = 0.01, batch_s: float = 0.002,
             clock: Callable[[], float] = time.perf_counter) -> Measurement:
    """Sample `arm` in batches of about `batch_s` of its own time until the stopping rule holds.

    Warm-up first: at least `warmup` runs and `warmup_s` seconds of the arm's time, discarded. Then batches sized
    from the latest per-run time, shrunk to what fits in the rest of `budget_s`; the rule is
    checked each time the sample has grown by ~10%, and once more at the stop."""
    _check_settings(rel_hw, min_samples, max_samples, budget_s, warmup, warmup_s, batch_s)
    t0 = clock()
    deadline = t0 + budget_s
    caller = Caller(arm, clock)
    n_warm = warm_up(caller, warmup, warmup_s, batch_s, deadline)
    samples: list[float] = []
    next_check, reason = min_samples, None
    while reason is None:
        n = max(1, min(caller.batch(batch_s), max_samples - len(samples)))
        if samples:
            fit = int((deadline - clock()) / caller.wall_per)
            if fit < 1:
                reason = Stop.budget
                break
            n = min(n, fit)
        samples.extend(caller(n))
        if len(samples) >= next_check or len(samples) >= max_samples:
            if _settled(samples, rel_hw):
                reason = Stop.converged
            next_check = max(len(samples) + 1, math.ceil(len(samples) * 1.1))
        if reason is None and len(samples) >= max_samples:
            reason = Stop.max_samples
        if reason is None and clock() >= deadline:
            reason = Stop.budget
    if not samples:
        raise MeasureError(f"arm {arm.name!r} produced no valid samples within its {budget_s} s budget")
    if reason is not Stop.converged and len(samples) >= min_samples and _settled(samples, rel_hw):
        reason = Stop.converged  # settled between the last check and the stop
    return _measurement(arm.name, samples, reason, n_warm, clock() - t0, rel_hw)


@dataclass
class ClockWatch:
    """The device clock, read after every paired round: a round read below `low` of `max_mhz` is
    dropped (nvbench drops samples below 75% of the peak clock), the range seen is kept. `read`
    returns MHz now (None where it cannot tell); `throttle` the active throttle reasons."""
    read: Callable[[], float | None]
    max_mhz: float
    low: float = 0.75
    throttle: Callable[[], list[str]] | None = None


def paired(arms: Sequence[Arm], *, rel_hw: float = 0.01, min_rounds: int = 10, max_rounds: int = 100_000,
           budget_s: float = 5.0, seed: int = 0, k: int | None = None, pairs: Sequence[tuple[str, str]] | None = None,
           warmup: int = 2, warmup_s: float = 0.01, batch_s: float = 0.002,
           clock: Callable[[], float] = time.perf_counter, watch: ClockWatch | None = None,
           on_round: Callable[[int], None] | None = None, k_multiple: int = 1) -> PairedResult:
    """Interleaved rounds: in each, every arm runs `k` times in an order drawn from a seeded rng;
    an arm's value for the round is the median of its k runs. Drift shared by a round cancels in
    the per-round ratios. Stops when every arm's median (of the arms that settle: Arm.settles) and
    every ratio in `pairs` (default: each arm against the first) have a 95% interval within `rel_hw` and no ratio drifts, or at
    `max_rounds`, or when the next round no longer fits in `budget_s` (wall time, warm-up
    included); the first `min_rounds` rounds always run, so a slow case overruns its budget rather
    than report a median of one or two rounds. k=None sizes k from the warm-up so that a round takes about `batch_s`
    of the arms' own time.
    Warm-up (gapbench.core.sampling.warm_up_pairing): `warmup` runs and `warmup_s` of its own time for an arm timed on the
    host; `warmup` runs of each device-timed arm, then `warmup_s` of device time among them.
    With a `watch`, the device clock is read after each round and a round at a low clock is
    dropped (its values become nan for every arm) and counted. `on_round(i)` is called before round i
    (from 0), e.g. to put the round's arms on its stream (bench.blas: cuda/blas.h kTimingStreams).
    `k_multiple`: k (sized or given) rounded up to a multiple of it (bench.blas --parity balanced: 4)."""
    _check_settings(rel_hw, min_rounds, max_rounds, budget_s, warmup, warmup_s, batch_s)
    if k_multiple < 1:
        raise MeasureError(f"k_multiple must be >= 1, got {k_multiple}")
    names = [a.name for a in arms]
    if not arms or len(set(names)) != len(names):
        raise MeasureError(f"paired needs arms with distinct names, got {names}")
    if k is not None and k < 1:
        raise MeasureError(f"k (runs per arm per round) must be >= 1, got {k}")
    pairs = [(names[i], names[0]) for i in range(1, len(names))] if pairs is None else [tuple(p) for p in pairs]
    for p in pairs:
        if len(p) != 2 or not set(p) <= set(names) or p[0] == p[1]:
            raise MeasureError(f"pair {p} must name two different arms among {names}")
    rng = np.random.default_rng(seed)
    t0 = clock()
    deadline = t0 + budget_s
    callers = [Caller(a, clock) for a in arms]
    n_warm = warm_up_pairing(callers, warmup, warmup_s, batch_s, deadline)
    if k is None:
        # sized by the arms' own (device) time, not by wall time: sized by wall time, a 5 us
        # kernel's k fell from about 100 to under 10, and the arms then perturbed one another (6
        # pairings flagged per default bench.blas instead of 2-5, rows 6-9% off their old values,
        # 0.7% false alarms between runs of one machine: docs/findings/between-runs.md)
        per_round_s = sum(c.per for c in callers)
        k = 1 if math.isnan(per_round_s) else max(1, int(batch_s / per_round_s))
    k = -(-k // k_multiple) * k_multiple
    per_round: dict[str, list[float]] = {n: [] for n in names}
    settling = [a.name for a in arms if a.settles]
    seen: list[float] = []
    dropped = 0
    next_check, reason = min_rounds, None
    while reason is None:
        n_done = len(per_round[names[0]])
        if n_done >= min_rounds and clock() + k * sum(c.wall_per for c in callers) > deadline:
            reason = Stop.budget
            break
        if on_round is not None:
            on_round(n_done)
        for i in rng.permutation(len(callers)):
            vals = callers[i](k)
            per_round[names[i]].append(float(np.median(vals)) if len(vals) else math.nan)
        if watch is not None:
            mhz = watch.read()
            if mhz:
                seen.append(float(mhz))
                if mhz < watch.low * watch.max_mhz:
                    for n in names:
                        per_round[n][-1] = math.nan
                    dropped += 1
        if n_done + 1 >= next_check or n_done + 1 >= max_rounds:
            if _paired_settled(per_round, pairs, rel_hw, settling):
                reason = Stop.converged
            next_check = max(n_done + 2, math.ceil((n_done + 1) * 1.1))
        if reason is None and n_done + 1 >= max_rounds:
            reason = Stop.max_samples
    rounds_done = len(per_round[names[0]])
    if reason is not Stop.converged and rounds_done >= min_rounds and _paired_settled(per_round, pairs, rel_hw,
                                                                                      settling):
        reason = Stop.converged  # settled between the last check and the stop
    wall = clock() - t0
    measured = {}
    for n in names:
        vals = [x for x in per_round[n] if not math.isnan(x)]
        if not vals:
            low = f" ({dropped} dropped at a low clock)" if dropped else ""
            raise MeasureError(f"arm {n!r} produced no valid samples in {len(per_round[n])} rounds{low}")
        m = _measurement(n, vals, reason, n_warm[n], wall, rel_hw)
        m.converged = m.rel_hw <= rel_hw
        measured[n] = m
    return PairedResult(arms=measured, per_round=per_round, k=k, seed=seed, pairs=pairs, reason=reason,
                        converged=reason is Stop.converged, rel_hw=rel_hw, wall_s=wall,
                        clock_mhz=[min(seen), max(seen)] if seen else None, low_clock_dropped=dropped)


#: an arm whose paired and standalone medians differ by more than this (and beyond both intervals)
#: was perturbed by the pairing: 5%, the tolerance the like-for-like issue sets; smaller shifts
#: between two phases of one process (clocks, L2 placement) are common and are not the pairing's
PERTURB_MIN = 0.05


def perturbation(alone: Sequence[float], in_pairing: Sequence[float]) -> float | None:
    """How much pairing moved an arm: median in the pairing / median alone - 1, where the two
    medians' intervals do not overlap and differ by more than PERTURB_MIN; None where they agree
    (or either side has too few values for an interval). Pairing must not change what it measures:
    a moved arm's ratio is not the ratio of what each arm does on its own."""
    a = [x for x in alone if x is not None and math.isfinite(x)]
    p = [x for x in in_pairing if x is not None and math.isfinite(x)]
    if len(a) < 6 or len(p) < 6:
        return None
    am, alo, ahi = stats.median_ci(a, INTERVAL_CONFIDENCE)
    pm, plo, phi = stats.median_ci(p, INTERVAL_CONFIDENCE)
    d = pm / am - 1
    if (plo <= ahi and alo <= phi) or abs(d) <= PERTURB_MIN:
        return None
    return d


# --- internals ---------------------------------------------------------------------------------

def _drift(values: Sequence[float]) -> tuple[float, float]:
    """(split-half median difference over the median, its noise bound 2h/median)."""
    v = np.asarray(values, dtype=np.float64)
    med, lo, hi = stats.median_ci(v, INTERVAL_CONFIDENCE)
    half = v.size // 2
    if half < 1:
        return 0.0, math.inf
    d = (float(np.median(v[v.size - half:])) - float(np.median(v[:half]))) / med
    return d, 2.0 * stats.relative_half_width(med, lo, hi)


def _settled(values: Sequence[float], rel_hw: float) -> bool:
    med, lo, hi = stats.median_ci(values, INTERVAL_CONFIDENCE)
    if stats.relative_half_width(med, lo, hi) > rel_hw:
        return False
    d, bound = _drift(values)
    return abs(d) <= max(bound, rel_hw)


def _paired_settled(per_round: dict[str, list[float]], pairs: list[tuple[str, str]], rel_hw: float,
                    settling: Sequence[str]) -> bool:
    """Have the medians of the arms in `settling` and every ratio of `pairs` reached rel_hw?"""
    for name in settling:
        x = [a for a in per_round[name] if not math.isnan(a)]
        if not x or stats.relative_half_width(*stats.median_ci(x, INTERVAL_CONFIDENCE)) > rel_hw:
            return False
    for a, b in pairs:
        num, den = _aligned(per_round[a], per_round[b])
        if not num or not _settled([d / n for n, d in zip(num, den)], rel_hw):
            return False
    return True


def _aligned(a: Sequence[float], b: Sequence[float]) -> tuple[list[float], list[float]]:
    keep = [(x, y) for x, y in zip(a, b) if not (math.isnan(x) or math.isnan(y))]
    return [x for x, _ in keep], [y for _, y in keep]


def _ratio(num: str, den: str, t_num, t_den, rel_hw: float, band: float) -> Ratio:
    a, b = _aligned(t_num, t_den)
    if not a:
        raise MeasureError(f"arms {num!r} and {den!r} share no round where both have a valid value")
    med, lo, hi = stats.ratio_median_ci(b, a, INTERVAL_CONFIDENCE)
    d, _ = _drift([y / x for x, y in zip(a, b)])
    return Ratio(num=num, den=den, median=med, lo=lo, hi=hi, rel_hw=stats.relative_half_width(med, lo, hi),
                 drift=d, n_rounds=len(a), verdict=verdict(lo, hi, band))


def _measurement(name: str, samples: list[float], reason: Stop, n_warm: int, wall: float, rel_hw: float) -> Measurement:
    med, lo, hi = stats.median_ci(samples, INTERVAL_CONFIDENCE)
    return Measurement(name=name, samples=samples, median=med, lo=lo, hi=hi,
                       rel_hw=stats.relative_half_width(med, lo, hi), drift=_drift(samples)[0],
                       converged=reason is Stop.converged, reason=reason, n_warmup=n_warm, wall_s=wall)


def _check_settings(rel_hw, min_n, max_n, budget_s, warmup, warmup_s, batch_s) -> None:
    if not rel_hw > 0:
        raise MeasureError(f"rel_hw must be > 0 (e.g. 0.01 for 1%), got {rel_hw}")
    if not 1 <= min_n <= max_n:
        raise MeasureError(f"need 1 <= min <= max samples/rounds, got min={min_n}, max={max_n}")
    if not budget_s > 0 or not batch_s > 0 or warmup < 0 or warmup_s < 0:
        raise MeasureError(f"budget_s and batch_s must be > 0 and warm-up settings >= 0, got budget_s={budget_s}, "
                           f"batch_s={batch_s}, warmup={warmup}, warmup_s={warmup_s}")


def _compact(values: Iterable[float]) -> list:
    """Seven significant digits (float32's precision), None for nan: compact JSON."""
    return [None if math.isnan(x) else float(f"{x:.7g}") for x in values]


def _num(x: float):
    return x if math.isfinite(x) else None  # JSON has no infinity: an unbounded side is null


def _unnum(x, sign: int) -> float:
    return float(x) if x is not None else sign * math.inf
