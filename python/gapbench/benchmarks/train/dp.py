"""Data-parallel training: `python -m bench.train --nproc N` (routed here) or
`python -m gapbench.benchmarks.train.dp --nproc N`. DDP and FSDP2 for the torch minimal GPT-2, MLX data
parallel for the MLX one, each at a matched per-device batch on N ranks and on 1 (the same code),
with weak-scaling efficiency, step time median [p10-p90], tokens/s per device and in total, peak
memory per rank, exposed communication (step with gradient sync minus step without), and the
analytic prediction: gradient bytes x the all-reduce bus factor / the all-reduce bus bandwidth at
the gradient bucket size (from --comm-results, a bench.dist result file, or measured in-run)."""
from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from gapbench.backends.mlx import rank_env as mlx_rank_env
from gapbench.backends.torch import gpu_count
from gapbench.core import process
from gapbench.core.cli import ArgumentParser, UsageError, add_common_arguments
from gapbench.core.names import DType, one_of, parse_list
from gapbench.core.result import ERROR, FAILED, OK, Record, load_run
from gapbench.benchmarks.train.config import PRECISIONS

PROBE = "train-dp"
#: the model implementations a data-parallel job can train (--impl), named in each record and table
#: (issue 36 item 7): the minimal GPT-2, or transformers' GPT2LMHeadModel of the same size, the model
#: the single-device bench.train trains by default, so one model can be followed from 1 to N GPUs
IMPLS = {"minimal": "gapbench's minimal GPT-2", "hf": "transformers' GPT2LMHeadModel"}
IMPL = IMPLS["minimal"]
STRATEGIES = ("ddp", "fsdp2", "mlx")
FP32, _, AMP_BF16 = PRECISIONS  # data-parallel training runs fp32 or bf16 autocast


def busbw_from_results(path: str, size: int) -> tuple[float, str] | None:
    """All-reduce bus bandwidth (bytes/s) at `size`, interpolated in log size over a bench.dist
    result (direct NCCL preferred, then torch; fp32 preferred)."""
    recs = [r for r in load_run(path).records if r.probe == "dist" and r.metric == "all_reduce" and r.status == OK
            and r.params.get("size") and not r.params.get("reference_only")]
    for rung in ("nccl", "torch", "mlx"):
        for dt in (DType.fp32, DType.bf16, DType.fp16):
            pts = sorted((r.params["size"], r.params["size"] / r.summary().median * r.params["bus_factor"])
                         for r in recs if r.backend == rung and r.params.get("dtype") == dt)
            if len(pts) >= 1:
                xs = np.log([p[0] for p in pts])
                v = float(np.interp(math.log(size), xs, [p[1] for p in pts]))
                return v, f"{path}: {rung} {dt} all_reduce busbw at {size} bytes (interpolated)"
    return None


def predict(t1: float, grad_bytes: float, world: int, busbw: float | None, strategy: str,
            fsdp: dict | None = None) -> dict:
    """Communication time if none of it overlapped compute, and the efficiency that implies. FSDP2
    with its collectives measured on the ranks (dp_rank._fsdp_collectives: per-block all-gathers
    and reduce-scatters at their own sizes): their sum; else from the all-reduce bus bandwidth."""
    if world < 2:
        return {}
    if strategy == "fsdp2" and fsdp:
        t_comm = float(fsdp["step_s"])
        return {"predicted_comm_s": t_comm, "predicted_efficiency": t1 / (t1 + t_comm),
                "prediction_formula": f"FSDP2's collectives at their sizes, timed alone on these ranks: {fsdp['blocks']} "
                                      "blocks x (2 all-gathers + 1 reduce-scatter) + the root's, no overlap"}
    if not busbw:
        return {}
    if strategy == "fsdp2":  # all-gather in forward and in backward, reduce-scatter of gradients
        t_comm = 3 * grad_bytes * (world - 1) / world / busbw
        formula = "3 x param bytes x (n-1)/n / all-reduce busbw"
    else:
        t_comm = grad_bytes * 2 * (world - 1) / world / busbw
        formula = "grad bytes x 2(n-1)/n / all-reduce busbw"
    return {"predicted_comm_s": t_comm, "predicted_efficiency": t1 / (t1 + t_comm), "prediction_formula": formula}


def _records(job: dict, outs, world: int, base_median: float | None, comm: tuple | None) -> list[Record]:
    backend = ("mlx-" if job["strategy"] == "mlx" else "torch-") + ("cuda" if job["device"] == "cuda" else "cpu")
    impl = job.get("impl", "minimal")
    tag = "" if impl == "minimal" else f"-{impl}"
    common = dict(probe=PROBE, backend=backend, metric="step", variant=f"{job['strategy']}/{job['model']}{tag}/n{world}",
                  op=f"{job['strategy']} training step of {job['model']} ({IMPLS[impl]}), batch {job['batch']}x{job['seq']} "
                     f"per device, {world} rank(s)")
    bad = [o for o in outs if not o.ok]
    trains = {o.rank: next((d for d in o.lines if d.get("kind") == "train"), None) for o in outs}
    checks = [d for o in outs for d in o.lines if d.get("kind") == "check"]
    if bad or any(v is None for v in trains.values()):
        why = "; ".join(f"{o.describe()}: ...{o.stderr_tail[-400:]}" for o in bad) or "a rank wrote no timings"
        return [Record(**common, status=ERROR, reason=why[:1500])]
    ok = all(c["ok"] for c in checks) and len(checks) == 2 * world
    steps = np.max([trains[r]["steps_s"] for r in range(world)], axis=0)  # a step ends when the slowest rank does
    nosync = np.max([trains[r]["nosync_s"] for r in range(world)], axis=0)
    t0 = trains[0]
    tokens = job["batch"] * t0["seq"]
    med = float(np.median(steps))
    params = {"world": world, "strategy": job["strategy"], "model": job["model"], "impl": IMPLS[impl],
              "batch_per_device": job["batch"],
              "seq": t0["seq"], "precision": job["precision"], "n_params": t0["n_params"], "grad_bytes": t0["grad_bytes"],
              "tokens_per_s_per_device": tokens / med, "tokens_per_s_total": tokens * world / med,
              "exposed_comm_s": max(0.0, med - float(np.median(nosync))), "nosync_median_s": float(np.median(nosync)),
              "peak_bytes_per_rank": [trains[r]["peak_bytes"] for r in range(world)], "library": t0["library"],
              "backend": t0["backend"], "bucket_mb": job["bucket_mb"]}
    if base_median:
        params["baseline_median_s"] = base_median
        params["efficiency"] = base_median / med
    busbw, src = (comm if comm else (t0.get("allreduce_busbw"), "measured in-run: fp32 all_reduce at the bucket size"))
    if busbw and world > 1:
        params.update(busbw_Bps=busbw, busbw_source=src,
                      **predict(base_median or med, t0["grad_bytes"], world, busbw, job["strategy"],
                                t0.get("fsdp_collectives")))
        if t0.get("fsdp_collectives"):
            params["fsdp_collectives"] = t0["fsdp_collectives"]
    if t0.get("profile"):
        params["profile"] = {"rank": 0, **t0["profile"]}
    return [Record(**common, status=OK if ok else FAILED, reason="" if ok else "ranks disagree after a step or loss not finite",
                   clock="host_wall", samples_s=steps.tolist(), warmup=job["warmup"], work={"items": float(tokens * world)},
                   params=params, verified=ok,
                   verify_detail=("parameters identical on every rank and loss finite, before timing and after"
                                  if ok else json.dumps(checks)[:400]))]


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--nproc", type=int, required=True, help="ranks (one per GPU on a GPU machine)")
    ap.add_argument("--models", type=parse_list(str), default=None,
                    help="minimal GPT-2 sizes: tiny,gpt2,gpt2-medium,gpt2-large,gpt2-xl (default gpt2; --quick: tiny)")
    ap.add_argument("--impl", choices=tuple(IMPLS), default="minimal",
                    help="minimal: gapbench's minimal GPT-2 (default); hf: transformers' GPT2LMHeadModel of the same "
                         "size, the model single-device bench.train trains (DDP and FSDP2 only)")
    ap.add_argument("--strategies", type=parse_list(one_of("strategy", STRATEGIES)), default=["ddp", "fsdp2"],
                    help="ddp,fsdp2,mlx (default ddp,fsdp2)")
    ap.add_argument("--batch", type=int, default=None, help="sequences per device (default 8; --quick: 2)")
    ap.add_argument("--seq", type=int, default=None, help="tokens per sequence (default 1024; --quick: 64)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 20; --quick: 4)")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up steps (default 5; --quick: 1)")
    ap.add_argument("--precision", choices=(FP32, AMP_BF16), default=None, help="default amp-bf16 on GPUs")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP gradient bucket (and prediction size)")
    ap.add_argument("--comm-results", help="bench.dist result file for the all-reduce bus bandwidth")
    ap.add_argument("--no-baseline", action="store_true", help="skip the 1-rank run (no efficiency)")
    ap.add_argument("--profile-steps", type=int, default=0,
                    help="after timing, profile N more steps (CUDA): device busy, compute, NCCL exposed and idle time "
                         "per step, and the top kernels (rank 0), on N ranks and on 1")
    ap.add_argument("--op-timeout", type=float, default=120.0)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds one launch may take")
    ap.add_argument("--hang-timeout", type=float, default=300.0)
    ap.add_argument("--rank-dir")
    add_common_arguments(ap, probe=PROBE, quick_help="the tiny GPT-2, batch 2 x 64 tokens, a few steps (what you "
                         "name is kept)")


#: what a run without --quick and one with it take where the user names nothing (a value the
#: user gives is checked and kept either way)
DEFAULTS = {"models": ["gpt2"], "batch": 8, "seq": 1024, "steps": 20, "warmup": 5}
QUICK = {"models": ["tiny"], "batch": 2, "seq": 64, "steps": 4, "warmup": 1}


def run(args, prog: str, argv) -> int:
    from rich.console import Console

    from gapbench.core.cli import open_run
    from gapbench.models.gpt2_spec import SIZES

    console = Console(width=100)
    for name, value in (QUICK if args.quick else DEFAULTS).items():  # only where the user gave none
        if getattr(args, name) is None:
            setattr(args, name, value)
    try:
        models, strategies = list(args.models), list(args.strategies)
        unknown = [m for m in models if m not in SIZES]
        if unknown:
            raise UsageError(f"unknown model {unknown[0]!r}; choose from {', '.join(SIZES)}")
        ngpu = gpu_count()
        device = args.device if args.device != "auto" else ("cuda" if ngpu else "cpu")
        if args.nproc < 1 or (device == "cuda" and args.nproc > ngpu):
            raise UsageError(f"--nproc {args.nproc}: need 1 <= nproc <= GPUs visible ({ngpu}) on CUDA")
        if min(args.batch, args.seq, args.steps) < 1 or args.warmup < 0 or args.profile_steps < 0:
            raise UsageError("--batch, --seq, --steps must be >= 1, --warmup and --profile-steps >= 0")
        if args.impl == "hf" and "mlx" in strategies:
            raise UsageError("--impl hf trains transformers' model, a torch model: use --strategies ddp,fsdp2")
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    precision = args.precision or (AMP_BF16 if device == "cuda" else FP32)
    comm = busbw_from_results(args.comm_results, int(args.bucket_mb * (1 << 20))) if args.comm_results else None
    writer = open_run(PROBE, args.out, prog, argv, vars(args) | {"device": device, "precision": precision},
                      [f"{s}" for s in strategies])
    root = Path(args.rank_dir) if args.rank_dir else Path(tempfile.mkdtemp(prefix="gapbench-dp-"))
    try:
        for model in models:
            for strat in strategies:
                job = {"model": model, "impl": args.impl, "strategy": strat, "batch": args.batch, "seq": args.seq, "steps": args.steps,
                       "warmup": args.warmup, "precision": precision, "device": device, "bucket_mb": args.bucket_mb,
                       "op_timeout_s": args.op_timeout, "profile_steps": args.profile_steps}
                base = None
                for world in ([1] if not args.no_baseline and args.nproc > 1 else []) + [args.nproc]:
                    d = root / f"{model}-{strat}-n{world}"
                    d.mkdir(parents=True, exist_ok=True)
                    (d / "job.json").write_text(json.dumps(job))
                    if not args.no_progress:
                        console.print(f"[dim]{strat} {model} on {world} rank(s)...[/dim]")
                    penv = mlx_rank_env(world, device, d) if strat == "mlx" and world > 1 else None
                    outs = process.run_ranks(world, "gapbench.benchmarks.train.dp_rank", [str(d / "job.json"), str(d)], d,
                                        timeout_s=args.timeout, hang_s=args.hang_timeout, per_rank_env=penv,
                                        log_glob="rank{rank}.jsonl")
                    recs = _records(job, outs, world, base, comm)
                    if world == 1 and recs[0].status == OK:
                        base = recs[0].summary().median
                    writer.extend(recs)
    finally:
        if not args.rank_dir:
            shutil.rmtree(root, ignore_errors=True)
    writer.finish()
    console.print(table(writer.records))
    if any((r.params or {}).get("profile") for r in writer.records):
        console.print(profile_table(writer.records))
    console.print(f"results: {writer.path}")
    return 0


def table(records: list[Record]):
    from rich.markup import escape
    from rich.table import Table

    impls = sorted({str((r.params or {}).get("impl") or IMPL) for r in records if r.probe == PROBE}) or [IMPL]
    t = Table(title=f"Data-parallel training at a matched per-device batch (models: {', '.join(impls)}; a run "
                    "named -hf trains transformers' GPT2LMHeadModel, bench.train's model without --nproc)",
              title_justify="left")
    for c in ("run", "step ms [p10-p90]", "tok/s/dev", "tok/s", "eff", "pred", "exp. comm", "peak/rank"):
        t.add_column(c, justify="left" if c == "run" else "right", overflow="fold")
    for r in records:
        if r.probe != PROBE:
            continue
        if r.status != OK:
            t.add_row(r.variant, f"[red]{r.status}[/red]", escape(r.reason[:60]), "", "", "", "", "")
            continue
        s, p = r.summary(), r.params
        t.add_row(r.variant, f"{s.median * 1e3:.1f} [{s.p10 * 1e3:.1f}-{s.p90 * 1e3:.1f}]",
                  f"{p['tokens_per_s_per_device']:.0f}", f"{p['tokens_per_s_total']:.0f}",
                  f"{p['efficiency']:.0%}" if "efficiency" in p else "",
                  f"{p['predicted_efficiency']:.0%}" if "predicted_efficiency" in p else "",
                  f"{p['exposed_comm_s'] * 1e3:.1f} ms", f"{max(p['peak_bytes_per_rank']) / 2**30:.2f} GiB")
    return t


def profile_table(records: list[Record]):
    """--profile-steps: where each run's step went on rank 0's device (stepprofile.breakdown)."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="Where the step went on the device (rank 0, profiled after timing; ms per step)",
              title_justify="left")
    for c in ("run", "wall", "busy", "compute", "NCCL", "exposed", "idle", "kernels", "top compute kernel"):
        t.add_column(c, justify="left" if c in ("run", "top compute kernel") else "right", overflow="fold")
    for r in records:
        p = (r.params or {}).get("profile")
        if r.probe != PROBE or not p:
            continue
        if "reason" in p:
            t.add_row(r.variant, escape(p["reason"]), "", "", "", "", "", "", "")
            continue
        top = p["top_compute"][0] if p["top_compute"] else {}
        t.add_row(r.variant, *(f"{p[k] * 1e3:.1f}" for k in ("wall_s", "busy_s", "compute_s", "comm_s",
                                                              "exposed_comm_s", "idle_s")),
                  f"{p['kernels_per_step']:.0f}",
                  escape(f"{top['kernel'][:40]} {top['s_per_step'] * 1e3:.1f}") if top else "")
    return t


def parser(prog: str = "python -m bench.train") -> ArgumentParser:
    """The parser of `bench.train --nproc N` (the one-line error parser every command uses)."""
    ap = ArgumentParser(prog=prog, description="data-parallel training (DDP, FSDP2, MLX)")
    add_arguments(ap)
    return ap


def main(argv: list[str] | None = None, prog: str = "python -m bench.train") -> int:
    ap = parser(prog)
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:  # --help (0) or a bad argument (2, one line: gapbench.core.cli.ArgumentParser)
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    try:
        return run(args, prog, argv)
    except UsageError as e:  # e.g. an --out that cannot be written (open_run): one line, exit 2
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(prog="python -m gapbench.benchmarks.train.dp"))
