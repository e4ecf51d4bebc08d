"""How a run was set up to measure, beyond its host: the sequence of its cases and the streams its
native CUDA rows were timed on, and the lines gapbench compare prints where two runs differ in
them (what ran before a row, and which stream it ran on, move short rows; the noise model is
fitted on runs of one setup)."""
from __future__ import annotations

from gapbench.core.names import Backend
from gapbench.core.result import OK, Run

#: how far the cases measured before a row moved it, where two runs measured different sequences
#: of cases (bench.blas against gapbench bench at the same GEMV shapes on an H100: 1-2.5%, within
#: 1% for the same rows once both ran the same sequence; findings/between-runs.md)
SEQUENCE_EFFECT = 0.025


def case_sequence(run: Run) -> list[tuple]:
    """The cases of a run in the order it measured them: (op, dtype, shape) of its records as they
    first appear, and the backends measured (a run's case list and order come from its options)."""
    seen: dict[tuple, None] = {}
    for r in run.records:
        p = r.params or {}
        if p.get("op") is not None:
            seen.setdefault((str(p.get("op")), str(p.get("dtype")), str(p.get("shape_text") or p.get("shape"))), None)
    return list(seen)


def sequence_note(a: Run, b: Run) -> str | None:
    """A line where A and B measured different sequences of cases (other ops, shapes, dtypes or
    their order), else None: what ran before a row moves it, and compare's noise model is fitted
    on runs of one sequence."""
    sa, sb = case_sequence(a), case_sequence(b)
    if not sa or not sb or sa == sb:
        return None
    common = [k for k in sa if k in set(sb)]
    order = "the same order" if common == [k for k in sb if k in set(sa)] else "another order"
    return (f"the runs measured different sequences of cases (A {len(sa)}, B {len(sb)}, {len(common)} in common, "
            f"in {order}): the cases run before a row moved it by up to {100 * SEQUENCE_EFFECT:.1f}% on an H100, "
            "beyond the noise model (fitted on runs of one sequence); run both with the same options to rule it out")


def timing_streams(run: Run) -> set:
    """The numbers of streams a run's native CUDA rows were timed on (conditions.streams; None for
    rows of runs from before a case had several: cuda/blas.h kTimingStreams)."""
    return {(r.conditions or {}).get("streams") for r in run.records
            if r.backend == Backend.native_cuda.value and r.status == OK and r.conditions}


def streams_note(a: Run, b: Run) -> str | None:
    """A line where A's and B's native CUDA rows were timed on different numbers of streams, else
    None: which stream a short kernel runs on moves its time, so one run's short native rows moved
    with their process's stream and the other's pool several (docs/findings/between-runs.md)."""
    sa, sb = timing_streams(a), timing_streams(b)
    if not sa or not sb or sa == sb:
        return None

    def text(s: set) -> str:
        return " and ".join(sorted("1 stream" if x is None else f"{x} streams, one a round" for x in s))
    return (f"native CUDA rows were timed on {text(sa)} in A and on {text(sb)} in B: rows under ~10 us timed on one "
            "stream move by that stream's place among the hardware queues (1-2% between processes), which the "
            "noise model (fitted on runs of one kind or the other) does not tell apart from a change")
