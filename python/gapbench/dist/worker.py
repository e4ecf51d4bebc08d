"""One rank of bench.dist: `python -m gapbench.dist.worker --config CFG --rungs R[,R..] --out-dir D`.

Rank, world size and local rank come from the launcher's environment (torchrun / env://,
mpirun, mlx.launch). Every result is appended to D/rank<r>.jsonl as it completes (the local
launcher watches these files for progress and merges them). With --merge-to, the ranks gather
their lines to rank 0 (through gloo, or MLX's all_gather under mlx.launch), which writes the
merged result file: the multi-node path."""
from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import traceback
from datetime import timedelta
from pathlib import Path

from .config import SAFE_ENV, DistConfig, elements, shaping_env

UNSUPPORTED = re.compile(r"not supported|unsupported|not implemented", re.I)
TIMEOUT_WORDS = ("timed out", "timeout", "aborted", "Connection closed", "connection reset", "NCCL error")


class RankLog:
    def __init__(self, path: Path, rank: int):
        self.path, self.rank, self.lines = path, rank, []
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, "a", encoding="utf-8")

    def write(self, **d) -> None:
        d["rank"] = self.rank
        self.lines.append(d)
        self.f.write(json.dumps(d) + "\n")
        self.f.flush()


def enforce_env(rank: int, cfg: DistConfig, out_dir: Path) -> dict:
    """Multicast off unless GAPBENCH_ALLOW_MULTICAST=1 (recorded); rank 0 logs NCCL's choices."""
    allowed = os.environ.get("GAPBENCH_ALLOW_MULTICAST") == "1"
    if not allowed:
        os.environ.update(SAFE_ENV)
    if cfg.device == "cuda" and cfg.nccl_debug and rank == 0 and "NCCL_DEBUG" not in os.environ:
        os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS=cfg.nccl_debug_subsys,
                          NCCL_DEBUG_FILE=str(out_dir / "nccl-rank0.%p.log"))
    return {"multicast_allowed_by_user": allowed, "env": shaping_env()}


def run_rung(name: str, ctx, log: RankLog) -> None:
    from .rungs import make
    from .rungs.base import Unavailable

    cfg = ctx.cfg
    log.write(kind="start", rung=name, world=ctx.world, host=ctx.host, pid=os.getpid(), device=cfg.device)
    rung = make(name)
    try:
        rung.setup(ctx)
    except Unavailable as e:
        log.write(kind="unavailable", rung=name, reason=str(e))
        log.write(kind="done", rung=name)
        return
    log.write(kind="info", rung=name, info=rung.info())
    broken = None
    for op in cfg.ops:
        for dtype in cfg.dtypes:
            for placement in rung.placements(op, cfg.placements):
                why = rung.not_applicable(op, placement, ctx.world)
                if why:
                    log.write(kind="na", rung=name, op=op, dtype=dtype, placement=placement, reason=why)
                    continue
                for size in cfg.sizes:
                    key = dict(rung=name, op=op, dtype=dtype, placement=placement, size=size)
                    count = elements(op, size, dtype, ctx.world)
                    if count == 0:
                        continue
                    if broken:
                        log.write(kind="result", **key, count=count, status="error",
                                  reason=f"not run: the communicator failed earlier ({broken})")
                        continue
                    log.write(kind="begin", **key)
                    res = _measure(rung, cfg, op, dtype, placement, size, count)
                    if res["status"] == "error" and UNSUPPORTED.search(res["reason"]):
                        # the engine lacks this op here: one row, not one error per size
                        log.write(kind="na", rung=name, op=op, dtype=dtype, placement=placement,
                                  reason=f"the engine says: {res['reason']}")
                        break
                    log.write(kind="result", **key, count=count, **res)
                    last = log.lines[-1]
                    if last["status"] == "error" and any(w.lower() in last["reason"].lower() for w in TIMEOUT_WORDS):
                        broken = last["reason"][:200]
    rung.close()
    log.write(kind="done", rung=name)


def _measure(rung, cfg, op, dtype, placement, size, count) -> dict:
    inplace = placement == "in"
    iters = cfg.iters_for(size)
    try:
        ok, detail = rung.check(op, dtype, count, inplace, cfg.root)
        if not ok:
            return dict(status="failed", reason=f"wrong result before timing: {detail}", verified=False,
                        verify_detail=detail)
        samples = rung.time(op, dtype, count, inplace, cfg.root, iters, cfg.samples, cfg.warmup)
        ok2, detail2 = rung.verify_last(op, dtype, count, inplace, cfg.root)
        return dict(status="ok" if ok2 else "failed", reason="" if ok2 else f"wrong result after timing: {detail2}",
                    samples_s=samples, iters=iters, warmup=cfg.warmup, verified=ok2,
                    verify_detail=f"before timing: {detail}; after: {detail2}")
    except Exception as e:  # noqa: BLE001 - one failing case never loses the others
        return dict(status="error", reason=f"{type(e).__name__}: {str(e).strip()[:400]}")


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
    from .rungs.base import RankContext, rank_from_env

    ap = argparse.ArgumentParser(prog="python -m gapbench.dist.worker")
    ap.add_argument("--config", required=True)
    ap.add_argument("--rungs", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--merge-to", help="rank 0 writes the merged result file here")
    ap.add_argument("--run-meta", help="JSON file: the run dict (command, config) for --merge-to")
    a = ap.parse_args(argv)
    cfg = DistConfig.from_dict(json.loads(Path(a.config).read_text()))
    rank, world, local = rank_from_env()
    out_dir = Path(a.out_dir)
    log = RankLog(out_dir / f"rank{rank}.jsonl", rank)
    meta = enforce_env(rank, cfg, out_dir)
    rungs = [r for r in a.rungs.split(",") if r]
    log.write(kind="env", host=socket.gethostname(), local_rank=local, **meta)
    if "p2p" in rungs:
        from .p2p import run_p2p

        run_p2p(cfg, log)
        rungs.remove("p2p")
    control = None
    if any(r in ("nccl", "torch", "cupy") for r in rungs) or (a.merge_to and rungs != ["mlx"]):
        control = init_control(cfg.op_timeout_s)
    ctx = RankContext(rank=rank, world=world, local_rank=local, cfg=cfg, control=control)
    for r in rungs:
        try:
            run_rung(r, ctx, log)
        except Exception as e:  # noqa: BLE001 - the next rung still runs
            log.write(kind="error", rung=r, reason=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-2000:])
    if a.merge_to:
        per_rank = gather_to_rank0(log.lines, rank, world, control)
        if rank == 0:
            from .merge import write_merged

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
