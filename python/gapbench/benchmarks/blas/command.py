"""python -m bench.blas: the command (arguments, the run, what it prints and draws). The
measurement is gapbench.benchmarks.blas.run, the rendering gapbench.benchmarks.blas.tables."""
from __future__ import annotations

import argparse
import time
from dataclasses import asdict

from gapbench.backends import registry as bk
from gapbench.core.benchmark import Benchmark, UsageError, print_lines
from gapbench.ops.spec import shape_text
from gapbench.core.dtypes import DTYPES
from gapbench.core.result import NOT_APPLICABLE, Record
from gapbench.benchmarks.blas.run import COLD_MODES, OP_NAMES, PROBE, Config, Phases, iterate, parse_shapes, selected_specs, shapes_for
from gapbench.benchmarks.blas.plain import plain_check
from gapbench.benchmarks.blas.run import __doc__ as _BLAS_DOC
from gapbench.benchmarks.blas.tables import build_tables, mark_suspects, markdown_summary, plain_ratios, report_tables, roofline


FORMS = {"copy": "N", "gemv": "MxK", "vjp_dx": "MxK", "vjp_dw": "MxK", "gemm": "BxMxNxK"}


def default_backends(names: list[str]) -> tuple[list[str], list[str]]:
    """The backends a run without --backends times, and the CPU ones it leaves out: where a GPU
    backend is available, the CPU backends are left out (at the default shapes their rows take
    minutes, and the question on such a machine is the GPU's); elsewhere all of them run."""
    gpu = [b for b in names if bk.device_class_of(b) != "cpu" and bk.info(b).available]
    if not gpu:
        return names, []
    cpu = [b for b in names if bk.device_class_of(b) == "cpu" and bk.info(b).available]
    return [b for b in names if b not in cpu], cpu


def ops_for_shapes(ops: list[str], shapes: list[dict], explicit: bool) -> list[str]:
    """The ops --shapes runs. Each op takes the shapes of its own form (N, MxK, BxMxNxK); a shape
    no selected op takes, or (with --ops given) an op no shape fits, is an error, not a silent
    no-op. Without --ops, the ops are those the shapes fit."""
    specs = selected_specs(ops)
    forms = {spec.name: set(spec.shapes(True)[0]) for spec in specs}
    unused = [shape_text(s) for s in shapes if set(s) not in forms.values()]
    if unused:
        raise ValueError(f"--shapes {', '.join(unused)}: no selected op takes this form; "
                         + "; ".join(f"{n} takes {FORMS[n]}" for n in forms))
    if not explicit:
        return [spec.name for spec in specs if any(set(s) == forms[spec.name] for s in shapes)]
    empty = [n for n, f in forms.items() if not any(set(s) == f for s in shapes)]
    if empty:
        raise ValueError(f"--shapes gives no shape for {', '.join(empty)}: "
                         + "; ".join(f"{n} takes {FORMS[n]}" for n in empty))
    return ops


def _split(text: str | None, allowed, what: str) -> list[str] | None:
    if text is None:
        return None
    items = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in items if s not in allowed]
    if bad:
        raise ValueError(f"unknown {what} {', '.join(bad)}; choose from {', '.join(allowed)}")
    return items


class BlasBenchmark(Benchmark):
    name = PROBE
    title = "GEMM/GEMV/VJP/copy throughput against the roofline measured here (paper Figures 5-7)"
    description = _BLAS_DOC.split("\n\n")[0]

    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--ops", help=f"comma list of {', '.join(OP_NAMES)} (default: all; vjp = vjp_dx and vjp_dw)")
        ap.add_argument("--dtypes", help=f"comma list of {', '.join(DTYPES)} (default: all)")
        ap.add_argument("--shapes", help="comma list: N (copy), MxK (gemv, vjp), BxMxNxK (gemm); default: each op's sweep")
        ap.add_argument("--backends", help="comma list, or all (default: all, but on a machine with a GPU only the GPU "
                        f"backends: CPU rows at the default shapes take minutes). Known: {', '.join(bk.ALL)}")
        ap.add_argument("--quick", action="store_true", help="small shapes and few samples (CI)")
        ap.add_argument("--samples", type=int, default=None,
                        help="most paired rounds per case and cache mode (default 1000; quick 10)")
        ap.add_argument("--warmup", type=int, default=None, help="untimed runs per arm first (default 2)")
        ap.add_argument("--budget", type=float, default=None,
                        help="wall seconds per case and cache mode for the paired rounds (default 1; quick 0.3)")
        ap.add_argument("--rel-hw", type=float, default=None,
                        help="stop once every median's and ratio's 95%% interval half-width is within this "
                             "fraction (default 0.01)")
        ap.add_argument("--cold", nargs="?", const="read", default=None, metavar="SCRUBS",
                        help="also time native CUDA kernels with L2 scrubbed before each run: read (default: a read "
                             "pass, L2 left clean), write (a memset, L2 left dirty), or read,write for both")
        ap.add_argument("--seed", type=int, default=None, help="random seed (default: fresh data every run)")
        ap.add_argument("--out", help="result JSON (default results/blas-<time>.json); CSV written beside it")
        ap.add_argument("--no-plots", action="store_true", help="skip the PNG figures (written next to the JSON)")
        ap.add_argument("--plain", choices=("one", "all", "none"), default="one",
                        help="the plain C++ cuBLAS loop check at each op's largest shape: one dtype per op (default), "
                             "every dtype, or none")
        ap.add_argument("--no-plain", action="store_true", help="same as --plain none")
        ap.add_argument("--variants", choices=("shipped", "all"), default="shipped",
                        help="shipped (default): the library's dispatcher against the vendor and frameworks; "
                             "all: also every numbered variant of the kernel lab (cuda/lab/, built with "
                             "-Ccmake.define.GAPBENCH_LAB=ON), each verified and paired against cuBLAS")
        ap.add_argument("--no-progress", action="store_true")

    @staticmethod
    def config(args) -> Config:
        cfg = Config(quick=args.quick, cold=_split(args.cold, list(COLD_MODES), "--cold scrub") or [], seed=args.seed)
        if args.quick:
            cfg.samples, cfg.min_rounds, cfg.budget_s = 10, 5, 0.3
        cfg.ops = _split(args.ops, OP_NAMES, "op") or cfg.ops
        cfg.dtypes = _split(args.dtypes, list(DTYPES), "dtype") or cfg.dtypes
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
        if cfg.samples < 1 or cfg.warmup < 0 or cfg.budget_s <= 0 or not 0 < cfg.rel_hw < 1:
            raise ValueError("--samples must be >= 1, --warmup >= 0, --budget > 0, 0 < --rel-hw < 1")
        return cfg

    def run(self, args, prog: str, argv: list[str] | None) -> int:
        from rich.markup import escape

        from gapbench.core.cli import console_for, open_run, progress_bar, write_figures

        console = console_for()
        try:
            cfg = self.config(args)
            names = bk.resolve(args.backends)
        except ValueError as e:
            console.print(f"[red]error:[/red] {e}")
            return 2
        lab_ops = []
        if args.variants == "all":
            from gapbench.benchmarks.blas import lab

            lab_ops = [spec.name for spec in selected_specs(cfg.ops)]
            try:
                for op in lab_ops:
                    lab.find_binary(op)
            except lab.LabError as e:
                raise UsageError(f"--variants all needs the kernel lab: {e}") from e
        names, left_out = default_backends(names) if args.backends is None else (names, [])
        writer = open_run(PROBE, args.out, prog, argv, asdict(cfg), names + left_out)
        for b in left_out:
            writer.add(Record(probe=PROBE, backend=b, metric="all", status=NOT_APPLICABLE, device=bk.info(b).device,
                              reason="not in the default run on a machine with a GPU (minutes at the default "
                                     f"shapes): add --backends all, or name {b}"))
        n_cases = (sum(len(shapes_for(spec, cfg)) for spec in selected_specs(cfg.ops)) * len(cfg.dtypes)
                   * max(1, len([n for n in names if bk.info(n).available and n != "native-cpu"])))
        phases, t0 = Phases(), time.perf_counter()
        with progress_bar(console, n_cases, disable=args.no_progress) as bar:
            def on_case(text):
                bar.describe(f"blas: {text}")
                bar.advance()

            for rec in iterate(cfg, names, on_case, phases):
                writer.add(rec)
        with phases("lab variants"):
            for op in lab_ops:
                writer.extend(lab_records(op, cfg, console))
        if not args.no_plain and args.plain != "none":
            with phases("plain cuBLAS loop check"):
                writer.extend(plain_check(writer.records, cfg, every_dtype=args.plain == "all"))
        roof = roofline(writer.records)
        n_suspect = mark_suspects(writer.records, roof)
        wall = {k: round(v, 2) for k, v in phases.items() if v >= 0.005}
        total = time.perf_counter() - t0
        wall["setup and other"] = round(total - sum(phases.values()), 2)
        wall["total"] = round(total, 2)
        writer.finish(roofline=roof, wall_s=wall)
        print_lines(console, build_tables(writer.records, roof))
        busy = next((r.params["cpu_threads"] for r in writer.records
                     if r.params.get("cpu_threads", {}).get("reduced")), None)
        if busy:
            console.print(f"note: other processes kept {busy['busy_cores_other']:.1f} of {busy['cores']} CPU cores busy; CPU "
                          f"frameworks ran on {busy['threads']} thread(s), so CPU rows measure a shared machine",
                          highlight=False)
        if n_suspect:
            console.print(f"[red]{n_suspect} suspect row(s)[/red]: a rate under 1% of the roofline measured in this run; "
                          "is the machine busy? (reasons in the JSON, params.suspect)", highlight=False)
        console.print(f"wall time {wall['total']:.1f} s: " + ", ".join(f"{k} {v:.1f} s" for k, v in wall.items()
                                                                  if k != "total"), highlight=False)
        ratios = plain_ratios(writer.records)
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
        return build_tables(records)

    def markdown(self, records):
        return markdown_summary(records)

    def figures(self, records, stem, run=None):
        from gapbench.benchmarks.blas.figures import blas_figures

        return blas_figures(records, stem, (run or {}).get("roofline"))

    def report_tables(self, runs):
        return report_tables(runs)

    def bundle_args(self, out, quick):
        return super().bundle_args(out, quick) + ["--no-progress", "--no-plots"]


def lab_records(op: str, cfg: Config, console) -> list:
    """Every numbered variant of `op` from the kernel lab's own binary (verified and paired
    against cuBLAS there), as rows of this run; a lab that cannot run here is one row saying why."""
    from gapbench.benchmarks.blas import lab
    from gapbench.core.result import ERROR, UNAVAILABLE, Record

    spec = next(s for s in selected_specs([op]))
    shapes = ",".join("x".join(str(sh[d]) for d in ("batch", "m", "n", "k") if d in sh) for sh in shapes_for(spec, cfg))
    args = ["--variants", "all", "--dtypes", ",".join(cfg.dtypes), "--cold", (cfg.cold or ["read"])[0]]
    if shapes:
        args += ["--shapes", shapes]
    console.print(f"lab: {op} {' '.join(args)}", highlight=False)
    try:
        return lab.run(op, args).records
    except lab.LabError as e:
        status = UNAVAILABLE if e.kind == "no_device" else ERROR
        return [Record(probe=PROBE, backend="native-cuda", variant=f"lab-{op}", metric="all", status=status,
                       reason=f"kernel lab ({e.kind}): {e.detail}"[:500])]


BENCHMARK = BlasBenchmark()


def main(argv: list[str] | None = None, prog: str = "python -m bench.blas") -> int:
    return BENCHMARK.main(argv, prog)
