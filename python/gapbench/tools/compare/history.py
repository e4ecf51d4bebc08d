"""`gapbench history DIR` (also `python -m bench.history DIR`): every result file in a folder, per
benchmark and device in the order the runs were made, each row's median over the runs, one PNG per
benchmark and device with a Markdown index. A row is marked at the first run where it turned
slower (gapbench.core.compare: the interval of B/A wholly above 1 + the minimum effect) against
the run before and stayed slower in every later run against that same run."""
from __future__ import annotations

import argparse
from pathlib import Path

from gapbench.tools.compare.command import _margin
from gapbench.core import compare as cmp
from gapbench.core.benchmark import Benchmark
from gapbench.core.cli import UsageError
from gapbench.core.result import OK, SchemaError, atomic_write_text, load_run


def _label(run) -> str:
    commit = str(run.env.get("source_commit") or "")[:7]
    when = str(run.run.get("started") or run.env.get("time") or "")[:16]
    return f"{when} {commit}".strip()


def series(runs: list) -> dict:
    """{row key: [median seconds per op, or None where the run lacks the row]} over `runs` in order."""
    out: dict = {}
    for i, run in enumerate(runs):
        for r in run.records:
            if r.status == OK and r.samples_s:
                out.setdefault(cmp.row_key(r), [None] * len(runs))[i] = float(r.summary().median)
    return out


def regressions(runs: list, min_effect: float = cmp.MIN_EFFECT, noise: cmp.Noise | None = None) -> dict:
    """{row key: index of the first run where the row turned slower and stayed slower}, each pair
    of runs compared as `gapbench compare` does (the shipped noise model))."""
    found: dict = {}
    noise = noise or cmp.noise_for("auto")
    for i in range(1, len(runs)):
        later = [{c.key: c.verdict for c in cmp.compare_runs(runs[i - 1], runs[j], min_effect, margin=noise.margin,
                                                             model=noise.model)}
                 for j in range(i, len(runs))]
        for key, verdict in later[0].items():
            if key in found or verdict != cmp.SLOWER:
                continue
            if all(v.get(key, cmp.SLOWER) == cmp.SLOWER for v in later[1:]):
                found[key] = i
    return found


def _plot(path: Path, title: str, labels: list[str], rows: dict, marked: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for key, vals in rows.items():
        first = next((v for v in vals if v), None)
        if not first:
            continue
        xs = [i for i, v in enumerate(vals) if v]
        ys = [vals[i] / first for i in xs]
        red = key in marked
        ax.plot(xs, ys, color="tab:red" if red else "0.7", lw=1.5 if red else 0.7, zorder=3 if red else 1)
        if red:
            ax.plot([marked[key]], [vals[marked[key]] / first], "o", color="tab:red")
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("median time / first run's")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


class HistoryBenchmark(Benchmark):
    name = "history"
    title = "Every run in a folder over time: each row's median per benchmark, regressions marked"
    measures = False

    def add_arguments(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument("folder", help="a folder of result files (.json, .json.gz), searched recursively")
        ap.add_argument("--out", default="history", help="output folder (history.md and one PNG per benchmark)")
        ap.add_argument("--min-effect", type=float, default=cmp.MIN_EFFECT, help=f"as gapbench compare (default {cmp.MIN_EFFECT:g})")
        ap.add_argument("--margin", type=_margin, default="auto", metavar="auto|none|N%",
                        help="as gapbench compare: the noise model (default), none, or one margin for every row")

    def run(self, args, prog: str, argv: list[str] | None) -> int:
        from gapbench.core.cli import check_out_path, console_for

        folder = Path(args.folder)
        if not folder.is_dir():
            raise UsageError(f"{folder}: not a folder (give the folder holding the result files)")
        files = sorted(p for p in folder.rglob("*") if p.name.endswith((".json", ".json.gz")))
        runs, skipped = [], []
        for f in files:
            try:
                runs.append(load_run(f))
            except (SchemaError, OSError, ValueError) as e:
                skipped.append(f"{f.name}: {str(e).splitlines()[0][:160]}")
        if not runs:
            raise UsageError(f"{folder}: no gapbench result file in it")
        out = check_out_path(args.out, "--out", folder=True)
        out.mkdir(parents=True, exist_ok=True)
        groups: dict = {}
        for run in runs:
            groups.setdefault((run.run.get("probe") or "?", cmp.device_of(run)), []).append(run)
        md = [f"# History of {folder}", "", "Each row's median over the runs in the order they were made; a row is "
              "marked where it turned slower and stayed slower (gapbench compare, "
              f"beyond {100 * args.min_effect:.3g}%).", ""]
        for (probe, device), rs in sorted(groups.items()):
            rs.sort(key=lambda r: str(r.run.get("started") or r.env.get("time") or ""))
            rows, marked = series(rs), regressions(rs, args.min_effect, cmp.noise_for(args.margin))
            stem = f"{probe}-{''.join(c if c.isalnum() else '-' for c in device)}".lower()
            _plot(out / f"{stem}.png", f"{probe} on {device}", [_label(r) for r in rs], rows, marked)
            md += [f"## {probe} on {device}", "", f"![{probe}]({stem}.png)", "",
                   "runs: " + ", ".join(f"{i}: {_label(r)} ({r.path.name})" for i, r in enumerate(rs)), ""]
            md += [f"- **{cmp.key_text(k)}** turned slower at run {i} ({_label(rs[i])}) and stayed slower"
                   for k, i in sorted(marked.items(), key=lambda kv: kv[1])] or ["- no row turned slower and stayed so"]
            md.append("")
        if skipped:
            md += ["Not read: " + "; ".join(skipped), ""]
        atomic_write_text(out / "history.md", "\n".join(md) + "\n")
        console_for().print(f"{len(runs)} runs, {len(groups)} benchmark(s) x device: {out / 'history.md'}"
                            + (f"; {len(skipped)} file(s) not read" if skipped else ""), highlight=False)
        return 0


BENCHMARK = HistoryBenchmark()
