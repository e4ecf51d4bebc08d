"""The harness against a plain standalone C++ NCCL loop (cuda/plain/nccl.cu): does bench.dist's
direct-NCCL timing add anything? Both sides run one process per GPU and time the same thing (a
1-element all-reduce as a barrier, then a host-timed loop of out-of-place all-reduces ended by a
stream synchronize). Each round starts a fresh set of harness ranks (`python -m
gapbench.benchmarks.collectives.plain --rank R ...`: gapbench._native.dist.NcclRunner, the direct-NCCL rung's own
timing code, without torch) and a fresh set of plain-loop ranks, in a seeded random order, so the
per-process spread is inside the interval; the ratio per size is the median of the per-round
ratios harness/plain with its 95% interval (gapbench.core.plaincheck)."""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from gapbench.core.plaincheck import interleave
from gapbench.core.result import ERROR, FAILED, OK, UNAVAILABLE, Record
from gapbench.core.cli import ArgumentParser
from gapbench.core import process
from gapbench.core.names import DType
from gapbench.benchmarks.collectives.config import DistConfig, bus_factor

SEED = 20261123
#: Samples per size in each process: a round's median then stands through a few host preemptions
#: (a small message's sample is under a millisecond). Cheap: a process is mostly its NCCL start.
PLAIN_SAMPLES = 10


def plain_bin() -> Path | None:
    """The installed plain NCCL loop (gapbench/bin/gapbench_nccl_plain), None where not built."""
    from gapbench.core.native import tool

    return tool("gapbench_nccl_plain")


def _sweep_args(cfg: DistConfig, dtype: str) -> list[str]:
    f = cfg.sizes[1] / cfg.sizes[0] if len(cfg.sizes) > 1 else 2.0
    return [str(cfg.sizes[0]), str(cfg.sizes[-1]), repr(f), str(cfg.iters), str(PLAIN_SAMPLES), str(cfg.warmup), dtype]


def _launch(cmds: list[list[str]], timeout_s: float, cpus: list[list[int]] | None = None) -> list[dict] | str:
    """Run one process per rank (rank r bound to cpus[r] where given, as the collective ranks are);
    every rank's JSON, or why not (a failing or hung rank stops the others)."""
    outs = process.run_rank_set(cmds, timeout_s, cpus)
    if isinstance(outs, str):
        return outs
    docs = []
    for r, out in enumerate(outs):
        try:
            docs.append(json.loads(out))
        except json.JSONDecodeError:
            return f"rank {r} printed no JSON: {out[-200:]!r}"
    return docs


def _round_cmds(kind: str, cfg: DistConfig, nproc: int, dtype: str, lib: str, d: Path) -> list[list[str]]:
    uid = d / f"uid-{kind}"
    uid.unlink(missing_ok=True)
    rest = _sweep_args(cfg, dtype)
    if kind == "plain":
        return [[str(plain_bin()), lib, str(r), str(nproc), str(r), str(uid), *rest] for r in range(nproc)]
    return [[sys.executable, "-m", "gapbench.benchmarks.collectives.plain", "--lib", lib, "--rank", str(r), "--world", str(nproc),
             "--uid-file", str(uid), *rest] for r in range(nproc)]


def _rank_mean(docs: list[dict]) -> dict[int, dict]:
    """Per size: samples averaged over ranks (as the collective rungs are merged), checks summed."""
    out = {}
    for i, row in enumerate(docs[0]["rows"]):
        rows = [doc["rows"][i] for doc in docs]
        n = min(len(r["samples_s"]) for r in rows)
        out[row["bytes"]] = {"samples": np.mean([r["samples_s"][:n] for r in rows], axis=0).tolist(),
                             "count": row["count"], "iters": row["iters"],
                             "wrong": sum(r["wrong_before"] + r["wrong_after"] for r in rows)}
    return out


def plain_records(cfg: DistConfig, nproc: int, rounds: int = 6, timeout_s: float = 120.0,
                  cpus: list[list[int]] | None = None) -> list[Record]:
    """One record per size: the plain loop's samples, and per round the (harness, plain) medians."""
    from gapbench.benchmarks.collectives.rungs.nccl import nccl_candidates

    base = dict(probe="dist", backend="nccl-plain", metric="all_reduce")
    if plain_bin() is None:
        return [Record(**base, status=UNAVAILABLE,
                       reason="gapbench/bin/gapbench_nccl_plain not built (no CUDA toolkit at install)")]
    libs = nccl_candidates()
    if not libs:
        return [Record(**base, status=UNAVAILABLE, reason="no libnccl.so.2 found (set GAPBENCH_NCCL_LIB)")]
    out = []
    for dt in cfg.dtypes:
        with tempfile.TemporaryDirectory(prefix="gapbench-plain-") as tmp:
            d = Path(tmp)
            arms = {k: (lambda k=k: _launch(_round_cmds(k, cfg, nproc, dt, libs[0], d), timeout_s, cpus))
                    for k in ("harness", "plain")}
            got, order = interleave(arms, rounds, SEED)
        errs = [g for k in got for g in got[k] if isinstance(g, str)]
        if errs:
            out.append(Record(**base, variant=dt, status=ERROR, reason=errs[0]))
            continue
        h = [_rank_mean(g) for g in got["harness"]]
        p = [_rank_mean(g) for g in got["plain"]]
        version = got["plain"][0][0]["nccl_version"]
        for size in p[0]:
            wrong = sum(r[size]["wrong"] for r in h + p)
            row = p[0][size]
            common = dict(**base, variant=f"{dt}/out/{size}", work={"bytes": float(size)},
                          op=f"all_reduce {dt} out of place, one process per GPU, {nproc} GPUs",
                          params={"size": size, "count": row["count"], "world": nproc, "dtype": dt, "placement": "out",
                                  "bus_factor": bus_factor("all_reduce", nproc), "nccl_version_code": version,
                                  "rounds": rounds, "samples_per_round": PLAIN_SAMPLES, "round_order": order, "seed": SEED,
                                  "processes": "fresh harness and plain rank sets every round", "cpu_binding": cpus,
                                  "round_medians_s": [[float(np.median(hr[size]["samples"])),
                                                       float(np.median(pr[size]["samples"]))] for hr, pr in zip(h, p)],
                                  "harness_interleaved_s": [s for hr in h for s in hr[size]["samples"]]})
            if wrong:
                out.append(Record(**common, status=FAILED, verified=False,
                                  reason=f"{wrong} elements wrong over all rounds (checked before and after timing)"))
                continue
            out.append(Record(**common, status=OK, clock="host_wall", inner=row["iters"], warmup=cfg.warmup,
                              samples_s=[s for pr in p for s in pr[size]["samples"]], verified=True,
                              verify_detail="both sides checked before timing and after the last timed loop, every round"))
    return out


def _harness_rank(argv: list[str]) -> int:
    """One harness rank of the check: NcclRunner over the sweep, the plain loop's JSON on stdout."""
    import time

    ap = ArgumentParser(prog="python -m gapbench.benchmarks.collectives.plain")
    ap.add_argument("--lib", required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--uid-file", required=True)
    ap.add_argument("sweep", nargs=7, help="min max factor iters samples warmup dtype")
    a = ap.parse_args(argv)
    lo, hi, f, iters, samples, warmup, dt = a.sweep
    from gapbench import _native
    from gapbench.benchmarks.collectives.config import elements, iterations, sweep

    nd = _native.dist
    nd.nccl_load([a.lib])
    uid_path = Path(a.uid_file)
    if a.rank == 0:
        tmp = uid_path.with_suffix(".tmp")
        tmp.write_bytes(nd.nccl_unique_id())
        tmp.replace(uid_path)
        uid = uid_path.read_bytes()
    else:
        t0 = time.monotonic()
        while not uid_path.exists():
            if time.monotonic() - t0 > 60:
                print(f"rank {a.rank}: no unique id in {uid_path} after 60 s", file=sys.stderr)
                return 2
            time.sleep(0.005)
        uid = uid_path.read_bytes()
    r = nd.NcclRunner(uid, a.rank, a.world, a.rank, 60.0)
    op, dtype = nd.CollOp.all_reduce, _native.DType.__members__[dt]
    rows = []
    for size in sweep(int(lo), int(hi), float(f)):
        count = elements("all_reduce", size, dt, a.world)
        count -= count % a.world
        it = int(iters) or iterations(size)
        c1 = r.check(op, dtype, count, False, 0)
        s = r.time(op, dtype, count, False, 0, it, int(samples), int(warmup))
        c2 = r.verify_output(op, dtype, count, False, 0)
        rows.append({"bytes": count * DType(dt).itemsize, "count": count, "iters": it,
                     "wrong_before": c1["wrong"], "wrong_after": c2["wrong"], "samples_s": list(s)})
    print(json.dumps({"nccl_version": nd.nccl_version(), "rank": a.rank, "world": a.world, "rows": rows}))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(_harness_rank(sys.argv[1:]))
