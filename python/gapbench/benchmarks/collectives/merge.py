"""Rank lines -> result records: one record per (rung, op, dtype, placement, size) over all ranks
(samples averaged over ranks per sample, as nccl-tests reports; each rank's median kept for the
min/avg/max columns), one row per unavailable rung or inapplicable combination, and an error row
for every rank that failed, hung or vanished, naming the measurement it was in."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from gapbench.core.result import ERROR, FAILED, NOT_APPLICABLE, OK, UNAVAILABLE, Record
from gapbench.benchmarks.collectives.config import bus_factor, human_bytes
from gapbench.core.names import Rung

PROBE = "dist"


def variant(dtype: str, placement: str, size: int) -> str:
    return f"{dtype}/{placement}/{size}"


def _op_text(op, dtype, placement, size, world) -> str:
    where = "in place" if placement == "in" else "out of place"
    return f"{op} of {human_bytes(size)} {dtype} {where} over {world} ranks"


def merge_lines(per_rank: dict[int, list[dict]], world: int, *, failures: dict[int, str] | None = None,
                nccl_info: dict | None = None, device: dict | None = None) -> list[Record]:
    """Merge what ranks 0..world-1 wrote. `failures` maps a rank to why it failed (launcher)."""
    from gapbench.benchmarks.collectives.ncclinfo import algo_for

    failures = dict(failures or {})
    device = device or {}
    recs: list[Record] = []
    seen_rung_rows = set()
    results: dict[tuple, dict[int, dict]] = {}
    begun: dict[int, dict] = {}
    infos: dict[str, dict] = {}
    order: list[tuple] = []
    for r in range(world):
        lines = per_rank.get(r)
        if lines is None:
            failures.setdefault(r, f"rank {r} sent no results")
            continue
        for d in lines:
            k = d.get("kind")
            rung = d.get("rung", "")
            if k == "begin":
                begun[r] = d
            elif k == "result":
                key = (rung, d["op"], d["dtype"], d["placement"], d["size"])
                if key not in results:
                    order.append(key)
                results.setdefault(key, {})[r] = d
                begun.pop(r, None)
            elif k == "info" and r == 0:
                infos[rung] = d.get("info", {})
            elif k in ("unavailable", "na", "error") and (k, rung, d.get("op"), d.get("dtype"), d.get("placement")) not in seen_rung_rows:
                seen_rung_rows.add((k, rung, d.get("op"), d.get("dtype"), d.get("placement")))
                if k == "na":
                    recs.append(Record(probe=PROBE, backend=rung, metric=d["op"], variant=f"{d['dtype']}/{d['placement']}",
                                       status=NOT_APPLICABLE, reason=d["reason"], device=device))
                else:
                    recs.append(Record(probe=PROBE, backend=rung, metric="rung", variant=f"rank{r}" if k == "error" else "",
                                       status=UNAVAILABLE if k == "unavailable" else ERROR, reason=d["reason"],
                                       device=device))
    for key in order:
        rung, op, dtype, placement, size = key
        by_rank = results[key]
        first = by_rank[min(by_rank)]
        params = {"size": size, "count": first.get("count"), "world": world, "dtype": dtype, "placement": placement,
                  "bus_factor": bus_factor(op, world), "group": first.get("group", rung),
                  **{f"{rung}_{k}": v for k, v in infos.get(rung, {}).items()}}
        if Rung.of(rung) is not None and Rung(rung).on_nccl and nccl_info:
            params["nccl_algo"] = algo_for(nccl_info, op, size, world)
        missing = [r for r in range(world) if r not in by_rank]
        bad = {r: d for r, d in by_rank.items() if d.get("status") != OK}
        common = dict(probe=PROBE, backend=rung, metric=op, variant=variant(dtype, placement, size),
                      op=_op_text(op, dtype, placement, size, world), params=params, device=device,
                      work={"bytes": float(size)})
        if missing or bad:
            why = [f"rank {r}: {d.get('reason', '')}" for r, d in sorted(bad.items())]
            why += [f"no result from rank {r}" + (f" ({failures[r]})" if r in failures else "") for r in missing]
            status = FAILED if bad and all(d.get("status") == FAILED for d in bad.values()) and not missing else ERROR
            verified = False if any(d.get("verified") is False for d in bad.values()) else None
            recs.append(Record(**common, status=status, reason="; ".join(why)[:1500], verified=verified,
                               verify_detail="; ".join(str(d.get("verify_detail", "")) for d in bad.values())[:500]))
            continue
        samples = [np.asarray(by_rank[r]["samples_s"], dtype=float) for r in range(world)]
        n = min(len(s) for s in samples)
        mean = np.mean([s[:n] for s in samples], axis=0)
        iters = int(first["iters"])
        params["rank_median_s"] = [float(np.median(s)) / iters for s in samples]
        params["iters"] = iters
        rounds = int(first.get("rounds") or 1)
        params["rounds"] = rounds
        if rounds > 1 and n % rounds == 0:  # samples in round order: each round's median, for paired ratios
            params["round_medians_s"] = [float(np.median(c)) for c in np.split(mean, rounds)]
        recs.append(Record(**common, status=OK, clock="host_wall", samples_s=mean.tolist(), inner=iters,
                           warmup=int(first.get("warmup", 0)), verified=all(d.get("verified") for d in by_rank.values()),
                           verify_detail=f"every rank exact; rank 0: {first.get('verify_detail', '')}"))
    for r, why in sorted(failures.items()):
        at = begun.get(r)
        where = f" during {at['rung']} {at['op']} {at['dtype']}/{at['placement']} {human_bytes(at['size'])}" if at else ""
        recs.append(Record(probe=PROBE, backend=(at or {}).get("rung", "launch"), metric="rank", variant=f"rank{r}",
                           status=ERROR, reason=f"{why}{where}", device=device))
    return recs


def p2p_records(lines: list[dict], device: dict | None = None) -> list[Record]:
    out = []
    for d in lines:
        if d.get("kind") != "p2p":
            continue
        v = f"{d['src']}->{d['dst']}/{d['size']}"
        common = dict(probe=PROBE, backend="p2p", metric=d["method"], variant=v, device=device or {},
                      params={"src": d["src"], "dst": d["dst"], "size": d["size"], "peer_access": d.get("peer_access")},
                      work={"bytes": float(d["size"])},
                      op=f"{d['method']} of {human_bytes(d['size'])} from GPU {d['src']} to GPU {d['dst']}")
        if d["status"] == OK:
            out.append(Record(**common, status=OK, clock="device_events", samples_s=d["samples_s"], inner=d["iters"],
                              warmup=d.get("warmup", 0), verified=True, verify_detail=d.get("verify_detail", "")))
        else:
            out.append(Record(**common, status=d["status"], reason=d["reason"],
                              verified=False if d["status"] == FAILED else None))
    for d in lines:
        if d.get("kind") == "unavailable" and d.get("rung") == "p2p":
            out.append(Record(probe=PROBE, backend="p2p", metric="rung", status=UNAVAILABLE, reason=d["reason"],
                              device=device or {}))
    return out


def write_merged(path: Path, per_rank: dict[int, list[dict]], world: int, run_meta: dict, nccl_logs=()) -> None:
    """The multi-node path: rank 0 writes the usual result file from every rank's lines."""
    from gapbench.core import env as envmod
    from gapbench.core.cli import csv_path_for
    from gapbench.core.result import RunWriter
    from gapbench.benchmarks.collectives.ncclinfo import read_logs

    info = read_logs(list(nccl_logs))
    run = dict(run_meta)
    run.setdefault("probe", PROBE)
    run["nccl"] = info
    run["rank_env"] = next((d for d in per_rank.get(0, []) if d.get("kind") == "env"), {})
    w = RunWriter(path, env=envmod.collect(), csv_path=csv_path_for(path), run=run)
    w.extend(p2p_records(per_rank.get(0, [])))
    w.extend(merge_lines(per_rank, world, nccl_info=info))
    w.finish()


def stage_times(lines: list[dict], t_start: float, t_end: float) -> dict:
    """Where one launch's wall time went, from one rank's timestamped lines: "start" (process
    start, imports, communicators: up to the first measurement), seconds per op (each interval
    between consecutive lines goes to the op of the later line), "end" (teardown, merging)."""
    def what(d):
        return d.get("op") or d.get("method")

    marks = sorted((d["t"], what(d)) for d in lines
                   if isinstance(d.get("t"), (int, float)) and what(d) and d.get("kind") in ("begin", "result", "na", "p2p"))
    out = {"wall": round(t_end - t_start, 2)}
    if not marks:
        return out
    out["start"] = round(marks[0][0] - t_start, 2)
    per_op: dict[str, float] = {}
    for (t0, _), (t1, op) in zip(marks, marks[1:]):
        per_op[op] = per_op.get(op, 0.0) + t1 - t0
    out["ops"] = {k: round(v, 2) for k, v in per_op.items()}
    out["end"] = round(t_end - marks[-1][0], 2)
    return out
