"""Figures in the style of the paper's Figures 5-7, drawn from result records with matplotlib:
one PNG per BLAS op, one panel per dtype, throughput against shape for every backend (the best
hand-written variant, the vendor library, each framework), with the roofline measured in the
same run as a dashed line."""
from __future__ import annotations

from pathlib import Path

from .result import OK, Record


def _value(r: Record, op: str) -> float:
    rates = r.rates()
    return rates.get("flops_per_s", 0.0) / 1e12 if op == "gemm" else rates.get("bytes_per_s", 0.0) / 1e9


def _series_name(r: Record) -> str:
    from .registry import parse

    if parse(r.backend).is_native:
        return f"{r.backend} gapbench (dispatcher)" if r.variant == "gapbench" else f"{r.backend} {r.variant}"
    return r.backend + (" @tf32" if r.params.get("precision") == "tf32" else "")


def blas_figures(records: list[Record], out_prefix: str | Path, roofline: dict | None = None) -> list[Path]:
    """Write <out_prefix>-<op>.png for each op present; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_prefix = Path(out_prefix)
    ok = [r for r in records if r.status == OK and r.metric == "time" and r.params.get("op")]
    paths = []
    for op in dict.fromkeys(r.params["op"] for r in ok):
        rows = [r for r in ok if r.params["op"] == op]
        dts = list(dict.fromkeys(r.params["dtype"] for r in rows))
        names = sorted({_series_name(r) for r in rows})
        colour = {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(names)}  # same series, same colour
        fig, axes = plt.subplots(1, len(dts), figsize=(6 * len(dts), 4.6), squeeze=False)
        for ax, dt in zip(axes[0], dts):
            sub = [r for r in rows if r.params["dtype"] == dt]
            shapes = sorted(dict.fromkeys(r.params["shape_text"] for r in sub),
                            key=lambda s: next(r.work["flops"] or r.work["bytes"] for r in sub if r.params["shape_text"] == s))
            series: dict[str, dict[str, float]] = {}
            for r in sub:
                name = _series_name(r)
                v = _value(r, op)
                cur = series.setdefault(name, {})
                cur[r.params["shape_text"]] = max(v, cur.get(r.params["shape_text"], 0.0))  # best variant
            xs = range(len(shapes))
            for name, pts in sorted(series.items()):
                ys = [pts.get(s) for s in shapes]
                ax.plot([x for x, y in zip(xs, ys) if y is not None], [y for y in ys if y is not None], marker="o",
                        label=name, color=colour[name], linestyle="--" if "hand-written" in name else "-")
            if roofline:
                for cls, peaks in roofline.items():
                    key = dt if op == "gemm" else "bytes_per_s"
                    if key in peaks:
                        peak = peaks[key]["value"] / (1e12 if op == "gemm" else 1e9)
                        ax.axhline(peak, color="grey", linestyle=":", linewidth=1)
                        ax.annotate(f"{cls} roofline {peak:.3g}", (0, peak), fontsize=7, color="grey",
                                    xytext=(2, 2), textcoords="offset points")
            ax.set_xticks(list(xs))
            ax.set_xticklabels(shapes, rotation=30, ha="right", fontsize=7)
            ax.set_ylabel("TFLOP/s" if op == "gemm" else "GB/s (read + write)")
            ax.set_title(f"{op} {dt}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6)
        devices = sorted({str(r.device.get("name", "")) for r in rows if r.device.get("name")})
        fig.suptitle(f"{op}: throughput per backend ({', '.join(devices) or 'unknown device'}); "
                     f"dotted: roofline measured in the same run", fontsize=9)
        fig.tight_layout()
        path = out_prefix.parent / f"{out_prefix.name}-{op}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def broken_at_gaps(tl: dict) -> dict:
    """The timeline's columns with a None row wherever sampling paused (a gap of more than five
    intervals: the plain-loop and sampler-off arms), so plots break the line there instead of
    drawing a straight segment across time that was not sampled."""
    cols = tl["columns"]
    gap = 5 * float(tl.get("interval_s") or 0.1)
    t0 = cols["t"]
    cut = {i for i in range(1, len(t0)) if t0[i] - t0[i - 1] > gap}
    out = {}
    for key, val in cols.items():
        col = []
        for i, v in enumerate(val):
            if i in cut:
                col.append((t0[i - 1] + t0[i]) / 2 if key == "t" else None)
            col.append(v)
        out[key] = col
    return out


def train_figures(records: list[Record], out_prefix: str | Path) -> list[Path]:
    """Training figures: <prefix>-steps.png, forward/backward/optimizer medians per case (the
    paper's Figure 3), and <prefix>-memory-<n>.png per case, memory and page faults over time
    (its Figure 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_prefix = Path(out_prefix)
    by_label: dict[str, dict[str, Record]] = {}
    for r in records:
        if r.probe == "train" and r.status == OK:
            by_label.setdefault(r.params.get("label", "?"), {})[r.metric] = r
    cases = [(lab, m) for lab, m in by_label.items() if "step" in m]
    if not cases:
        return []
    paths = []
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(cases) + 2), 4.8))
    bottom = [0.0] * len(cases)
    for phase, colour in (("forward", "tab:blue"), ("backward", "tab:orange"), ("optimizer", "tab:green")):
        vals = [m[phase].summary().median if phase in m else 0.0 for _, m in cases]
        ax.bar(range(len(cases)), vals, bottom=bottom, color=colour, label=phase)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(cases)), [lab for lab, _ in cases], rotation=20, ha="right", fontsize=7)
    ax.set_ylabel("seconds per step (median)")
    ax.set_title("training step by phase")
    ax.legend()
    fig.tight_layout()
    p = out_prefix.with_name(out_prefix.name + "-steps.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)
    for n, (lab, m) in enumerate(cases):
        tl = m["step"].params.get("timeline")
        if not tl or not tl.get("columns", {}).get("t"):
            continue
        cols = broken_at_gaps(tl)
        t = cols["t"]
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
        for key, val in cols.items():
            if key.endswith("_bytes") and any(v is not None for v in val):
                a1.plot(t, [None if v is None else v / 2**30 for v in val], label=key[:-6])
        a1.set_ylabel("GiB")
        a1.legend(fontsize=7)
        a1.set_title(f"memory over time: {lab}", fontsize=9)
        for key in ("minor_faults", "major_faults"):
            if key in cols:
                v0 = next((v for v in cols[key] if v is not None), 0)
                a2.plot(t, [None if v is None else v - v0 for v in cols[key]], label=key)
        a2.set_ylabel("page faults since start")
        a2.set_xlabel("seconds")
        a2.legend(fontsize=7)
        for tm, text in tl.get("marks", []):
            if text.startswith("sampler"):
                a1.axvline(tm, color="grey", lw=0.5, ls=":")
        fig.tight_layout()
        p = out_prefix.with_name(out_prefix.name + f"-memory-{n}.png")
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths
