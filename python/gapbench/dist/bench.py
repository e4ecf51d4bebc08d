"""`python -m bench.dist`: collectives rung by rung (see the package docstring), nccl-tests style.

Local (default): one rank per visible GPU (or --nproc gloo ranks on a CPU), each rung launched
as its own set of rank processes (launcher.launch_local), merged by this process into one result
file. Multi-node: --launcher torchrun|mlx|mpirun runs the ranks through that launcher and rank 0
of the job writes the result file (worker --merge-to)."""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..benchmark import Benchmark, UsageError
from ..result import ERROR, OK, Record, load_run
from . import tables
from .config import (DTYPES, OPS, PLACEMENTS, RUNGS, ConfigError, DistConfig, csv_list,
                     parse_bytes, process_env, shaping_env, sweep)


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        return 0


class DistBenchmark(Benchmark):
    name = "dist"
    title = "Collectives: p2p floor, NCCL direct, torch.distributed, CuPy, MLX distributed"

    def bundle_args(self, out: Path, quick: bool) -> list[str]:
        """`gapbench run`: a short sweep (1K-64K, all-reduce, on this machine's GPUs or 2 CPU ranks)."""
        return ["--out", str(out), "--no-plain"] + (["-e", "64K", "--ops", "all_reduce"] if quick else [])

    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        g = ap.add_argument_group("sweep (nccl-tests' -b/-e/-f)")
        g.add_argument("-b", "--min-bytes", default=None, help="smallest size (default 1K)")
        g.add_argument("-e", "--max-bytes", default=None, help="largest size (default 1G on GPUs, 1M on CPUs)")
        g.add_argument("-f", "--step-factor", type=float, default=4.0, help="size multiplier (default 4)")
        g.add_argument("--ops", help=f"comma list of {','.join(OPS)} (default all)")
        g.add_argument("--dtypes", help="comma list of fp32,fp16,bf16 (default bf16)")
        g.add_argument("--placements", default="auto",
                       help="auto (each API's own form; NCCL also in place where torch is) or out,in")
        g.add_argument("--rungs", help=f"comma list of {','.join(RUNGS)} (default all that apply)")
        g.add_argument("--samples", type=int, default=10)
        g.add_argument("--warmup", type=int, default=5)
        g.add_argument("--iters", type=int, default=0, help="ops per sample (default 50/20/5 by size)")
        g = ap.add_argument_group("ranks")
        g.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
        g.add_argument("--nproc", type=int, help="ranks on this machine (default: one per GPU; 2 on a CPU)")
        g.add_argument("--launcher", choices=("local", "torchrun", "mlx", "mpirun"), default="local")
        g.add_argument("--nnodes", type=int, default=1, help="torchrun: nodes")
        g.add_argument("--node-rank", type=int, default=0, help="torchrun: this node's rank")
        g.add_argument("--rdzv-endpoint", help="torchrun: HOST:PORT of node 0")
        g.add_argument("--hostfile", help="mlx.launch / mpirun: the hosts")
        g.add_argument("--op-timeout", type=float, default=60.0, help="seconds any one collective may take")
        g.add_argument("--hang-timeout", type=float, default=180.0, help="stop ranks with no progress this long")
        g.add_argument("--timeout", type=float, default=900.0, help="seconds a whole launch may take")
        g.add_argument("--allow-multicast", action="store_true",
                       help="do not force NVLink multicast off (recorded; never on the lent machines)")
        g.add_argument("--no-nccl-debug", action="store_true", help="do not log/parse NCCL's choices")
        g.add_argument("--no-plain", action="store_true", help="skip the plain C++ NCCL loop check")
        g.add_argument("--rank-dir", help="keep the ranks' logs here (default: a temporary folder)")
        ap.add_argument("--out", help="result JSON (default results/dist-<time>.json)")

    # ------------------------------------------------------------------ run
    def config(self, args) -> tuple[DistConfig, list[str], int]:
        if args.samples < 1 or args.warmup < 0 or args.iters < 0:
            raise ConfigError("--samples must be >= 1, --warmup and --iters >= 0")
        ngpu = gpu_count()
        device = args.device if args.device != "auto" else ("cuda" if ngpu else "cpu")
        if device == "cuda" and not ngpu:
            raise ConfigError("--device cuda but no GPU is visible; use --device cpu")
        nproc = args.nproc or (ngpu if device == "cuda" else 2)
        if nproc < 1:
            raise ConfigError("--nproc must be >= 1")
        if args.launcher == "local" and device == "cuda" and nproc > ngpu:
            raise ConfigError(f"--nproc {nproc} but only {ngpu} GPUs are visible (one rank per GPU)")
        lo = parse_bytes(args.min_bytes or "1K")
        hi = parse_bytes(args.max_bytes or ("1G" if device == "cuda" else "1M"))
        default_rungs = RUNGS if device == "cuda" else ("torch", "mlx")
        rungs = csv_list(args.rungs, RUNGS, "rung", default_rungs)
        placements = csv_list(args.placements, PLACEMENTS + ("auto",), "placement", ("auto",))
        cfg = DistConfig(ops=csv_list(args.ops, OPS, "op", OPS), dtypes=csv_list(args.dtypes, DTYPES, "dtype", ("bf16",)),
                         placements=placements, sizes=sweep(lo, hi, args.step_factor), samples=args.samples,
                         warmup=args.warmup, iters=args.iters, device=device, op_timeout_s=args.op_timeout,
                         nccl_debug=not args.no_nccl_debug)
        return cfg, rungs, nproc

    def run(self, args, prog: str = "python -m bench.dist", argv: list[str] | None = None) -> int:
        from rich.console import Console

        from ..cli import open_run

        console = Console(width=100)
        try:
            cfg, rungs, nproc = self.config(args)
        except ConfigError as e:
            raise UsageError(str(e)) from e
        if args.launcher != "local":
            from .external import run_external_launcher

            return run_external_launcher(self, args, cfg, rungs, nproc, prog, argv, console)
        writer = open_run("dist", args.out, prog, argv, cfg.to_dict(), rungs)
        writer.run.update(nproc=nproc, launcher="local", multicast_allowed_by_user=bool(args.allow_multicast),
                          env_shaping=shaping_env(process_env(allow_multicast=args.allow_multicast)))
        rank_root = Path(args.rank_dir) if args.rank_dir else Path(tempfile.mkdtemp(prefix="gapbench-dist-"))
        try:
            self._run_local(args, cfg, rungs, nproc, writer, rank_root, console)
        finally:
            if not args.rank_dir:
                shutil.rmtree(rank_root, ignore_errors=True)
        writer.finish()
        for t in self.tables(writer.records):
            console.print(t)
        try:
            paths = self.figures(writer.records, writer.path.with_suffix(""))
            if paths:
                console.print("figures: " + ", ".join(map(str, paths)))
        except ImportError:
            console.print("figures skipped: matplotlib is not installed")
        console.print(f"results: {writer.path}")
        return 0

    def _run_local(self, args, cfg, rungs, nproc, writer, rank_root: Path, console) -> None:
        from .launcher import launch_local
        from .merge import merge_lines, p2p_records
        from .ncclinfo import datasheet_GBps, nvidia_smi_topo, nvlink_topology, read_logs

        sheet = None
        if cfg.device == "cuda":
            topo = {"nvidia_smi_topo": nvidia_smi_topo(), "nvml": nvlink_topology()}
            sheet = datasheet_GBps(topo["nvml"])
            writer.run["topology"] = {**topo, "datasheet_GBps_per_dir": sheet}
        if cfg.device == "cuda" and cfg.nccl_debug and "nccl" in rungs:
            writer.run["nccl_choices"] = self._algo_probe(args, cfg, nproc, rank_root / "algo-probe", console)
        for rung in rungs:
            nprocs = 1 if rung == "p2p" else nproc
            if rung == "p2p" and cfg.device != "cuda":
                continue
            d = rank_root / rung
            d.mkdir(parents=True, exist_ok=True)
            cfg_path = d / "config.json"
            cfg_path.write_text(json.dumps(cfg.to_dict()))
            console.print(f"[dim]{rung}: {nprocs} rank(s)...[/dim]")
            per_rank_env = _mlx_env(nprocs, cfg, d) if rung == "mlx" else None
            outs = launch_local(nprocs, "gapbench.dist.worker",
                                ["--config", str(cfg_path), "--rungs", rung, "--out-dir", str(d)], d,
                                timeout_s=args.timeout, hang_s=args.hang_timeout, per_rank_env=per_rank_env,
                                allow_multicast=args.allow_multicast, log_glob="rank{rank}.jsonl")
            failures = {o.rank: f"{o.describe()}; output: ...{o.stderr_tail[-300:]}" for o in outs if not o.ok}
            if rung == "p2p":
                recs = p2p_records(outs[0].lines)
                if failures:
                    recs.append(Record(probe="dist", backend="p2p", metric="rank", variant="rank0", status=ERROR,
                                       reason=failures[0]))
            else:
                info = read_logs(sorted(d.glob("nccl-rank0.*.log"))) if cfg.device == "cuda" else {}
                if info:
                    info["tuning"] = writer.run.get("nccl_choices", {}).get("tuning", {})
                    writer.run.setdefault("nccl", {})[rung] = info
                recs = merge_lines({o.rank: o.lines for o in outs}, nprocs, failures=failures, nccl_info=info)
            for r in recs:
                if sheet:
                    r.params["datasheet_GBps"] = sheet
            writer.extend(recs)
        if cfg.device == "cuda" and "nccl" in rungs and not args.no_plain:
            writer.extend(plain_records(cfg, nproc))

    def _algo_probe(self, args, cfg, nproc, d: Path, console) -> dict:
        """NCCL's algorithm/protocol per op and size, from one untimed pass of direct NCCL with
        NCCL_DEBUG_SUBSYS=TUNING (a log line per call would cost host time in the timed passes)."""
        from dataclasses import replace

        from .launcher import launch_local
        from .ncclinfo import read_logs

        d.mkdir(parents=True, exist_ok=True)
        probe = replace(cfg, samples=1, warmup=0, iters=1, nccl_debug_subsys="INIT,ENV,TUNING")
        (d / "config.json").write_text(json.dumps(probe.to_dict()))
        console.print("[dim]nccl: untimed pass logging NCCL's algorithm choices...[/dim]")
        launch_local(nproc, "gapbench.dist.worker", ["--config", str(d / "config.json"), "--rungs", "nccl",
                     "--out-dir", str(d)], d, timeout_s=args.timeout, hang_s=args.hang_timeout,
                     allow_multicast=args.allow_multicast, log_glob="rank{rank}.jsonl")
        return read_logs(sorted(d.glob("nccl-rank0.*.log")))

    def tables(self, records: list[Record]) -> list:
        return tables.all_tables(records)

    def markdown(self, records: list[Record]) -> str:
        return tables.markdown(records)

    def figures(self, records: list[Record], stem: Path, run: dict | None = None) -> list[Path]:
        return tables.figures(records, stem)


def _mlx_env(nproc: int, cfg: DistConfig, d: Path):
    """What mlx.launch sets: the ring's hostfile (one 127.0.0.1:port per rank) and MLX_RANK on CPU;
    NCCL_HOST_IP/NCCL_PORT/MLX_WORLD_SIZE and one GPU per rank on CUDA."""
    from .launcher import free_ports

    ports = free_ports(nproc + 1)
    if cfg.device == "cpu":
        hf = d / "mlx-hosts.json"
        hf.write_text(json.dumps([[f"127.0.0.1:{p}"] for p in ports[:nproc]]))
        return lambda r: {"MLX_RANK": str(r), "MLX_HOSTFILE": str(hf), "GAPBENCH_MLX_BACKEND": "ring"}
    return lambda r: {"MLX_RANK": str(r), "MLX_WORLD_SIZE": str(nproc), "NCCL_HOST_IP": "127.0.0.1",
                      "NCCL_PORT": str(ports[-1]), "CUDA_VISIBLE_DEVICES": str(r), "LOCAL_RANK": "0",
                      "GAPBENCH_MLX_BACKEND": "nccl"}


def plain_bin() -> Path:
    return Path(__file__).resolve().parents[1] / "bin" / "gapbench_nccl_plain"


def plain_records(cfg: DistConfig, nproc: int) -> list[Record]:
    """The plain standalone C++ loop (cuda/plain/nccl.cu): all_reduce over every visible GPU."""
    from .config import bus_factor
    from .rungs.nccl import nccl_candidates

    exe = plain_bin()
    base = dict(probe="dist", backend="nccl-plain", metric="all_reduce")
    if not exe.exists():
        return [Record(**base, status="unavailable", reason=f"{exe} not built (no CUDA toolkit at install)")]
    lib = (nccl_candidates() or ["libnccl.so.2"])[0]
    out = []
    for dt in cfg.dtypes:
        cmd = [str(exe), lib, str(cfg.sizes[0]), str(cfg.sizes[-1]), str(cfg.sizes[1] / cfg.sizes[0] if len(cfg.sizes) > 1 else 2),
               str(cfg.iters), str(cfg.samples), str(cfg.warmup), dt]
        try:
            env = process_env()
            env.setdefault("CUDA_VISIBLE_DEVICES", ",".join(map(str, range(nproc))))  # the ranks' GPUs
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
            doc = json.loads(p.stdout) if p.returncode == 0 else None
        except (subprocess.SubprocessError, json.JSONDecodeError) as e:
            p, doc = None, None
            err = str(e)
        if doc is None:
            why = err if p is None else f"exit {p.returncode}: {p.stderr.strip()[-300:]}"
            out.append(Record(**base, variant=dt, status=ERROR, reason=why))
            continue
        n = doc["ngpus"]
        for row in doc["rows"]:
            ok = row["wrong_before"] == 0 and row["wrong_after"] == 0
            out.append(Record(**base, variant=f"{dt}/out/{row['bytes']}", status=OK if ok else "failed",
                              reason="" if ok else f"{row['wrong_before']}/{row['wrong_after']} elements wrong",
                              clock="host_wall", samples_s=row["samples_s"], inner=row["iters"], warmup=cfg.warmup,
                              verified=ok, verify_detail="checked before timing and after the last timed loop",
                              work={"bytes": float(row["bytes"])},
                              op=f"all_reduce {dt} out of place, one process driving {n} GPUs",
                              params={"size": row["bytes"], "count": row["count"], "world": n, "dtype": dt,
                                      "placement": "out", "bus_factor": bus_factor("all_reduce", n),
                                      "nccl_version_code": doc["nccl_version"]}))
    return out


BENCHMARK = DistBenchmark()


def main(argv: list[str] | None = None, prog: str = "python -m bench.dist") -> int:
    return BENCHMARK.main(argv, prog)


def show(path: str) -> int:
    """Print the tables of a result file (used by tests and by hand)."""
    from rich.console import Console

    c = Console(width=100)
    for t in BENCHMARK.tables(load_run(path).records):
        c.print(t)
    return 0
