"""How a run was set up to measure, beyond its host: the sequence of its cases and the streams its
CUDA rows were timed on, and the lines gapbench compare prints where two runs differ in
them (what ran before a row, and which stream it ran on, move short rows; the noise model is
fitted on runs of one setup)."""
from __future__ import annotations

from gapbench.core.conditions import Clock
from gapbench.core.names import Backend, DeviceClass
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


def timing_streams(run: Run) -> dict[str, set]:
    """The numbers of streams a run's CUDA rows timed behind the gate were timed on, per backend
    (conditions.streams; None for one stream: native rows of runs from before a case had several,
    cuda/blas.h kTimingStreams, torch's and CuPy's but under --streams shared, any under --streams one)."""
    out: dict[str, set] = {}
    for r in run.records:
        c = r.conditions or {}
        if r.status != OK or not c or c.get("clock") != Clock.GATED:
            continue
        try:
            cuda = Backend(r.backend).device_class is DeviceClass.cuda
        except ValueError:
            continue
        if cuda:
            out.setdefault(r.backend, set()).add(c.get("streams") if (c.get("streams") or 1) > 1 else None)
    return out


def streams_note(a: Run, b: Run) -> str | None:
    """A line where a backend's CUDA rows were timed on different numbers of streams in A and B,
    else None: which stream a short kernel runs on moves its time, so one run's short rows moved with
    their process's stream and the other's pool several (docs/findings/between-runs.md)."""
    sa, sb = timing_streams(a), timing_streams(b)
    differ = [k for k in sa if k in sb and sa[k] != sb[k]]
    if not differ:
        return None

    def text(s: set) -> str:
        return " and ".join(sorted("1 stream" if x is None else f"{x} streams, one a round" for x in s))
    by = "; ".join(f"{k} rows on {text(sa[k])} in A and on {text(sb[k])} in B" for k in differ)
    return (f"CUDA rows were timed on different numbers of streams ({by}): rows under ~10 us timed on one "
            "stream move by that stream's place among the hardware queues (1-2% between processes), which the "
            "noise model (fitted on runs of one kind or the other) does not tell apart from a change")
