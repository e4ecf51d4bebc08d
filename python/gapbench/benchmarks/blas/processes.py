"""bench.blas --processes K: the short cases timed in K fresh processes in all.

A row of a few microseconds agrees with itself within a process to 0.2%, yet its median moves
1-2% between two fresh processes, each row its own way (findings/between-runs.md). One process a
side then cannot tell a 3% change: compare's noise model has to allow for that move. With K
processes a side each short row carries K medians, and compare's interval for it comes from their
spread (core.ratio_ci.process_ratio_ci, as for `gapbench run --repeat K`), at the cost of the short
cases only, not of the whole run.

This run's process is the first: it times the short cases first (Config.cases), then the rest.
After it, K-1 more processes (core.worker: fresh interpreters, one after another, never beside
device work) each run the short cases alone, in the same order, on the same data (the run's seed),
each verifying its outputs before and after timing as every run does. Their medians are added to
this run's rows (`params.process_medians_s`, this process's first); a process that fails, or a row
it could not time or timed under other recorded conditions, is named in the row
(`params.process_failures`) and the run's `processes` entry, and the rows keep what the others gave.
Each process's entry keeps where its time went (`wall_s`: its own phases, and "process total" from
the parent's clock, the interpreter's start and imports included).
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from gapbench.benchmarks.blas.config import Config, is_short
from gapbench.core.conditions import Conditions, mismatch
from gapbench.core.names import Backend
from gapbench.core.noise import row_key
from gapbench.core.result import OK, Record

#: the worker target each more process runs
TARGET = "gapbench.benchmarks.blas.processes:short_cases"


def short_cases(payload: dict) -> dict:
    """Worker side: the run's short cases alone (payload: the run's config, its backends), every
    record as a dict, and where the process's time went (`wall_s`, as the run's own: its set-up,
    from this call on, is "setup and other")."""
    from gapbench.benchmarks.blas.run import Phases, iterate
    from gapbench.core.worker import progress

    t0 = time.perf_counter()
    cfg = Config.from_dict(payload["config"])
    cfg.short_only = True
    backends = [Backend(b) for b in payload["backends"]]
    phases = Phases()
    records = [r.to_dict() for r in iterate(cfg, backends, on_case=progress, phases=phases)]
    return {"records": records, "wall_s": phases.wall(time.perf_counter() - t0)}


def _short(r: Record) -> bool:
    from gapbench import ops

    p = r.params or {}
    spec = ops.get(str(p.get("op") or ""))
    return spec is not None and isinstance(p.get("shape"), dict) and spec.fits(p["shape"]) and is_short(spec, p["shape"])


def timed_short_rows(records: list[Record]) -> dict[tuple, Record]:
    """This run's timed rows of short cases, by row key."""
    return {row_key(r): r for r in records if r.status == OK and r.samples_s and _short(r)}


def worker_timeout(cfg: Config) -> float:
    """Seconds one more process may take: its imports and set-up, then each short case's checks
    and paired rounds (cfg.budget_s a cache mode) with room for slow hosts."""
    n = sum(1 for spec, shape, _ in cfg.cases() if is_short(spec, shape))
    return 120.0 + 10.0 * n * len(cfg.modes()) * max(cfg.budget_s, 1.0)


def more_processes(cfg: Config, backends: list[Backend], records: list[Record],
                   on_progress: Callable[[str], None] | None = None, on_done: Callable[[], None] | None = None,
                   run: Callable[..., dict] | None = None) -> dict:
    """Times the short cases in cfg.processes - 1 more fresh processes and adds their medians to
    `records` (this run's, changed in place). Returns what the run file records of it.
    `on_progress(text)`: each case a process starts; `on_done()`: each process ended. `run`: the
    worker runner (core.worker.run_in_worker; tests pass their own)."""
    from gapbench.core.worker import WorkerError, run_in_worker

    run = run or run_in_worker
    own = timed_short_rows(records)
    for r in own.values():
        r.params["process_medians_s"] = [float(np.median(r.per_op()))]
    payload = {"config": {**cfg.to_dict(), "short_only": True}, "backends": [b.value for b in backends]}
    log = []
    for i in range(2, cfg.processes + 1):
        t0 = time.perf_counter()
        def progress(text: str, _i=i) -> None:
            if on_progress:
                on_progress(f"process {_i}/{cfg.processes}: {text}")

        try:
            doc = run(TARGET, payload, worker_timeout(cfg), on_progress=progress, fast_exit=True)
        except WorkerError as e:
            if on_done:
                on_done()
            log.append({"process": i, "error": f"{e.kind}: {e}"})
            for r in own.values():
                r.params.setdefault("process_failures", []).append(f"process {i}: {e.kind}: {e}")
            continue
        added, seen = 0, set()
        for d in doc.get("records", []):
            r = Record.from_dict(d)
            mine = own.get(row_key(r))
            if mine is None:
                continue  # a row this process has no timing of (it failed its check here, or is no row)
            seen.add(row_key(r))
            why = (f"{r.status}: {r.reason}" if r.status != OK or not r.samples_s
                   else mismatch(Conditions.of(mine), Conditions.of(r)))
            if why:
                mine.params.setdefault("process_failures", []).append(f"process {i}: {why}")
                continue
            mine.params["process_medians_s"].append(float(np.median(r.per_op())))
            added += 1
        for k, mine in own.items():
            if k not in seen:
                mine.params.setdefault("process_failures", []).append(f"process {i}: no such row")
        wall = {**(doc.get("wall_s") or {}), "process total": round(time.perf_counter() - t0, 2)}
        log.append({"process": i, "rows": added, "wall_s": wall})
        if on_done:
            on_done()
    return {"processes": cfg.processes, "short_rows": len(own), "more": log}


def spread_text(records: list[Record]) -> str | None:
    """One line on the short rows' medians across processes: how far each row's processes were
    apart (max/min - 1), median and largest over the rows."""
    spans = [max(m) / min(m) - 1 for r in records
             if len(m := (r.params or {}).get("process_medians_s") or []) >= 2 and min(m) > 0]
    if not spans:
        return None
    k = max(len(r.params.get("process_medians_s") or []) for r in records if r.params)
    return (f"short cases in {k} processes: {len(spans)} row{'s' if len(spans) != 1 else ''}, their medians {100 * float(np.median(spans)):.2f}% "
            f"apart (median over rows), at most {100 * max(spans):.2f}%")
