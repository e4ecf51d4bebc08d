"""CuPy's NCCL bindings (cupy.cuda.nccl.NcclCommunicator), where CuPy is installed. CuPy has no
bfloat16 array type: bf16 buffers are uint16 arrays holding the bf16 bits (the pattern's small
integers are exact, so their bf16 bits are the top half of their fp32 bits)."""
from __future__ import annotations

import time

from gapbench.benchmarks.collectives import pattern
from gapbench.benchmarks.collectives.rungs.base import RankContext, Rung, Unavailable, idempotent, not_installed
from gapbench.core.names import DType, Rung as Engine


class CupyRung(Rung):
    name = Engine.cupy
    natural = {op: ("out",) for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all",
                                       "sendrecv")}

    def setup(self, ctx: RankContext) -> None:
        if not ctx.cuda:
            raise Unavailable("CuPy's NCCL needs GPUs (this run is on the CPU)")
        try:
            import cupy
            from cupy.cuda import nccl
        except ImportError as e:
            raise Unavailable(not_installed(Engine.cupy, e)) from None
        if not getattr(nccl, "available", True):
            raise Unavailable("CuPy was built without NCCL")
        import torch.distributed as dist

        self.cp, self.nccl, self.ctx = cupy, nccl, ctx
        cupy.cuda.Device(ctx.local_rank).use()
        uid = [nccl.get_unique_id() if ctx.rank == 0 else None]
        dist.broadcast_object_list(uid, src=0, group=ctx.control)
        self.comm = nccl.NcclCommunicator(ctx.world, uid[0], ctx.rank)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.types = {DType.fp32: (nccl.NCCL_FLOAT32, cupy.float32), DType.fp16: (nccl.NCCL_FLOAT16, cupy.float16),
                      DType.bf16: (getattr(nccl, "NCCL_BFLOAT16", 9), cupy.uint16)}
        self.one = cupy.ones(1, dtype=cupy.float32)
        self.bufs: dict = {}

    def info(self) -> dict:
        return {"library": "cupy " + self.cp.__version__, "nccl_version_cupy": str(self.nccl.get_version())}

    def not_applicable(self, op, placement, world):
        return "CuPy rows are out of place" if placement == "in" else None

    def _buffers(self, dtype, count):
        key = (dtype, count)
        if key not in self.bufs:
            self.bufs.clear()
            t = self.types[dtype][1]
            self.bufs[key] = (self.cp.empty(count, dtype=t), self.cp.empty(count, dtype=t))
        return self.bufs[key]

    def _cast(self, ints, dtype):
        cp = self.cp
        f = ints.astype(cp.float32)
        if dtype == DType.bf16:
            return (f.view(cp.uint32) >> 16).astype(cp.uint16)
        return f.astype(self.types[dtype][1])

    def _enqueue(self, op, dtype, count, root):
        c, nccl, world, rank = self.comm, self.nccl, self.ctx.world, self.ctx.rank
        a, b = self._buffers(dtype, count)
        t, s, chunk = self.types[dtype][0], self.stream.ptr, count // world
        es = a.itemsize
        if op == "all_reduce":
            c.allReduce(a.data.ptr, b.data.ptr, count, t, nccl.NCCL_SUM, s)
        elif op == "all_gather":
            c.allGather(a.data.ptr, b.data.ptr, chunk, t, s)
        elif op == "reduce_scatter":
            c.reduceScatter(a.data.ptr, b.data.ptr, chunk, t, nccl.NCCL_SUM, s)
        elif op == "broadcast":
            c.broadcast(a.data.ptr, b.data.ptr, count, t, root, s)
        elif op == "all_to_all":
            nccl.groupStart()
            for p in range(world):
                c.send(a.data.ptr + p * chunk * es, chunk, t, p, s)
                c.recv(b.data.ptr + p * chunk * es, chunk, t, p, s)
            nccl.groupEnd()
        elif op == "sendrecv":
            nccl.groupStart()
            c.send(a.data.ptr, count, t, (rank + 1) % world, s)
            c.recv(b.data.ptr, count, t, (rank - 1 + world) % world, s)
            nccl.groupEnd()

    def check(self, op, dtype, count, inplace, root):
        cp, rank, world = self.cp, self.ctx.rank, self.ctx.world
        a, b = self._buffers(dtype, count)
        # Fill on the stream NCCL runs on: a non-blocking stream does not wait for CuPy's default
        # stream, and large fills there raced the collective (seen on 2 H200s: whole buffers wrong).
        with self.stream:
            a.view(cp.uint8).fill(0xFF)
            b.view(cp.uint8).fill(0xFF)
            n_in = count // world if op == "all_gather" else count
            if op != "broadcast" or rank == root:
                a[:n_in] = self._cast(pattern.input_values(op, rank, root, cp.arange(n_in, dtype=cp.int64)), dtype)
        self._enqueue(op, dtype, count, root)
        self.stream.synchronize()
        return self._compare(op, dtype, count, root)

    def _compare(self, op, dtype, count, root):
        cp, world = self.cp, self.ctx.world
        b = self._buffers(dtype, count)[1]
        self.stream.synchronize()  # the compare runs on CuPy's default stream, after the collective
        n_out = count // world if op == "reduce_scatter" else count
        exp = self._cast(pattern.expected_values(op, self.ctx.rank, world, root, count // world,
                                                 cp.arange(n_out, dtype=cp.int64)), dtype)
        got = b[:n_out]
        wrong = int((got.view(cp.uint16) != exp.view(cp.uint16)).sum()) if dtype == DType.bf16 else int((got != exp).sum())
        return wrong == 0, f"{wrong} of {n_out} elements wrong" if wrong else f"{n_out} elements exact"

    def time(self, op, dtype, count, inplace, root, iters, samples, warmup):
        for _ in range(warmup):
            self._enqueue(op, dtype, count, root)
        self.stream.synchronize()
        res = []
        for _ in range(samples):
            self.comm.allReduce(self.one.data.ptr, self.one.data.ptr, 1, self.nccl.NCCL_FLOAT32, self.nccl.NCCL_SUM,
                                self.stream.ptr)
            self.stream.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                self._enqueue(op, dtype, count, root)
            self.stream.synchronize()
            res.append(time.perf_counter() - t0)
        return res

    def verify_last(self, op, dtype, count, inplace, root):
        assert idempotent(op, inplace)  # out of place only
        return self._compare(op, dtype, count, root)

    def close(self):
        self.bufs.clear()
        self.comm = None
