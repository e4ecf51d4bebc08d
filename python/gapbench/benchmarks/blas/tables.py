"""BLAS benchmark, rendering: the ceilings measured in a run, the terminal tables, the Markdown
summary, and the report's table over many machines. Records are read through BlasParams and each
row's op through its OpSpec (gapbench.ops): what a rate is held against comes from the op's
declaration, not from its name."""
from __future__ import annotations

from dataclasses import dataclass

from gapbench import ops
from gapbench.benchmarks.blas.measure import converged_mark, ratio_text
from gapbench.benchmarks.blas.params import BlasParams, CpuThreads
from gapbench.core import reportkit as rk
from gapbench.core.conditions import Cache, Conditions
from gapbench.core.names import Backend, DeviceClass, Family, device_class_of
from gapbench.core.result import OK, Record
from gapbench.ops.spec import Bound, OpSpec

#: Dense datasheet peaks (NVIDIA SXM datasheets): HBM bytes/s and FLOP/s per dtype. Shown beside
#: the measured roofline, never in place of it.
DATASHEET = {
    "H200": {"bytes_per_s": 4.8e12, "fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12},
    "H100 80GB HBM3": {"bytes_per_s": 3.35e12, "fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12},
}
BANDWIDTH = "bytes_per_s"  # the roofline entry of the memory ceiling; compute ceilings are keyed by precision
#: the best streaming rate of any native memory-bound row not labeled l2-resident: what this device
#: was seen to read and write at. Read-mostly streams (GEMV, VJP) run a few percent above the copy
#: (read + write) on HBM, so this, not the copy, is what a row cannot plausibly beat.
STREAM = "stream_bytes_per_s"


@dataclass(frozen=True)
class Row:
    """A timed record with what it is: its typed params and its op's spec (None: an op this
    version does not know)."""
    rec: Record
    p: BlasParams
    spec: OpSpec | None

    @property
    def backend(self) -> Backend | None:
        return Backend.of(self.rec.backend)

    @property
    def device_class(self) -> DeviceClass | None:
        return device_class_of(self.rec.backend)

    @property
    def roof_key(self) -> str:
        """The roofline entry the row is held against: compute-bound ops the best GEMM of their
        precision, every other op the copy bandwidth of its device class."""
        if self.spec is not None and self.spec.bound is Bound.compute:
            return (self.p.precision or self.p.dtype).value
        return BANDWIDTH

    @property
    def rate_key(self) -> str:
        return "flops_per_s" if self.spec is not None and self.spec.bound is Bound.compute else "bytes_per_s"

    @property
    def rate(self) -> float:
        return self.rec.rates().get(self.rate_key, 0.0)

    @property
    def l2_resident(self) -> bool:
        """The row read its inputs from L2 (labeled so): its rate may beat the memory ceiling."""
        return Conditions.of(self.rec).cache == Cache.L2_RESIDENT

    @property
    def rate_at_slow_end(self) -> float:
        """The rate at the slow end of the median's interval (the least its interval lets it be)."""
        return self._rate_at(1)

    @property
    def rate_at_fast_end(self) -> float:
        """The rate at the fast end of the median's interval (the most its interval lets it be)."""
        return self._rate_at(0)

    def _rate_at(self, end: int) -> float:
        """The rate at the time of one end of the median's interval (the rate itself without one)."""
        stop = self.p.stop
        t = stop.median_ci_s[end] if stop is not None and stop.median_ci_s and stop.median_ci_s[end] else None
        med = self.rec.summary().median
        return self.rate * med / t if t and med and t > 0 else self.rate

    def ceiling_entry(self, with_op: bool = False) -> dict:
        """A roofline entry set by this row: its rate, the fast end of its interval (a row held
        against it ties it up to there), its median time (under reportkit.CEILING_MIN_S it is bound by
        overhead, not by a throughput ceiling) and where it came from (`with_op`: naming the op too)."""
        op = f" {self.p.op}" if with_op else ""
        return {"value": self.rate, "high": self.rate_at_fast_end, "time_s": self.rec.summary().median,
                "from": f"{self.rec.backend}/{self.rec.variant}{op} {self.p.dtype} {self.p.shape_text}"}

    @property
    def unit(self) -> tuple[str, float]:
        return ("TFLOP/s", 1e12) if self.rate_key == "flops_per_s" else ("GB/s", 1e9)


def rows(records: list[Record], metric: str | None = "time", ok_only: bool = True) -> list[Row]:
    """The op rows of a run (backend-wide rows and other metrics left out)."""
    out = []
    for r in records:
        if (ok_only and r.status != OK) or (metric and r.metric != metric):
            continue
        p = BlasParams.of(r)
        if p.op is None:
            continue
        out.append(Row(r, p, ops.get(p.op)))
    return out


def plain_ratios(records: list[Record]) -> list[tuple[str, str, str, float, float, float]]:
    """(op, dtype, shape, ratio, lo, hi) for each plain-checked vendor row: the harness's time over
    the plain loop's, the median of per-round ratios of the interleaved rounds with its 95%
    interval (gapbench.core.plaincheck.plain_ratio: infinite bounds where too few rounds give one;
    older files without round medians give the ratio of the two medians and NaN bounds)."""
    from gapbench.core.plaincheck import plain_ratio

    idx = {(r.backend, r.p.key): r.rec for r in map(_as_row, records) if r and r.rec.variant == "cublas"}
    out = []
    for (b, key), rec in idx.items():
        if b == Backend.plain_cuda:
            ratio, lo, hi = plain_ratio(rec, idx.get((Backend.native_cuda, key)))
            if ratio == ratio:  # not NaN
                out.append((key[0], str(key[1]), key[2], ratio, lo, hi))
    return out


def _as_row(r: Record) -> Row | None:
    found = rows([r])
    return found[0] if found else None


def cpu_threads_reduced(records: list[Record]) -> CpuThreads | None:
    """The CPU frameworks' thread team where it was cut to the free cores (a shared machine)."""
    for r in records:
        t = BlasParams.of(r).cpu_threads
        if t is not None and t.reduced:
            return t
    return None


# ============================================================== roofline and table
def roofline(records: list[Record]) -> dict:
    """Per device class: peak bandwidth (the best rate of the run's memory-ceiling op, the copy, in
    bytes read + written per second) and peak compute per precision (the best rate of its
    compute-ceiling op, the GEMM), both measured here by the native rows (the vendor's and the
    library's own: a framework row is what is held against the ceiling, not what sets it; a class
    with no native row, e.g. the CPU, takes its frameworks'). The best rates come from the largest
    sizes; the record each came from is named. A copy that read from L2 (labeled l2-resident) does
    not set the memory ceiling: it measured the cache. Each entry keeps the fast end of its row's
    interval ("high"): what a row must beat to beat the ceiling, not merely tie it."""
    cands = []
    for row in rows(records):
        if row.spec is None or row.spec.ceiling is None or row.backend is None or row.backend.is_plain:
            continue  # a plain-loop row checks the harness: not another implementation
        if row.spec.bound is Bound.memory and row.l2_resident:
            continue
        cands.append(row)
    native_classes = {row.device_class for row in cands if row.backend.family is Family.native}
    out: dict = {}
    for row in rows(records):  # the streaming ceiling: every native memory-bound row off the L2
        if (row.spec is None or row.spec.bound is not Bound.memory or row.backend is None or row.backend.is_plain
                or row.backend.family is not Family.native or row.l2_resident or row.device_class is None):
            continue
        cur = out.setdefault(row.device_class.value, {}).get(STREAM)
        if cur is None or row.rate > cur["value"]:
            out[row.device_class.value][STREAM] = row.ceiling_entry(with_op=True)
    for row in cands:
        if row.device_class in native_classes and row.backend.family is not Family.native:
            continue
        cls = row.device_class.value
        cur = out.setdefault(cls, {}).get(row.roof_key)
        if cur is None or row.rate > cur["value"]:
            out[cls][row.roof_key] = row.ceiling_entry()
    return out


def _peak(roof: dict, row: Row) -> float | None:
    return _roof_entry(roof, row).get("value")


def _roof_entry(roof: dict, row: Row) -> dict:
    cls = row.device_class
    return (roof.get(cls.value, {}).get(row.roof_key) or {}) if cls is not None else {}


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


def suspect(r: Record, roof: dict) -> str:
    """Why an ok row's rate is implausible ('' when it is not): below SUSPECT_FRACTION of the
    roofline of its device class measured in the same run, for an op longer than SUSPECT_MIN_S.
    Such a row timed something else too (a descheduled thread, a busy machine)."""
    row = _as_row(r)
    if row is None:
        return ""
    peak, rate, med = _peak(roof, row), row.rate, r.summary().median
    if not peak or not rate or med < SUSPECT_MIN_S or rate >= SUSPECT_FRACTION * peak:
        return ""
    return (f"rate {rate:.3g} {row.rate_key.replace('_per_s', '')}/s is {100 * rate / peak:.2g}% of the roofline "
            f"{peak:.3g} measured in this run ({roof[row.device_class.value][row.roof_key]['from']}): implausible, "
            "likely a busy or oversubscribed machine; re-run")


def _held_to_ceilings(r: Record) -> Row | None:
    """The row, where physics judges it: timed, not labeled l2-resident, not a plain-loop check,
    of a known device class (None otherwise)."""
    row = _as_row(r)
    if row is None or row.l2_resident or row.backend is None or row.backend.is_plain or row.device_class is None:
        return None
    return row


def implausible(r: Record, roof: dict, sheet: dict | None = None) -> str:
    """Why an ok row beats physics ('' when it does not): not labeled l2-resident, yet even at the
    slow end of its median's interval its rate is above
    - the GPU's datasheet peak (`sheet`, DATASHEET: a bound no row of the run sets, so every row,
      the native ones that set the measured ceilings included, is held against it), or
    - the ceiling of its device class measured in this run (for memory-bound ops the best streaming
      rate of a native row off the L2, STREAM; for compute-bound ones the best native GEMM), which
      judges every row but the one that set it, beyond the fast end of that row's own interval: a
      row between the ceiling and there ties it (a framework calling the vendor's kernel that set
      it does, half the time), and a ceiling set by an op under rk.CEILING_MIN_S (--quick's small
      shapes) is bound by overhead, not a throughput ceiling: rows above it are labeled
      (`above_roof`), not implausible.
    It timed less work than it claims, or read from a cache it says it rotated past."""
    row = _held_to_ceilings(r)
    if row is None:
        return ""
    bound = (sheet or {}).get(row.roof_key) if row.device_class is DeviceClass.cuda else None
    if bound and row.rate_at_slow_end > bound:
        return (f"rate {row.rate_at_slow_end:.3g} {row.rate_key.replace('_per_s', '')}/s at the slow end of its interval "
                f"beats the datasheet's {bound:.3g}, and the row is not labeled l2-resident")
    kind, text = _against_ceiling(row, roof)
    return text if kind == BEYOND else ""


#: how a row above the ceiling measured in its run stands to it (_against_ceiling)
BEYOND, TIE, OVERHEAD = "beyond", "tie", "overhead"


def _against_ceiling(row: Row, roof: dict) -> tuple[str, str]:
    """(kind, reason) of a row above the measured ceiling it is held against, even at the slow end of
    its own interval: BEYOND the fast end of the interval of the row that set it (implausible; files
    before those ends: beyond the ceiling itself), a TIE within it, or OVERHEAD where that row ran
    under rk.CEILING_MIN_S (no throughput ceiling). ("", "") for a row under it, or the row that set it."""
    ceiling = _ceiling(roof, row)
    peak, high = ceiling.get("value"), ceiling.get("high")
    slow = row.rate_at_slow_end
    if not peak or row.rate == peak or slow <= peak:
        return "", ""
    rate = f"rate {slow:.3g} {row.rate_key.replace('_per_s', '')}/s at the slow end of its interval"
    if not rk.is_ceiling(ceiling):
        return OVERHEAD, (f"{rate} is above the ceiling {peak:.3g} measured in this run ({ceiling['from']}), which an "
                          f"op of {1e6 * ceiling['time_s']:.3g} us set: bound by overhead, not a throughput ceiling")
    if high and slow <= high:
        return TIE, (f"{rate} is above the ceiling {peak:.3g} measured in this run ({ceiling['from']}), within that "
                     f"row's own interval (to {high:.3g}): a tie with it")
    return BEYOND, (f"{rate} beats the ceiling {peak:.3g} measured in this run ({ceiling['from']})"
                    + (f" and the fast end {high:.3g} of that row's interval" if high and high > peak else "")
                    + ", and the row is not labeled l2-resident")


def _ceiling(roof: dict, row: Row) -> dict:
    """The measured ceiling a row is held against: the streaming rate for memory-bound ops where the
    run has one, else its roof key's entry ({} where the run measured none)."""
    key = STREAM if row.roof_key == BANDWIDTH and STREAM in roof.get(row.device_class.value, {}) else row.roof_key
    return roof.get(row.device_class.value, {}).get(key) or {}


def above_roof(r: Record, roof: dict) -> str:
    """The label of a row above the ceiling measured in this run, even at the slow end of its own
    interval, that is not implausible: it ties the row that set the ceiling (not beyond the fast end
    of that row's interval), or that row ran under rk.CEILING_MIN_S. '' for every other row, the
    ceiling's own included."""
    row = _held_to_ceilings(r)
    if row is None:
        return ""
    kind, text = _against_ceiling(row, roof)
    return text if kind in (TIE, OVERHEAD) else ""


def above_copy(r: Record, roof: dict) -> str:
    """The label of a memory-bound row off the L2 whose rate is above the copy bandwidth measured
    in this run (a read-mostly stream reads faster than a copy reads and writes): how far, so no
    row beats a measured ceiling unlabeled ('' when it does not)."""
    row = _held_to_ceilings(r)
    if row is None or row.roof_key != BANDWIDTH:
        return ""
    copy = roof.get(row.device_class.value, {}).get(BANDWIDTH) or {}
    peak = copy.get("value")
    if not peak or row.rate <= peak:
        return ""
    return (f"{100 * (row.rate / peak - 1):.2g}% above the copy bandwidth {peak:.3g} B/s measured in this run "
            f"({copy['from']}): a read-mostly stream")


def mark_suspects(records: list[Record], roof: dict) -> int:
    """Write each implausible row's reason into its params: "suspect" (far under the roofline) or
    "implausible" (over the datasheet or the ceiling measured in the run, not L2-resident), and
    label rows above the measured copy bandwidth ("above_copy") and rows above the measured ceiling
    that are not implausible ("above_roof"); returns how many rows were marked suspect or
    implausible."""
    n = 0
    sheet = _datasheet(records)
    for r in records:
        slow, fast, over = suspect(r, roof), implausible(r, roof, sheet), above_copy(r, roof)
        tie = above_roof(r, roof) if not fast else ""
        if slow or fast or over or tie:
            r.params = BlasParams.of(r).replace(suspect=slow or None, implausible=fast or None,
                                                above_copy=(over or None) if not fast else None,
                                                above_roof=tie or None).to_dict()
            n += bool(slow or fast)
    return n


def native_kind(r: Record) -> str:
    """What a native row is: the library's dispatcher, a hand-written kernel timed by name (the
    library's and the lab's, --variants all; the numbered variants of older result files and the
    lab's own sweep rows), or the vendor library."""
    v = r.variant
    if v == "gapbench":
        return "gapbench (dispatcher)"
    if BlasParams.of(r).source in ("kernel", "lab") or (v[:1] == "v" and v[1:].isdigit()):
        return "hand-written"
    return "vendor"


def build_tables(records: list[Record], roof: dict | None = None):
    from gapbench.core.termtable import Col, FitTable

    roof = roofline(records) if roof is None else roof
    sheet = _datasheet(records)
    out = []
    everything = rows(records, metric=None, ok_only=False)
    for op in dict.fromkeys(row.p.op for row in everything):
        op_rows = [row for row in everything if row.p.op == op]
        unit, scale = next((row.unit for row in op_rows if row.spec is not None), ("GB/s", 1e9))
        # a user's case (gapbench.api) has no vendor row: its rows are paired against its baseline
        user = all(row.spec is None or any(f.baseline for f in row.spec.frameworks) for row in op_rows)
        ref = "baseline" if user else "vendor"
        t = FitTable(f"{op}: median per run, rate, % of the roofline measured here (and of the datasheet)",
                     [Col("shape"), Col("dtype"), Col("backend"), Col("variant"), Col("median us", right=True),
                      Col("95% CI us", 2), Col(f"speed vs {ref} [95% CI]", 1), Col(unit, right=True),
                      Col("% roof", 1, right=True), Col("% sheet", 3, right=True), Col("check", 1)],
                     caption=f"Speed vs {ref}: the {ref}'s time / this row's, median of interleaved per-round "
                             "ratios, its 95% interval and verdict; * after a median or a ratio: it stopped at its "
                             "budget before its interval reached the target; n/c (field): the two rows ran under "
                             "different conditions (that field), so no ratio. ~ noisy (IQR > 10% of median). "
                             "suspect: under 1% of the roofline measured in this run; implausible: above the datasheet, or above "
                             "the ceiling measured in this run beyond its own interval, and not labeled l2-resident; "
                             ">roof: above that ceiling within its interval (a tie), or it was set by an op under "
                             "50 us (overhead-bound, --quick); >copy: above the copy "
                             "bandwidth measured in this run, under both (a read-mostly stream; reasons in the JSON).")
        for row in op_rows:
            r, p = row.rec, row.p
            base = [p.shape_text or "", str(p.dtype or ""), r.backend, r.variant]
            if r.status != OK:
                t.add_note(f"{' '.join(base)}: {r.status}: {r.reason[:300]}", style="yellow")
                continue
            s = r.summary()
            val, peak = row.rate, _peak(roof, row)
            # of a ceiling only: --quick's overhead-bound rates are none (reportkit.is_ceiling)
            pr = f"{100 * val / peak:.0f}%" if peak and rk.is_ceiling(_roof_entry(roof, row)) else ""
            ps = (f"{100 * val / sheet[row.roof_key]:.0f}%" if sheet.get(row.roof_key)
                  and row.device_class is DeviceClass.cuda else "")
            noisy = "~" if s.noisy else ""
            over = p.implausible or implausible(r, roof, sheet)
            bad = over or p.suspect or suspect(r, roof)
            lo_hi = p.stop.median_ci_s if p.stop is not None else None
            ci = (f"{lo_hi[0] * 1e6:.4g}-{lo_hi[1] * 1e6:.4g}" if lo_hi and None not in lo_hi
                  else f"{s.p10 * 1e6:.4g}-{s.p90 * 1e6:.4g} (p10-p90)")
            ratio = ratio_text(r)
            if over and ratio:  # a ratio of a row that beats physics is no verdict
                ratio = ratio.rsplit(" ", 1)[0] + " implausible"
            check = "implausible" if over else "suspect" if bad else ("ok" if r.verified else "")
            if not bad and (p.above_roof or above_roof(r, roof)):
                check += " >roof"
            if not bad and (p.above_copy or above_copy(r, roof)):
                check += " >copy"
            t.add_row(*base, f"{s.median * 1e6:.4g}{noisy}{converged_mark(r)}", ci, ratio,
                      f"{val / scale:.4g}", pr, ps, check,
                      style="red" if bad else "")
        out.append(t)
    return out


def markdown_summary(records: list[Record], shapes: list[str] | None = None) -> str:
    """One Markdown row per op x dtype x shape: the best hand-written variant, the vendor library
    and each framework, as % of the measured bandwidth roofline (memory-bound ops) or TFLOP/s
    (compute-bound ops), generated from result records (for READMEs and issues)."""
    roof = roofline(records)
    cols = ["gapbench (dispatcher)", "vendor", "torch", "cupy", "mlx"]
    lines = ["| op | dtype | shape | unit | " + " | ".join(cols) + " |", "|" + "---|" * (4 + len(cols))]
    groups: dict = {}
    for row in rows(records):
        if shapes and row.p.shape_text not in shapes:
            continue
        groups.setdefault(row.p.key, []).append(row)
    for (op, dtype, shape), rs in groups.items():
        compute = rs[0].rate_key == "flops_per_s"

        def value(row: Row) -> float:
            if compute:
                return row.rate / 1e12
            peak = (roof.get(row.device_class.value, {}).get(BANDWIDTH) or {}).get("value") if row.device_class else None
            return 100 * row.rate / peak if peak else 0.0

        def fmt(row: Row) -> str:
            return f"{value(row):.3g}" if compute else f"{value(row):.0f}"

        native = [row for row in rs if row.backend is not None and row.backend.is_native]
        hand = [row for row in native if row.rec.variant == "gapbench"]
        best = max(hand, key=value, default=None)
        cells = [f"{fmt(best)} ({best.p.strategy or best.rec.variant})" if best else "",
                 ", ".join(f"{fmt(row)} ({row.rec.variant})" for row in native if row.rec.variant != "gapbench")]
        for fam in (Family.torch, Family.cupy, Family.mlx):
            fr = [row for row in rs if row.backend is not None and row.backend.family is fam]
            cells.append(", ".join(fmt(row) + (" (tf32)" if row.p.tf32 else "") for row in fr))
        unit = "TFLOP/s" if compute else "% of copy BW"
        lines.append(f"| {op} | {dtype} | {shape} | {unit} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ============================================================== report (many machines)
def report_tables(runs: list) -> list[rk.Table]:
    """Figures 5-7 as a table: per op, dtype and shape, each backend's best rate and the ladder
    down to the roofline floor (time the op would take at the measured peak)."""
    table_rows = []
    by_machine: dict[str, dict] = {}  # a run without a copy or GEMM borrows its machine's roofline
    for run in runs:
        for cls, entries in rk.ceilings(run).items():  # --quick's overhead-bound rates: no floor to borrow
            for k, v in entries.items():
                cur = by_machine.setdefault(rk.machine_of(run), {}).setdefault(cls, {}).get(k)
                if cur is None or v["value"] > cur["value"]:
                    by_machine[rk.machine_of(run)][cls][k] = v
    # A case (machine, op, dtype, shape) that several runs of one machine measured is shown from
    # the newest of them only: a later run completes or supersedes an earlier one (e.g. one cut
    # short mid-case), and two "best" rows for one case on one machine would contradict each other.
    newest: dict[tuple, str] = {}
    for run in runs:
        for row in rows([r for r in run.records if r.probe == "blas"], ok_only=False):
            key = (rk.machine_of(run), *row.p.key)
            newest[key] = max(newest.get(key, ""), rk.started(run))
    superseded = 0
    for run in runs:
        recs = rows([r for r in run.records if r.probe == "blas"], ok_only=False)
        if not recs:
            continue
        mach = rk.machine_of(run)
        own = rk.ceilings(run)
        roof = {c: dict(by_machine.get(mach, {}).get(c, {}), **own.get(c, {}))
                for c in set(own) | set(by_machine.get(mach, {}))}
        groups: dict[tuple, list[Row]] = {}
        for row in recs:
            groups.setdefault(row.p.key, []).append(row)
        for key, rs in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
            if newest[(mach, *key)] != rk.started(run):
                superseded += 1
                continue
            best: dict[str, Row] = {}
            for row in rs:
                b = row.backend
                if not rk.ok(row.rec) or (b is not None and b.is_plain):
                    continue
                name = row.rec.backend if b is None or not b.is_native else f"{row.rec.backend} {native_kind(row.rec)}"
                if name not in best or row.rec.summary().median < best[name].rec.summary().median:
                    best[name] = row
            if not best:
                continue
            any_r = next(iter(best.values()))
            cuda = any(r.backend is not None and r.backend.classes == (DeviceClass.cuda,) for r in best.values())
            floor = "-"
            entry = (roof.get(DeviceClass.cuda.value) or {}).get(any_r.roof_key) if cuda else None
            work = any_r.rec.work.get("flops" if any_r.rate_key == "flops_per_s" else "bytes")
            if entry and work:
                floor = rk.num(work / entry["value"] * 1e6)
            for name, row in sorted(best.items(), key=lambda kv: kv[1].rec.summary().median):
                unit, scale = row.unit
                table_rows.append([mach, key[0], str(key[1]), key[2], name + (f" {row.rec.variant}" if row.rec.variant else ""),
                                   rk.spread(row.rec, 1e6), f"{row.rate / scale:.4g} {unit}", floor, rk.date(run)])
    if not table_rows:
        return []
    return [rk.Table("BLAS (paper Figures 5-7): per op, the best of each rung, us per op median [p10-p90], and the roofline floor",
                     ["machine", "op", "dtype", "shape", "backend (best variant)", "us", "rate", "roofline floor us", "date"],
                     table_rows,
                     note="Roofline floor: declared bytes (or FLOPs) / the peak copy bandwidth (or vendor GEMM rate) "
                          "measured in the same run, or, where that run measured none, in another run of the same "
                          "machine given to this report."
                          + (f" A case measured by several runs of one machine is shown from the newest ({superseded} "
                             "older case(s) left out)." if superseded else ""))]
