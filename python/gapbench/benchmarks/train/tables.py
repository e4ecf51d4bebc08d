"""Training benchmark: the terminal table of a run, and the report's tables over many machines."""
from __future__ import annotations

from gapbench.core import published as pub
from gapbench.core import reportkit as rk
from gapbench.core.result import OK, Record
from gapbench.benchmarks.train.config import PROBE


def _ms(r: Record | None) -> str:
    if r is None or r.status != OK:
        return "-"
    s = r.summary()
    return f"{s.median * 1e3:.4g} [{s.p10 * 1e3:.4g}-{s.p90 * 1e3:.4g}]" + ("~" if s.noisy else "")


def build_table(records: list[Record]):
    from gapbench.core.termtable import Col, FitTable

    t = FitTable("training step: median [p10-p90] ms per step; rates from the median step",
                 [Col("case", text=True), Col("scenario", 3, text=True), Col("fwd ms", 2), Col("bwd ms", 2),
                  Col("opt ms", 2), Col("step ms"), Col("items/s"), Col("TFLOP/s", 1), Col("% roof", 1),
                  Col("peak mem GiB", 3), Col("J/step", 3), Col("harness/plain", 4), Col("sampler on/off", 4),
                  Col("defaults/plain", 4)],
                 caption="harness/plain: the harness step over the plain loop's with the same choices (its "
                         "overhead); defaults/plain: the plain loop with torch.optim.AdamW() as is over the plain "
                         "loop with the harness's optimizer (what that choice buys). The choices (optimizer, "
                         "attention, compile) are in each record's conditions.")
    by_label: dict[str, dict[str, Record]] = {}
    for r in records:
        if r.probe == PROBE:
            by_label.setdefault(r.params.get("label", "?"), {})[r.metric] = r
    for label, m in by_label.items():
        st = m.get("step")
        if st is None:
            continue
        if st.status != OK:
            t.add_note(f"{label}: {st.status}: {st.reason[:300]}", style="red")
            continue
        p = st.params
        rates = st.rates()
        unit = p.get("item_unit", "items")
        roof = p.get("roofline", {})
        pct = f"{100 * rates['flops_per_s'] / roof['flops_per_s']:.0f}%" if roof and rates.get("flops_per_s") else "-"
        peaks = p.get("memory_peaks", {})
        dev_peak = max([v for k, v in peaks.items() if k.startswith(("torch_cuda_max_reserved", "mlx_peak", "nvml_used"))] or [0])
        mem = f"{dev_peak / 2**30:.1f} dev / {peaks.get('rss_peak_bytes', 0) / 2**30:.1f} rss" if peaks else "-"
        e = p.get("energy", {})
        joules = f"{e['joules_per_step']:.4g}" if e.get("status") == "ok" else "n/a"
        med = st.summary().median
        hp = f"{med / m['plain_step'].summary().median:.3f}" if "plain_step" in m and m["plain_step"].status == OK else "-"
        so = f"{med / m['step_nosampler'].summary().median:.3f}" if "step_nosampler" in m else "-"
        pd = m.get("plain_defaults_step")
        dp = (f"{pd.summary().median / m['plain_step'].summary().median:.3f}"
              if pd is not None and pd.status == OK and "plain_step" in m and m["plain_step"].status == OK else "-")
        t.add_row(label, p.get("memory_plan", {}).get("scenario", ""), _ms(m.get("forward")),
                  _ms(m.get("backward")), _ms(m.get("optimizer")), _ms(st),
                  f"{rates.get('items_per_s', 0):.4g} {unit}", f"{rates.get('flops_per_s', 0) / 1e12:.3g}" if rates.get("flops_per_s") else "-",
                  pct, mem, joules, hp, so, dp)
    return t


# ============================================================== report (many machines)
def _launch_floor_by_machine(runs: list) -> dict[str, float]:
    """Seconds per back-to-back launch of the native null kernel (as issued), per machine."""
    out: dict[str, float] = {}
    for run in runs:
        for r in run.records:
            if r.probe == "launch" and r.backend == "native-cuda" and r.variant == "null" and r.metric == "stream_b2b" and rk.ok(r):
                out[rk.machine_of(run)] = r.summary().median
    return out


def report_tables(runs: list) -> list[rk.Table]:
    rows, energy = [], []
    peaks = rk.peaks_by_machine(runs)
    floors = _launch_floor_by_machine(runs)
    for run in runs:
        mach = rk.machine_of(run)
        by: dict[str, dict[str, Record]] = {}
        for r in run.records:
            if r.probe == "train":
                by.setdefault(r.params.get("label", "?"), {})[r.metric] = r
        for label, m in by.items():
            st = m.get("step")
            if st is None:
                continue
            if not rk.ok(st):
                rows.append([mach, label, f"{st.status}: {st.reason[:80]}", "-", "-", "-", "-", rk.date(run)])
                continue
            ph = [(rk.spread(m[k]) if k in m and rk.ok(m[k]) else "-") for k in ("forward", "backward", "optimizer")]
            prec = {"fp32": "fp32", "amp-fp16": "fp16", "amp-bf16": "bf16"}.get(st.params.get("case", {}).get("precision", ""), "")
            peak = (st.params.get("roofline") or {}).get("flops_per_s") or peaks.get(mach, {}).get(prec)
            floor = rk.num(st.work["flops"] / peak) if peak and st.work.get("flops") else "-"
            kern = st.params.get("kernels_per_step")
            est = f"{rk.num(kern * floors[mach])} (estimate)" if kern and mach in floors else "-"
            ktime = st.params.get("kernel_time_per_step_s")
            rows.append([mach, label, rk.spread(st), *ph, floor, rk.num(ktime) if ktime else "-", str(kern) if kern else "-", est,
                         f"{rk.num(st.rates().get('items_per_s', 0))} {st.params.get('item_unit', '')}/s", rk.date(run)])
            e = st.params.get("energy", {})
            energy.append([mach, label, f"{e['joules_per_step']:.4g} over {e.get('steps', '?')} steps, {e.get('window_s', 0):.3g} s"
                           if e.get("status") == "ok" else f"unavailable: {e.get('reason', '')}", rk.date(run)])
    if not rows:
        return []
    return [rk.Table("Training step (paper Table 4), seconds, median [p10-p90], and the roofline floor",
                  ["machine", "case", "step", "forward", "backward", "optimizer", "roofline floor", "kernels on the device",
                   "kernels/step", "launch cost", "rate", "date"], rows,
                  note="Roofline floor: the step's counted FLOPs / the peak GEMM rate for its precision measured on that machine. "
                       "Kernels/step and their summed time on the device: torch's profiler on one extra step after the timing. Launch cost is an ESTIMATE: kernels/step x "
                       "the native null kernel's back-to-back launch time measured by bench.launch on that machine."),
            rk.Table(f"Published, not measured: {pub.SOURCE} Table 4 (GPT2-large pre-training without Hugging Face, s per pass)",
                  ["testbed", "batch", "MLX (Macs) / CUDA (A6000)", "MPS"],
                  [[t, str(b), rk.num(x), rk.num(y) if y else "-"] for t, b, x, y in pub.TABLE4]),
            rk.Table("GPU energy per training step (paper Table 5), joules", ["machine", "case", "J/step", "date"], energy,
                  note="One counter reading over the whole timed window divided by its steps: a mean, so no per-step spread."),
            rk.Table(f"Published, not measured: {pub.SOURCE} Table 5 (Whisper-medium, batch 4, fp32)", ["testbed", "J per iteration"],
                  [[t, rk.num(j)] for t, j in pub.TABLE5])]
