"""Statistics over raw samples. Native code and framework loops return raw per-sample
durations; everything derived from them (median, spread, noise, rates) is computed here."""
from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np

#: A result whose interquartile range exceeds this fraction of its median is flagged noisy.
NOISE_THRESHOLD = 0.10


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    min: float
    max: float
    p10: float
    p25: float
    p75: float
    p90: float
    iqr: float
    noise: float  # IQR / median: a robust relative spread
    noisy: bool

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(values, noise_threshold: float = NOISE_THRESHOLD) -> Summary:
    """Summarise per-operation values (seconds). Raises ValueError on empty or non-finite data:
    a summary of nothing is a bug upstream, not a zero."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        raise ValueError("no samples to summarise")
    if not np.all(np.isfinite(v)):
        raise ValueError("samples contain NaN or infinity")
    p10, p25, med, p75, p90 = np.percentile(v, [10, 25, 50, 75, 90])
    iqr = float(p75 - p25)
    noise = iqr / med if med > 0 else float("inf")
    return Summary(
        n=int(v.size), median=float(med), mean=float(v.mean()), min=float(v.min()),
        max=float(v.max()), p10=float(p10), p25=float(p25), p75=float(p75), p90=float(p90),
        iqr=iqr, noise=float(noise), noisy=bool(noise > noise_threshold),
    )


def rates(seconds_per_op: float, flops: float | None, bytes_: float | None, items: float | None = None) -> dict:
    """The one place rates are derived from declared work: FLOP/s, bytes/s and items/s (tokens
    or samples of a training step) per op."""
    out: dict = {}
    if seconds_per_op > 0:
        if flops:
            out["flops_per_s"] = flops / seconds_per_op
        if bytes_:
            out["bytes_per_s"] = bytes_ / seconds_per_op
        if items:
            out["items_per_s"] = items / seconds_per_op
    return out


# --- Distribution-free intervals (order statistics) -------------------------------------------
# For n independent draws of a continuous quantity, the number B of draws below the q-quantile is
# binomial(n, q), whatever the distribution. So the interval between the l-th and u-th smallest
# draws (1-based) covers the q-quantile with probability P(l <= B <= u - 1). The ranks below are
# the outermost ones that keep each tail at most (1 - confidence) / 2: exact binomial sums up to
# EXACT_MAX_N draws, the normal approximation with continuity correction beyond (the two agree
# to within one rank there; tests/test_measure.py checks it). Ties (a coarse timer) only widen
# the closed interval, so the coverage stays at least the nominal one.

#: Largest n for which interval ranks come from exact binomial sums.
EXACT_MAX_N = 1000


@functools.lru_cache(maxsize=4096)
def order_stat_ranks(n: int, q: float = 0.5, confidence: float = 0.95) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) of the sorted sample bounding a `confidence` interval for the
    q-quantile. A side is None where even the sample's extreme cannot reach the confidence
    (e.g. the median of 5 or fewer draws at 95%): that side of the interval is unbounded."""
    if n < 1:
        raise ValueError(f"need at least one sample for a quantile interval, got n={n}")
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must lie strictly between 0 and 1, got {q}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    tail = (1.0 - confidence) / 2.0
    if n <= EXACT_MAX_N:
        i = np.arange(n + 1)
        logpmf = (np.array([math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) for k in i])
                  + i * math.log(q) + (n - i) * math.log1p(-q))
        cdf = np.cumsum(np.exp(logpmf))  # cdf[k] = P(B <= k)
        below = np.nonzero(cdf <= tail)[0]  # P(B <= l - 1) <= tail  ->  l = k + 1
        lo = int(below[-1]) + 1 if below.size else None
        upper = 1.0 - np.concatenate(([0.0], cdf[:-1]))  # upper[u] = P(B >= u)
        above = np.nonzero(upper[1:] <= tail)[0] + 1
        hi = int(above[0]) if above.size else None
    else:
        z = NormalDist().inv_cdf(1.0 - tail)
        sd = math.sqrt(n * q * (1.0 - q))
        lo = math.floor(n * q + 0.5 - z * sd)
        hi = math.ceil(n * q + 0.5 + z * sd)
        lo = lo if lo >= 1 else None
        hi = hi if hi <= n else None
    return lo, hi


def quantile_ci(values, q: float = 0.5, confidence: float = 0.95) -> tuple[float, float, float]:
    """(estimate, lo, hi): the sample q-quantile (linear interpolation) and its distribution-free
    `confidence` interval from order statistics. An unbounded side is -inf / +inf."""
    v = np.sort(_finite(values))
    lo_rank, hi_rank = order_stat_ranks(int(v.size), q, confidence)
    lo = float(v[lo_rank - 1]) if lo_rank is not None else -math.inf
    hi = float(v[hi_rank - 1]) if hi_rank is not None else math.inf
    return float(np.quantile(v, q)), lo, hi


def median_ci(values, confidence: float = 0.95) -> tuple[float, float, float]:
    """(median, lo, hi): the median and its distribution-free interval (see quantile_ci)."""
    return quantile_ci(values, 0.5, confidence)


def ratio_median_ci(numer, denom, confidence: float = 0.95) -> tuple[float, float, float]:
    """(median, lo, hi) of the per-pair ratios numer[i] / denom[i] (e.g. one pair per interleaved
    round), with the median's distribution-free interval. The pairs must line up one to one."""
    a, b = _finite(numer), _finite(denom)
    if a.shape != b.shape:
        raise ValueError(f"paired ratios need equally many values, got {a.size} and {b.size}")
    if np.any(b == 0):
        raise ValueError("ratio denominator contains zero")
    return median_ci(a / b, confidence)


def relative_half_width(estimate: float, lo: float, hi: float) -> float:
    """Half the interval's width over the estimate: (hi - lo) / 2 / estimate (inf if unbounded)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or estimate <= 0:
        return math.inf
    return (hi - lo) / 2.0 / estimate


def _finite(values) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        raise ValueError("no samples for an interval")
    if not np.all(np.isfinite(v)):
        raise ValueError("samples contain NaN or infinity")
    return v
