"""Figures in the style of the paper's Figures 5-7, drawn from result records with matplotlib:
one PNG per BLAS op, one panel per dtype, throughput against shape for every backend (the best
hand-written variant, the vendor library, each framework), with the roofline measured in the
same run as a dashed line."""
from __future__ import annotations

from pathlib import Path

from gapbench.core.result import OK, Record


def _value(r: Record, op: str) -> float:
    rates = r.rates()
    return rates.get("flops_per_s", 0.0) / 1e12 if op == "gemm" else rates.get("bytes_per_s", 0.0) / 1e9


def _series_name(r: Record) -> str:
    from gapbench.backends.registry import parse

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
