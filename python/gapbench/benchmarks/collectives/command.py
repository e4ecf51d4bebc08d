"""`python -m bench.dist`: collectives rung by rung (see the package docstring), nccl-tests style.

Local (default): one rank per visible GPU (or --nproc gloo ranks on a CPU), each rung launched
as its own set of rank processes (gapbench.core.process.run_ranks), merged by this process into one result
file. Multi-node: --launcher torchrun|mlx|mpirun runs the ranks through that launcher and rank 0
of the job writes the result file (worker --merge-to)."""
from __future__ import annotations

import argparse
import json

import shutil
import tempfile
import time
from pathlib import Path

from gapbench.backends.mlx import rank_env as mlx_rank_env
from gapbench.backends.torch import gpu_count
from gapbench.core import process
from gapbench.core.benchmark import Benchmark
from gapbench.core.cli import UsageError, add_common_arguments
from gapbench.core.names import CollOp, DType, Placement, Rung, parse_list
from gapbench.core.result import ERROR, Record, load_run
from gapbench.benchmarks.collectives import tables
from gapbench.benchmarks.collectives.config import OPS, PLACEMENTS, ROUNDS, RUNGS, DistConfig, human_bytes, parse_bytes, shaping_env, sweep


class DistBenchmark(Benchmark):
    name = "dist"
    title = "Collectives: p2p floor, NCCL direct, torch.distributed, CuPy, MLX distributed"

    def bundle_args(self, out: Path, quick: bool) -> list[str]:
        """`gapbench run`: with --quick a short sweep (1K-64K, all-reduce, on this machine's GPUs or 2 CPU ranks)."""
        return super().bundle_args(out, quick) + ["--no-plain"]

    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        g = ap.add_argument_group("sweep (nccl-tests' -b/-e/-f)")
        g.add_argument("-b", "--min-bytes", default=None, help="smallest size (default 1K)")
        g.add_argument("-e", "--max-bytes", default=None,
                       help="largest size (default 1G on GPUs, 1M on CPUs; --quick: 64K)")
        g.add_argument("-f", "--step-factor", type=float, default=4.0, help="size multiplier (default 4)")
        g.add_argument("--ops", type=parse_list(CollOp.parse), default=None,
                       help=f"comma list of {','.join(OPS)} (default all; --quick: {CollOp.all_reduce})")
        g.add_argument("--dtypes", type=parse_list(DType.parse), default=[DType.bf16],
                       help=f"comma list of {','.join(DType)} (default {DType.bf16})")
        g.add_argument("--placements", type=parse_list(Placement.parse), default=[Placement.auto],
                       help=f"{Placement.auto} (each API's own form; NCCL also in place where torch is) or "
                            f"{','.join(PLACEMENTS)}")
        g.add_argument("--rungs", type=parse_list(Rung.parse),
                       help=f"comma list of {','.join(RUNGS)} (default all that apply)")
        g.add_argument("--samples", type=int, default=0,
                       help="samples per engine per round (default 0: 3 up to 64 MiB, 2 beyond)")
        g.add_argument("--rounds", type=int, default=ROUNDS,
                       help=f"interleaved rounds per case; paired ratios need >= 6 for a 95%% interval, >= 9 for "
                            f"one that no single round sets (default {ROUNDS})")
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
        g.add_argument("--plain-rounds", type=int, default=0,
                       help="rounds of fresh processes in the plain check (default: --rounds); small messages' "
                            "time varies from process to process, and a tighter interval needs more rounds")
        g.add_argument("--bind", choices=("cores", "none"), default="cores",
                       help="GPUs: bind each rank to physical cores of its own near its GPU, as mpirun --bind-to "
                            "core does for nccl-tests (default); none: leave placement to the OS")
        g.add_argument("--rank-dir", help="keep the ranks' logs here (default: a temporary folder)")
        add_common_arguments(ap, probe=self.name,
                             quick_help=f"a short sweep, {CollOp.all_reduce} only, sizes up to 64K (what you name is kept)")

    # ------------------------------------------------------------------ run
    def config(self, args) -> tuple[DistConfig, list[str], int]:
        if args.samples < 0 or args.rounds < 1 or args.warmup < 0 or args.iters < 0 or args.plain_rounds < 0:
            raise UsageError("--rounds must be >= 1; --samples (0: by size), --warmup, --iters and --plain-rounds "
                              "(0: --rounds) >= 0")
        ngpu = gpu_count()
        device = args.device if args.device != "auto" else ("cuda" if ngpu else "cpu")
        if device == "cuda" and not ngpu:
            raise UsageError("--device cuda but no GPU is visible; use --device cpu")
        nproc = args.nproc or (ngpu if device == "cuda" else 2)
        if nproc < 1:
            raise UsageError("--nproc must be >= 1")
        if args.launcher == "local" and device == "cuda" and nproc > ngpu:
            raise UsageError(f"--nproc {nproc} but only {ngpu} GPUs are visible (one rank per GPU)")
        lo = parse_bytes(args.min_bytes or "1K")
        hi = parse_bytes(args.max_bytes or ("64K" if args.quick else "1G" if device == "cuda" else "1M"))
        ops = list(args.ops) if args.ops is not None else [CollOp.all_reduce] if args.quick else list(OPS)
        default_rungs = RUNGS if device == "cuda" else (Rung.torch, Rung.mlx)
        rungs = list(args.rungs or default_rungs)
        cfg = DistConfig(ops=ops, dtypes=list(args.dtypes), placements=list(args.placements), sizes=sweep(lo, hi, args.step_factor), samples=args.samples,
                         rounds=args.rounds, warmup=args.warmup, iters=args.iters, device=device, op_timeout_s=args.op_timeout,
                         nccl_debug=not args.no_nccl_debug)
        return cfg, rungs, nproc

    def run(self, args, prog: str = "python -m bench.dist", argv: list[str] | None = None) -> int:
        from rich.console import Console

        from gapbench.core.cli import open_run

        console = Console(width=100)
        cfg, rungs, nproc = self.config(args)
        if args.launcher != "local":
            from gapbench.benchmarks.collectives.external import run_external_launcher

            return run_external_launcher(self, args, cfg, rungs, nproc, prog, argv, console)
        writer = open_run("dist", args.out, prog, argv, cfg.to_dict(), rungs)
        writer.run.update(nproc=nproc, launcher="local", multicast_allowed_by_user=bool(args.allow_multicast),
                          env_shaping=shaping_env(process.child_env(allow_multicast=args.allow_multicast)))
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
        stages = writer.run.get("stages_s") or {}
        if stages:
            console.print("time: " + ", ".join(f"{k} {v['wall'] if isinstance(v, dict) else v:.1f} s"
                                               for k, v in stages.items()))
        console.print(f"results: {writer.path}")
        return 0

    def _run_local(self, args, cfg, rungs, nproc, writer, rank_root: Path, console) -> None:
        from gapbench.benchmarks.collectives.merge import merge_lines, stage_times
        from gapbench.benchmarks.collectives.ncclinfo import NVLINK_GBPS, datasheet_GBps, nvidia_smi_topo, nvlink_topology, read_logs, smi_nvlink_pairs

        sheet = None
        if cfg.device == "cuda":
            topo = {"nvidia_smi_topo": nvidia_smi_topo(), "nvml": nvlink_topology()}
            per_link = NVLINK_GBPS.get(((topo["nvml"].get("gpus") or [{}])[0]).get("nvlink_version") or 0, 25.0)
            topo["nvlinks_per_pair"] = {k: {"nvlinks": n, "GBps_per_dir": n * per_link}
                                        for k, n in smi_nvlink_pairs(topo["nvidia_smi_topo"]).items()}
            sheet = datasheet_GBps(topo["nvml"])
            writer.run["topology"] = {**topo, "datasheet_GBps_per_dir": sheet}
        cpus = None
        if cfg.device == "cuda" and args.bind == "cores":
            from gapbench.core.affinity import rank_cpus
            from gapbench.core.gpu import rank_local_cpus

            local = rank_local_cpus(nproc, writer.run["topology"]["nvidia_smi_topo"])
            cpus, how = rank_cpus(nproc, local)
            writer.run["cpu_binding"] = {"ranks": cpus, "how": how}
        stages = writer.run["stages_s"] = {}  # where the run's time went (docs/dist.md)
        t = time.time()
        if cfg.device == "cuda" and cfg.nccl_debug and "nccl" in rungs:
            writer.run["nccl_choices"] = self._algo_probe(args, cfg, nproc, rank_root / "algo-probe", console)
            stages["nccl algorithm probe"], t = round(time.time() - t, 2), time.time()
        if "p2p" in rungs and cfg.device == "cuda":
            writer.extend(_with_sheet(self._p2p(args, cfg, rank_root / "p2p", console), sheet))
            stages["p2p"], t = round(time.time() - t, 2), time.time()
        seen: set[str] = set()
        groups, missing = plan_groups(rungs, cfg.device)
        writer.extend(missing)
        for group in groups:
            d = rank_root / "+".join(group)
            d.mkdir(parents=True, exist_ok=True)
            cfg_path = d / "config.json"
            cfg_path.write_text(json.dumps(cfg.to_dict()))
            self._progress(args, console, f"[dim]{' + '.join(group)}: {nproc} rank(s), {cfg.rounds} interleaved "
                                          "rounds...[/dim]")
            per_rank_env = mlx_rank_env(nproc, cfg.device, d) if Rung.mlx in group else None
            outs = process.run_ranks(nproc, "gapbench.benchmarks.collectives.worker",
                                ["--config", str(cfg_path), "--rungs", ",".join(group), "--out-dir", str(d)], d,
                                timeout_s=args.timeout, hang_s=args.hang_timeout, per_rank_env=per_rank_env,
                                allow_multicast=args.allow_multicast, log_glob="rank{rank}.jsonl", cpus=cpus)
            stages["+".join(group)] = stage_times(outs[0].lines, t, time.time())
            t = time.time()
            failures = {o.rank: f"{o.describe()}; output: ...{o.stderr_tail[-300:]}" for o in outs if not o.ok}
            info = read_logs(sorted(d.glob("nccl-rank0.*.log"))) if cfg.device == "cuda" else {}
            if info:
                info["tuning"] = writer.run.get("nccl_choices", {}).get("tuning", {})
                writer.run.setdefault("nccl", {})["+".join(group)] = info
            recs = merge_lines({o.rank: o.lines for o in outs}, nproc, failures=failures, nccl_info=info)
            for r in recs:  # an engine measured again as another launch's in-process reference
                if r.backend in seen and r.params.get("size"):
                    r.variant += "@" + "+".join(group)
                    r.params["reference_only"] = True
            seen.update(group)
            writer.extend(_with_sheet(recs, sheet))
        if cfg.device == "cuda" and "nccl" in rungs and not args.no_plain:
            from gapbench.benchmarks.collectives.plain import plain_records

            rounds = args.plain_rounds or cfg.rounds
            writer.run["plain_rounds"] = rounds
            self._progress(args, console, f"[dim]nccl-plain: the harness against a plain C++ loop, {rounds} rounds "
                                          "of fresh processes...[/dim]")
            writer.extend(_with_sheet(plain_records(cfg, nproc, rounds=rounds, cpus=cpus), sheet))
            stages["nccl-plain check"] = round(time.time() - t, 2)

    @staticmethod
    def _progress(args, console, text: str) -> None:
        """A status line of a local run (what it starts next); none with --no-progress."""
        if not getattr(args, "no_progress", False):
            console.print(text)

    def _p2p(self, args, cfg, root: Path, console) -> list[Record]:
        """The copy probe: every case in one process; if that process dies, the case it was in
        becomes an error row carrying the Python stack the worker's faulthandler printed, and each
        case it had not reached runs in a process of its own, so a crash loses that case only."""
        from gapbench.benchmarks.collectives.p2p import cases

        ngpu = gpu_count()
        todo = cases(ngpu, sorted(set(cfg.sizes)))
        if not todo:
            return [Record(probe="dist", backend="p2p", metric="rung", status="unavailable",
                           reason=f"the p2p probe needs two GPUs in one node; this one has {ngpu}")]
        self._progress(args, console, f"[dim]p2p: {len(todo)} copy cases over every GPU pair...[/dim]")
        recs, reached, ok = self._p2p_launch(args, cfg, root / "all", None)
        for i, (src, dst, method, _) in enumerate(todo):
            if not ok and (src, dst, method) not in reached:
                recs += self._p2p_launch(args, cfg, root / f"{i:03d}", f"{src},{dst},{method}")[0]
        return recs

    def _p2p_launch(self, args, cfg, d: Path, only: str | None) -> tuple[list[Record], set, bool]:
        """One probe process (all cases, or `only` = "SRC,DST,METHOD"): its records, the
        (src, dst, method) cases it reached, and whether it exited cleanly."""
        from gapbench.benchmarks.collectives.merge import p2p_records

        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(cfg.to_dict()))
        extra = ["--p2p-only", only] if only else []
        out = process.run_ranks(1, "gapbench.benchmarks.collectives.worker", ["--config", str(d / "config.json"), "--rungs", "p2p", *extra,
                           "--out-dir", str(d)], d, timeout_s=args.timeout, hang_s=args.hang_timeout,
                           allow_multicast=args.allow_multicast, log_glob="rank{rank}.jsonl")[0]
        recs = p2p_records(out.lines)
        reached = {(x["src"], x["dst"], x["op"]) for x in out.lines if x.get("kind") == "begin"}
        if not out.ok:
            at = next((x for x in reversed(out.lines) if x.get("kind") == "begin"), None)
            where = f" at {human_bytes(at['size'])}" if at else ""
            src, dst, method = (at["src"], at["dst"], at["op"]) if at else (only or "?,?,rung").split(",")
            recs.append(Record(probe="dist", backend="p2p", metric=method, variant=f"{src}->{dst}", status=ERROR,
                               reason=f"{out.describe()}{where}; output: ...{out.stderr_tail[-800:]}"))
        return recs, reached, out.ok

    def _algo_probe(self, args, cfg, nproc, d: Path, console) -> dict:
        """NCCL's algorithm/protocol per op and size, from one untimed pass of direct NCCL with
        NCCL_DEBUG_SUBSYS=TUNING (a log line per call would cost host time in the timed passes)."""
        from dataclasses import replace

        from gapbench.benchmarks.collectives.ncclinfo import read_logs

        d.mkdir(parents=True, exist_ok=True)
        probe = replace(cfg, samples=1, rounds=1, warmup=0, iters=1, nccl_debug_subsys="INIT,ENV,TUNING")
        (d / "config.json").write_text(json.dumps(probe.to_dict()))
        self._progress(args, console, "[dim]nccl: untimed pass logging NCCL's algorithm choices...[/dim]")
        process.run_ranks(nproc, "gapbench.benchmarks.collectives.worker", ["--config", str(d / "config.json"), "--rungs", "nccl",
                     "--out-dir", str(d)], d, timeout_s=args.timeout, hang_s=args.hang_timeout,
                     allow_multicast=args.allow_multicast, log_glob="rank{rank}.jsonl")
        return read_logs(sorted(d.glob("nccl-rank0.*.log")))

    def tables(self, records: list[Record]) -> list:
        return tables.all_tables(records)

    def markdown(self, records: list[Record]) -> str:
        return tables.markdown(records)

    def report_tables(self, runs: list) -> list:
        return tables.report_tables(runs)

    def figures(self, records: list[Record], stem: Path, run: dict | None = None) -> list[Path]:
        return tables.figures(records, stem)


def launch_groups(rungs: list[str], device: str) -> list[list[str]]:
    """The rank-process sets of a local run, each measuring its engines in interleaved rounds. On
    GPUs: direct NCCL with torch and CuPy; then MLX beside its own direct-NCCL reference (MLX's nccl
    backend wants one visible GPU per rank, which the first set does not have). On CPUs: one set."""
    if device != "cuda":
        rest = [r for r in rungs if r != Rung.p2p]
        return [rest] if rest else []
    first = [r for r in (Rung.nccl, Rung.torch, Rung.cupy) if r in rungs]
    groups = [first] if first else []
    if Rung.mlx in rungs:
        groups.append(([Rung.nccl] if Rung.nccl in rungs else []) + [Rung.mlx])
    return groups


def plan_groups(rungs: list[str], device: str, why_absent=None) -> tuple[list[list[str]], list[Record]]:
    """launch_groups, less the rungs whose package is not installed (`why_absent(rung)`: the reason,
    or None; default rungs.base.absent), each a row saying why, without starting ranks for them; a
    group left with nothing new (MLX's group without MLX is its NCCL reference, measured already)
    is not started."""
    from gapbench.benchmarks.collectives.merge import PROBE
    from gapbench.benchmarks.collectives.rungs.base import absent
    from gapbench.core.result import UNAVAILABLE

    why_absent = why_absent or absent
    gone = {r: why for r in rungs if (why := why_absent(r))}
    rows = [Record(probe=PROBE, backend=r, metric="rung", status=UNAVAILABLE, reason=why) for r, why in gone.items()]
    groups, covered = [], set()
    for group in launch_groups(rungs, device):
        left = [r for r in group if r not in gone]
        if left and not set(left) <= covered:
            groups.append(left)
            covered.update(left)
    return groups, rows


def _with_sheet(recs: list[Record], sheet) -> list[Record]:
    for r in recs:
        if sheet:
            r.params["datasheet_GBps"] = sheet
    return recs


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
