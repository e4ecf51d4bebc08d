"""BLAS benchmark, rendering: the roofline measured in a run, the terminal tables, the Markdown
summary, and the report's table over many machines."""
from __future__ import annotations


from gapbench.backends import registry as bk
from gapbench.core import reportkit as rk
from gapbench.benchmarks.blas.measure import converged_mark, ratio_text
from gapbench.core.result import OK, Record

#: Dense datasheet peaks (NVIDIA SXM datasheets): HBM bytes/s and FLOP/s per dtype. Shown beside
#: the measured roofline, never in place of it.
DATASHEET = {
    "H200": {"bytes_per_s": 4.8e12, "fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12},
    "H100 80GB HBM3": {"bytes_per_s": 3.35e12, "fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12},
}


# --cold scrub -> (native cache code, metric, the `cache` param written with the samples);


def plain_ratios(records: list[Record]) -> list[tuple[str, str, str, float, float, float]]:
    """(op, dtype, shape, ratio, lo, hi) for each plain-checked vendor row: the harness's time over
    the plain loop's, the median of per-round ratios of the interleaved rounds with its 95%
    interval (gapbench.core.plaincheck.plain_ratio: infinite bounds where too few rounds give one;
    older files without round medians give the ratio of the two medians and NaN bounds)."""
    from gapbench.core.plaincheck import plain_ratio

    idx = {(r.backend, r.params.get("op"), r.params.get("dtype"), r.params.get("shape_text")): r
           for r in records if r.status == OK and r.variant == "cublas" and r.metric == "time"}
    out = []
    for (b, op, dt, sh), p in idx.items():
        if b == "plain-cuda":
            ratio, lo, hi = plain_ratio(p, idx.get(("native-cuda", op, dt, sh)))
            if ratio == ratio:  # not NaN
                out.append((op, dt, sh, ratio, lo, hi))
    return out


# ============================================================== roofline and table
def roofline(records: list[Record]) -> dict:
    """Per device class: peak bandwidth (the best copy of the run, in bytes read + written per
    second) and peak compute per dtype (the best GEMM of the run), both measured here. The best
    rates come from the largest sizes; the record each came from is named."""
    out: dict = {}
    for r in records:
        if r.status != OK or r.metric != "time" or r.params.get("op") not in ("copy", "gemm"):
            continue
        if bk.parse(r.backend).family == "plain":  # a check of the harness, not another implementation
            continue
        if r.params["op"] == "copy":
            key, rate = "bytes_per_s", r.rates().get("bytes_per_s", 0.0)
        else:
            key = r.params.get("precision", r.params["dtype"])
            rate = r.rates().get("flops_per_s", 0.0)
        cls = bk.device_class_of(r.backend)
        cur = out.setdefault(cls, {}).get(key)
        if cur is None or rate > cur["value"]:
            out[cls][key] = {"value": rate, "from": f"{r.backend}/{r.variant} {r.params['dtype']} {r.params['shape_text']}"}
    return out


def _datasheet(records: list[Record]) -> dict:
    for r in records:
        name = str(r.device.get("name", ""))
        for key, sheet in DATASHEET.items():
            if key in name:
                return sheet
    return {}


#: a rate below this fraction of the roofline measured in the same run is implausible ...
SUSPECT_FRACTION = 0.01
#: ... unless the op is this short: below it an op may be bound by launch or call overhead
SUSPECT_MIN_S = 100e-6


def _roof_key(r: Record) -> tuple[str, str]:
    """(roofline entry, rate) a row is compared with: GEMM with the best GEMM of its precision,
    every other op with the copy bandwidth of its device class."""
    if r.params.get("op") == "gemm":
        return r.params.get("precision", r.params.get("dtype", "")), "flops_per_s"
    return "bytes_per_s", "bytes_per_s"


def suspect(r: Record, roof: dict) -> str:
    """Why an ok row's rate is implausible ('' when it is not): below SUSPECT_FRACTION of the
    roofline of its device class measured in the same run, for an op longer than SUSPECT_MIN_S.
    Such a row timed something else too (a descheduled thread, a busy machine)."""
    if r.status != OK or r.metric != "time" or not r.params.get("op"):
        return ""
    key, rate_key = _roof_key(r)
    peak = roof.get(bk.device_class_of(r.backend), {}).get(key, {}).get("value")
    rate = r.rates().get(rate_key, 0.0)
    med = r.summary().median
    if not peak or not rate or med < SUSPECT_MIN_S or rate >= SUSPECT_FRACTION * peak:
        return ""
    return (f"rate {rate:.3g} {rate_key.replace('_per_s', '')}/s is {100 * rate / peak:.2g}% of the roofline "
            f"{peak:.3g} measured in this run ({roof[bk.device_class_of(r.backend)][key]['from']}): implausible, "
            "likely a busy or oversubscribed machine; re-run")


def mark_suspects(records: list[Record], roof: dict) -> int:
    """Write each implausible row's reason into its params ("suspect"); returns how many."""
    n = 0
    for r in records:
        why = suspect(r, roof)
        if why:
            r.params["suspect"] = why
            n += 1
    return n


def native_kind(r: Record) -> str:
    """What a native row is: the library's dispatcher, a hand-written variant (the numbered ones of
    result files from before the library/lab split, and the lab's), or the vendor library."""
    v = r.variant
    if v == "gapbench":
        return "gapbench (dispatcher)"
    if v.startswith("lab-v") or (v[:1] == "v" and v[1:].isdigit()):
        return "hand-written"
    return "vendor"


def build_tables(records: list[Record], roof: dict | None = None):
    from gapbench.core.termtable import Col, FitTable

    roof = roofline(records) if roof is None else roof
    sheet = _datasheet(records)
    tables = []
    ops = list(dict.fromkeys(r.params.get("op") for r in records if r.params.get("op")))
    for op in ops:
        unit = "TFLOP/s" if op == "gemm" else "GB/s"
        t = FitTable(f"{op}: median per run, rate, % of the roofline measured here (and of the datasheet)",
                     [Col("shape"), Col("dtype"), Col("backend"), Col("variant", 2), Col("median us", right=True),
                      Col("95% CI us", 2), Col("speed vs vendor [95% CI]", 1), Col(unit, right=True),
                      Col("% roof", 1, right=True), Col("% sheet", 3, right=True), Col("check")],
                     caption="Speed vs vendor: the vendor's time / this row's, median of interleaved per-round "
                             "ratios, its 95% interval and verdict. * stopped at its budget before its interval "
                             "reached the target. ~ noisy (IQR > 10% of median). suspect: under 1% of the "
                             "roofline measured in this run (the reason is in the JSON).")
        for r in (r for r in records if r.params.get("op") == op):
            base = [r.params["shape_text"], r.params["dtype"], r.backend, r.variant]
            if r.status != OK:
                t.add_note(f"{' '.join(base)}: {r.status}: {r.reason[:300]}", style="yellow")
                continue
            s = r.summary()
            rates = r.rates()
            val = rates.get("flops_per_s" if op == "gemm" else "bytes_per_s", 0.0)
            key = _roof_key(r)[0]
            peak = roof.get(bk.device_class_of(r.backend), {}).get(key, {}).get("value")
            pr = f"{100 * val / peak:.0f}%" if peak else ""
            ps = f"{100 * val / sheet[key]:.0f}%" if sheet.get(key) and bk.device_class_of(r.backend) == "cuda" else ""
            noisy = "~" if s.noisy else ""
            bad = r.params.get("suspect") or suspect(r, roof)
            lo_hi = r.params.get("stop", {}).get("median_ci_s")
            ci = (f"{lo_hi[0] * 1e6:.4g}-{lo_hi[1] * 1e6:.4g}" if lo_hi and None not in lo_hi
                  else f"{s.p10 * 1e6:.4g}-{s.p90 * 1e6:.4g} (p10-p90)")
            t.add_row(*base, f"{s.median * 1e6:.4g}{noisy}{converged_mark(r)}", ci, ratio_text(r),
                      f"{val / (1e12 if op == 'gemm' else 1e9):.4g}", pr, ps,
                      "suspect" if bad else ("ok" if r.verified else ""), style="red" if bad else "")
        tables.append(t)
    return tables


def markdown_summary(records: list[Record], shapes: list[str] | None = None) -> str:
    """One Markdown row per op x dtype x shape: the best hand-written variant, the vendor library
    and each framework, as % of the measured bandwidth roofline (copy, gemv, vjp) or TFLOP/s
    (gemm), generated from result records (for READMEs and issues)."""
    roof = roofline(records)
    cols = ["gapbench (dispatcher)", "vendor", "torch", "cupy", "mlx"]
    lines = ["| op | dtype | shape | unit | " + " | ".join(cols) + " |", "|" + "---|" * (4 + len(cols))]
    groups: dict = {}
    for r in records:
        if r.status != OK or r.metric != "time" or not r.params.get("op"):
            continue
        if shapes and r.params["shape_text"] not in shapes:
            continue
        groups.setdefault((r.params["op"], r.params["dtype"], r.params["shape_text"]), []).append(r)
    for (op, dtype, shape), rs in groups.items():
        def value(r):
            if op == "gemm":
                return r.rates().get("flops_per_s", 0.0) / 1e12
            peak = roof.get(bk.device_class_of(r.backend), {}).get("bytes_per_s", {}).get("value")
            return 100 * r.rates().get("bytes_per_s", 0.0) / peak if peak else 0.0

        def fmt(r):
            return f"{value(r):.0f}" if op != "gemm" else f"{value(r):.3g}"

        cells = []
        hand = [r for r in rs if bk.parse(r.backend).is_native and r.variant == "gapbench"]
        best = max(hand, key=value, default=None)
        cells.append(f"{fmt(best)} ({best.params.get('strategy', best.variant)})" if best else "")
        vendor = [r for r in rs if bk.parse(r.backend).is_native and r.variant != "gapbench"]
        cells.append(", ".join(f"{fmt(r)} ({r.variant})" for r in vendor))
        for fam in ("torch", "cupy", "mlx"):
            fr = [r for r in rs if bk.parse(r.backend).family == fam]
            cells.append(", ".join(f"{fmt(r)}" + (" (tf32)" if r.params.get("precision") == "tf32" else "")
                                   for r in fr))
        unit = "TFLOP/s" if op == "gemm" else "% of copy BW"
        lines.append(f"| {op} | {dtype} | {shape} | {unit} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ============================================================== report (many machines)
def report_tables(runs: list) -> list[rk.Table]:
    """Figures 5-7 as a table: per op, dtype and shape, each backend's best rate and the ladder
    down to the roofline floor (time the op would take at the measured peak)."""
    rows = []
    by_machine: dict[str, dict] = {}  # a run without a copy or GEMM borrows its machine's roofline
    for run in runs:
        for cls, entries in (run.run.get("roofline") or {}).items():
            for k, v in entries.items():
                cur = by_machine.setdefault(rk.machine_of(run), {}).setdefault(cls, {}).get(k)
                if cur is None or v["value"] > cur["value"]:
                    by_machine[rk.machine_of(run)][cls][k] = v
    # A case (machine, op, dtype, shape) that several runs of one machine measured is shown from
    # the newest of them only: a later run completes or supersedes an earlier one (e.g. one cut
    # short mid-case), and two "best" rows for one case on one machine would contradict each other.
    newest: dict[tuple, str] = {}
    for run in runs:
        for r in run.records:
            if r.probe == "blas" and r.metric == "time":
                key = (rk.machine_of(run), r.params.get("op"), r.params.get("dtype"), r.params.get("shape_text"))
                newest[key] = max(newest.get(key, ""), rk.started(run))
    superseded = 0
    for run in runs:
        recs = [r for r in run.records if r.probe == "blas" and r.metric == "time"]
        if not recs:
            continue
        mach = rk.machine_of(run)
        own = run.run.get("roofline") or {}
        roof = {c: dict(by_machine.get(mach, {}).get(c, {}), **own.get(c, {})) for c in set(own) | set(by_machine.get(mach, {}))}
        groups: dict[tuple, list[Record]] = {}
        for r in recs:
            p = r.params
            groups.setdefault((p.get("op"), p.get("dtype"), p.get("shape_text")), []).append(r)
        for (op, dt, shape), rs in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
            if newest[(mach, op, dt, shape)] != rk.started(run):
                superseded += 1
                continue
            best: dict[str, Record] = {}
            for r in rs:
                if not rk.ok(r) or bk.parse(r.backend).family == "plain":
                    continue
                name = r.backend if not bk.parse(r.backend).is_native else f"{r.backend} {native_kind(r)}"
                if name not in best or r.summary().median < best[name].summary().median:
                    best[name] = r
            if not best:
                continue
            cls = "cuda" if any(bk.parse(r.backend).classes == ("cuda",) for r in best.values()) else None
            floor = "-"
            any_r = next(iter(best.values()))
            if cls and roof.get(cls):
                if op == "gemm" and roof[cls].get(dt) and any_r.work.get("flops"):
                    floor = rk.num(any_r.work["flops"] / roof[cls][dt]["value"] * 1e6)
                elif op != "gemm" and roof[cls].get("bytes_per_s") and any_r.work.get("bytes"):
                    floor = rk.num(any_r.work["bytes"] / roof[cls]["bytes_per_s"]["value"] * 1e6)
            for name, r in sorted(best.items(), key=lambda kv: kv[1].summary().median):
                rate = r.rates()
                txt = (f"{rate['flops_per_s'] / 1e12:.4g} TFLOP/s" if op == "gemm" and rate.get("flops_per_s")
                       else f"{rate.get('bytes_per_s', 0) / 1e9:.4g} GB/s")
                rows.append([mach, op, dt, shape, name + (f" {r.variant}" if r.variant else ""), rk.spread(r, 1e6), txt, floor,
                             rk.date(run)])
    if not rows:
        return []
    return [rk.Table("BLAS (paper Figures 5-7): per op, the best of each rung, us per op median [p10-p90], and the roofline floor",
                  ["machine", "op", "dtype", "shape", "backend (best variant)", "us", "rate", "roofline floor us", "date"], rows,
                  note="Roofline floor: declared bytes (or FLOPs) / the peak copy bandwidth (or vendor GEMM rate) measured in the same run, "
                       "or, where that run measured none, in another run of the same machine given to this report."
                       + (f" A case measured by several runs of one machine is shown from the newest ({superseded} older "
                          "case(s) left out)." if superseded else ""))]
