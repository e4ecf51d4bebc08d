"""Statistics over raw samples. Native code and framework loops return raw per-sample
durations; everything derived from them (median, spread, noise, rates) is computed here."""
from __future__ import annotations

from dataclasses import asdict, dataclass

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
