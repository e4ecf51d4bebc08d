"""python -m bench.blas: the command (arguments, the run, what it prints and draws). The
measurement is gapbench.benchmarks.blas.run, the rendering gapbench.benchmarks.blas.tables."""
from __future__ import annotations

import argparse
import time

from gapbench import ops
from gapbench.backends import registry
from gapbench.benchmarks.blas import tables
from gapbench.benchmarks.blas.config import PROBE, STREAMS, Config, ops_for_shapes, parse_shapes
from gapbench.benchmarks.blas.plain import plain_check
from gapbench.benchmarks.blas.processes import more_processes, spread_text
from gapbench.benchmarks.blas.run import Phases, iterate
from gapbench.benchmarks.blas.run import __doc__ as _BLAS_DOC
from gapbench.core.benchmark import Benchmark, print_lines
from gapbench.core.cli import UsageError, add_common_arguments
from gapbench.core.names import (Backend, ColdScrub, Data, DeviceClass, DType, Parity, StreamPlan, injection, parse_list,
                                 parse_one)
from gapbench.core.result import NOT_APPLICABLE, Record


def default_backends(names: list[Backend]) -> tuple[list[Backend], list[Backend]]:
    """The backends a run without --backends times, and the CPU ones it leaves out: where a GPU
    backend is available, the CPU backends are left out (at the default shapes their rows take
    minutes, and the question on such a machine is the GPU's); elsewhere all of them run."""
    cpu = DeviceClass.cpu
    gpu = [b for b in names if b.device_class is not cpu and registry.info(b).available]
    if not gpu:
        return names, []
    left_out = [b for b in names if b.device_class is cpu and registry.info(b).available]
    return [b for b in names if b not in left_out], left_out


class BlasBenchmark(Benchmark):
    name = PROBE
    title = "GEMM/GEMV/VJP/copy/... throughput against the roofline measured here (paper Figures 5-7)"
    description = _BLAS_DOC.split("\n\n")[0]

    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--ops", type=ops.op_list,
                        help=f"comma list of {', '.join(ops.choices())} (default: all; a group such as vjp "
                             "selects each of its ops)")
        ap.add_argument("--dtypes", type=parse_list(DType.parse), help="comma list of fp32, fp16, bf16 (default: all)")
        ap.add_argument("--shapes", help="comma list: N (copy), MxK (gemv, vjp, ...), BxMxNxK (gemm); default: each "
                                         "op's sweep")
        ap.add_argument("--backends", type=registry.backend_list,
                        help="comma list, or all (default: all, but on a machine with a GPU only the GPU "
                             "backends: CPU rows at the default shapes take minutes). Known: "
                             + ", ".join(b.value for b in Backend.selectable()))
        ap.add_argument("--samples", type=int, default=None,
                        help="most paired rounds per case and cache mode (default 1000; quick 10)")
        ap.add_argument("--warmup", type=int, default=None, help="untimed runs per arm first (default 2)")
        ap.add_argument("--budget", type=float, default=None,
                        help="wall seconds per case and cache mode for the paired rounds (default 1; quick 0.3)")
        ap.add_argument("--rel-hw", type=float, default=None,
                        help="stop once every median's and ratio's 95%% interval half-width is within this "
                             "fraction (default 0.01)")
        ap.add_argument("--cold", nargs="?", type=parse_list(ColdScrub.parse), const=[ColdScrub.read], default=None,
                        metavar="SCRUBS",
                        help="also time with the L2 scrubbed before each run (native CUDA rows, and torch-cuda and "
                             "CuPy through the same scrub on their stream): read (default: a read pass, L2 left clean), "
                             "write (a memset, L2 left dirty), or read,write for both")
        ap.add_argument("--seed", type=int, default=None,
                        help="random seed of the input data (default: a fresh one, recorded with every row)")
        ap.add_argument("--data", type=parse_one(Data.parse), default=Data.randn,
                        help="input data: randn (default), uniform (in [-1, 1)) or zeros; GEMMs draw less power and "
                             "clock higher on data that toggles fewer bits")
        ap.add_argument("--graph", action="store_true",
                        help="also time each torch-cuda and CuPy row captured into a CUDA graph and replayed "
                             "(`<row>@graph`, beside its eager row, under the same conditions)")
        ap.add_argument("--no-plots", action="store_true", help="skip the PNG figures (written next to the JSON)")
        ap.add_argument("--plain", choices=("one", "all", "none"), default="one",
                        help="the plain C++ cuBLAS loop check at each op's largest shape: one dtype per op (default), "
                             "every dtype, or none")
        ap.add_argument("--no-plain", action="store_true", help="same as --plain none")
        ap.add_argument("--variants", choices=("shipped", "all"), default="shipped",
                        help="shipped (default): the library's dispatcher against the vendor and frameworks; "
                             "all: also every other kernel of the op as a row named by strategy, timed in the same "
                             "paired rounds: the library's (csrc/ops.def) and the kernel lab's that never shipped "
                             "(csrc/lab.def; rows saying why unless built with -Ccmake.define.GAPBENCH_LAB=ON)")
        ap.add_argument("--no-overlap", action="store_true",
                        help="make each case's inputs and float64 reference after the previous case, not on a host "
                             "thread beside its device work (the default where every row is timed on the device "
                             "behind the release gate)")
        ap.add_argument("--processes", type=int, default=1, metavar="K",
                        help="time the short cases (rows of a few microseconds, whose medians move 1-2%% between "
                             "fresh processes) in K fresh processes in all, this one and K-1 more after it, so "
                             "gapbench compare judges them by the spread of K medians (default 1; 3 decides most "
                             "of the rows one process cannot, for about half again the run's time)")
        ap.add_argument("--streams", type=parse_one(StreamPlan.parse), default=StreamPlan.native,
                        help="which streams CUDA rows time on, one a paired round in turn: native (default: the "
                             f"native rows on their case's {STREAMS}, torch and CuPy on their default stream, the "
                             f"calibrated method), shared (every row of a round on one of the process's {STREAMS}: "
                             "2-3x the rounds, no gain in compare on 4 starts: findings/between-runs.md), one (every "
                             "row on one stream)")
        ap.add_argument("--parity", type=parse_one(Parity.parse), default=Parity.as_drawn,
                        help="CUDA rows' samples and the parity of the kernels launched on their stream before them, "
                             "which moves a cuBLAS GEMV's sample by 3-4%% on an H200: as-drawn (default: as the "
                             "process's history falls, the calibrated method), balanced (one or two empty kernels "
                             "after the release gate in turn, a round's runs a multiple of four: both parities in "
                             "every row alike; not yet calibrated for gapbench compare: findings/between-runs.md)")
        ap.add_argument("--launch-floor", action=argparse.BooleanOptionalAction, default=None,
                        help="time an empty kernel beside each short case's rows, in the same rounds on the stream "
                             "they take (default: on, off with --quick): each CUDA row records its stream's launch "
                             "floor (params.launch_floor), and gapbench compare of two such runs takes the floor's "
                             "move off the short rows, which then move less between processes (more rows `same`; "
                             "calibrated on H100s and H200s)")
        ap.add_argument("--inject-delay-us", action="append", default=[], metavar="BACKEND=US",
                        type=injection(lambda b: b is Backend.torch_cuda, "torch-cuda only (torch.cuda._sleep), "
                                       "e.g. torch-cuda=2"),
                        help="TEST ONLY: queue about US microseconds of device-side spin after every timed op of "
                             "that backend, a known slowdown for checking gapbench compare (its records say so); "
                             "never use for results")
        add_common_arguments(ap, probe=PROBE, gpu=True, quick_help="small shapes and few samples")

    @staticmethod
    def config(args) -> Config:
        cfg = Config(quick=args.quick, cold=args.cold or [], seed=args.seed, data=args.data,
                     inject_delay_us=dict(args.inject_delay_us), graph=args.graph, kernels=args.variants == "all",
                     overlap=not args.no_overlap, processes=args.processes, streams=args.streams, parity=args.parity,
                     launch_floor=Config.default_launch_floor(args.quick) if args.launch_floor is None
                     else args.launch_floor)
        if args.quick:
            cfg.samples, cfg.min_rounds, cfg.budget_s = 10, 5, 0.3
        cfg.ops = args.ops or cfg.ops
        cfg.dtypes = args.dtypes or cfg.dtypes
        if args.shapes:
            cfg.shapes = parse_shapes(args.shapes)
            cfg.ops = ops_for_shapes(cfg.ops, cfg.shapes, explicit=args.ops is not None)
        for name in ("samples", "warmup"):
            if getattr(args, name) is not None:
                setattr(cfg, name, getattr(args, name))
        if args.budget is not None:
            cfg.budget_s = args.budget
        if args.rel_hw is not None:
            cfg.rel_hw = args.rel_hw
        if cfg.processes < 1:
            raise ValueError(f"--processes {cfg.processes}: give 1 (this process only) or more")
        if cfg.samples < 1 or cfg.warmup < 0 or cfg.budget_s <= 0 or not 0 < cfg.rel_hw < 1:
            raise ValueError("--samples must be >= 1, --warmup >= 0, --budget > 0, 0 < --rel-hw < 1")
        return cfg

    def run(self, args, prog: str, argv: list[str] | None) -> int:
        from rich.markup import escape

        from gapbench.core.cli import console_for, open_run, progress_bar, write_figures

        console = console_for()
        try:
            cfg = self.config(args)
        except ValueError as e:
            raise UsageError(str(e)) from None
        cfg.run_seed()  # drawn now, so the run file's config names it
        names = args.backends or Backend.selectable()
        names, left_out = default_backends(names) if args.backends is None else (names, [])
        writer = open_run(PROBE, args.out, prog, argv, cfg.to_dict(), [b.value for b in names + left_out])
        for b in left_out:
            writer.add(Record(probe=PROBE, backend=b.value, metric="all", status=NOT_APPLICABLE,
                              device=registry.info(b).device,
                              reason="not in the default run on a machine with a GPU (minutes at the default "
                                     f"shapes): add --backends all, or name {b}"))
        live = [n for n in names if registry.info(n).available and n is not Backend.native_cpu]
        n_cases = sum(len(cfg.shapes_for(spec)) for spec in cfg.ops) * len(cfg.dtypes) * max(1, len(live))
        phases, t0 = Phases(), time.perf_counter()
        with progress_bar(console, n_cases, disable=args.no_progress) as bar:
            def on_case(text):
                bar.describe(f"blas: {text}")
                bar.advance()

            for rec in iterate(cfg, names, on_case, phases):
                writer.add(rec)
        if not args.no_plain and args.plain != "none":
            with phases("plain cuBLAS loop check"):
                writer.extend(plain_check(writer.records, cfg, every_dtype=args.plain == "all"))
        more = {}
        if cfg.processes > 1:
            with phases("short cases, more processes"), progress_bar(
                    console, cfg.processes - 1, disable=args.no_progress) as bar:
                more = more_processes(cfg, names, writer.records, lambda text: bar.describe(f"blas: {text}"),
                                      on_done=bar.advance)
        roof = tables.roofline(writer.records)
        n_suspect = tables.mark_suspects(writer.records, roof)
        writer.finish(roofline=roof, wall_s=phases.wall(time.perf_counter() - t0), **({"processes": more} if more else {}))
        print_lines(console, tables.build_tables(writer.records, roof))
        busy = tables.cpu_threads_reduced(writer.records)
        if busy:
            console.print(f"note: other processes kept {busy.busy_cores_other:.1f} of {busy.cores} CPU cores busy; "
                          f"CPU frameworks ran on {busy.threads} thread(s), so CPU rows measure a shared machine",
                          highlight=False)
        if n_suspect:
            console.print(f"[red]{n_suspect} suspect or implausible row(s)[/red]: a rate under 1% of the roofline "
                          "measured in this run (is the machine busy?) or above its ceiling without being "
                          "L2-resident (reasons in the JSON, params.suspect / params.implausible)", highlight=False)
        wall = writer.run.get("wall_s") or {}
        console.print(f"wall time {wall['total']:.1f} s: " + ", ".join(f"{k} {v:.1f} s" for k, v in wall.items()
                                                                  if k not in ("total", "parts")),
                      highlight=False, soft_wrap=True)  # one line at any width: logs grep it
        for line in ([spread_text(writer.records)] if more else []) + [
                f"[yellow]process {m['process']}[/yellow] failed: {escape(m['error'])}" for m in more.get("more", [])
                if "error" in m]:
            if line:
                console.print(line, highlight=False)
        ratios = tables.plain_ratios(writer.records)
        if ratios:
            console.print("cuBLAS from the harness vs from a plain C++ loop (time ratio, median of interleaved "
                          "rounds [95% CI]): " + ", ".join(
                              f"{op} {dt} {sh} {x:.3f}" + (f" [{lo:.3f}-{hi:.3f}]" if lo == lo else "")
                              for op, dt, sh, x, lo, hi in ratios), highlight=False)
        for r in (r for r in writer.records if r.metric == "all"):
            console.print(f"[yellow]{r.backend}[/yellow]: {r.status}: {escape(r.reason)}", highlight=False)
        if not args.no_plots:
            write_figures(console, self, writer)
        console.print(f"results: {writer.path} and {writer.csv_path}")
        return 0

    def tables(self, records):
        return tables.build_tables(records)

    def markdown(self, records):
        return tables.markdown_summary(records)

    def figures(self, records, stem, run=None):
        from gapbench.benchmarks.blas.figures import blas_figures

        return blas_figures(records, stem, (run or {}).get("roofline"))

    def report_tables(self, runs):
        return tables.report_tables(runs)

    def compare_notes(self, a, b):
        from gapbench.benchmarks.blas.states import state_note

        note = state_note(a, b)
        return [note] if note else []

    def bundle_args(self, out, quick):
        return super().bundle_args(out, quick) + ["--no-progress", "--no-plots"]


BENCHMARK = BlasBenchmark()


def main(argv: list[str] | None = None, prog: str = "python -m bench.blas") -> int:
    return BENCHMARK.main(argv, prog)
