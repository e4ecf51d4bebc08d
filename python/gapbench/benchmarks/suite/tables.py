"""Seed suites, rendering: the seeds' own CSV layout, the terminal table, the figure, and the
report's tables over many machines."""
from __future__ import annotations

import re
from pathlib import Path

from gapbench.core import published as pub
from gapbench.core import reportkit as rk
from gapbench.core.result import OK, Record, atomic_write_text
from gapbench.benchmarks.suite.config import EXPERIMENTS, PROBE


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", s).strip("_").lower()


def seed_csvs(records: list[Record], root: Path, device_name: str) -> list[Path]:
    """One CSV per experiment and backend: results/<suite>/<device>_<dataset>_<model>_<backend>.csv,
    a row per case: batch, sequence, mode, steps, total seconds, median step, samples/s or '-'."""
    groups: dict[tuple, list[Record]] = {}
    for r in records:
        if r.probe != PROBE or r.metric not in ("step", "generate"):
            continue
        c = r.params["case"]
        groups.setdefault((r.params.get("suite", "?"), c["experiment"], c["model"], r.backend), []).append(r)
    paths = []
    for (suite, ex, model, backend), rs in groups.items():
        dataset = EXPERIMENTS[ex][1]
        name = Path(model).stem if model.endswith(".gguf") else Path(model).name  # a file's name, not its type
        p = root / _slug(suite) / f"{_slug(device_name)}_{dataset}_{_slug(name)}_{backend}.csv"
        lines = ["batch_size,sequence_length,mode,steps,total_time_s,median_step_s,items_per_s,status"]
        for r in rs:
            c = r.params["case"]
            if r.status == OK:
                s = r.summary()
                lines.append(f"{c['batch_size']},{c['seq_len']},{c['mode']},{len(r.samples_s)},{sum(r.samples_s):.4f},"
                             f"{s.median:.6f},{r.rates().get('items_per_s', 0):.2f},ok")
            else:
                lines.append(f"{c['batch_size']},{c['seq_len']},{c['mode']},-,-,-,-,{'oom' if r.params.get('oom') else r.status}")
        atomic_write_text(p, "\n".join(lines) + "\n")
        paths.append(p)
    return paths


def _dur(s: float) -> str:
    """Seconds as the seed tables write them: 43s, 2m 29s, 1h 21m 2s."""
    if s < 10:
        return f"{s:.3g}s"
    s = int(round(s))
    h, m, sec = s // 3600, (s % 3600) // 60, s % 60
    return f"{h}h {m}m {sec}s" if h else f"{m}m {sec}s" if m else f"{sec}s"


def build_table(records: list[Record]):
    from gapbench.core.termtable import Col, FitTable

    t = FitTable("seed suites: total time of the steps (as the seeds' tables), median [p10-p90] per step, rate",
                 [Col("experiment", text=True), Col("backend"), Col("mode", 2), Col("batch"), Col("seq"),
                  Col("steps", 1), Col("total", 1), Col("step ms"), Col("rate")])
    for r in records:
        if r.probe != PROBE:
            continue
        c = r.params.get("case", {})
        seq = str(c.get("seq_len")) if c.get("experiment") in ("bert", "distilbert-imdb", "tf-distilbert-imdb") else ""
        if r.status != OK:
            t.add_note(f"{c.get('experiment', '?')} {r.backend} {c.get('mode', '')} batch {c.get('batch_size', '')}"
                       + (f" seq {seq}" if seq else "") + f": {r.status}: {r.reason[:300]}", style="red")
            continue
        s = r.summary()
        unit = "tokens/s" if r.metric in ("generate", "prefill") else "samples/s"
        t.add_row(c["experiment"] + (f" ({r.metric})" if r.metric != "step" else ""), r.backend, c.get("mode", ""),
                  str(c["batch_size"]), seq, str(len(r.samples_s)), _dur(sum(r.samples_s)),
                  f"{s.median * 1e3:.4g} [{s.p10 * 1e3:.4g}-{s.p90 * 1e3:.4g}]" + ("~" if s.noisy else ""),
                  f"{r.rates().get('items_per_s', 0):.4g} {unit}")
    return t


def suite_figures(runs: list, out_prefix: Path) -> list[Path]:
    """Time per step against batch size, one line per machine (result file) and mode, one PNG per
    experiment and sequence length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[tuple, dict[str, list]] = {}
    for run in runs:
        mach = (run.env.get("nvidia_smi") or [{}])[0].get("name") or run.env.get("cpu", "?")
        for r in run.records:
            if r.probe != PROBE or r.status != OK or r.metric != "step":
                continue
            c = r.params["case"]
            key = (c["experiment"], c["seq_len"] if c["experiment"] in ("bert", "distilbert-imdb", "tf-distilbert-imdb") else None)
            series.setdefault(key, {}).setdefault(f"{mach} {r.backend} {c['mode']}", []).append(
                (c["batch_size"], r.summary().median))
    paths = []
    for (ex, seq), lines in series.items():
        fig, ax = plt.subplots(figsize=(6.5, 4.5))
        for name, pts in sorted(lines.items()):
            pts.sort()
            ax.plot([b for b, _ in pts], [v for _, v in pts], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size")
        ax.set_ylabel("seconds per step (median)")
        ax.set_title(ex + (f", sequence {seq}" if seq else ""))
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = out_prefix.with_name(out_prefix.name + f"-{ex}" + (f"-s{seq}" if seq else "") + ".png")
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths



# ============================================================== report (many machines)
def report_tables(runs: list) -> list[rk.Table]:
    rows = []
    for run in runs:
        for r in run.records:
            if r.probe != "suite":
                continue
            c = r.params.get("case", {})
            if not rk.ok(r):
                rows.append([rk.machine_of(run), c.get("experiment", "?"), r.backend, c.get("mode", ""), str(c.get("batch_size", "")),
                             str(c.get("seq_len", "")), "-", f"{r.status}: {r.reason[:60]}"])
                continue
            rows.append([rk.machine_of(run), c.get("experiment", "?") + ("" if r.metric == "step" else f" ({r.metric})"), r.backend,
                         c.get("mode", ""), str(c.get("batch_size", "")), str(c.get("seq_len", "")),
                         rk.num(sum(r.samples_s)), rk.spread(r, 1e3) + " ms"])
    if not rows:
        return []
    out = [rk.Table("Seed suites: total seconds of the timed steps, and per step", ["machine", "experiment", "backend", "mode",
                                                                                "batch", "seq", "total s", "per step"], rows)]
    # the BERT matrix in the seed's own layout: rows batch x sequence, a column per machine
    cols: dict[str, dict[tuple, str]] = {}
    for run in runs:
        for r in run.records:
            c = r.params.get("case", {})
            if r.probe != "suite" or c.get("experiment") != "bert" or c.get("model") != "bert-base-cased":
                continue
            name = f"{rk.machine_of(run)} {r.backend} (measured)"
            key = (c.get("mode"), c.get("batch_size"), c.get("seq_len"))
            cols.setdefault(name, {})[key] = _dur(sum(r.samples_s)) if rk.ok(r) else ("-" if r.params.get("oom") else r.status)
    if cols:
        pubcols = list(next(iter(pub.SEED_BERT.values())))
        keys = [k for k in pub.SEED_BERT if any(k in v for v in cols.values())]
        out.append(rk.Table("BERT-base in the seed's layout: time for 100 steps (published columns are the seed's, not measured here)",
                         ["mode", "batch", "seq", *cols, *[f"{m} (published)" for m in pubcols]],
                         [[k[0], str(k[1]), str(k[2]), *[v.get(k, "") for v in cols.values()],
                           *[pub.SEED_BERT[k][m] for m in pubcols]] for k in keys],
                         note=f"Published: {pub.SEED_BERT_SOURCE}."))
    return out
