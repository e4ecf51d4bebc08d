"""MLX distributed (mx.distributed): the ring backend on CPUs and Macs (TCP), nccl on CUDA
(JACCL over Thunderbolt 5 RDMA on Macs where set up; see the README). MLX's API is functional:
every op is out of place; it has no broadcast or all-to-all. Send/recv runs as even ranks
sending first and odd ranks receiving first, each half evaluated on its own (MLX has no fused
send+recv), so its time is that of two transfers in turn."""
from __future__ import annotations

import os
import time

from gapbench.benchmarks.collectives import pattern
from gapbench.benchmarks.collectives.rungs.base import RankContext, Rung, Unavailable, not_installed
from gapbench.core.names import DType, Rung as Engine

_DT = {DType.fp32: "float32", DType.fp16: "float16", DType.bf16: "bfloat16"}


class MlxRung(Rung):
    name = "mlx"
    natural = {op: ("out",) for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all",
                                       "sendrecv")}

    def setup(self, ctx: RankContext) -> None:
        try:
            import mlx.core as mx
        except ImportError as e:
            raise Unavailable(not_installed(Engine.mlx, e)) from None
        self.mx, self.ctx = mx, ctx
        self.backend = os.environ.get("GAPBENCH_MLX_BACKEND") or ("nccl" if ctx.cuda else "ring")
        if ctx.cuda and not (hasattr(mx, "cuda") and mx.cuda.is_available()):
            raise Unavailable("this MLX has no CUDA backend (pip install 'mlx[cuda13]')")
        try:
            self.g = mx.distributed.init(strict=True, backend=self.backend)
        except (RuntimeError, ValueError) as e:
            raise Unavailable(f"mx.distributed.init(backend={self.backend!r}) failed: {e}") from None
        if self.g.size() != ctx.world:
            raise Unavailable(f"MLX group has {self.g.size()} ranks, expected {ctx.world}")
        self.dev = mx.gpu if ctx.cuda else mx.cpu
        mx.set_default_device(self.dev)
        self.bufs: dict = {}
        self.last = None

    def info(self) -> dict:
        return {"library": "mlx " + self.mx.__version__, "backend": self.backend}

    def not_applicable(self, op, placement, world):
        if op in ("broadcast", "all_to_all"):
            return f"mx.distributed has no {op.replace('_', '-')}"
        if placement == "in":
            return "MLX arrays are immutable: out of place only"
        if op == "sendrecv" and world < 2:
            return "send/recv needs two ranks"
        return None

    def _input(self, op, dtype, count, root):
        mx, rank = self.mx, self.ctx.rank
        n_in = count // self.ctx.world if op == "all_gather" else count
        key = (op, dtype, count)
        if key not in self.bufs:
            self.bufs.clear()
            x = pattern.input_values(op, rank, root, mx.arange(n_in, dtype=mx.int32)).astype(getattr(mx, _DT[dtype]))
            mx.eval(x)
            self.bufs[key] = x
        return self.bufs[key]

    def _op(self, op, x):
        mx, g = self.mx, self.g
        if op == "all_reduce":
            return [mx.distributed.all_sum(x, group=g)]
        if op == "all_gather":
            return [mx.distributed.all_gather(x, group=g)]
        if op == "reduce_scatter":
            return [mx.distributed.sum_scatter(x, group=g)]
        raise ValueError(op)

    def _sendrecv(self, x):
        mx, g, world, rank = self.mx, self.g, self.ctx.world, self.ctx.rank
        nxt, prv = (rank + 1) % world, (rank - 1 + world) % world
        if rank % 2 == 0:
            mx.eval(mx.distributed.send(x, nxt, group=g))
            y = mx.distributed.recv_like(x, prv, group=g)
            mx.eval(y)
        else:
            y = mx.distributed.recv_like(x, prv, group=g)
            mx.eval(y)
            mx.eval(mx.distributed.send(x, nxt, group=g))
        return y

    def _run(self, op, x, iters):
        if op == "sendrecv":
            for _ in range(iters):
                self.last = self._sendrecv(x)
            return
        outs = []
        for _ in range(iters):
            outs += self._op(op, x)
        self.mx.eval(outs)
        self.last = outs[-1]

    def check(self, op, dtype, count, inplace, root):
        x = self._input(op, dtype, count, root)
        self.last = None  # MLX allocates each output fresh: nothing to poison
        self._run(op, x, 1)
        return self._compare(op, count, root)

    def _compare(self, op, count, root):
        mx, world = self.mx, self.ctx.world
        out = self.last.reshape(-1)
        n_out = count // world if op == "reduce_scatter" else count
        if out.size != n_out:
            return False, f"output has {out.size} elements, expected {n_out}"
        exp = pattern.expected_values(op, self.ctx.rank, world, root, count // world,
                                      mx.arange(n_out, dtype=mx.int32)).astype(out.dtype)
        wrong = int(mx.sum(out != exp).item())
        return wrong == 0, f"{wrong} of {n_out} elements wrong" if wrong else f"{n_out} elements exact"

    def time(self, op, dtype, count, inplace, root, iters, samples, warmup):
        mx = self.mx
        x = self._input(op, dtype, count, root)
        one = mx.ones(1)
        if warmup:
            self._run(op, x, warmup)
        res = []
        for _ in range(samples):
            mx.eval(mx.distributed.all_sum(one, group=self.g))  # barrier
            t0 = time.perf_counter()
            self._run(op, x, iters)
            res.append(time.perf_counter() - t0)
        return res

    def verify_last(self, op, dtype, count, inplace, root):
        return self._compare(op, count, root)

    def close(self):
        self.bufs.clear()
        self.last = None
