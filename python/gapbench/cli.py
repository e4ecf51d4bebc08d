"""Conventions shared by every gapbench command: output paths, progress, backend listing."""
from __future__ import annotations

import contextlib
from datetime import datetime
from pathlib import Path


#: the run file the current command is writing ("writer": RunWriter), for the interrupt message
#: and the nothing-measured check of gapbench.benchmark.run_cli
current_run: dict = {}


def console_for():
    """The console every command prints on: the terminal's width, or 200 columns when piped."""
    from rich.console import Console

    return Console() if Console().is_terminal else Console(width=200)


def default_out(probe: str) -> Path:
    return Path("results") / f"{probe}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"


def open_run(probe: str, out: str | None, prog: str, argv: list[str] | None, config: dict, backends: list[str]):
    """The run file of one suite invocation (JSON at `out` or results/<probe>-<time>.json, CSV
    beside it), holding the environment, the exact command and the configuration."""
    import sys

    from . import env
    from .result import RunWriter

    path = Path(out) if out else default_out(probe)
    args = argv if argv is not None else sys.argv[1:]
    writer = RunWriter(path, env=env.collect(), csv_path=path.with_suffix(".csv"),
                       run={"probe": probe, "command": " ".join([prog] + list(args)), "config": config,
                            "backends": backends})
    current_run["writer"] = writer
    return writer


class _Progress:
    def __init__(self, progress, task):
        self._p, self._t = progress, task

    def advance(self, n: int = 1) -> None:
        if self._p is not None:
            self._p.advance(self._t, n)

    def describe(self, text: str) -> None:
        if self._p is not None:
            self._p.update(self._t, description=text)


@contextlib.contextmanager
def progress_bar(console, total: int, disable: bool = False):
    """A rich progress bar on a terminal; silent when disabled or not a terminal."""
    if disable or not console.is_terminal:
        yield _Progress(None, None)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as p:
        yield _Progress(p, p.add_task("starting", total=max(total, 1)))


def list_backends(console) -> None:
    from rich.markup import escape
    from rich.table import Table

    from .registry import all_backends

    t = Table(title="gapbench backends on this machine")
    for c in ("backend", "kind", "device class", "available", "device / reason"):
        t.add_column(c)
    for b in all_backends():
        t.add_row(b.name, b.kind, b.device_class, "yes" if b.available else "no",
                  escape(str(b.device.get("name", "")) if b.available else b.reason))
    console.print(t)


def write_figures(console, bench, writer) -> None:
    """Draw a benchmark's figures beside its result JSON, then print where they are. Without
    matplotlib, say so and go on."""
    try:
        paths = bench.figures(writer.records, writer.path.with_suffix(""), writer.run)
        if paths:
            console.print("figures: " + ", ".join(str(p) for p in paths))
    except ImportError:
        console.print("figures skipped: matplotlib is not installed (pip install 'gapbench[plot]')")
