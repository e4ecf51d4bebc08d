"""One rank of data-parallel training (train_dp.py launches these): the minimal GPT-2 of
gapbench.models under DDP, FSDP2 (torch.distributed.fsdp.fully_shard) or MLX data parallel
(nn.average_gradients). `python -m gapbench.benchmarks.train.dp_rank JOB.json OUT_DIR`.

Per rank it writes OUT_DIR/rank<r>.jsonl: a check line (parameters identical across ranks after
a synchronised step, loss finite), the timed steps with gradient sync, the same steps without it
(DDP no_sync, FSDP2 set_requires_gradient_sync(False), MLX without average_gradients: the
difference is the exposed communication), peak memory, and an all-reduce timed at the gradient
bucket size on the same ranks (for the analytic prediction)."""
from __future__ import annotations

import json
import os
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path

from gapbench.core import process
from gapbench.core.ranks import RankLog, rank_from_env


def _tokens(vocab: int, batch: int, seq: int, rank: int, step: int):
    import numpy as np

    g = np.random.default_rng(1000 * rank + step % 4)
    x = g.integers(0, vocab, size=(batch, seq + 1))
    return x[:, :-1], x[:, 1:]


def torch_job(job: dict, rank: int, world: int, local: int, log: RankLog) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from gapbench.models.gpt2_spec import SIZES
    from gapbench.models.gpt2_torch import GPT2

    cuda = job["device"] == "cuda"
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(seconds=job["op_timeout_s"]),
                            **({"device_id": dev} if cuda else {}))
    spec = SIZES[job["model"]]
    seq = min(job["seq"], spec.n_ctx)
    torch.manual_seed(0)  # every rank starts from the same weights
    if job.get("impl", "minimal") == "hf":  # transformers' GPT-2 of the same size (bench.train's model)
        import transformers

        cfg = transformers.GPT2Config(n_embd=spec.n_embd, n_layer=spec.n_layer, n_head=spec.n_head,
                                      vocab_size=spec.vocab, n_positions=spec.n_ctx, attn_implementation="sdpa")
        model = transformers.GPT2LMHeadModel(cfg).to(dev)
        model.config.use_cache = False
        blocks = list(model.transformer.h)

        def forward(net, x):
            return net(input_ids=x).logits
    else:
        model = GPT2(spec).to(dev)
        blocks = list(model.blocks)

        def forward(net, x):
            return net(x)
    n_params = sum(p.numel() for p in model.parameters())
    block_numels = [[p.numel() for p in b.parameters()] for b in blocks]  # before any sharding
    if job["strategy"] == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(model, device_ids=[local] if cuda else None, bucket_cap_mb=job["bucket_mb"])
        nosync = net.no_sync
    else:
        from torch.distributed.fsdp import fully_shard

        for b in blocks:
            fully_shard(b)
        net = fully_shard(model)

        class _NoSync:
            def __enter__(self):
                net.set_requires_gradient_sync(False)

            def __exit__(self, *a):
                net.set_requires_gradient_sync(True)

        nosync = _NoSync
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    amp = job["precision"] == "amp-bf16"
    batches = [tuple(torch.as_tensor(a, device=dev) for a in _tokens(spec.vocab, job["batch"], seq, rank, s))
               for s in range(4)]

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    def step(i):
        x, y = batches[i % 4]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            logits = forward(net, x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    def checksum() -> list[float]:
        s = torch.zeros(1, dtype=torch.float64, device=dev)
        for p in net.parameters():
            t = p.full_tensor() if hasattr(p, "full_tensor") else p
            s += t.detach().double().sum()
        out = [torch.zeros_like(s) for _ in range(world)]
        dist.all_gather(out, s)
        return [float(o.item()) for o in out]

    def check(when: str) -> None:
        loss = float(step(0).item())
        sums = checksum()
        ok = all(v == sums[0] for v in sums) and loss == loss and abs(loss) != float("inf")
        log.write(kind="check", when=when, ok=ok, loss=loss, checksums=sums)

    check("before timing")
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    times = {}
    for mode in ("sync", "nosync"):
        for i in range(job["warmup"]):
            with (nosync() if mode == "nosync" else _null()):
                step(i)
        sync()
        ts = []
        for i in range(job["steps"]):
            dist.barrier()
            sync()
            t0 = time.perf_counter()
            with (nosync() if mode == "nosync" else _null()):
                step(i)
            sync()
            ts.append(time.perf_counter() - t0)
        times[mode] = ts
        if mode == "sync":  # no-sync steps let the ranks' weights drift apart: check before them
            peak = torch.cuda.max_memory_allocated(dev) if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            check("after timing")
    busbw = _allreduce_busbw(torch, dist, dev, world, int(job["bucket_mb"] * (1 << 20)), sync)
    fsdp = None
    if job["strategy"] == "fsdp2" and cuda and world > 1:
        fsdp = _fsdp_collectives(torch, dist, dev, world, block_numels, n_params, sync)
    prof = None
    if job.get("profile_steps"):  # after every timing: the profiler never touches a timed step
        from gapbench.benchmarks.train.stepprofile import profile_steps

        prof = profile_steps(step, sync, int(job["profile_steps"]))
    log.write(kind="train", steps_s=times["sync"], nosync_s=times["nosync"], peak_bytes=int(peak), n_params=n_params,
              seq=seq, grad_bytes=4 * n_params, allreduce_busbw=busbw, library="torch " + torch.__version__,
              backend="nccl" if cuda else "gloo", **({"fsdp_collectives": fsdp} if fsdp else {}), **({"profile": prof} if prof else {}))
    dist.destroy_process_group()


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def _time_collective(fn, dist, sync, reps: int = 10) -> float:
    """Seconds per call of collective `fn` on these ranks: 3 calls to warm up, then `reps` in a
    row between a barrier and a device synchronisation."""
    for _ in range(3):
        fn()
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


def _allreduce_busbw(torch, dist, dev, world, nbytes, sync) -> float | None:
    """All-reduce bus bandwidth (bytes/s) of an fp32 buffer of the bucket size on these ranks."""
    if world < 2:
        return None
    t = torch.ones(nbytes // 4, dtype=torch.float32, device=dev)
    dt = _time_collective(lambda: dist.all_reduce(t), dist, sync)
    return nbytes / dt * 2 * (world - 1) / world


def _fsdp_collectives(torch, dist, dev, world, blocks: list[list[int]], n_params: int, sync) -> dict:
    """The collectives FSDP2 issues per step, timed alone on these ranks at their own sizes (fp32:
    no mixed-precision policy): per block (each its own fully_shard unit, resharded after forward)
    an all-gather in forward, another in backward and a reduce-scatter of its gradients; for the
    root (embeddings, final norm; not resharded after forward) one all-gather and one reduce-scatter.
    FSDP2 pads each parameter's shard to a multiple of the world size. Returns the per-step sum,
    issued one after another (no overlap with compute), and the parts."""
    def padded(numels):
        return sum(-(-n // world) * world for n in numels)

    cache: dict[int, tuple[float, float]] = {}

    def unit(numel: int) -> tuple[float, float]:
        if numel not in cache:
            full = torch.empty(numel, dtype=torch.float32, device=dev)
            shard = torch.ones(numel // world, dtype=torch.float32, device=dev)
            cache[numel] = (_time_collective(lambda: dist.all_gather_into_tensor(full, shard), dist, sync),
                            _time_collective(lambda: dist.reduce_scatter_tensor(shard, full), dist, sync))
        return cache[numel]

    block_sizes = [padded(b) for b in blocks]
    root = padded([n_params - sum(sum(b) for b in blocks)])
    total = 0.0
    for n in block_sizes:
        ag, rs = unit(n)
        total += 2 * ag + rs
    ag_root, rs_root = unit(root)
    total += ag_root + rs_root
    return {"step_s": total, "blocks": len(block_sizes), "block_bytes": 4 * block_sizes[0] if block_sizes else 0,
            "root_bytes": 4 * root, "per_size_s": {str(4 * k): list(v) for k, v in cache.items()}}


def mlx_job(job: dict, rank: int, world: int, log: RankLog) -> None:
    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim

    from gapbench.models.gpt2_mlx import GPT2, n_params
    from gapbench.models.gpt2_spec import SIZES

    backend = os.environ.get("GAPBENCH_MLX_BACKEND", "ring")
    g = mx.distributed.init(strict=world > 1, backend=backend) if world > 1 else None
    spec = SIZES[job["model"]]
    seq = min(job["seq"], spec.n_ctx)
    model = GPT2(spec, seed=0)
    opt = optim.AdamW(learning_rate=1e-4)
    lg = nn.value_and_grad(model, model.loss)
    batches = [tuple(mx.array(a) for a in _tokens(spec.vocab, job["batch"], seq, rank, s)) for s in range(4)]

    def step(i, sync=True):
        x, y = batches[i % 4]
        loss, grads = lg(x, y)
        if sync and g is not None:
            grads = nn.average_gradients(grads, group=g)
        opt.update(model, grads)
        mx.eval(model.parameters(), opt.state, loss)
        return loss

    def check(when):
        loss = float(step(0).item())
        from mlx.utils import tree_flatten

        s = sum(float(mx.sum(p.astype(mx.float32)).item()) for _, p in tree_flatten(model.parameters()))
        sums = [s] if g is None else [float(v) for v in mx.distributed.all_gather(mx.array([s]), group=g).tolist()]
        log.write(kind="check", when=when, ok=all(v == sums[0] for v in sums) and loss == loss, loss=loss, checksums=sums)

    check("before timing")
    times = {}
    for mode in ("sync", "nosync"):
        for i in range(job["warmup"]):
            step(i, mode == "sync")
        ts = []
        for i in range(job["steps"]):
            if g is not None:
                mx.eval(mx.distributed.all_sum(mx.ones(1), group=g))
            t0 = time.perf_counter()
            step(i, mode == "sync")
            ts.append(time.perf_counter() - t0)
        times[mode] = ts
        if mode == "sync":  # no-sync steps let the ranks' weights drift apart: check before them
            peak = mx.get_peak_memory() if hasattr(mx, "get_peak_memory") else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            check("after timing")
    busbw = None
    if g is not None:
        t = mx.ones(int(job["bucket_mb"] * (1 << 20)) // 4)
        mx.eval(mx.distributed.all_sum(t, group=g))
        t0 = time.perf_counter()
        mx.eval([mx.distributed.all_sum(t, group=g) for _ in range(5)])
        dt = (time.perf_counter() - t0) / 5
        busbw = t.nbytes / dt * 2 * (world - 1) / world
    np_ = n_params(model)
    log.write(kind="train", steps_s=times["sync"], nosync_s=times["nosync"], peak_bytes=int(peak), n_params=np_,
              seq=seq, grad_bytes=4 * np_, allreduce_busbw=busbw, library="mlx " + mx.__version__, backend=backend)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(argv[0]).read_text())
    process.multicast_off_here()
    rank, world, local = rank_from_env()
    log = RankLog(Path(argv[1]) / f"rank{rank}.jsonl", rank)
    log.write(kind="start", world=world, job=job)
    if job["strategy"] == "mlx":
        mlx_job(job, rank, world, log)
    else:
        torch_job(job, rank, world, local, log)
    log.write(kind="done")
    # Everything is written: leave without interpreter/backend teardown (gloo's threads can abort
    # in static destructors after FSDP2, which would turn a finished rank into a failed one).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
