"""`gapbench compare A B [C ...]` (also `python -m bench.compare`): each later result file against
the first, row by row: the change B/A of the median time with a 95% interval from the raw samples,
and a verdict same / faster / slower / ambiguous beyond a minimum effect (gapbench.core.compare).
Rows whose conditions differ are listed as not comparable, with the field; files from different
devices are said to be so, and each row is also shown as a fraction of its own machine's measured
ceiling. `--fail-if slower>5%` exits 1 with one line per regressed row, for a CI gate.

    gapbench compare before.json.gz after.json.gz
    gapbench compare before.json.gz after.json.gz --fail-if slower>5% --markdown cmp.md --json cmp.json
"""
from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from pathlib import Path

from gapbench.core import compare as cmp
from gapbench.core.benchmark import Benchmark
from gapbench.core.cli import UsageError
from gapbench.core.bundle import load_inputs
from gapbench.core.result import SchemaError, atomic_write_text


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
                        help="smallest change called faster or slower (default 2%%)")
        ap.add_argument("--widen", type=float, default=1.0,
                        help="factor on each interval's half-width for the noise between processes (default 1: "
                             "the intervals cover the noise within the runs only)")
        ap.add_argument("--margin", type=_margin, default="auto", metavar="auto|none|N%",
                        help="between-run margin added to a single run's interval (log scale, each side): auto "
                             "(default) the benchmark's margin calibrated from A/A runs on the lent GPUs "
                             "(docs/results/compare-calibration-*.md), none (within-run noise only), or a percentage; "
                             "rows with several fresh processes a side (run --repeat) use their spread instead")
        ap.add_argument("--fail-if", type=_fail_if, default=None, metavar="slower>N%",
                        help="exit 1 when a row is classified slower (or faster) by more than N%%")
        ap.add_argument("--markdown", help="also write the comparison as Markdown to this file")
        ap.add_argument("--json", help="also write the comparison as JSON to this file")

    def run(self, args, prog: str, argv: list[str] | None) -> int:
        from rich.table import Table

        from gapbench.core.cli import console_for

        if len(args.files) < 2:
            raise UsageError("give at least two result files: the first is the baseline (A)")
        if args.widen < 1:
            raise UsageError(f"--widen {args.widen}: must be >= 1")
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
        console = console_for()
        a_name, a_by = sides[0]
        doc, md, failed = {"baseline": a_name, "min_effect": args.min_effect, "widen": args.widen,
                           "comparisons": []}, [], []
        for b_name, b_by in sides[1:]:
            for probe in [p for p in b_by if p in a_by]:
                a_runs, b_runs = a_by[probe], b_by[probe]
                base, other = a_runs[0], b_runs[0]
                margin, margin_note = cmp.margin_for(probe, args.margin)
                changes = cmp.compare_groups(a_runs, b_runs, args.min_effect, args.widen, margin=margin)
                devices = cmp.different_devices(base, other)
                title = f"{probe}: B = {Path(b_name).name} against A = {Path(a_name).name}"
                if len(a_runs) > 1 or len(b_runs) > 1:
                    title += f" ({len(a_runs)} and {len(b_runs)} runs)"
                if devices:
                    title += f" (different devices: {cmp.device_of(base)} -> {cmp.device_of(other)})"
                t = Table(title=title, caption="B/A: median time ratio (below 1: B faster) [95% bootstrap interval: "
                          "within the runs, or between their processes where each side has several]; verdict beyond "
                          f"+-{100 * args.min_effect:.3g}%")
                cols = ("row", "A p50 us", "B p50 us", "B/A [95%]", "covers", "verdict")
                for col in cols + (("of ceiling A -> B",) if devices else ()):
                    t.add_column(col)
                md += [f"## {title}", "", "| " + " | ".join(cols) + " |" + (" of ceiling A -> B |" if devices else ""),
                       "|" + "---|" * len(cols) + ("---|" if devices else "")]
                for c in changes:
                    verdict = c.verdict if not c.why else f"{c.verdict} ({c.why})"
                    ceil = (f"{100 * c.of_ceiling['A']:.0f}% -> {100 * c.of_ceiling['B']:.0f}%" if c.of_ceiling else "",)
                    cells = (cmp.key_text(c.key), f"{c.quantiles['A'][0] * 1e6:.4g}", f"{c.quantiles['B'][0] * 1e6:.4g}",
                             cmp.fmt_ratio(c), c.covers, verdict) + (ceil if devices else ())
                    t.add_row(*cells)
                    md.append("| " + " | ".join(cells) + " |")
                n = cmp.counts(changes)
                summary = ", ".join(f"{v} {k}" for k, v in n.items())
                console.print(t)
                console.print(f"{probe}, {Path(b_name).name}: {summary}", highlight=False)
                md += ["", summary, ""]
                shown = ", ".join(f"{k if k != '*' else 'rows'} +-{100 * math.expm1(v):.3g}%" for k, v in margin.items())
                if any(margin.values()):
                    console.print(f"{probe}: a single run's interval is widened by the between-run margin ({shown}; "
                                  f"{margin_note})", highlight=False)
                md += [f"Between-run margin: {shown} ({margin_note})", ""]
                doc["comparisons"].append({"probe": probe, "a": a_name, "b": b_name, "different_devices": devices,
                                           "margin_log": margin, "margin_note": margin_note,
                                           "runs": [len(a_runs), len(b_runs)], "counts": n,
                                           "rows": [c.to_dict() for c in changes]})
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


BENCHMARK = CompareBenchmark()


def main(argv: list[str] | None = None, prog: str = "gapbench compare") -> int:
    return BENCHMARK.main(argv, prog)


def _command_line() -> str:
    """The command that made this comparison, as typed (gapbench compare ..., whichever entry)."""
    words = sys.argv[1:]
    if not words or words[0] != "compare":
        words = ["compare"] + words
    return "gapbench " + shlex.join(words)
