"""What the case-by-case benchmarks (train, suite) share: the exception a case raises when it
cannot run as asked, and running one case in a fresh worker process (gapbench.core.worker)."""
from __future__ import annotations

from dataclasses import asdict
from typing import Callable

from gapbench.core.result import ERROR, Record
from gapbench.core.worker import WorkerError, run_in_worker


class CaseError(Exception):
    """A case that cannot run as asked (a row with this reason; the sweep goes on)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def run_case_in_worker(target: str, case, timeout_s: float, progress: Callable[[str], None] | None,
                       error_record: Callable[[str], Record]) -> list[Record]:
    """One case (a dataclass) in a fresh process: `target(asdict(case))` returns the records as
    dicts. A clean memory timeline per case, and a crash (or the OS killing it for memory) or a
    timeout is the row `error_record(reason)` instead of the end of the sweep."""
    try:
        docs = run_in_worker(target, asdict(case), timeout_s, on_progress=progress)
    except WorkerError as e:
        rec = error_record(f"the case's process {e}" if e.kind != "error" else f"the case's process failed: {e}")
        rec.params["stderr_tail"] = e.tail[-40:]
        rec.params["worker_error"] = e.kind
        return [rec]
    return [Record.from_dict(d) for d in docs]


def error_record(probe: str, backend: str, variant: str, params: dict) -> Callable[[str], Record]:
    return lambda reason: Record(probe=probe, backend=backend, variant=variant, metric="step", status=ERROR,
                                 reason=reason, params=dict(params))
