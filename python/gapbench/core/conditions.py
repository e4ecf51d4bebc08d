"""The conditions a measurement ran under, as one typed part of every record (Record.conditions),
and the rule that a ratio is taken only between arms whose conditions match.

A ratio is gapbench's product (framework against native, native against vendor, harness against
plain), and it means something only when both arms saw the same machine state: the L2 (flushed,
or inputs rotated past it, or resident in it), the same input data, the same clock, the same
process arrangement. Fields that describe the state the work ran in are *compared*; fields that
describe what happened during the work (the SM clock range, throttle reasons, samples dropped at a
low clock) are *recorded*. `mismatch(a, b)` names the first compared field that differs, and every
table, ratio and report says `n/c (<field>)` there instead of a number.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from gapbench.core.names import Parity
from gapbench.core.params import Params


class Cache:
    """The L2 state before each timed run, in the words records use."""
    ROTATED = "rotated"  # input sets cycled, together at least 2x the L2: each run reads from memory
    FLUSHED_CLEAN = "flushed-clean"  # a 2x-L2 read pass before each run: nothing of the op in L2
    FLUSHED_DIRTY = "flushed-dirty"  # a 2x-L2 memset before each run: the op writes back dirty lines too
    L2_RESIDENT = "l2-resident"  # the inputs fit the L2 and were read from it (one set, or too few)
    HOST = "host"  # CPU backends: caches of the host, not rotated


class Clock:
    GATED = "device events, gated"  # events around the work, the queue held until it is all queued
    ISSUED = "device events, as issued"  # events around the work as the host issues it
    GRAPH = "device events, one graph launch"  # events around a CUDA graph replay: one host call queues it all
    HOST = "host wall"  # the host's clock around the calls and a final synchronise
    GPU_TIMESTAMPS = "gpu timestamps"  # Metal command buffer GPU start/end


#: Record.clock (how the samples were read) -> the conditions' clock, for records timed without the
#: release gate (gated device events are Clock.GATED, set where the gate is used)
_RECORD_CLOCKS = {"host_wall": Clock.HOST, "device_events": Clock.ISSUED, "gpu_timestamps": Clock.GPU_TIMESTAMPS}


def clock_of(record_clock: str | None, gated: bool = False, graph: bool = False) -> str | None:
    """The conditions' clock of a record whose samples were read by `record_clock`; `gated`: its
    device events were held behind the release gate; `graph`: they bracket one graph launch (the
    host issues one call, so the span is the device's work, not the host's issue rate)."""
    if gated:
        return Clock.GATED
    if graph and record_clock == "device_events":
        return Clock.GRAPH
    return _RECORD_CLOCKS.get(record_clock or "", record_clock)


class Process:
    PAIRED = "paired"  # interleaved rounds with the other arms, in one process
    STANDALONE = "standalone"  # alone in its process


@dataclass
class Conditions(Params):
    # ---- compared: a ratio needs these equal
    cache: str | None = None
    data: str | None = None  # the input distribution: randn, uniform, zeros
    clock: str | None = None
    process: str | None = None
    optimizer: str | None = None  # training: fused, foreach, for-loop
    attention: str | None = None  # training: sdpa, eager, flash
    compile: str | None = None  # training: none, default, reduce-overhead, max-autotune
    #: gated CUDA rows: "balanced" where each sample was padded to both launch parities of its stream
    #: (bench.blas --parity balanced, cuda/gate.h); None: as the process's history drew it
    parity: str | None = None
    # ---- recorded: how the state was reached, and what happened while it ran
    rotations: int | None = None  # input sets cycled (rotated)
    set_bytes: int | None = None  # bytes of one set (inputs and output)
    l2_bytes: int | None = None  # the device's L2
    seed: int | None = None
    sm_clock_mhz: list | None = None  # [min, max] over the measurement
    max_sm_clock_mhz: int | None = None  # the device's maximum SM clock
    throttle: list | None = None  # throttle reasons seen while it ran
    low_clock_dropped: int | None = None  # samples or rounds dropped below LOW_CLOCK of the max clock
    event_pair_s: float | None = None  # the cost of an empty event pair, measured in the run
    cpu: str | None = None  # the CPU the measuring thread was bound to ("not bound" where not)
    streams: int | None = None  # streams the rounds were timed on, one a round in turn (native CUDA rows: cuda/blas.h)

    def compared(self) -> dict:
        return {f: getattr(self, f) for f in COMPARED}

    @classmethod
    def of(cls, record) -> "Conditions":
        """The conditions of a record (empty for files written before records carried them), kept
        on the record for as long as its conditions hold the same items (gapbench compare reads a
        record once per pair of runs it is in: the calibration's 1753 pairs, 600,000 parses). Read
        it, do not change it: the record hands out the same object."""
        d = getattr(record, "conditions", None)
        made_of = tuple(d.items()) if d else ()
        kept = getattr(record, "__dict__", {})
        memo = kept.get("_conditions")
        if memo is not None and memo[0] == made_of:
            return memo[1]
        c = cls.from_dict(d)
        if hasattr(record, "__dict__"):
            record.__dict__["_conditions"] = (made_of, c)
        return c


#: the fields a ratio needs equal, in the order a mismatch is reported
COMPARED = ("cache", "data", "clock", "process", "optimizer", "attention", "compile", "parity")
#: samples taken below this fraction of the maximum SM clock are dropped (nvbench's default)
LOW_CLOCK = 0.75


def mismatch(a: Conditions | None, b: Conditions | None) -> str | None:
    """The first compared field whose values differ ("cache: rotated vs l2-resident"), None when
    the two arms ran under the same conditions. A field one side does not record (older files,
    conditions a backend cannot have) is a mismatch only if the other side records it."""
    a, b = a or Conditions(), b or Conditions()
    for f in COMPARED:
        x, y = getattr(a, f), getattr(b, f)
        if x != y:
            unset = UNSET.get(f, "not recorded")
            return f"{f}: {x or unset} vs {y or unset}"
    return None


#: what a compared field left unset means, where that is not "not recorded": a gated row without a
#: parity ran as its process's history drew it (the default, and every run before the pads)
UNSET = {"parity": Parity.as_drawn.value}


def not_comparable(why: str) -> str:
    """The cell a table shows where a ratio would compare unequal conditions."""
    return f"n/c ({why.split(':')[0]})"


assert set(COMPARED) <= {f.name for f in fields(Conditions)}
