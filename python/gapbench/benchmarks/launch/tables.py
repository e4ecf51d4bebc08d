"""Launch benchmark, rendering: the terminal table, its Markdown, and the report's tables over
many machines."""
from __future__ import annotations

from gapbench.benchmarks.launch.config import PHASES, WARM_METRICS
from gapbench.benchmarks.launch.params import LaunchParams, Pairing
from gapbench.core import published as pub
from gapbench.core import reportkit as rk
from gapbench.core.names import Backend, DeviceClass
from gapbench.core.result import ERROR, NOT_APPLICABLE, OK, UNAVAILABLE, Record


# ============================================================== table
def _us(x: float) -> str:
    us = x * 1e6
    return f"{us:.3g}" if us < 100 else f"{us:.0f}"


def _cell(rec: Record | None, with_range: bool = False) -> str:
    if rec is None:
        return ""
    if rec.status != OK:
        return "n/a" if rec.status == NOT_APPLICABLE else rec.status
    s = rec.summary()
    txt = _us(s.median)
    if with_range and s.n > 1:
        txt += f" [{_us(s.min)}-{_us(s.max)}]"
    if s.noisy:
        txt += "~"
    return txt


def _x(v: float) -> str:
    return f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}" if abs(v) < 100 else f"{v:.0f}"


def paired_text(p: Pairing | None) -> str:
    """A paired ratio as `1.42x [1.40-1.45]` (median of per-round ratios, 95% interval); "" when
    there is none (not paired, or the pairing failed: the record's params say why)."""
    if p is None or p.x_floor is None:
        return ""
    if p.perturbed:
        return f"{_x(p.x_standalone)}x alone (paired perturbed)" if p.x_standalone else "perturbed by pairing"
    lo, hi = p.lo, p.hi
    return f"{_x(p.x_floor)}x [{_x(lo) if lo is not None else '0'}-{_x(hi) if hi is not None else 'inf'}]"


def overhead(records: list[Record], backend: str, metric: str, rec: Record | None) -> str:
    """The xfloor cell: the framework's time over its native floor's, from the rounds paired with
    the floor inside the framework's own processes (params["paired"]); empty when there are none,
    never a ratio of medians from different processes."""
    if rec is None or rec.status != OK:
        return ""
    return paired_text(LaunchParams.of(rec).paired)


def build_table(records: list[Record], title: str = "Launch latency (us): median, cold as median [min-max]"):
    from gapbench.core.termtable import Col, FitTable

    t = FitTable(title, [Col("backend"), Col("variant"), Col("context", 2), Col("cold"), Col("1st warm", 3),
                         Col("submit/op", 2), Col("launch+sync"), Col("b2b/op", 1), Col("kernel/op", 1),
                         Col("graph/node", 3), Col("xfloor sync", 1), Col("xfloor b2b", 2), Col("xfloor kernel", 2)],
                 caption="~ noisy (IQR > 10% of median). xfloor: framework time / native floor of the same device "
                         "(add1; CPU: binding floor), median of per-round ratios of rounds interleaved in the "
                         "framework's own processes [95% interval]; 'alone (paired perturbed)': an arm ran at another speed "
                         "in the pairing than alone, beyond both intervals, so the ratio is of the standalone medians "
                         "(unpaired, no interval; what moved is in the JSON). Full samples and spread in the JSON.")
    by_key = {(r.backend, r.variant, r.metric): r for r in records}
    rows = list(dict.fromkeys((r.backend, r.variant) for r in records))
    for backend, variant in rows:
        got = {m: by_key.get((backend, variant, m)) for m in PHASES + WARM_METRICS + ("all", "warm")}
        if got["all"] is not None:
            continue  # listed by unavailable_table
        if variant == "(errors)" or (got["cold"] and got["cold"].status == ERROR):
            t.add_note(f"{backend} {variant or '-'}: error: {got['cold'].reason}", style="red")
            continue
        if all(v is None for v in got.values()):
            continue
        t.add_row(
            backend, variant, _cell(got["context"]) if got["context"] else ("import " + _cell(got["import"]) if got["import"] else ""),
            _cell(got["cold"], with_range=True), _cell(got["first_warm"]), _cell(got["submit"]),
            _cell(got["roundtrip"]), _cell(got["stream_b2b"]), _cell(got["device_kernel"]), _cell(got["graph_node"]),
            overhead(records, backend, "roundtrip", got["roundtrip"]),
            overhead(records, backend, "stream_b2b", got["stream_b2b"]),
            overhead(records, backend, "device_kernel", got["device_kernel"]),
        )
        if got["warm"] is not None and got["warm"].status == ERROR:
            t.add_note(f"{backend} {variant}: warm measurements lost: {got['warm'].reason}", style="red")
    return t


def markdown_table(records: list[Record]) -> str:
    """The terminal table as Markdown (for READMEs and issues), generated from result records."""
    head = ["backend", "variant", "context", "cold [min-max]", "1st warm", "submit/op", "launch+sync", "b2b/op",
            "kernel/op", "graph/node", "xfloor sync", "xfloor b2b", "xfloor kernel"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by_key = {(r.backend, r.variant, r.metric): r for r in records}
    for backend, variant in dict.fromkeys((r.backend, r.variant) for r in records):
        got = {m: by_key.get((backend, variant, m)) for m in PHASES + WARM_METRICS}
        if all(v is None or v.status == ERROR for v in got.values()):
            continue
        ctx = _cell(got["context"]) if got["context"] else ("import " + _cell(got["import"]) if got["import"] else "")
        cells = [backend, variant, ctx, _cell(got["cold"], True), _cell(got["first_warm"]), _cell(got["submit"]),
                 _cell(got["roundtrip"]), _cell(got["stream_b2b"]), _cell(got["device_kernel"]),
                 _cell(got["graph_node"]), overhead(records, backend, "roundtrip", got["roundtrip"]),
                 overhead(records, backend, "stream_b2b", got["stream_b2b"]),
                 overhead(records, backend, "device_kernel", got["device_kernel"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def unavailable_table(records: list[Record]):
    from gapbench.core.termtable import Col, FitTable

    rows = [r for r in records if r.metric == "all" and r.status == UNAVAILABLE]
    if not rows:
        return None
    t = FitTable("Not measured on this machine", [Col("backend"), Col("why", text=True)])
    for r in rows:
        t.add_row(r.backend, r.reason)
    return t


def plain_comparison(records: list[Record]) -> list[tuple[str, float, float, float]]:
    """(metric, harness/plain, lo, hi) for the native-cuda null kernel: the median of the per-round
    ratios of the paired rounds with its 95% interval (gapbench.core.plaincheck.plain_ratio; older files:
    the ratio of medians, NaN bounds)."""
    from gapbench.core.plaincheck import plain_ratio

    idx = {(r.backend, r.variant, r.metric): r for r in records if r.status == OK}
    rows = []
    for m in WARM_METRICS:
        p = idx.get((Backend.plain_cuda, "null", m))
        if p is not None:
            r, lo, hi = plain_ratio(p, idx.get((Backend.native_cuda, "null", m)))
            if r == r:  # not NaN
                rows.append((m, r, lo, hi))
    return rows


# ============================================================== report (many machines)
def report_tables(runs: list) -> list[rk.Table]:
    """Table 6 and the launch rungs of the overhead ladder, microseconds."""
    rows, ladder = [], []
    for run in runs:
        recs = [r for r in run.records if r.probe == "launch"]
        if not recs:
            continue
        mach = rk.machine_of(run)
        idx = {(r.backend, r.variant, r.metric): r for r in recs}
        for (b, v, m), r in sorted(idx.items()):
            if m != "roundtrip":
                continue
            cold = idx.get((b, v, "cold"))
            if not rk.ok(r):
                rows.append([mach, b, v, "-", f"{r.status}: {r.reason[:60]}", rk.date(run)])
                continue
            rows.append([mach, b, v, rk.us(cold) if cold is not None and rk.ok(cold) else "-", rk.us(r), rk.date(run)])
        for r in recs:  # unavailable backends are rows that say why
            if r.metric == "all" and r.status != OK:
                rows.append([mach, r.backend, "", "-", f"{r.status}: {r.reason[:80]}", rk.date(run)])
        # the ladder for the one-element add: framework -> raw launch -> device kernel
        for cls in (DeviceClass.cuda, DeviceClass.metal, DeviceClass.cpu):
            native = cls.floor
            raw = idx.get((native, "add1", "roundtrip")) or idx.get((native, "noop", "roundtrip"))
            dev = idx.get((native, "add1", "device_kernel"))
            for (b, v, m), r in sorted(idx.items()):
                fw_b = Backend.of(b)
                if m != "roundtrip" or fw_b is None or not fw_b.is_framework or not rk.ok(r) or raw is None \
                        or not rk.ok(raw) or cls not in fw_b.classes:
                    continue
                fw, rw = r.summary().median, raw.summary().median
                x = paired_text(LaunchParams.of(r).paired) or f"{fw / rw:.2f}x"
                ladder.append([mach, b, rk.us(r), rk.num((fw - rw) * 1e6), rk.us(raw),
                               rk.us(dev) if dev is not None and rk.ok(dev) else "-", x, rk.date(run)])
    out = []
    if rows:
        out.append(rk.Table("Kernel launch (paper Table 6): cold and launch + wait, us, median [p10-p90]",
                         ["machine", "backend", "variant", "cold", "launch + wait", "date"], rows))
        out.append(rk.Table(f"Published, not measured: {pub.SOURCE} Table 6 (converted to us)",
                         ["testbed", "cold launch", "follow-up launch"],
                         [[t, rk.num(c * 1e3), rk.num(f * 1e3)] for t, c, f in pub.TABLE6]))
    if ladder:
        out.append(rk.Table("Overhead ladder, one-element op (us, median [p10-p90]): framework op = framework dispatch + raw launch + wait",
                         ["machine", "framework", "framework op", "framework dispatch (difference of medians)",
                          "raw launch + wait", "kernel on the device", "x raw", "date"], ladder,
                         note="Each rung is measured; 'framework dispatch' is the difference of the two measured medians "
                              "beside it. 'x raw' is the framework/raw ratio paired in the framework's own processes "
                              "(median of per-round ratios [95% interval]); files without paired rounds: the ratio of the "
                              "two medians, shown without an interval."))
    return out
