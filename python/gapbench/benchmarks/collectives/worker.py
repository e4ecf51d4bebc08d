"""One rank of bench.dist: `python -m gapbench.benchmarks.collectives.worker --config CFG --rungs R[,R..] --out-dir D`.

Rank, world size and local rank come from the launcher's environment (torchrun / env://,
mpirun, mlx.launch). Every result is appended to D/rank<r>.jsonl as it completes (the local
launcher watches these files for progress and merges them). With --merge-to, the ranks gather
their lines to rank 0 (through gloo, or MLX's all_gather under mlx.launch), which writes the
merged result file: the multi-node path."""
from __future__ import annotations

import faulthandler
import json
import os
import re
import socket
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path

from gapbench.core.cli import ArgumentParser
from gapbench.core import process
from gapbench.core.ranks import RankLog, rank_from_env
from gapbench.benchmarks.collectives.config import DistConfig, elements, shaping_env
from gapbench.core.names import Rung

UNSUPPORTED = re.compile(r"not supported|unsupported|not implemented|has no (CUDA|CPU|GPU) implementation", re.I)
TIMEOUT_WORDS = ("timed out", "timeout", "aborted", "Connection closed", "connection reset", "NCCL error")


def enforce_env(rank: int, cfg: DistConfig, out_dir: Path) -> dict:
    """Multicast off unless GAPBENCH_ALLOW_MULTICAST=1 (recorded); rank 0 logs NCCL's choices."""
    allowed = process.multicast_off_here()
    if cfg.device == "cuda" and cfg.nccl_debug and rank == 0 and "NCCL_DEBUG" not in os.environ:
        os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS=cfg.nccl_debug_subsys,
                          NCCL_DEBUG_FILE=str(out_dir / "nccl-rank0.%p.log"))
    return {"multicast_allowed_by_user": allowed, "env": shaping_env()}


def agree(ok: bool, ctx) -> bool:
    """True only if `ok` on every rank (through the gloo control group; local where there is none),
    so that every rank drops a failing engine from a case together and none waits on a collective
    its peers skipped."""
    if ctx.control is None or ctx.world == 1:
        return ok
    import torch
    import torch.distributed as dist

    t = torch.tensor([1 if ok else 0], dtype=torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=ctx.control)
    return bool(t.item())


def run_group(names: list[str], ctx, log: RankLog) -> None:
    """The engines `names`, set up side by side in this rank, measured case by case in interleaved
    rounds: per case every engine is checked, then `cfg.rounds` rounds in which each engine runs
    `cfg.samples_for(size)` samples, in an order drawn from a seeded rng (the same on every rank), then every
    engine's last output is checked again. Ratios between engines pair their rounds."""
    import numpy as np

    from gapbench.benchmarks.collectives.rungs import make
    from gapbench.benchmarks.collectives.rungs.base import Unavailable

    cfg = ctx.cfg
    group = "+".join(names)
    live: dict = {}
    for name in names:
        log.write(kind="start", rung=name, world=ctx.world, host=ctx.host, pid=os.getpid(), device=cfg.device)
        rung = make(name)
        try:
            rung.setup(ctx)
        except Unavailable as e:
            log.write(kind="unavailable", rung=name, reason=str(e))
            log.write(kind="done", rung=name)
            continue
        log.write(kind="info", rung=name, info=rung.info())
        live[name] = rung
    rng = np.random.default_rng(cfg.seed)
    broken: dict[str, str] = {}
    for op in cfg.ops:
        for dtype in cfg.dtypes:
            placements = []
            for rung in live.values():
                placements += [p for p in rung.placements(op, cfg.placements) if p not in placements]
            for placement in placements:
                members = []
                for name, rung in live.items():
                    if placement not in rung.placements(op, cfg.placements):
                        continue
                    why = rung.not_applicable(op, placement, ctx.world)
                    if why:
                        log.write(kind="na", rung=name, op=op, dtype=dtype, placement=placement, reason=why)
                    else:
                        members.append(name)
                for size in cfg.sizes:
                    count = elements(op, size, dtype, ctx.world)
                    if count:
                        members = _case(live, members, broken, group, rng, ctx, log, op, dtype, placement, size, count)
    for name, rung in live.items():
        rung.close()
        log.write(kind="done", rung=name)


def _case(live, members, broken, group, rng, ctx, log, op, dtype, placement, size, count) -> list[str]:
    """One case over the engines in `members`; returns the members left for the next size (an
    engine that says it lacks the op leaves)."""
    cfg, inplace, iters, nsamp = ctx.cfg, placement == "in", ctx.cfg.iters_for(size), ctx.cfg.samples_for(size)

    def case_key(name):
        return dict(rung=name, op=op, dtype=dtype, placement=placement, size=size, group=group)

    keep, active, first = [], [], {}
    for name in members:
        key = case_key(name)
        if name in broken:
            log.write(kind="result", **key, count=count, status="error",
                      reason=f"not run: the communicator failed earlier ({broken[name]})")
            keep.append(name)
            continue
        log.write(kind="begin", **key)
        try:
            ok, detail = live[name].check(op, dtype, count, inplace, cfg.root)
            err = None
        except Exception as e:  # noqa: BLE001 - one failing case never loses the others
            ok, detail, err = False, "", f"{type(e).__name__}: {str(e).strip()[:400]}"
        unsupported = bool(err and UNSUPPORTED.search(err))
        if not agree(not unsupported, ctx):  # the engine lacks this op here (on some rank): one row, not one per size
            log.write(kind="na", rung=name, op=op, dtype=dtype, placement=placement,
                      reason=f"the engine says: {err}" if unsupported else "the engine lacks this op on a peer rank")
            continue
        keep.append(name)
        if not agree(ok, ctx):
            if err:
                _fail(log, broken, key, count, "error", err)
            else:
                log.write(kind="result", **key, count=count, status="failed", verified=False, verify_detail=detail,
                          reason=f"wrong result before timing: {detail}" if not ok else "wrong result on a peer rank")
            continue
        active.append(name)
        first[name] = detail
    samples: dict[str, list[float]] = {n: [] for n in active}
    errors: dict[str, str] = {}
    for rnd in range(cfg.rounds):
        for j in rng.permutation(len(active)):
            name = active[j]
            if name in errors:
                continue
            try:
                samples[name] += live[name].time(op, dtype, count, inplace, cfg.root, iters, nsamp,
                                                 cfg.warmup if rnd == 0 else 1)
                err = None
            except Exception as e:  # noqa: BLE001
                err = f"{type(e).__name__}: {str(e).strip()[:400]}"
            if not agree(err is None, ctx):
                errors[name] = err or "timing failed on a peer rank"
    for name in active:
        key = case_key(name)
        if name in errors:
            _fail(log, broken, key, count, "error", errors[name])
            continue
        try:
            ok2, detail2 = live[name].verify_last(op, dtype, count, inplace, cfg.root)
        except Exception as e:  # noqa: BLE001
            ok2, detail2 = False, f"{type(e).__name__}: {e}"
        log.write(kind="result", **key, count=count, status="ok" if ok2 else "failed",
                  reason="" if ok2 else f"wrong result after timing: {detail2}", samples_s=samples[name],
                  rounds=cfg.rounds, iters=iters, warmup=cfg.warmup, verified=ok2,
                  verify_detail=f"before timing: {first[name]}; after: {detail2}")
    return keep


def _fail(log, broken, key, count, status, reason) -> None:
    log.write(kind="result", **key, count=count, status=status, reason=reason)
    if any(w.lower() in reason.lower() for w in TIMEOUT_WORDS):
        broken[key["rung"]] = reason[:200]


def init_control(ctx_timeout_s: float):
    """A gloo process group for metadata (unique ids, gathering results)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timedelta(seconds=ctx_timeout_s))
    return dist.group.WORLD


def gather_to_rank0(lines: list[dict], rank: int, world: int, control) -> list[list[dict]] | None:
    if world == 1:
        return [lines]
    if control is not None:
        import torch.distributed as dist

        out = [None] * world if rank == 0 else None
        dist.gather_object(lines, out, dst=0, group=control)
        return out
    import mlx.core as mx
    import numpy as np

    blob = np.frombuffer(json.dumps(lines).encode(), dtype=np.uint8)
    n = mx.distributed.all_gather(mx.array([blob.size], dtype=mx.int32))
    longest = int(mx.max(n).item())
    padded = np.zeros(longest, dtype=np.uint8)
    padded[:blob.size] = blob
    allb = np.array(mx.distributed.all_gather(mx.array(padded)).reshape(world, longest))
    sizes = np.array(n).reshape(-1)
    return [json.loads(allb[r, :sizes[r]].tobytes().decode()) for r in range(world)] if rank == 0 else None


def main(argv: list[str] | None = None) -> int:
    from gapbench.benchmarks.collectives.rungs.base import RankContext

    ap = ArgumentParser(prog="python -m gapbench.benchmarks.collectives.worker")
    ap.add_argument("--config", required=True)
    ap.add_argument("--rungs", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--p2p-only", help="the p2p probe for one pair and method only: SRC,DST,METHOD")
    ap.add_argument("--merge-to", help="rank 0 writes the merged result file here")
    ap.add_argument("--run-meta", help="JSON file: the run dict (command, config) for --merge-to")
    a = ap.parse_args(argv)
    faulthandler.enable()  # a crash in native code leaves this rank's Python stack in its log
    cfg = DistConfig.from_dict(json.loads(Path(a.config).read_text()))
    rank, world, local = rank_from_env()
    out_dir = Path(a.out_dir)
    log = RankLog(out_dir / f"rank{rank}.jsonl", rank)
    meta = enforce_env(rank, cfg, out_dir)
    rungs = [r for r in a.rungs.split(",") if r]
    log.write(kind="env", host=socket.gethostname(), local_rank=local, **meta)
    if "p2p" in rungs:
        from gapbench.benchmarks.collectives.p2p import run_p2p

        run_p2p(cfg, log, only=a.p2p_only)
        rungs.remove(Rung.p2p)
    control = None
    if any(Rung(r).on_nccl for r in rungs) or (a.merge_to and rungs != [Rung.mlx]):
        control = init_control(cfg.op_timeout_s)
    ctx = RankContext(rank=rank, world=world, local_rank=local, cfg=cfg, control=control)
    try:
        if rungs:
            run_group(rungs, ctx, log)
    except Exception as e:  # noqa: BLE001 - what was measured is already written
        log.write(kind="error", rung=",".join(rungs), reason=f"{type(e).__name__}: {e}",
                  trace=traceback.format_exc()[-2000:])
    if a.merge_to:
        per_rank = gather_to_rank0(log.lines, rank, world, control)
        if rank == 0:
            from gapbench.benchmarks.collectives.merge import write_merged

            run_meta = json.loads(Path(a.run_meta).read_text()) if a.run_meta else {}
            write_merged(Path(a.merge_to), {r: lines for r, lines in enumerate(per_rank)}, world, run_meta,
                         nccl_logs=sorted(out_dir.glob("nccl-rank0.*.log")))
    if control is not None:
        import torch.distributed as dist

        dist.destroy_process_group()
    # Everything is written and flushed: skip interpreter teardown, where backends' static
    # destructors can abort a rank that finished (seen with gloo), turning it into a failure.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
