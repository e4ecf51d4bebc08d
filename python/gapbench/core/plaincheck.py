"""The harness against a plain C++ loop (cuda/plain/*.cu), shared by bench.launch and bench.blas:
rounds of both in a seeded random order, and the harness/plain ratio those rounds give."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from gapbench.core.result import OK, Record
from gapbench.core.stats import ratio_median_ci


def interleave(arms: dict[str, Callable[[], Any]], rounds: int, seed: int) -> tuple[dict[str, list], list[list[str]]]:
    """`rounds` rounds; in each, every arm's function is called once, in an order drawn from a
    seeded rng. Returns each arm's answers in round order, and each round's order."""
    rng = np.random.default_rng(seed)
    names = list(arms)
    got: dict[str, list] = {n: [] for n in names}
    order = []
    for _ in range(rounds):
        perm = [names[j] for j in rng.permutation(len(names))]
        for n in perm:
            got[n].append(arms[n]())
        order.append(perm)
    return got, order


def plain_ratio(rec: Record, harness: Record | None = None) -> tuple[float, float, float]:
    """(harness/plain, lo, hi) for one plain-cuda record: the median of its per-round ratios with
    the 95% interval (infinite bounds where too few rounds give one). Older files without round
    medians: the ratio of medians (of the interleaved harness samples, or of `harness`, the
    native-cuda row) with NaN bounds; NaN throughout when neither is there."""
    nan = math.nan
    rounds = [(h, p) for h, p in rec.params.get("round_medians_s") or [] if h is not None and p is not None]
    if rounds:
        return ratio_median_ci([h for h, _ in rounds], [p for _, p in rounds])
    pm = float(np.median(rec.samples_s))
    if rec.params.get("harness_interleaved_s"):
        return float(np.median(rec.params["harness_interleaved_s"])) / pm, nan, nan
    if harness is not None and harness.status == OK:
        return harness.summary().median / rec.summary().median, nan, nan
    return nan, nan, nan
