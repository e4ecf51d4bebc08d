"""Conventions shared by every gapbench command: the argument parser and the flags every
benchmark shares (--out, --quick, --no-progress, --gpu), output paths, progress."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path


class UsageError(ValueError):
    """Bad input found before any work started: one line saying what to do (exit 2)."""


#: the run file the current command is writing ("writer": RunWriter), for the interrupt message
#: and the nothing-measured check of gapbench.core.benchmark.run_cli
current_run: dict = {}


#: the width of piped output when COLUMNS does not say
PIPE_WIDTH = 100


def console_for():
    """The console every command prints on: the terminal's width; when piped, COLUMNS if set,
    else PIPE_WIDTH columns. The tables fit whatever width this is (gapbench.core.termtable)."""
    from rich.console import Console

    c = Console()
    if c.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return c
    return Console(width=PIPE_WIDTH)


class ArgumentParser(argparse.ArgumentParser):
    """The parser of every gapbench command: a bad argument is one line on stderr,
    "error: <message> (see --help)", and exit 2 (argparse's own prints a usage block first)."""

    def error(self, message: str):
        self.exit(2, f"error: {' '.join(str(message).split())} (see --help)\n")


def gpu_index(text: str) -> int:
    """--gpu INDEX: a GPU index, 0 or more (which GPUs exist is checked when the command runs)."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a GPU index: give 0, 1, ... (the GPUs this process sees)")
    return int(text)


def add_gpu_argument(ap) -> None:
    """--gpu INDEX, the same in every command that measures on one GPU (gapbench.core.gpu.select)."""
    ap.add_argument("--gpu", type=gpu_index, default=None, metavar="INDEX",
                    help="measure on this GPU: an index among the GPUs this process sees (CUDA's numbering, "
                         "after CUDA_VISIBLE_DEVICES); default: the first")


#: the help of the flags every measuring benchmark shares (add_common_arguments); {probe} is its name
OUT_HELP = ("result file (default results/{probe}-<time>.json; a name ending .json.gz is written compact); "
            "a CSV of the same name (.csv) is written beside it")
QUICK_HELP = "a fast smoke run (CI)"
NO_PROGRESS_HELP = "no progress display: no live bar or status lines (for logs and CI)"


def add_common_arguments(ap, *, probe: str, out: bool = True, quick: bool = True, progress: bool = True,
                         gpu: bool = False, quick_help: str | None = None, out_help: str | None = None) -> None:
    """The flags that mean the same in every benchmark, defined here once: --out (the result file,
    OUT_HELP), --quick (QUICK_HELP, then `quick_help`: what it means for this benchmark),
    --no-progress (NO_PROGRESS_HELP) and, for a command that measures on one GPU, --gpu
    (add_gpu_argument). `out_help` replaces OUT_HELP where --out is not one result file
    (gapbench run: the bundle's folder)."""
    if out:
        ap.add_argument("--out", default=None, metavar="PATH", help=out_help or OUT_HELP.format(probe=probe))
    if quick:
        ap.add_argument("--quick", action="store_true",
                        help=QUICK_HELP + (f"; {quick_help}" if quick_help else ""))
    if progress:
        ap.add_argument("--no-progress", action="store_true", help=NO_PROGRESS_HELP)
    if gpu:
        add_gpu_argument(ap)


def result_stem(path: str | os.PathLike) -> str:
    """A result file's name without its .json / .json.gz suffix (a.json.gz -> a; other names: the stem)."""
    name = Path(path).name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return Path(path).stem


def csv_path_for(path: str | os.PathLike) -> Path:
    """The CSV written beside a result file: a.json -> a.csv, a.json.gz -> a.csv (never the
    result file itself: a result named x.csv gets x.csv.csv)."""
    p = Path(path)
    csv = p.with_name(result_stem(p) + ".csv")
    return csv if csv != p else p.with_name(p.name + ".csv")


def check_out_path(path: str | os.PathLike, flag: str = "--out", folder: bool = False) -> Path:
    """`path` as an output file (or, with `folder`, an output folder) that can be written, or a
    UsageError saying in one line why not: it is a directory (a file), a file stands where a
    folder of its path should be, or the nearest existing folder is not writable (tried with a
    temporary file, removed at once). No folder is created here."""

    p = Path(path).expanduser()
    if folder:
        if p.exists() and not p.is_dir():
            raise UsageError(f"{flag} {path}: is a file; give a folder for the output")
    elif p.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; give a file name, e.g. {flag} {p / 'result.json'}")
    elif p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"{flag} {path}: the file exists and is not writable")
    parent = p if folder else p.parent
    for up in [parent, *parent.parents]:
        if up.exists():
            if not up.is_dir():
                raise UsageError(f"{flag} {path}: {up} is a file, not a folder; choose another path")
            try:  # a real write, not os.access: root, ACLs and read-only mounts answer truly
                with tempfile.TemporaryFile(dir=up):
                    pass
            except OSError as e:
                raise UsageError(f"{flag} {path}: cannot write in {up} ({e.strerror or e}); choose another path") from None
            break
    return p


def default_out(probe: str) -> Path:
    return Path("results") / f"{probe}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"


def open_run(probe: str, out: str | None, prog: str, argv: list[str] | None, config: dict, backends: list[str]):
    """The run file of one suite invocation (JSON at `out` or results/<probe>-<time>.json, CSV
    beside it: csv_path_for), holding the environment, the exact command and the configuration. A path that
    cannot be written is a UsageError (exit 2) before any work."""
    from gapbench.core import env
    from gapbench.core.result import RunWriter

    path = check_out_path(out or default_out(probe))
    csv_path = check_out_path(csv_path_for(path))
    args = argv if argv is not None else sys.argv[1:]
    try:
        writer = RunWriter(path, env=env.collect(), csv_path=csv_path,
                           run={"probe": probe, "command": " ".join([prog] + list(args)), "config": config,
                                "backends": backends})
    except OSError as e:
        raise UsageError(f"cannot write the result file {path}: {e.strerror or e}; choose another --out") from None
    current_run["writer"] = writer
    return writer


class _Progress:
    """What a command reports as it goes: `describe` names the step under way, `advance` counts
    steps done. On a terminal a rich bar; piped, one flushed line per step (`lines`); else silent."""

    def __init__(self, progress=None, task=None, lines=None, total: int = 0):
        self._p, self._t = progress, task
        self._lines, self._total, self._done, self._text = lines, total, 0, ""
        self._t0 = time.monotonic()

    def advance(self, n: int = 1) -> None:
        if self._p is not None:
            self._p.advance(self._t, n)
        self._done += n
        if self._lines is not None:
            progress_line(self._lines, f"[{self._done}/{self._total}] {self._text}", time.monotonic() - self._t0)

    def describe(self, text: str) -> None:
        self._text = text
        if self._p is not None:
            self._p.update(self._t, description=text)


def progress_line(console, text: str, elapsed_s: float | None = None) -> None:
    """One progress line, flushed at once: what a piped command prints as it goes (a log that
    grows with each case, not one that stays empty until the end)."""
    tail = f" ({elapsed_s:.1f} s)" if elapsed_s is not None else ""
    console.print(text + tail, markup=False, highlight=False, soft_wrap=True)
    with contextlib.suppress(AttributeError, OSError, ValueError):
        console.file.flush()


@contextlib.contextmanager
def progress_bar(console, total: int, disable: bool = False):
    """A rich progress bar on a terminal; one line per step when piped; silent when disabled."""
    if disable:
        yield _Progress()
        return
    if not console.is_terminal:
        yield _Progress(lines=console, total=total)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as p:
        yield _Progress(p, p.add_task("starting", total=max(total, 1)))


def write_figures(console, bench, writer) -> None:
    """Draw a benchmark's figures beside its result JSON, then print where they are. Without
    matplotlib, say so and go on."""
    try:
        paths = bench.figures(writer.records, writer.path.with_suffix(""), writer.run)
        if paths:
            console.print("figures: " + ", ".join(str(p) for p in paths))
    except ImportError:
        console.print("figures skipped: matplotlib is not installed (pip install 'gapbench[plot]')")
