"""The one interface every gapbench command implements, and the one way a command runs.

A Benchmark says its name and title, adds its arguments, runs (returning an exit code), and
renders records: terminal tables, Markdown and figures for one run, tables and figures across
the runs of many machines for the report. `gapbench <name>`, `python -m bench.<name>` and
`bench.report` reach benchmarks only through `gapbench.benchmarks`.

`run_cli(benchmark, argv)` is the command-line mechanism, in this one place for every command:
  exit 2   bad arguments (one line, gapbench.core.cli.ArgumentParser) or bad input found before
           any work (`UsageError`);
  exit 1   a run was asked for but nothing was measured (every case failed or was unavailable);
  exit 130 Ctrl-C (SIGINT), exit 143 SIGTERM: no traceback, one line naming the partial result
           file (the writer has written every record up to then), and the workers are gone
           (gapbench.core.worker kills their process groups on the way out);
  exit 0   otherwise.
"""
from __future__ import annotations

import argparse
import signal
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from gapbench.core import cli, gpu
from gapbench.core.cli import UsageError
from gapbench.core.result import OK, Record

EXIT_OK, EXIT_NOTHING_MEASURED, EXIT_USAGE = 0, 1, 2
EXIT_SIGINT, EXIT_SIGTERM = 128 + signal.SIGINT, 128 + signal.SIGTERM


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread so cleanup runs as for Ctrl-C."""


class Benchmark(ABC):
    #: the command name (gapbench <name>, python -m bench.<name>) and the probe of its records
    name: str = ""
    #: one line for `gapbench --help` and the argument parser
    title: str = ""
    #: whether the command writes a result file (and so must measure something to exit 0)
    measures: bool = True
    #: whether `gapbench run` runs it (a command that needs more than the common flags does not)
    bundled: bool = True

    #: the argument parser's description (default: the title)
    description: str = ""

    @abstractmethod
    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        ...

    @abstractmethod
    def run(self, args: argparse.Namespace, prog: str, argv: list[str] | None) -> int:
        """Do the work; return the exit code. Open the result file with gapbench.core.cli.open_run."""

    # ---- one run's records
    def tables(self, records: list[Record]) -> list:
        """rich renderables for the terminal."""
        return []

    def markdown(self, records: list[Record]) -> str:
        return ""

    def figures(self, records: list[Record], stem: Path, run: dict | None = None) -> list[Path]:
        """PNG files named <stem>-*.png; [] when the records have nothing to draw. `run` is the
        run section of the result file (e.g. its roofline)."""
        return []

    # ---- two runs (gapbench compare)
    def compare_notes(self, a: Any, b: Any) -> list[str]:
        """What this benchmark knows moved between two of its runs (gapbench.core.result.Run), in
        lines gapbench compare prints after its own notes; never a verdict."""
        return []

    # ---- many runs, many machines (bench.report)
    def report_tables(self, runs: list) -> list:
        """gapbench.core.reportkit.Table objects over result files (gapbench.core.result.Run) of any machines."""
        return []

    def report_figures(self, runs: list, out: Path) -> list[Path]:
        """Figures over result files: by default this benchmark's figures of each of its runs."""
        paths: list[Path] = []
        for i, run in enumerate(runs):
            if run.run.get("probe") == self.name:
                paths += self.figures(run.records, out / f"fig{i}-{result_stem(run.path)}", run.run)
        return paths

    # ---- gapbench run (one shareable bundle)
    def bundle_args(self, out: Path, quick: bool) -> list[str]:
        """The arguments `gapbench run` gives this command: its result file `out` (a compact
        .json.gz in the bundle), --quick when asked; overridden to add what keeps a bundled run
        quiet and self-contained (no progress bar, no figures: the report draws them)."""
        return ["--out", str(out)] + (["--quick"] if quick else [])

    # ---- entry point
    def parser(self, prog: str) -> argparse.ArgumentParser:
        ap = cli.ArgumentParser(prog=prog, description=self.description or self.title)
        self.add_arguments(ap)
        return ap

    def main(self, argv: list[str] | None = None, prog: str | None = None) -> int:
        return run_cli(self, argv, prog)


def result_stem(path: Path) -> str:
    """A result file's name without its .json / .json.gz suffix (figure names are built on it)."""
    return cli.result_stem(path)


def measured_something(records: list[Record]) -> bool:
    return any(r.status == OK and r.samples_s for r in records)


def _on_sigterm(signum, frame):
    raise Terminated()


def run_cli(bench: Benchmark, argv: list[str] | None = None, prog: str | None = None) -> int:
    """Run `bench` as a command; returns the exit code (see the module text)."""
    prog = prog or f"python -m bench.{bench.name}"
    try:
        args = bench.parser(prog).parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or bad arguments (2)
        return int(e.code or 0) if not isinstance(e.code, str) else EXIT_USAGE
    old_term = None
    try:
        old_term = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread (embedded use): leave SIGTERM alone
        pass
    cli.current_run.clear()
    try:
        if getattr(args, "gpu", None) is not None:  # before any framework or CUDA starts
            try:
                gpu.select(args.gpu)
            except gpu.GpuChoiceError as e:
                raise UsageError(str(e)) from None
        code = bench.run(args, prog, argv)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (KeyboardInterrupt, Terminated) as e:
        _flush_pending()
        sig = "SIGTERM" if isinstance(e, Terminated) else "Ctrl-C"
        print(f"\ninterrupted ({sig}): {_partial_line()}", file=sys.stderr, flush=True)
        return EXIT_SIGTERM if isinstance(e, Terminated) else EXIT_SIGINT
    except BaseException:
        _flush_pending()  # a crash loses no record already measured
        raise
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    _flush_pending()
    if code == EXIT_OK and bench.measures:
        w = cli.current_run.get("writer")
        if w is not None and not measured_something(w.records):
            print(f"error: nothing was measured: every case failed or was unavailable (rows saying why are in "
                  f"{w.path})", file=sys.stderr)
            return EXIT_NOTHING_MEASURED
    return code


def _flush_pending() -> None:
    """Write the records the run's file does not hold yet (RunWriter rewrites lazily)."""
    w = cli.current_run.get("writer")
    if w is not None and getattr(w, "pending", False):
        try:
            w.flush()
        except OSError as e:
            print(f"warning: could not write {w.path}: {e}", file=sys.stderr)


def _partial_line() -> str:
    w = cli.current_run.get("writer")
    if w is None:
        return "no result file was started"
    return f"partial results ({len(w.records)} record(s) so far) are in {w.path}" + (
        f" and {w.csv_path}" if w.csv_path else "")


def print_lines(console: Any, items: list) -> None:
    for t in items:
        if t is not None:
            console.print(t)
