"""What a bench.launch record carries (Record.params), typed: every reader goes through LaunchParams.of."""
from __future__ import annotations

from dataclasses import dataclass

from gapbench.core.params import Params


@dataclass
class Pairing(Params):
    """A framework's time over its native floor's, from rounds interleaved in the framework's own
    process (several processes' rounds pooled): x_floor is the median of per-round ratios."""
    vs: str | None = None  # the floor's backend/variant, e.g. native-cuda/add1
    per_round: dict | None = None  # {"framework": [...], "floor": [...]}: per-op seconds per round
    x_floor: float | None = None
    lo: float | None = None  # None: the interval is unbounded on that side (too few rounds)
    hi: float | None = None
    rounds: int | None = None
    processes: int | None = None
    k: object = None  # runs per arm per round (a list when pooled)
    seed: object = None
    stop: object = None
    wall_s: float | None = None
    reason: str | None = None  # why there is no ratio
    unpaired_processes: list | None = None
    #: {"framework": [...], "floor": [...]}: per-op seconds of each arm timed alone, in the same
    #: process, right after the paired rounds (several processes' pooled)
    alone: dict | None = None
    #: an arm timed slower or faster in the pairing than alone, beyond both intervals: what moved
    #: (then x_standalone, not x_floor, is the row's ratio)
    perturbed: str | None = None
    #: the framework's standalone median over the floor's standalone median (unpaired; set where
    #: the pairing perturbed an arm)
    x_standalone: float | None = None


@dataclass
class LaunchParams(Params):
    stop: dict | None = None  # the stopping rule's record (gapbench.core.measure.Measurement.to_dict)
    fresh_processes: int | None = None  # processes a once-per-process phase was sampled in
    processes: int | str | None = None  # processes whose warm samples were pooled (plain rows: in words)
    synchronous: bool | None = None  # a CPU call whose completion is its return
    method: str | None = None  # how the device time was taken
    invalid_samples: int | None = None
    paired: Pairing | None = None
    # the plain C++ loop's rows (backend plain-cuda)
    binary: str | None = None
    rounds: int | None = None
    samples_per_round: int | None = None
    seed: int | None = None
    order: list | None = None
    round_medians_s: list | None = None
    harness_interleaved_s: list | None = None
    #: each round's [harness process, plain loop process] wall seconds, as the parent saw them
    #: (start to answer): what the check costs, round by round
    round_walls_s: list | None = None
