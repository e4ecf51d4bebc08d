"""NCCL called directly from C++ (gapbench._native.dist.NcclRunner): libnccl.so.2 is opened at
run time, the unique id is made in rank 0 and shared through the control group (gloo)."""
from __future__ import annotations

import glob
import importlib.util
import os
import sys
from pathlib import Path

from gapbench.benchmarks.collectives.rungs.base import RankContext, Rung, Unavailable, idempotent


def nccl_candidates() -> list[str]:
    """Where libnccl.so.2 may be: $GAPBENCH_NCCL_LIB, the nvidia-nccl wheel (site-packages/nvidia/
    nccl/lib, which torch's CUDA wheels bring), torch/lib; then the loader tries the plain soname."""
    out = []
    if os.environ.get("GAPBENCH_NCCL_LIB"):
        out.append(os.environ["GAPBENCH_NCCL_LIB"])
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        out += sorted(glob.glob(os.path.join(base, "nccl", "lib", "libnccl.so*")))
    for p in sys.path:
        out += sorted(glob.glob(os.path.join(p, "torch", "lib", "libnccl.so*")))
    seen, uniq = set(), []
    for p in out:
        if p not in seen and Path(p).exists():
            seen.add(p)
            uniq.append(p)
    return uniq


def load_nccl():
    """(the _native.dist module with NCCL loaded, path); raises Unavailable saying why not."""
    from gapbench.core import native

    try:
        nd = native.load().dist
    except (RuntimeError, AttributeError) as e:
        raise Unavailable(f"gapbench._native.dist is missing ({e})") from None
    if not nd.built:
        raise Unavailable(nd.reason)
    try:
        path = nd.nccl_load(nccl_candidates())
    except RuntimeError as e:
        raise Unavailable(str(e).splitlines()[0] + " (set GAPBENCH_NCCL_LIB to libnccl.so.2)") from None
    return nd, path


class NcclRung(Rung):
    name = "nccl"
    # out of place everywhere; all_reduce and broadcast also in place, so torch's in-place rows
    # have a same-placement reference
    natural = {"all_reduce": ("out", "in"), "broadcast": ("out", "in"), "all_gather": ("out",),
               "reduce_scatter": ("out",), "all_to_all": ("out",), "sendrecv": ("out",)}

    def setup(self, ctx: RankContext) -> None:
        if not ctx.cuda:
            raise Unavailable("direct NCCL needs GPUs (this run is on the CPU)")
        self.nd, self.path = load_nccl()
        import torch.distributed as dist

        self.ctx = ctx
        uid = [self.nd.nccl_unique_id() if ctx.rank == 0 else None]
        dist.broadcast_object_list(uid, src=0, group=ctx.control)
        self.r = self.nd.NcclRunner(uid[0], ctx.rank, ctx.world, ctx.local_rank, ctx.cfg.op_timeout_s)
        self.Op = self.nd.CollOp
        from gapbench import _native

        self.DType = _native.DType

    def info(self) -> dict:
        v = self.nd.nccl_version()
        return {"library": f"libnccl {v // 10000}.{v // 100 % 100}.{v % 100}", "nccl_path": self.path,
                "nccl_version_code": v}

    def not_applicable(self, op, placement, world):
        if not self.nd.supports(self.nd.CollOp.__members__[op], placement == "in"):
            return "no in-place form (grouped send/recv)"
        return None

    def check(self, op, dtype, count, inplace, root):
        c = self.r.check(self.Op.__members__[op], self.DType[dtype], count, inplace, root)
        return _describe(c)

    def time(self, op, dtype, count, inplace, root, iters, samples, warmup):
        return list(self.r.time(self.Op.__members__[op], self.DType[dtype], count, inplace, root, iters, samples, warmup))

    def verify_last(self, op, dtype, count, inplace, root):
        if not idempotent(op, inplace):
            ok, detail = self.check(op, dtype, count, inplace, root)
            return ok, "re-run after timing (in-place reductions sum their own output): " + detail
        return _describe(self.r.verify_output(self.Op.__members__[op], self.DType[dtype], count, inplace, root))

    def close(self):
        self.r = None


def _describe(c: dict) -> tuple[bool, str]:
    if c["ok"]:
        return True, f"{c['checked']} elements exact"
    return False, f"{c['wrong']} of {c['checked']} elements wrong (first at {c['first_wrong']})"
