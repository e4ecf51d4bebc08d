"""torch.distributed: the nccl backend on GPUs, gloo on CPUs, through the public collective API
(all_reduce, all_gather_into_tensor, reduce_scatter_tensor, broadcast, all_to_all_single,
batch_isend_irecv)."""
from __future__ import annotations

import time
from datetime import timedelta

from gapbench.benchmarks.collectives import pattern
from gapbench.benchmarks.collectives.rungs.base import RankContext, Rung, Unavailable, idempotent, not_installed
from gapbench.core.names import DType, Rung as Engine

_DT = {DType.fp32: "float32", DType.fp16: "float16", DType.bf16: "bfloat16"}


class TorchRung(Rung):
    name = "torch"
    # all_reduce and broadcast exist in place only in torch.distributed's API
    natural = {"all_reduce": ("in",), "broadcast": ("in",), "all_gather": ("out", "in"),
               "reduce_scatter": ("out", "in"), "all_to_all": ("out",), "sendrecv": ("out",)}

    def setup(self, ctx: RankContext) -> None:
        try:
            import torch
            import torch.distributed as dist
        except ImportError as e:
            raise Unavailable(not_installed(Engine.torch, e)) from None
        self.torch, self.dist, self.ctx = torch, dist, ctx
        if ctx.cuda:
            if not torch.cuda.is_available():
                raise Unavailable("torch sees no CUDA GPU")
            if not dist.is_nccl_available():
                raise Unavailable("this torch build has no NCCL backend")
            torch.cuda.set_device(ctx.local_rank)
            self.dev = torch.device("cuda", ctx.local_rank)
            self.backend = "nccl"
        else:
            self.dev = torch.device("cpu")
            self.backend = "gloo"
        kw = {"device_id": self.dev} if ctx.cuda else {}
        try:
            self.pg = dist.new_group(backend=self.backend, timeout=timedelta(seconds=ctx.cfg.op_timeout_s), **kw)
        except TypeError:  # older torch: no device_id
            self.pg = dist.new_group(backend=self.backend, timeout=timedelta(seconds=ctx.cfg.op_timeout_s))
        self.one = torch.ones(1, device=self.dev)
        self.bufs: dict = {}

    def info(self) -> dict:
        d = {"library": "torch " + self.torch.__version__, "backend": self.backend}
        if self.ctx.cuda:
            v = self.torch.cuda.nccl.version()
            d["nccl_version_torch"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        return d

    def not_applicable(self, op, placement, world):
        if placement == "out" and op in ("all_reduce", "broadcast"):
            return f"torch.distributed.{op} works in place only"
        if placement == "in" and op in ("all_to_all", "sendrecv"):
            return "no in-place form"
        if op == "sendrecv" and world < 2:
            return "send/recv needs two ranks"
        return None

    # ---- buffers: (send, out) for op; in-place views inside one buffer
    def _buffers(self, op, dtype, count, inplace):
        torch, world, rank = self.torch, self.ctx.world, self.ctx.rank
        dt = getattr(torch, _DT[dtype])
        chunk = count // world
        big = self.bufs.get((dtype, count))
        if big is None:
            self.bufs.clear()
            big = (torch.empty(count, dtype=dt, device=self.dev), torch.empty(count, dtype=dt, device=self.dev))
            self.bufs[(dtype, count)] = big
        a, b = big
        if op == "all_gather":
            return (b.narrow(0, rank * chunk, chunk) if inplace else a.narrow(0, 0, chunk)), b
        if op == "reduce_scatter":
            return a, (a.narrow(0, rank * chunk, chunk) if inplace else b.narrow(0, 0, chunk))
        if op in ("all_reduce", "broadcast") and inplace:
            return b, b
        return a, b

    def _enqueue(self, op, send, out, root):
        d, pg, world, rank = self.dist, self.pg, self.ctx.world, self.ctx.rank
        if op == "all_reduce":
            d.all_reduce(out, group=pg)
        elif op == "broadcast":
            d.broadcast(out, src=root, group=pg)
        elif op == "all_gather":
            d.all_gather_into_tensor(out, send, group=pg)
        elif op == "reduce_scatter":
            d.reduce_scatter_tensor(out, send, group=pg)
        elif op == "all_to_all":
            d.all_to_all_single(out, send, group=pg)
        elif op == "sendrecv":
            reqs = d.batch_isend_irecv([d.P2POp(d.isend, send, (rank + 1) % world, pg),
                                        d.P2POp(d.irecv, out, (rank - 1 + world) % world, pg)])
            for r in reqs:
                r.wait()

    def _sync(self):
        if self.ctx.cuda:
            self.torch.cuda.synchronize(self.dev)

    def check(self, op, dtype, count, inplace, root):
        torch, rank, world = self.torch, self.ctx.rank, self.ctx.world
        send, out = self._buffers(op, dtype, count, inplace)
        chunk = count // world
        for t in {id(send): send, id(out): out}.values():
            t.fill_(float("nan"))
        idx_dtype = torch.int32 if count < 2**31 else torch.int64
        if op == "broadcast":
            if rank == root:
                out.copy_(pattern.input_values(op, rank, root, torch.arange(count, dtype=idx_dtype, device=self.dev)))
        elif op == "all_gather":
            send.copy_(pattern.input_values(op, rank, root, torch.arange(chunk, dtype=idx_dtype, device=self.dev)))
        else:
            tgt = out if (inplace and op == "all_reduce") else send
            tgt.copy_(pattern.input_values(op, rank, root, torch.arange(tgt.numel(), dtype=idx_dtype, device=self.dev)))
        self._enqueue(op, send, out, root)
        self._sync()
        return self._compare(op, out, chunk, root)

    def _compare(self, op, out, chunk, root):
        torch = self.torch
        idx = torch.arange(out.numel(), dtype=torch.int32 if out.numel() < 2**31 else torch.int64, device=self.dev)
        exp = pattern.expected_values(op, self.ctx.rank, self.ctx.world, root, chunk, idx).to(out.dtype)
        wrong = int((out != exp).sum().item())
        return wrong == 0, f"{wrong} of {out.numel()} elements wrong" if wrong else f"{out.numel()} elements exact"

    def time(self, op, dtype, count, inplace, root, iters, samples, warmup):
        send, out = self._buffers(op, dtype, count, inplace)
        for _ in range(warmup):
            self._enqueue(op, send, out, root)
        self._sync()
        res = []
        for _ in range(samples):
            self.dist.all_reduce(self.one, group=self.pg)  # barrier
            self._sync()
            t0 = time.perf_counter()
            for _ in range(iters):
                self._enqueue(op, send, out, root)
            self._sync()
            res.append(time.perf_counter() - t0)
        return res

    def verify_last(self, op, dtype, count, inplace, root):
        if not idempotent(op, inplace):
            ok, detail = self.check(op, dtype, count, inplace, root)
            return ok, "re-run after timing (in-place reductions sum their own output): " + detail
        send, out = self._buffers(op, dtype, count, inplace)
        return self._compare(op, out, count // self.ctx.world, root)

    def close(self):
        self.bufs.clear()
        try:
            self.dist.destroy_process_group(self.pg)
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
