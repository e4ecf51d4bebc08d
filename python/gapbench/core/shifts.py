"""What the noise model is fitted on (docs/results/calibrate_compare.py, floor_model.py): the log
shift of every A/A row pair exactly as compare_runs judges it, so the model and compare see the
same quantity."""
from __future__ import annotations

import math

from gapbench.core.compare import NOT_COMPARABLE, compare_runs
from gapbench.core.noise import NoiseModel
from gapbench.core.result import Run


def judged_shifts(a: Run, b: Run, one_start: bool | None = None,
                  floor_shares: dict[str, float] | None = None) -> list[tuple[tuple, float]]:
    """(row class, log shift) of every row compare_runs would judge by its noise class, each run's
    first process (a --processes run's other processes aside: the model is of one process a side):
    rows whose conditions match, not left without a verdict by a floor that moved (event pair), host-timed
    launch rows as gaps to their host floor. `floor_shares` ({"native": b, "framework": b}): rows
    with a launch floor less that share of its move, in their floor classes (floor_model.py)."""
    out = []
    for c in compare_runs(a, b, model=_Everything(floor_shares), one_start=one_start, intervals=False,
                          processes=False):
        if c.verdict == NOT_COMPARABLE or c.why or c.ratio is None:
            continue
        out.append((c.noise_class, math.log(c.ratio)))
    return out


class _Everything(NoiseModel):
    """A stand-in model that calibrates every class (so judged_shifts sees every row), with the
    floor shares given (none: rows keep their floors)."""

    def __init__(self, floor_shares: dict[str, float] | None = None):
        super().__init__({})
        self.shares = floor_shares or {}

    def scale(self, device, cls, same_start=False, confidence=0.95):
        return 0.0, "any"

    def floor_share(self, device, group):
        return self.shares.get(group)
