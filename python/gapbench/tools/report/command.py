"""python -m bench.report: result files from any number of machines into one comparison,
Markdown and a self-contained HTML page, with the paper's published numbers beside ours.

Every number shown comes from the raw samples in the files (median with its p10-p90 spread) and
carries its machine, backend, dtype and date; published numbers are marked as published. The
overhead ladder is measured rung by rung: framework op (launch + wait) -> raw driver launch +
wait (native probe) -> kernel time on the device (queue preloaded) -> for BLAS ops, the floor
implied by the roofline measured on the same machine. `--compare A.json B.json` gives a verdict
per matching row (same, faster, slower, unclear) from the measured spreads.
Every benchmark in gapbench.benchmarks contributes its own tables and figures; this file adds the
machines, the A/B comparison and the page. Figures are PNG files beside report.md and report.html;
the HTML links them, or embeds them with --self-contained.
Run: python -m bench.report results/*.json --out report/   (a folder reads every result JSON in it)
Inputs may also be `gapbench run` bundles (folders or .tar.gz archives) from any machines; see
gapbench.core.bundle.
"""
from __future__ import annotations

import argparse
import base64
import html
import sys
from pathlib import Path

from gapbench.core import published as pub
from gapbench.core.benchmark import Benchmark
from gapbench.core.cli import UsageError
from gapbench.core.reportkit import Table, date, machine_of, peaks_by_machine, spread
from gapbench.core.bundle import load_inputs
from gapbench.core.result import Run, SchemaError, atomic_write_text


# ============================================================== sections
def machines_table(runs: list[Run], prices: dict[str, float] | None = None) -> Table:
    """Table 1's view of the machines in the report: memory, the peak compute measured on each
    (the best vendor GEMM of any BLAS run of that machine, per dtype) and the price the user
    entered (--price NAME=USD, matched against the device name); nothing is looked up."""
    peaks = peaks_by_machine(runs)
    rows = []
    for run in runs:
        mem = run.env.get("memory_bytes")
        gpus = run.env.get("nvidia_smi") or []
        mach = machine_of(run)
        pk = {k: v for k, v in peaks.get(mach, {}).items() if not k.endswith("bytes_per_s")}  # GEMM peaks only
        peak = ", ".join(f"{k} {v / 1e12:.4g}" for k, v in sorted(pk.items())) or "-"
        price = next((f"{usd:,.0f} (entered)" for name, usd in (prices or {}).items() if name.lower() in mach.lower()), "-")
        rows.append([_shown(run), mach, str(run.env.get("cpu", "")),
                     f"{mem / 2**30:.0f} GiB" if mem else "?",
                     f"{gpus[0].get('memory.total')} MiB" if gpus else "-", peak, price,
                     date(run) + ("" if run.run.get("finished") else " (unfinished: no finish time)"),
                     str(run.run.get("probe", "?")), _source(run.env)])
    return Table("Machines and runs (the paper's Table 1 view)", ["file", "device", "CPU", "host memory", "GPU memory",
                                                                   "measured peak TFLOP/s", "price USD", "started (UTC)",
                                                                   "suite", "source (commit, hash, dirty)"], rows,
                 note="Peak: the best vendor GEMM per dtype measured on that machine by bench.blas (none: -). "
                      "Price: as entered with --price, not looked up. An unfinished run was cut short (its "
                      "records up to then were written as it went).")


def conditions_table(runs: list[Run]) -> Table:
    """What each run's rows were measured under (gapbench.core.conditions): every distinct set of
    compared conditions with how many rows share it, so a reader sees what can be compared."""
    from collections import Counter

    from gapbench.core.conditions import COMPARED, Conditions

    rows = []
    for run in runs:
        sets = Counter()
        for r in run.records:
            c = Conditions.of(r).compared()
            sets[", ".join(f"{k} {v}" for k, v in c.items() if v is not None) or "not recorded"] += 1
        for text, n in sets.most_common():
            rows.append([_shown(run), str(run.run.get("probe", "?")), text, str(n)])
    return Table("Conditions of the rows (compared between arms: " + ", ".join(COMPARED) + ")",
                 ["file", "suite", "conditions", "rows"], rows,
                 note="A ratio or a compare verdict is drawn only between rows of the same conditions; 'not "
                      "recorded': rows of files written before records carried them, or rows without timing.")


def gpus_tables(runs: list[Run]) -> list[Table]:
    """The GPUs of one host side by side (gapbench.core.pergpu): for each benchmark run on two or
    more GPUs of one machine start (`gapbench run --gpus all`), each GPU's fraction of the node's
    best per family of rows, a GPU outside the others' spread marked."""
    from gapbench.core import pergpu

    out = []
    for c in pergpu.comparisons(runs):
        marks = c.marks()
        out.append(Table(f"GPUs of one host: {c.probe}{' --quick' if c.quick else ''} ({c.device})",
                         ["family", "rows", *c.gpus, "tolerance"], pergpu.rows_of(c),
                         note="Each GPU's geometric mean over the family's rows of (the fastest GPU's median / its "
                              "own): 1.000 is the best GPU on every row. ! marks a GPU outside the other GPUs' range "
                              "by more than the tolerance (1.96 x the rows' median between-run scale, at least "
                              f"{100 * pergpu.MIN_TOL:g}%). " + ("Marked: " + "; ".join(marks) if marks else
                                                                  "No GPU is outside the others' spread.")
                              + (f" {len(c.left_out)} row(s) left out: their conditions differ between GPUs."
                                 if c.left_out else "")))
    return out


def _source(env: dict) -> str:
    """The code a run measured: source commit and content hash of the built sources (12 digits
    each), and whether the sources differed from the commit; older files carry only the commit of
    the checkout they ran in."""
    if env.get("source_hash"):
        return (f"{str(env.get('source_commit', '?'))[:12]} {str(env['source_hash'])[:12]}"
                + (" dirty" if env.get("dirty") else ""))
    old = env.get("git_sha_checkout")
    return f"{old} (checkout, no content hash)" if old else "-"


def _shown(run: Run) -> str:
    """A run's file as the report names it: with its bundle's folder (or archive) for a bundled run."""
    return f"{run.path.parent.name}/{run.path.name}" if run.env.get("host") else run.path.name


def published_table1() -> Table:
    return Table(f"Published, not measured: {pub.SOURCE} Table 1", ["device", "RAM (GB)", "fp32 TFLOPS", "launch price (USD)"],
                 [[d, str(m), str(t), str(p)] for d, m, t, p in pub.TABLE1])


# ============================================================== A/B
def compare_table(a: Run, b: Run) -> Table:
    """`gapbench compare A B` (gapbench.core.compare) as a report table: the same matching,
    intervals and verdicts."""
    from gapbench.core import compare as cmp

    rows = [[*c.key[:4], c.key[4], f"{c.quantiles['A'][0] * 1e6:.4g}", f"{c.quantiles['B'][0] * 1e6:.4g}",
             cmp.fmt_ratio(c), c.verdict if not c.why else f"{c.verdict} ({c.why})"]
            for c in cmp.compare_runs(a, b, model=cmp.noise_for("auto").model)]
    return Table(f"A/B: B = {b.path.name} ({machine_of(b)}) against A = {a.path.name} ({machine_of(a)}), us per op",
                 ["probe", "backend", "variant", "metric", "case", "A p50", "B p50", "B/A [95%]", "verdict"], rows,
                 note="gapbench compare: B/A is the median time ratio with its 95% bootstrap interval; same / faster / "
                      f"slower beyond +-{100 * cmp.MIN_EFFECT:.0f}%, can't tell where the interval straddles a bound; "
                      "rows whose conditions differ are not comparable.")


# ============================================================== rendering
def to_markdown(tables: list[Table], figures: list[Path]) -> str:
    out = ["# gapbench report", "", "Medians with [p10-p90]; `~` marks a noisy row (IQR > 10% of the median). "
           "Tables titled *Published* are transcribed from their source, not measured here.", ""]
    for t in tables:
        out += [f"## {t.title}", ""]
        if t.note:
            out += [t.note, ""]
        out.append("| " + " | ".join(t.columns) + " |")
        out.append("|" + "---|" * len(t.columns))
        out += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in t.rows]
        out.append("")
    if figures:
        out += ["## Figures", ""] + [f"![{p.stem}]({p.name})" for p in figures] + [""]
    return "\n".join(out)


def to_html(tables: list[Table], figures: list[Path], self_contained: bool = False) -> str:
    """The page; figures are linked by their file name (they sit beside it), or embedded as
    base64 when self_contained (one file to mail, several MB larger)."""
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>gapbench report</title><style>",
             "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}th{background:#eee}"
             "h2.pub{color:#555}img{max-width:900px;display:block;margin:1em 0}</style></head><body>",
             "<h1>gapbench report</h1><p>Medians with [p10-p90]; ~ marks a noisy row. Tables titled <i>Published</i> are "
             "transcribed from their source, not measured here.</p>"]
    for t in tables:
        cls = " class='pub'" if t.title.startswith("Published") else ""
        parts.append(f"<h2{cls}>{e(t.title)}</h2>")
        if t.note:
            parts.append(f"<p>{e(t.note)}</p>")
        parts.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in t.columns) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in t.rows]
        parts.append("</table>")
    for p in figures:
        src = f"data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}" if self_contained else p.name
        parts.append(f"<h3>{e(p.stem)}</h3><img alt='{e(p.stem)}' src='{e(src)}'>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _benchmarks() -> list[Benchmark]:
    from gapbench import benchmarks

    return [b for b in benchmarks.all_benchmarks() if b.name != "report"]


def figures_for(runs: list[Run], out: Path, step=None) -> list[Path]:
    """Every benchmark's figures of the runs given, as PNG files in `out`. A figure that cannot
    be drawn is reported; the tables still come out."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return []
    paths: list[Path] = []
    for bench in _benchmarks():
        if step:
            step(f"figures: {bench.name}")
        try:
            paths += bench.report_figures(runs, out)
        except Exception as e:
            print(f"warning: no {bench.name} figure: {type(e).__name__}: {e}", file=sys.stderr)
    return paths


def build(paths: list[str], out: Path, compare: bool = False, prices: dict[str, float] | None = None,
          self_contained: bool = False, step=None, plots: bool = True) -> tuple[Path, Path]:
    """The report of the result files, bundles and bundle archives `paths` (gapbench.core.bundle) in the
    folder `out`; `step(text)` is told each step as it starts (the inputs read, a benchmark's
    tables or figures). `plots=False`: the tables only (no figure drawn)."""
    step = step or (lambda text: None)
    runs = load_inputs(paths)
    for run in runs:
        step(f"read {run.path}")
    out.mkdir(parents=True, exist_ok=True)
    tables = [machines_table(runs, prices), conditions_table(runs), *gpus_tables(runs), published_table1()]
    if compare:
        if len(runs) != 2:
            raise SchemaError("--compare takes exactly two result files (A then B)")
        tables.append(compare_table(runs[0], runs[1]))
    for bench in _benchmarks():
        step(f"tables: {bench.name}")
        tables += bench.report_tables(runs)
    figs = figures_for(runs, out, step) if plots else []
    md, page = out / "report.md", out / "report.html"
    atomic_write_text(md, to_markdown(tables, figs))
    atomic_write_text(page, to_html(tables, figs, self_contained))
    return md, page


class ReportBenchmark(Benchmark):
    name = "report"
    title = "Result files from any machines into one report: Markdown, HTML and PNG figures"
    measures = False

    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument("files", nargs="+", help="result files (.json, .json.gz), folders of them, `gapbench run` bundles (folders or "
                        ".tar.gz) - any suites, any machines")
        ap.add_argument("--out", default="report", help="output folder (report.md, report.html, figures)")
        ap.add_argument("--compare", action="store_true",
                        help="also an A/B table of the two files given (A first): gapbench compare A B")
        ap.add_argument("--price", action="append", default=[], metavar="NAME=USD",
                        help="a machine's price for the Table 1 view, matched against its device name (repeatable)")
        ap.add_argument("--self-contained", action="store_true",
                        help="embed the figures in report.html (base64) instead of linking the PNG files beside it")
        ap.add_argument("--no-plots", action="store_true", help="the tables only: draw no figure (faster)")

    def run(self, args, prog: str, argv: list[str] | None) -> int:
        prices = {}
        for item in args.price:
            name, _, usd = item.partition("=")
            try:
                prices[name.strip()] = float(usd.replace(",", ""))
            except ValueError:
                raise UsageError(f"--price {item!r}: use NAME=USD, e.g. --price 'H200=32000'") from None
        from gapbench.core.cli import check_out_path, console_for, progress_bar

        out = check_out_path(args.out, "--out", folder=True)
        missing = [f for f in args.files if not Path(f).exists()]
        if missing:
            raise UsageError(f"{missing[0]}: no such file or folder (give result files, bundles or folders of them)")
        files = list(args.files)
        console = console_for()
        import tempfile

        from gapbench.core.bundle import expand_inputs

        try:
            with tempfile.TemporaryDirectory(prefix="gapbench-report-count-") as tmp:
                n_inputs = len(expand_inputs(files, Path(tmp)))
        except SchemaError as e:
            raise UsageError(str(e)) from None
        n_steps = n_inputs + (1 if args.no_plots else 2) * len(_benchmarks())
        with progress_bar(console, n_steps) as bar:
            def step(text):
                bar.describe(f"report: {text}")
                bar.advance()

            try:
                md, page = build([str(f) for f in files], out, args.compare, prices, args.self_contained, step,
                                 plots=not args.no_plots)
            except SchemaError as e:
                raise UsageError(str(e)) from None
        print(f"report: {md} and {page}")
        return 0


BENCHMARK = ReportBenchmark()


def main(argv: list[str] | None = None, prog: str = "python -m bench.report") -> int:
    return BENCHMARK.main(argv, prog)
