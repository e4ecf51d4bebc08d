"""python -m bench.report: result files from any number of machines into one comparison,
Markdown and a self-contained HTML page, with the paper's published numbers beside ours.

Every number shown comes from the raw samples in the files (median with its p10-p90 spread) and
carries its machine, backend, dtype and date; published numbers are marked as published. The
overhead ladder is measured rung by rung: framework op (launch + wait) -> raw driver launch +
wait (native probe) -> kernel time on the device (queue preloaded) -> for BLAS ops, the floor
implied by the roofline measured on the same machine. `--compare A.json B.json` gives a verdict
per matching row (same, faster, slower, unclear) from the measured spreads.
Run: python -m bench.report results/*.json --out report/
"""
from __future__ import annotations

import argparse
import base64
import html
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import published as pub
from ..result import OK, Record, Run, SchemaError, atomic_write_text, load_run


# ============================================================== model of the report
@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""


def machine_of(run: Run) -> str:
    gpus = run.env.get("nvidia_smi") or []
    if gpus:
        return f"{gpus[0].get('name', '?')} (driver {gpus[0].get('driver_version', '?')})"
    return str(run.env.get("cpu") or run.env.get("machine") or "unknown machine")


def _date(run: Run) -> str:
    return str(run.run.get("started", run.env.get("time", "")))[:16].replace("T", " ")


def _started(run: Run) -> str:
    return str(run.run.get("started", run.env.get("time", "")))


def _s(x: float) -> str:
    """Four significant digits, without exponents for large values (32370, not 3.237e+04)."""
    return f"{x:.0f}" if abs(x) >= 1e4 else f"{x:.4g}"


def _spread(r: Record, scale: float = 1.0) -> str:
    s = r.summary()
    return f"{_s(s.median * scale)} [{_s(s.p10 * scale)}-{_s(s.p90 * scale)}]" + ("~" if s.noisy else "")


def _us(r: Record) -> str:
    return _spread(r, 1e6)


def _ok(r: Record) -> bool:
    return r.status == OK and bool(r.samples_s)


# ============================================================== sections
def machines_table(runs: list[Run], prices: dict[str, float] | None = None) -> Table:
    """Table 1's view of the machines in the report: memory, the peak compute measured on each
    (the best vendor GEMM of any BLAS run of that machine, per dtype) and the price the user
    entered (--price NAME=USD, matched against the device name); nothing is looked up."""
    peaks = _peaks_by_machine(runs)
    rows = []
    for run in runs:
        mem = run.env.get("memory_bytes")
        gpus = run.env.get("nvidia_smi") or []
        mach = machine_of(run)
        pk = {k: v for k, v in peaks.get(mach, {}).items() if k != "bytes_per_s"}
        peak = ", ".join(f"{k} {v / 1e12:.4g}" for k, v in sorted(pk.items())) or "-"
        price = next((f"{usd:,.0f} (entered)" for name, usd in (prices or {}).items() if name.lower() in mach.lower()), "-")
        rows.append([run.path.name, mach, str(run.env.get("cpu", "")),
                     f"{mem / 2**30:.0f} GiB" if mem else "?",
                     f"{gpus[0].get('memory.total')} MiB" if gpus else "-", peak, price,
                     _date(run) + ("" if run.run.get("finished") else " (unfinished: no finish time)"),
                     str(run.run.get("probe", "?")), str(run.env.get("git_sha_checkout") or "-")])
    return Table("Machines and runs (the paper's Table 1 view)", ["file", "device", "CPU", "host memory", "GPU memory",
                                                                   "measured peak TFLOP/s", "price USD", "started (UTC)",
                                                                   "suite", "commit"], rows,
                 note="Peak: the best vendor GEMM per dtype measured on that machine by bench.blas (none: -). "
                      "Price: as entered with --price, not looked up. An unfinished run was cut short (its "
                      "records up to then were written as it went).")


def published_table1() -> Table:
    return Table(f"Published, not measured: {pub.SOURCE} Table 1", ["device", "RAM (GB)", "fp32 TFLOPS", "launch price (USD)"],
                 [[d, str(m), str(t), str(p)] for d, m, t, p in pub.TABLE1])


def launch_tables(runs: list[Run]) -> list[Table]:
    """Table 6 and the launch rungs of the overhead ladder, microseconds."""
    rows, ladder = [], []
    for run in runs:
        recs = [r for r in run.records if r.probe == "launch"]
        if not recs:
            continue
        mach = machine_of(run)
        idx = {(r.backend, r.variant, r.metric): r for r in recs}
        for (b, v, m), r in sorted(idx.items()):
            if m != "roundtrip":
                continue
            cold = idx.get((b, v, "cold"))
            if not _ok(r):
                rows.append([mach, b, v, "-", f"{r.status}: {r.reason[:60]}", _date(run)])
                continue
            rows.append([mach, b, v, _us(cold) if cold is not None and _ok(cold) else "-", _us(r), _date(run)])
        for r in recs:  # unavailable backends are rows that say why
            if r.metric == "all" and r.status != OK:
                rows.append([mach, r.backend, "", "-", f"{r.status}: {r.reason[:80]}", _date(run)])
        # the ladder for the one-element add: framework -> raw launch -> device kernel
        for cls, native in (("cuda", "native-cuda"), ("metal", "native-metal"), ("cpu", "native-cpu")):
            raw = idx.get((native, "add1", "roundtrip")) or idx.get((native, "noop", "roundtrip"))
            dev = idx.get((native, "add1", "device_kernel"))
            for (b, v, m), r in sorted(idx.items()):
                if m != "roundtrip" or b.startswith(("native", "plain")) or not _ok(r) or raw is None or not _ok(raw):
                    continue
                if (cls == "cuda" and b not in ("torch-cuda", "cupy", "mlx-gpu")) or \
                        (cls == "metal" and b not in ("torch-mps", "mlx-gpu")) or (cls == "cpu" and not b.endswith("cpu")):
                    continue
                fw, rw = r.summary().median, raw.summary().median
                ladder.append([mach, b, _us(r), _s((fw - rw) * 1e6), _us(raw),
                               _us(dev) if dev is not None and _ok(dev) else "-", f"{fw / rw:.2f}x", _date(run)])
    out = []
    if rows:
        out.append(Table("Kernel launch (paper Table 6): cold and launch + wait, us, median [p10-p90]",
                         ["machine", "backend", "variant", "cold", "launch + wait", "date"], rows))
        out.append(Table(f"Published, not measured: {pub.SOURCE} Table 6 (converted to us)",
                         ["testbed", "cold launch", "follow-up launch"],
                         [[t, _s(c * 1e3), _s(f * 1e3)] for t, c, f in pub.TABLE6]))
    if ladder:
        out.append(Table("Overhead ladder, one-element op (us, median [p10-p90]): framework op = framework dispatch + raw launch + wait",
                         ["machine", "framework", "framework op", "framework dispatch (difference of medians)",
                          "raw launch + wait", "kernel on the device", "x raw", "date"], ladder,
                         note="Each rung is measured; 'framework dispatch' is the difference of the two measured medians beside it."))
    return out


def blas_tables(runs: list[Run]) -> list[Table]:
    """Figures 5-7 as a table: per op, dtype and shape, each backend's best rate and the ladder
    down to the roofline floor (time the op would take at the measured peak)."""
    rows = []
    by_machine: dict[str, dict] = {}  # a run without a copy or GEMM borrows its machine's roofline
    for run in runs:
        for cls, entries in (run.run.get("roofline") or {}).items():
            for k, v in entries.items():
                cur = by_machine.setdefault(machine_of(run), {}).setdefault(cls, {}).get(k)
                if cur is None or v["value"] > cur["value"]:
                    by_machine[machine_of(run)][cls][k] = v
    # A case (machine, op, dtype, shape) that several runs of one machine measured is shown from
    # the newest of them only: a later run completes or supersedes an earlier one (e.g. one cut
    # short mid-case), and two "best" rows for one case on one machine would contradict each other.
    newest: dict[tuple, str] = {}
    for run in runs:
        for r in run.records:
            if r.probe == "blas" and r.metric == "time":
                key = (machine_of(run), r.params.get("op"), r.params.get("dtype"), r.params.get("shape_text"))
                newest[key] = max(newest.get(key, ""), _started(run))
    superseded = 0
    for run in runs:
        recs = [r for r in run.records if r.probe == "blas" and r.metric == "time"]
        if not recs:
            continue
        mach = machine_of(run)
        own = run.run.get("roofline") or {}
        roof = {c: dict(by_machine.get(mach, {}).get(c, {}), **own.get(c, {})) for c in set(own) | set(by_machine.get(mach, {}))}
        groups: dict[tuple, list[Record]] = {}
        for r in recs:
            p = r.params
            groups.setdefault((p.get("op"), p.get("dtype"), p.get("shape_text")), []).append(r)
        for (op, dt, shape), rs in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
            if newest[(mach, op, dt, shape)] != _started(run):
                superseded += 1
                continue
            best: dict[str, Record] = {}
            for r in rs:
                if not _ok(r) or r.backend.startswith("plain"):
                    continue
                name = r.backend if not r.backend.startswith("native") else (
                    f"{r.backend} vendor" if not r.variant.startswith("v") else f"{r.backend} hand-written")
                if name not in best or r.summary().median < best[name].summary().median:
                    best[name] = r
            if not best:
                continue
            cls = "cuda" if any(k.startswith("native-cuda") or k.startswith(("torch-cuda", "cupy")) for k in best) else None
            floor = "-"
            any_r = next(iter(best.values()))
            if cls and roof.get(cls):
                if op == "gemm" and roof[cls].get(dt) and any_r.work.get("flops"):
                    floor = _s(any_r.work["flops"] / roof[cls][dt]["value"] * 1e6)
                elif op != "gemm" and roof[cls].get("bytes_per_s") and any_r.work.get("bytes"):
                    floor = _s(any_r.work["bytes"] / roof[cls]["bytes_per_s"]["value"] * 1e6)
            for name, r in sorted(best.items(), key=lambda kv: kv[1].summary().median):
                rate = r.rates()
                txt = (f"{rate['flops_per_s'] / 1e12:.4g} TFLOP/s" if op == "gemm" and rate.get("flops_per_s")
                       else f"{rate.get('bytes_per_s', 0) / 1e9:.4g} GB/s")
                rows.append([mach, op, dt, shape, name + (f" {r.variant}" if r.variant else ""), _spread(r, 1e6), txt, floor,
                             _date(run)])
    if not rows:
        return []
    return [Table("BLAS (paper Figures 5-7): per op, the best of each rung, us per op median [p10-p90], and the roofline floor",
                  ["machine", "op", "dtype", "shape", "backend (best variant)", "us", "rate", "roofline floor us", "date"], rows,
                  note="Roofline floor: declared bytes (or FLOPs) / the peak copy bandwidth (or vendor GEMM rate) measured in the same run, "
                       "or, where that run measured none, in another run of the same machine given to this report."
                       + (f" A case measured by several runs of one machine is shown from the newest ({superseded} older "
                          "case(s) left out)." if superseded else ""))]


def _peaks_by_machine(runs: list[Run]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for run in runs:
        for entries in (run.run.get("roofline") or {}).values():
            for k, v in entries.items():
                cur = out.setdefault(machine_of(run), {})
                cur[k] = max(cur.get(k, 0.0), v["value"])
    return out


def _launch_floor_by_machine(runs: list[Run]) -> dict[str, float]:
    """Seconds per back-to-back launch of the native null kernel (as issued), per machine."""
    out: dict[str, float] = {}
    for run in runs:
        for r in run.records:
            if r.probe == "launch" and r.backend == "native-cuda" and r.variant == "null" and r.metric == "stream_b2b" and _ok(r):
                out[machine_of(run)] = r.summary().median
    return out


def train_tables(runs: list[Run]) -> list[Table]:
    rows, energy = [], []
    peaks = _peaks_by_machine(runs)
    floors = _launch_floor_by_machine(runs)
    for run in runs:
        mach = machine_of(run)
        by: dict[str, dict[str, Record]] = {}
        for r in run.records:
            if r.probe == "train":
                by.setdefault(r.params.get("label", "?"), {})[r.metric] = r
        for label, m in by.items():
            st = m.get("step")
            if st is None:
                continue
            if not _ok(st):
                rows.append([mach, label, f"{st.status}: {st.reason[:80]}", "-", "-", "-", "-", _date(run)])
                continue
            ph = [(_spread(m[k]) if k in m and _ok(m[k]) else "-") for k in ("forward", "backward", "optimizer")]
            prec = {"fp32": "fp32", "amp-fp16": "fp16", "amp-bf16": "bf16"}.get(st.params.get("case", {}).get("precision", ""), "")
            peak = (st.params.get("roofline") or {}).get("flops_per_s") or peaks.get(mach, {}).get(prec)
            floor = _s(st.work["flops"] / peak) if peak and st.work.get("flops") else "-"
            kern = st.params.get("kernels_per_step")
            est = f"{_s(kern * floors[mach])} (estimate)" if kern and mach in floors else "-"
            ktime = st.params.get("kernel_time_per_step_s")
            rows.append([mach, label, _spread(st), *ph, floor, _s(ktime) if ktime else "-", str(kern) if kern else "-", est,
                         f"{_s(st.rates().get('items_per_s', 0))} {st.params.get('item_unit', '')}/s", _date(run)])
            e = st.params.get("energy", {})
            energy.append([mach, label, f"{e['joules_per_step']:.4g} over {e.get('steps', '?')} steps, {e.get('window_s', 0):.3g} s"
                           if e.get("status") == "ok" else f"unavailable: {e.get('reason', '')}", _date(run)])
    if not rows:
        return []
    return [Table("Training step (paper Table 4), seconds, median [p10-p90], and the roofline floor",
                  ["machine", "case", "step", "forward", "backward", "optimizer", "roofline floor", "kernels on the device",
                   "kernels/step", "launch cost", "rate", "date"], rows,
                  note="Roofline floor: the step's counted FLOPs / the peak GEMM rate for its precision measured on that machine. "
                       "Kernels/step and their summed time on the device: torch's profiler on one extra step after the timing. Launch cost is an ESTIMATE: kernels/step x "
                       "the native null kernel's back-to-back launch time measured by bench.launch on that machine."),
            Table(f"Published, not measured: {pub.SOURCE} Table 4 (GPT2-large pre-training without Hugging Face, s per pass)",
                  ["testbed", "batch", "MLX (Macs) / CUDA (A6000)", "MPS"],
                  [[t, str(b), _s(x), _s(y) if y else "-"] for t, b, x, y in pub.TABLE4]),
            Table("GPU energy per training step (paper Table 5), joules", ["machine", "case", "J/step", "date"], energy,
                  note="One counter reading over the whole timed window divided by its steps: a mean, so no per-step spread."),
            Table(f"Published, not measured: {pub.SOURCE} Table 5 (Whisper-medium, batch 4, fp32)", ["testbed", "J per iteration"],
                  [[t, _s(j)] for t, j in pub.TABLE5])]


def suite_tables(runs: list[Run]) -> list[Table]:
    rows = []
    for run in runs:
        for r in run.records:
            if r.probe != "suite":
                continue
            c = r.params.get("case", {})
            if not _ok(r):
                rows.append([machine_of(run), c.get("experiment", "?"), r.backend, c.get("mode", ""), str(c.get("batch_size", "")),
                             str(c.get("seq_len", "")), "-", f"{r.status}: {r.reason[:60]}"])
                continue
            rows.append([machine_of(run), c.get("experiment", "?") + ("" if r.metric == "step" else f" ({r.metric})"), r.backend,
                         c.get("mode", ""), str(c.get("batch_size", "")), str(c.get("seq_len", "")),
                         _s(sum(r.samples_s)), _spread(r, 1e3) + " ms"])
    if not rows:
        return []
    out = [Table("Seed suites: total seconds of the timed steps, and per step", ["machine", "experiment", "backend", "mode",
                                                                                "batch", "seq", "total s", "per step"], rows)]
    # the BERT matrix in the seed's own layout: rows batch x sequence, a column per machine
    from .suite import _dur

    cols: dict[str, dict[tuple, str]] = {}
    for run in runs:
        for r in run.records:
            c = r.params.get("case", {})
            if r.probe != "suite" or c.get("experiment") != "bert" or c.get("model") != "bert-base-cased":
                continue
            name = f"{machine_of(run)} {r.backend} (measured)"
            key = (c.get("mode"), c.get("batch_size"), c.get("seq_len"))
            cols.setdefault(name, {})[key] = _dur(sum(r.samples_s)) if _ok(r) else ("-" if r.params.get("oom") else r.status)
    if cols:
        pubcols = list(next(iter(pub.SEED_BERT.values())))
        keys = [k for k in pub.SEED_BERT if any(k in v for v in cols.values())]
        out.append(Table("BERT-base in the seed's layout: time for 100 steps (published columns are the seed's, not measured here)",
                         ["mode", "batch", "seq", *cols, *[f"{m} (published)" for m in pubcols]],
                         [[k[0], str(k[1]), str(k[2]), *[v.get(k, "") for v in cols.values()],
                           *[pub.SEED_BERT[k][m] for m in pubcols]] for k in keys],
                         note=f"Published: {pub.SEED_BERT_SOURCE}."))
    return out


# ============================================================== A/B
def _key(r: Record) -> tuple:
    p = r.params
    return (r.probe, r.backend, r.variant, r.metric, str(p.get("label") or ""), str(p.get("op") or ""),
            str(p.get("dtype") or ""), str(p.get("shape_text") or ""), str(p.get("cache") or ""))


def verdict(a: Record, b: Record) -> tuple[str, float]:
    """B against A from their samples: 'faster'/'slower' when the interquartile ranges do not
    overlap, 'same' when they overlap and the medians differ by less than the larger relative
    IQR, otherwise 'unclear'. Returns (verdict, B/A median ratio)."""
    sa, sb = a.summary(), b.summary()
    ratio = sb.median / sa.median
    if sb.p75 < sa.p25:
        return "faster", ratio
    if sb.p25 > sa.p75:
        return "slower", ratio
    tol = max(sa.iqr / sa.median, sb.iqr / sb.median)
    return ("same" if abs(ratio - 1) <= tol else "unclear"), ratio


def compare_table(a: Run, b: Run) -> Table:
    ia = {_key(r): r for r in a.records if _ok(r)}
    rows = []
    for r in b.records:
        k = _key(r)
        if k not in ia:
            continue
        if not _ok(r):
            rows.append([*map(str, k[:4]), k[4] or f"{k[5]} {k[6]} {k[7]}".strip(), "-", "-", "-", f"B {r.status}"])
            continue
        v, ratio = verdict(ia[k], r)
        rows.append([*map(str, k[:4]), k[4] or f"{k[5]} {k[6]} {k[7]}".strip(), _spread(ia[k], 1e6), _spread(r, 1e6),
                     f"{ratio:.3f}", v])
    return Table(f"A/B: B = {b.path.name} ({machine_of(b)}) against A = {a.path.name} ({machine_of(a)}), us per op",
                 ["probe", "backend", "variant", "metric", "case", "A", "B", "B/A", "verdict"], rows,
                 note="Verdict from the spreads: faster/slower when the interquartile ranges do not overlap; same when they overlap "
                      "and the medians differ by less than the larger relative IQR; unclear otherwise.")


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


def to_html(tables: list[Table], figures: list[Path]) -> str:
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
    for p in figures:  # embedded: the page is one self-contained file
        data = base64.b64encode(p.read_bytes()).decode()
        parts.append(f"<h3>{e(p.stem)}</h3><img alt='{e(p.stem)}' src='data:image/png;base64,{data}'>")
    parts.append("</body></html>")
    return "\n".join(parts)


def figures_for(runs: list[Run], out: Path) -> list[Path]:
    try:
        from .. import plots
        from .suite import suite_figures
    except ImportError:
        return []
    paths: list[Path] = []
    jobs = []
    for i, run in enumerate(runs):
        prefix = out / f"fig{i}-{run.path.stem}"
        probe = run.run.get("probe")
        if probe == "blas":
            jobs.append((run.path.name, lambda r=run, p=prefix: plots.blas_figures(r.records, p, r.run.get("roofline"))))
        elif probe == "train":
            jobs.append((run.path.name, lambda r=run, p=prefix: plots.train_figures(r.records, p)))
    suites = [r for r in runs if r.run.get("probe") == "suite"]
    if suites:
        jobs.append(("suites", lambda: suite_figures(suites, out / "suites")))
    for name, job in jobs:  # a figure that cannot be drawn is reported; the tables still come out
        try:
            paths += job()
        except Exception as e:
            print(f"warning: no figure for {name}: {type(e).__name__}: {e}", file=sys.stderr)
    return paths


def build(paths: list[str], out: Path, compare: bool = False, prices: dict[str, float] | None = None) -> tuple[Path, Path]:
    runs = [load_run(p) for p in paths]
    out.mkdir(parents=True, exist_ok=True)
    tables = [machines_table(runs, prices), published_table1()]
    if compare:
        if len(runs) != 2:
            raise SchemaError("--compare takes exactly two result files (A then B)")
        tables.append(compare_table(runs[0], runs[1]))
    tables += launch_tables(runs) + blas_tables(runs) + train_tables(runs) + suite_tables(runs)
    figs = figures_for(runs, out)
    md, page = out / "report.md", out / "report.html"
    atomic_write_text(md, to_markdown(tables, figs))
    atomic_write_text(page, to_html(tables, figs))
    return md, page


def main(argv: list[str] | None = None, prog: str = "python -m bench.report") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="gapbench result JSON files (any suites, any machines)")
    ap.add_argument("--out", default="report", help="output folder (report.md, report.html, figures)")
    ap.add_argument("--compare", action="store_true", help="also an A/B table of the two files given (A first)")
    ap.add_argument("--price", action="append", default=[], metavar="NAME=USD",
                    help="a machine's price for the Table 1 view, matched against its device name (repeatable)")
    args = ap.parse_args(argv)
    prices = {}
    for item in args.price:
        name, _, usd = item.partition("=")
        try:
            prices[name.strip()] = float(usd.replace(",", ""))
        except ValueError:
            print(f"error: --price {item!r}: use NAME=USD, e.g. --price 'H200=32000'", file=sys.stderr)
            return 2
    try:
        md, page = build(args.files, Path(args.out), args.compare, prices)
    except SchemaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"report: {md} and {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
