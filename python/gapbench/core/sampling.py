"""Calling an arm (gapbench.core.measure's unit of timing): what it must return, the per-run and
wall time it is tracked by, and its warm-up, alone or in a pairing. The stopping rules and the
statistics over the values are in gapbench.core.measure."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

#: Consecutive calls returning no valid sample after which an arm is declared broken.
MAX_EMPTY_CALLS = 8


class MeasureError(ValueError):
    """An arm misbehaved (no valid samples, non-positive or non-finite values) or bad settings."""


@dataclass(frozen=True)
class Arm:
    """A named thing to time: sample(n) runs it n times and returns the valid runs' seconds.
    `device_timed`: its seconds are device time behind a release gate, so only the device's warm
    state shows in them (its clock), not the host's (caches, branch predictors, the host clock):
    such arms of a pairing share one device warm-up (`warm_up_pairing`).
    `settles`: the paired rounds stop only once this arm's median has its interval (False for an
    arm that rides along in the rounds and is not a row of its own, e.g. bench.blas's launch floor:
    the rows decide when to stop, as they do without it)."""
    name: str
    sample: Callable[[int], Sequence[float]]
    device_timed: bool = False
    settles: bool = True


class Caller:
    """Calls an arm, validates what it returns, and tracks its per-run time (the arm's own, for
    sizing batches) and wall time per requested run (for fitting the budget)."""

    def __init__(self, arm: Arm, clock: Callable[[], float]):
        self.arm, self.clock = arm, clock
        self.per = self.wall_per = math.nan
        self.empty = 0

    def __call__(self, n: int) -> list[float]:
        t = self.clock()
        got = self.arm.sample(n)
        wall = self.clock() - t
        vals = np.asarray(got, dtype=np.float64).ravel()
        if vals.size > n or not np.all(np.isfinite(vals) & (vals > 0)):
            raise MeasureError(f"arm {self.arm.name!r} must return at most {n} positive finite "
                               f"seconds for sample({n}), got {vals[:5].tolist()}{'...' if vals.size > 5 else ''}")
        self.empty = 0 if vals.size else self.empty + 1
        if self.empty >= MAX_EMPTY_CALLS:
            raise MeasureError(f"arm {self.arm.name!r} returned no valid sample in {self.empty} consecutive calls")
        if vals.size:
            self.per = float(np.median(vals))
        self.wall_per = max(wall / n, self.per if vals.size else 0.0, 1e-9)
        return vals.tolist()

    def batch(self, batch_s: float) -> int:
        return 1 if math.isnan(self.per) else max(1, int(batch_s / self.per))


def warm_up(c: Caller, warmup: int, warmup_s: float, batch_s: float, deadline: float) -> int:
    """Discarded runs: at least `warmup` of them and `warmup_s` seconds of the arm's own time
    (a GPU's clocks ramp with busy time, not with the host's wall time), the first run alone to
    learn the per-run time, then batches of about `batch_s`. Ends early at the deadline."""
    done, busy = 0, 0.0
    while done < warmup or busy < warmup_s:
        if done and c.clock() >= deadline:
            break
        if math.isnan(c.per):
            n = 1
        elif busy < warmup_s:
            n = c.batch(batch_s)
        else:
            n = min(warmup - done, c.batch(batch_s))
        busy += sum(c(n))
        done += n
    return done


def warm_up_pairing(callers: Sequence[Caller], warmup: int, warmup_s: float, batch_s: float,
                    deadline: float) -> dict[str, int]:
    """The warm-up of a pairing. An arm timed on the host warms up on its own (`warm_up`: the
    host's state is part of what it measures). Device-timed arms (Arm.device_timed) each run their
    own `warmup` runs (at least one, to learn the per-run time), then `warmup_s` of device time
    shared among them, since the clock ramps with the device's busy time whichever arm keeps it
    busy. That time is run by the arm that keeps the device busiest per host second (least wall
    time per second of its own), so a framework arm with a slow host path does not spend thousands
    of runs warming a GPU that a native arm warms in a few milliseconds. Ends early at the
    deadline. Returns runs per arm."""
    runs = {c.arm.name: warm_up(c, warmup, warmup_s, batch_s, deadline) for c in callers
            if not c.arm.device_timed}
    shared = [c for c in callers if c.arm.device_timed]
    first = max(warmup, 1) if warmup_s > 0 else warmup
    runs.update({c.arm.name: warm_up(c, first, 0.0, batch_s, deadline) for c in shared})
    busy = sum(c.per * runs[c.arm.name] for c in shared if math.isfinite(c.per))
    timed = [c for c in shared if math.isfinite(c.per) and c.per > 0]
    if busy < warmup_s and timed:
        best = min(timed, key=lambda c: c.wall_per / c.per)
        runs[best.arm.name] += warm_up(best, 0, warmup_s - busy, batch_s, deadline)
    return runs
