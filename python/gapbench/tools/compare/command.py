"""`gapbench compare A B [C ...]` (also `python -m bench.compare`): each later result file against
the first, row by row: the change B/A of the median time with a 95% interval (the runs' samples
and the noise model's between-run scale for the row, or the spread between fresh processes), and a
verdict same / faster / slower / can't tell beyond a minimum effect (gapbench.core.compare). The
summary leads; floors that moved and host differences follow the table. Rows whose conditions
differ are listed as not comparable, with the field; files from different devices are said to be
so, and each row is also shown as a fraction of its own machine's measured ceiling.
`--fail-if 'slower>5%'` exits 1 with one line per regressed row and its interval, for a CI gate.

    gapbench compare before.json.gz after.json.gz
    gapbench compare before.json.gz after.json.gz --fail-if 'slower>5%' --markdown cmp.md --json cmp.json
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from gapbench.core import compare as cmp
from gapbench.core.benchmark import Benchmark
from gapbench.core.cli import UsageError
from gapbench.core.bundle import load_inputs
from gapbench.core.result import SchemaError, atomic_write_text


def _benchmark_notes(probe: str, a, b) -> list[str]:
    """What the benchmark whose records these are knows moved between the two runs (Benchmark.compare_notes);
    none where this install cannot load that benchmark (an optional part missing): compare works without."""
    from gapbench import benchmarks

    try:
        bench = benchmarks.get(probe)
    except (benchmarks.UnknownBenchmark, ImportError):
        return []
    return bench.compare_notes(a, b)


def _fail_if(text: str) -> tuple[str, float]:
    try:
        return cmp.parse_fail_if(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _share(text: str, what: str, form: str) -> float:
    """A fraction (0.02) or a percentage (2%) in [0, 1), or an argparse error naming `what`."""
    try:
        v = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give {form}") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the {what} must lie in [0, 1)")
    return v


def _fraction(text: str) -> float:
    return _share(text, "minimum effect", "a fraction (0.02) or a percentage (2%)")


def _margin(text: str) -> str | float:
    """--margin: auto, none, or a percentage/fraction (0 <= m < 1)."""
    return text if text in ("auto", "none") else _share(text, "margin", "auto, none, or a percentage (5%)")


class CompareBenchmark(Benchmark):
    name = "compare"
    title = "Did it get faster or slower: rows of result files matched, with intervals and verdicts"
    measures = False

    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument("files", nargs="+",
                        help="two or more result files (.json, .json.gz), bundles or folders of them: each later one "
                             "against the first; a bundle of `gapbench run --repeat N` gives each row an interval "
                             "from the spread between its fresh processes")
        ap.add_argument("--min-effect", type=_fraction, default=cmp.MIN_EFFECT,
                        help=f"smallest change called faster or slower, and the band same lies within (default {100 * cmp.MIN_EFFECT:g}%%)")
        ap.add_argument("--widen", type=float, default=1.0,
                        help="factor on each interval's half-width for the noise between processes (default 1: "
                             "the intervals cover the noise within the runs only)")
        ap.add_argument("--margin", type=_margin, default="auto", metavar="auto|none|N%",
                        help="how one run a side is widened for the noise between runs: auto (default) the noise "
                             "model fitted on A/A runs of this GPU model, per row class "
                             "(docs/results/compare-calibration-*.md; uncalibrated devices get no verdict: use "
                             "--repeat), none (within-run noise only), or one margin for every row, e.g. 5%%; rows "
                             "with several fresh processes a side (run --repeat) use their spread")
        ap.add_argument("--fail-if", type=_fail_if, default=None, metavar="'slower>N%'",
                        help="exit 1 when a row is classified slower (or faster) by more than N%% (quote it: "
                             "'slower>5%%'; unquoted, the shell reads > as a redirection)")
        ap.add_argument("--markdown", help="also write the comparison as Markdown to this file")
        ap.add_argument("--json", help="also write the comparison as JSON to this file")

    def run(self, args, prog: str, argv: list[str] | None) -> int:
        from gapbench.core.cli import check_out_path, console_for

        if len(args.files) < 2:
            raise UsageError("give at least two result files: the first is the baseline (A)")
        if args.widen < 1:
            raise UsageError(f"--widen {args.widen}: must be >= 1")
        for flag in ("markdown", "json"):  # before any work: a path that cannot be written is one line
            if getattr(args, flag):
                check_out_path(getattr(args, flag), f"--{flag}")
        sides = []  # per argument: its runs by benchmark (several: the fresh processes of --repeat)
        for f in args.files:
            if not Path(f).exists():
                raise UsageError(f"{f}: no such file or folder (give result files or bundles written by gapbench)")
            try:
                runs = load_inputs([f])
            except (SchemaError, OSError, ValueError) as e:
                raise UsageError(f"{f}: cannot read it as a gapbench result ({str(e).splitlines()[0][:200]})") from None
            by: dict = {}
            for r in runs:
                by.setdefault(r.run.get("probe") or "?", []).append(r)
            sides.append((f, by))
        a_name, a_by = sides[0]
        for b_name, b_by in sides[1:]:
            if not a_by.keys() & b_by.keys():
                raise UsageError(f"{b_name} and {a_name} have no benchmark in common ({', '.join(sorted(b_by))} "
                                 f"against {', '.join(sorted(a_by))}): compare runs of the same benchmark")
        console = console_for()
        noise = cmp.noise_for(args.margin)
        doc, md, failed = {"baseline": a_name, "min_effect": args.min_effect, "widen": args.widen,
                           "noise": noise.note, "comparisons": []}, [], []
        for b_name, b_by in sides[1:]:
            for probe in [p for p in b_by if p in a_by]:
                a_runs, b_runs = a_by[probe], b_by[probe]
                base, other = a_runs[0], b_runs[0]
                changes = cmp.compare_groups(a_runs, b_runs, args.min_effect, args.widen, margin=noise.margin,
                                             model=noise.model)
                devices = cmp.different_devices(base, other)
                title = f"{probe}: B = {Path(b_name).name} against A = {Path(a_name).name}"
                if len(a_runs) > 1 or len(b_runs) > 1:
                    title += f" ({len(a_runs)} and {len(b_runs)} runs)"
                if devices:
                    title += f" (different devices: {cmp.device_of(base)} -> {cmp.device_of(other)})"
                n = cmp.counts(changes)
                summary = cmp.summary_line(changes, n)
                console.print(f"[bold]{title}[/bold]\n{summary}", highlight=False)
                console.print(rows_table(changes, devices, args.min_effect))
                notes = cmp.notes(base, other, changes) + _benchmark_notes(probe, base, other)
                for line in notes + [f"noise between runs: {noise.note}"]:
                    console.print(line, highlight=False, markup=False)
                md += [f"## {title}", "", summary, ""] + markdown_rows(changes, devices) + [""] + \
                      [f"- {x}" for x in notes + [f"noise between runs: {noise.note}"]] + [""]
                doc["comparisons"].append({"probe": probe, "a": a_name, "b": b_name, "different_devices": devices,
                                           "runs": [len(a_runs), len(b_runs)], "counts": n, "summary": summary,
                                           "notes": notes, "rows": [c.to_dict() for c in changes]})
                if args.fail_if is not None:
                    failed += [(Path(b_name).name, c) for c in cmp.gate(changes, args.fail_if)]
        if args.markdown:
            atomic_write_text(Path(args.markdown), f"Generated by `{_command_line()}`; do not edit by hand.\n\n"
                              + "\n".join(md) + "\n")
        if args.json:
            atomic_write_text(Path(args.json), json.dumps(doc, indent=1) + "\n")
        if failed:
            direction, size = args.fail_if
            for name, c in failed:
                print(f"{direction} by more than {100 * size:.3g}%: {cmp.key_text(c.key)}: B/A {cmp.fmt_ratio(c)} "
                      f"({name})", file=sys.stderr)
            return 1
        return 0


#: the columns of a row: what it is (each a column of its own), then the numbers
COLUMNS = ("op", "dtype", "shape", "backend", "metric", "A us", "B us", "B/A [95%]", "verdict")


def row_cells(c) -> list[str]:
    p = c.a.params or {}
    backend = c.key[1] + (f"/{c.key[2]}" if c.key[2] else "")
    verdict = c.verdict + ("*" if c.why and c.verdict != cmp.NOT_COMPARABLE else "")
    return [str(p.get("op") or p.get("label") or ""), str(p.get("dtype") or ""), str(p.get("shape_text") or ""),
            backend, c.key[3], f"{c.quantiles['A'][0] * 1e6:.4g}", f"{c.quantiles['B'][0] * 1e6:.4g}",
            cmp.fmt_ratio(c), verdict]


def _kept(changes) -> list[int]:
    """The columns some row fills (BLAS has no labels, launch no shapes), less the metric where every
    row has the same one (BLAS: time)."""
    cells = [row_cells(c) for c in changes]
    return [i for i in range(len(COLUMNS)) if i >= 5 or (any(r[i] for r in cells) and
                                                         not (i == 4 and len({r[i] for r in cells}) == 1))]


def rows_table(changes, devices: bool, min_effect: float):
    """One line a row at 100 columns: what the row is in columns, A and B medians, B/A and verdict."""
    from rich import box
    from rich.table import Table

    keep = _kept(changes)
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True,
              caption=f"B/A: median time ratio (below 1: B faster) [95% interval]; faster/slower: that interval beyond "
                      f"+-{100 * min_effect:.3g}%; same: the 90% interval within (two one-sided tests); "
                      "* the reason is in the notes, --json or --markdown")
    cells = [row_cells(c) for c in changes]
    limit = {2: 12, 3: 16}  # shape and backend give way first; the numbers and the verdict keep their width
    for i in keep:
        width = max([len(COLUMNS[i])] + [len(r[i]) for r in cells])
        t.add_column(COLUMNS[i], no_wrap=True, overflow="ellipsis", justify="right" if i >= 5 else "left",
                     min_width=min(width, limit.get(i, width)), max_width=limit.get(i))
    if devices:
        t.add_column("of ceiling A -> B", no_wrap=True)
    for c in changes:
        cells = row_cells(c)
        t.add_row(*[cells[i] for i in keep], *((_ceiling(c),) if devices else ()))
    return t


def _ceiling(c) -> str:
    return f"{100 * c.of_ceiling['A']:.0f}% -> {100 * c.of_ceiling['B']:.0f}%" if c.of_ceiling else ""


def markdown_rows(changes, devices: bool) -> list[str]:
    keep = _kept(changes)
    head = [COLUMNS[i] for i in keep] + ["why / how"] + (["of ceiling A -> B"] if devices else [])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in changes:
        cells = row_cells(c)
        out.append("| " + " | ".join([cells[i] for i in keep] + [c.why or c.note or ""]
                                     + ([_ceiling(c)] if devices else [])) + " |")
    return out


BENCHMARK = CompareBenchmark()


def main(argv: list[str] | None = None, prog: str = "gapbench compare") -> int:
    return BENCHMARK.main(argv, prog)


def _command_line() -> str:
    """The command that made this comparison, as typed (gapbench compare ..., whichever entry)."""
    words = sys.argv[1:]
    if not words or words[0] != "compare":
        words = ["compare"] + words
    return "gapbench " + shlex.join(words)
