"""Figures in the style of the paper's Figures 5-7, drawn from result records with matplotlib:
one PNG per op, one panel per dtype, throughput against shape for every backend (the best
hand-written variant, the vendor library, each framework), with the roofline measured in the
same run as a dotted line."""
from __future__ import annotations

from pathlib import Path

from gapbench.benchmarks.blas.tables import Row, rows
from gapbench.core.result import Record


def _series_name(row: Row) -> str:
    r = row.rec
    if row.backend is not None and row.backend.is_native:
        return f"{r.backend} gapbench (dispatcher)" if r.variant == "gapbench" else f"{r.backend} {r.variant}"
    return r.backend + (" @tf32" if row.p.tf32 else "")


def blas_figures(records: list[Record], out_prefix: str | Path, roofline: dict | None = None) -> list[Path]:
    """Write <out_prefix>-<op>.png for each op present; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_prefix = Path(out_prefix)
    ok = rows(records)
    paths = []
    for op in dict.fromkeys(row.p.op for row in ok):
        op_rows = [row for row in ok if row.p.op == op]
        unit, scale = op_rows[0].unit
        dts = list(dict.fromkeys(row.p.dtype for row in op_rows))
        names = sorted({_series_name(row) for row in op_rows})
        colour = {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(names)}  # same series, same colour
        fig, axes = plt.subplots(1, len(dts), figsize=(6 * len(dts), 4.6), squeeze=False)
        for ax, dt in zip(axes[0], dts):
            sub = [row for row in op_rows if row.p.dtype == dt]
            shapes = sorted(dict.fromkeys(row.p.shape_text for row in sub),
                            key=lambda s: next(row.rec.work["flops"] or row.rec.work["bytes"] for row in sub
                                               if row.p.shape_text == s))
            series: dict[str, dict[str, float]] = {}
            for row in sub:
                cur = series.setdefault(_series_name(row), {})
                cur[row.p.shape_text] = max(row.rate / scale, cur.get(row.p.shape_text, 0.0))  # best variant
            xs = range(len(shapes))
            for name, pts in sorted(series.items()):
                ys = [pts.get(s) for s in shapes]
                ax.plot([x for x, y in zip(xs, ys) if y is not None], [y for y in ys if y is not None], marker="o",
                        label=name, color=colour[name], linestyle="--" if "hand-written" in name else "-")
            for cls, peaks in (roofline or {}).items():
                entry = peaks.get(Row(sub[0].rec, sub[0].p.replace(precision=None), sub[0].spec).roof_key)
                if entry:
                    peak = entry["value"] / scale
                    ax.axhline(peak, color="grey", linestyle=":", linewidth=1)
                    ax.annotate(f"{cls} roofline {peak:.3g}", (0, peak), fontsize=7, color="grey",
                                xytext=(2, 2), textcoords="offset points")
            ax.set_xticks(list(xs))
            ax.set_xticklabels(shapes, rotation=30, ha="right", fontsize=7)
            ax.set_ylabel(unit if unit != "GB/s" else "GB/s (read + write)")
            ax.set_title(f"{op} {dt}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6)
        devices = sorted({str(row.rec.device.get("name", "")) for row in op_rows if row.rec.device.get("name")})
        fig.suptitle(f"{op}: throughput per backend ({', '.join(devices) or 'unknown device'}); "
                     f"dotted: roofline measured in the same run", fontsize=9)
        fig.tight_layout()
        path = out_prefix.parent / f"{out_prefix.name}-{op}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
