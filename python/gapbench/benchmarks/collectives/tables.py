"""bench.dist's tables (rich, within 100 columns), Markdown and figures, from result records."""
from __future__ import annotations

from collections import defaultdict
from statistics import median
from pathlib import Path

from gapbench.core.result import OK, Record
from gapbench.benchmarks.collectives.config import COLLECTIVE_RUNGS, OPS, human_bytes

FRAMEWORKS = ("torch", "cupy", "mlx")


def coll(records: list[Record]) -> list[Record]:
    return [r for r in records if r.probe == "dist" and r.backend in COLLECTIVE_RUNGS + ("nccl-plain",)
            and r.metric in OPS and r.params.get("size")]


def t_us(r: Record) -> float:
    return r.summary().median * 1e6


def gbps(size: float, seconds: float, factor: float = 1.0) -> float:
    """nccl-tests' bandwidths in GB/s: algbw (factor 1) or busbw (the op's bus factor)."""
    return size / seconds * factor / 1e9


def algbw(r: Record) -> float:
    return gbps(r.params["size"], r.summary().median)


def busbw(r: Record) -> float:
    return gbps(r.params["size"], r.summary().median, r.params.get("bus_factor", 1.0))


def _index(records):
    """OK collective records by (engine, op, dtype, placement, size); an engine measured again only
    as another launch's in-process reference is kept apart, under its group."""
    idx = {}
    for r in coll(records):
        if r.status == OK:
            key = (r.backend, r.metric, r.params["dtype"], r.params["placement"], r.params["size"])
            idx[key + ((r.params.get("group"),) if r.params.get("reference_only") else ())] = r
    return idx


def paired_gap(fw: Record, ref: Record) -> tuple[float, float, float, str]:
    """(ratio, lo, hi, how): fw / ref from rounds interleaved in one launch (median of per-round
    ratios, 95% interval); records without paired rounds give the ratio of medians, no interval."""
    from gapbench.core.stats import ratio_median_ci

    a, b = fw.params.get("round_medians_s"), ref.params.get("round_medians_s")
    if a and b and len(a) == len(b) and fw.params.get("group") == ref.params.get("group"):
        est, lo, hi = ratio_median_ci(a, b)
        return est, lo, hi, "paired"
    nan = float("nan")
    return t_us(fw) / t_us(ref), nan, nan, "unpaired"


def _reference(idx, op, dt, pl, size, grp):
    """Direct NCCL for a framework row: from the framework's own launch (same placement, else out of
    place) so the rounds pair; else from another launch (the gap is then unpaired)."""
    found = [c for c in (idx.get(("nccl", op, dt, pl, size, grp)), idx.get(("nccl", op, dt, pl, size)),
                         idx.get(("nccl", op, dt, "out", size, grp)), idx.get(("nccl", op, dt, "out", size)))
             if c is not None]
    return next((c for c in found if c.params.get("group") == grp), found[0] if found else None)


def gap_rows(records: list[Record]) -> list[dict]:
    """Per op, dtype, size: direct NCCL time and busbw, the plain loop's harness/plain ratio, each
    framework's time and its gap (framework / direct NCCL measured in the same launch, in the same
    placement where NCCL has it, else out of place), with its interval."""
    from gapbench.core.plaincheck import plain_ratio

    idx = _index(records)
    keys = sorted({(k[1], k[2], k[4]) for k in idx}, key=lambda k: (OPS.index(k[0]), k[1], k[2]))
    rows = []
    for op, dt, size in keys:
        row = {"op": op, "dtype": dt, "size": size}
        nccl = idx.get(("nccl", op, dt, "out", size))
        if nccl:
            row["nccl_us"], row["nccl_busbw"] = t_us(nccl), busbw(nccl)
        plain = idx.get(("nccl-plain", op, dt, "out", size))
        if plain:
            row["plain_us"] = t_us(plain)
            row["plain_ratio"] = plain_ratio(plain)
        for fw in FRAMEWORKS:
            r = idx.get((fw, op, dt, "out", size)) or idx.get((fw, op, dt, "in", size))
            if not r:
                continue
            row[f"{fw}_us"] = t_us(r)
            ref = _reference(idx, op, dt, r.params["placement"], size, r.params.get("group"))
            if ref:
                row[f"{fw}_gap"] = paired_gap(r, ref)
        if len(row) > 3:
            rows.append(row)
    return rows


def _f(v, fmt="{:.1f}"):
    return "" if v is None else fmt.format(v)


def _ci(v, short: bool = False) -> str:
    """'1.02x [0.99-1.04]' (a ratio and its 95% interval); 'unpaired' where rounds were not paired."""
    if not v:
        return ""
    est, lo, hi = v[:3]
    if lo != lo or hi != hi:  # NaN: no paired rounds
        return f"{est:.2f}x (unpaired)"
    fmt = (lambda x: "inf" if x == float("inf") else f"{x:.2f}")
    return f"{est:.2f} [{fmt(lo)}-{fmt(hi)}]" if short else f"{est:.2f}x [{fmt(lo)}-{fmt(hi)}]"


def gap_table(records: list[Record]):
    from rich.table import Table

    rows = gap_rows(records)
    if not rows:
        return None
    cols = [("size", lambda r: human_bytes(r["size"])), ("NCCL us", lambda r: _f(r.get("nccl_us"))),
            ("busbw", lambda r: _f(r.get("nccl_busbw"))), ("harness/plain", lambda r: _ci(r.get("plain_ratio"), True)),
            ("torch us", lambda r: _f(r.get("torch_us")))]
    cols += [(f"{fw} gap", lambda r, fw=fw: _ci(r.get(f"{fw}_gap"), True)) for fw in FRAMEWORKS]
    cols = [(h, g) for h, g in cols if any(g(r) for r in rows)]  # only columns with data
    t = Table(title="Collective gap: framework time / direct NCCL time in the same launch, median of paired "
                    "rounds [95% interval]", title_justify="left")
    for h, _ in cols:
        t.add_column(h, justify="right", no_wrap=True)
    section = None
    for r in rows:
        if (r["op"], r["dtype"]) != section:
            section = (r["op"], r["dtype"])
            t.add_section()
            t.add_row(f"[bold]{r['op']} {r['dtype']}[/bold]", *[""] * (len(cols) - 1))
        t.add_row(*[g(r) for _, g in cols])
    return t


def rung_table(records: list[Record], rung: str):
    """nccl-tests' columns for one rung: size, count, type, place, time, algbw, busbw, over ranks."""
    from rich.table import Table

    rs = [r for r in coll(records) if r.backend == rung and r.status == OK and not r.params.get("reference_only")]
    if not rs:
        return None
    t = Table(title=f"{rung}: time = median over samples of the rank average; algbw, busbw in GB/s",
              title_justify="left")
    has_algo = any(r.params.get("nccl_algo") for r in rs)
    for c in ("op", "size", "type", "pl", "time us", "algbw", "busbw", "ranks min/avg/max us") + (("algo",) if has_algo else ()):
        t.add_column(c, justify="left" if c in ("op", "type", "pl", "algo") else "right", no_wrap=True)
    for r in sorted(rs, key=lambda r: (OPS.index(r.metric), r.params["dtype"], r.params["placement"], r.params["size"])):
        rm = [x * 1e6 for x in r.params.get("rank_median_s", [])]
        ranks = f"{min(rm):.1f}/{sum(rm) / len(rm):.1f}/{max(rm):.1f}" if rm else ""
        t.add_row(r.metric, human_bytes(r.params["size"]), r.params["dtype"], r.params["placement"],
                  f"{t_us(r):.1f}", f"{algbw(r):.2f}", f"{busbw(r):.2f}", ranks,
                  *((str(r.params.get("nccl_algo") or ""),) if has_algo else ()))
    return t


def p2p_table(records: list[Record]):
    from rich.table import Table

    rs = [r for r in records if r.backend == "p2p" and r.status == OK]
    if not rs:
        return None
    t = Table(title="Hardware floor: peer-to-peer copies (device-timed, checked)", title_justify="left")
    for c in ("pair", "method", "size", "time us", "GB/s"):
        t.add_column(c, justify="left" if c in ("pair", "method") else "right", no_wrap=True)
    for r in sorted(rs, key=lambda r: (r.params["src"], r.params["dst"], r.metric, r.params["size"])):
        t.add_row(f"{r.params['src']}->{r.params['dst']}", r.metric, human_bytes(r.params["size"]),
                  f"{t_us(r):.2f}", f"{r.params['size'] / r.summary().median / 1e9:.1f}")
    return t


def problem_table(records: list[Record]):
    from rich.markup import escape
    from rich.table import Table

    rs = [r for r in records if r.probe == "dist" and r.status != OK]
    if not rs:
        return None
    t = Table(title="Not measured, and why", title_justify="left")
    for c in ("rung", "what", "status", "reason"):
        t.add_column(c, overflow="fold", max_width=None if c == "reason" else 24)
    for r in rs:
        t.add_row(r.backend, f"{r.metric} {r.variant}".strip(), r.status, escape(r.reason[:300]))
    return t


def launch_spread(records: list[Record]) -> list[dict]:
    """Per dtype, direct NCCL's out-of-place all-reduce at the largest size once per fresh
    communicator: each measured set of ranks, and each harness round of the plain check. One
    launch's rounds agree closely; launches differ by about a percent (docs/methodology.md), so a
    bandwidth claim is this median, not one launch."""
    rs = [r for r in coll(records) if r.status == OK and r.metric == "all_reduce" and r.params["placement"] == "out"
          and r.backend in ("nccl", "nccl-plain")]
    out = []
    for dt in sorted({r.params["dtype"] for r in rs}):
        mine = [r for r in rs if r.params["dtype"] == dt]
        size = max(r.params["size"] for r in mine)
        vals = []
        for r in (r for r in mine if r.params["size"] == size):
            if r.backend == "nccl":
                vals.append(busbw(r))
            else:
                vals += [gbps(size, h / r.inner, r.params.get("bus_factor", 1.0))
                         for h, _ in r.params.get("round_medians_s", [])]
        if vals:
            out.append({"dtype": dt, "size": size, "launches": len(vals), "median": median(vals),
                        "lo": min(vals), "hi": max(vals)})
    return out


def spread_text(s: dict) -> str:
    return (f"Direct NCCL all_reduce {s['dtype']} {human_bytes(s['size'])} out of place over {s['launches']} fresh "
            f"communicators (each set of ranks, and each harness round of the plain check): bus bandwidth median "
            f"{s['median']:.1f} GB/s, range {s['lo']:.1f}-{s['hi']:.1f}.")


def all_tables(records: list[Record]) -> list:
    from rich.text import Text

    out = [gap_table(records), *[Text(spread_text(s)) for s in launch_spread(records)], p2p_table(records)]
    out += [rung_table(records, r) for r in COLLECTIVE_RUNGS]
    out.append(problem_table(records))
    return [t for t in out if t is not None]


def markdown(records: list[Record]) -> str:
    rows = gap_rows(records)
    if not rows:
        return ""
    lines = ["### Collectives: direct NCCL and the frameworks", "",
             "Gap = framework time / direct NCCL time measured in the same launch: the median of the paired "
             "rounds' ratios [95% interval]. harness/plain: bench.dist's direct-NCCL timing against a plain "
             "C++ loop, rounds of fresh processes.", "",
             "| op | size | NCCL us | NCCL busbw GB/s | harness/plain | torch us | torch gap | CuPy gap | MLX us | MLX gap |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['op']} {r['dtype']} | {human_bytes(r['size'])} | {_f(r.get('nccl_us'))} | "
                     f"{_f(r.get('nccl_busbw'))} | {_ci(r.get('plain_ratio'))} | {_f(r.get('torch_us'))} | "
                     f"{_ci(r.get('torch_gap'))} | {_ci(r.get('cupy_gap'))} | {_f(r.get('mlx_us'))} | "
                     f"{_ci(r.get('mlx_gap'))} |")
    lines += [""] + [spread_text(s) for s in launch_spread(records)]
    return "\n".join(lines) + "\n"


def figures(records: list[Record], stem: Path) -> list[Path]:
    """Bus bandwidth against message size, one line per rung (p2p: memcpy bandwidth of pair
    0->1), one panel per op, the datasheet link rate dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = defaultdict(list)
    for r in coll(records):
        if r.status == OK and not r.params.get("reference_only"):
            series[(r.metric, f"{r.backend} {r.params['dtype']} {r.params['placement']}")].append((r.params["size"], busbw(r)))
    p2p = sorted((r.params["size"], r.params["size"] / r.summary().median / 1e9) for r in records
                 if r.backend == "p2p" and r.status == OK and r.metric == "memcpy_peer"
                 and (r.params["src"], r.params["dst"]) == (0, 1))
    ops = [op for op in OPS if any(k[0] == op for k in series)]
    if not ops:
        return []
    sheet = max((r.params.get("datasheet_GBps") or 0 for r in coll(records)), default=0)
    cols = min(3, len(ops))
    rows = (len(ops) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, op in zip(axes.ravel(), ops):
        for (o, label), pts in sorted(series.items()):
            if o == op:
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=label)
        if p2p:
            ax.plot([p[0] for p in p2p], [p[1] for p in p2p], ls="--", color="grey", label="p2p memcpy 0->1")
        if sheet:
            ax.axhline(sheet, ls=":", color="black", label=f"datasheet {sheet:.0f} GB/s")
        ax.set_xscale("log", base=2)
        ax.set_title(op)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.legend(fontsize=7)
    for ax in axes.ravel()[len(ops):]:
        ax.axis("off")
    fig.tight_layout()
    path = Path(str(stem) + "-busbw.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


# ---------------------------------------------------------------- bench.report's communication section
def report_tables(runs: list) -> list:
    """The report's communication section: per bench.dist file the collective-gap table (with the
    harness/plain check and the p2p floor beside it), and per data-parallel training file the
    scaling table beside its prediction."""
    from gapbench.core import reportkit as rk

    gap, scale = [], []
    for run in runs:
        mach, n = rk.machine_of(run), run.run.get("nproc") or (run.run.get("config") or {}).get("nproc") or ""
        where = f"{mach} x{n}" if n else mach
        if run.run.get("probe") == "dist":
            floor = {r.params["size"]: r.params["size"] / r.summary().median / 1e9 for r in run.records
                     if r.backend == "p2p" and r.status == OK and r.metric == "memcpy_peer"
                     and (r.params.get("src"), r.params.get("dst")) == (0, 1)}
            for row in gap_rows(run.records):
                p2p = floor.get(row["size"])
                gap.append([where, f"{row['op']} {row['dtype']}", human_bytes(row["size"]), _f(row.get("nccl_us")),
                            _f(row.get("nccl_busbw")), _f(p2p) if p2p else "-", _ci(row.get("plain_ratio")) or "-",
                            _ci(row.get("torch_gap")) or "-", _ci(row.get("cupy_gap")) or "-",
                            _ci(row.get("mlx_gap")) or "-", rk.date(run)])
        if run.run.get("probe") == "train-dp":
            for r in run.records:
                if r.probe != "train-dp":
                    continue
                p = r.params
                if r.status != OK:
                    scale.append([where, r.variant, f"{r.status}: {r.reason[:60]}", "-", "-", "-", "-", "-", rk.date(run)])
                    continue
                scale.append([where, r.variant, rk.spread(r, 1e3), f"{p['tokens_per_s_total']:.0f}",
                              f"{p['efficiency']:.0%}" if "efficiency" in p else "-",
                              f"{p['predicted_efficiency']:.0%}" if "predicted_efficiency" in p else "-",
                              f"{p['exposed_comm_s'] * 1e3:.1f}", f"{max(p['peak_bytes_per_rank']) / 2**30:.1f}",
                              rk.date(run)])
    out = []
    if gap:
        out.append(rk.Table("Communication: collectives rung by rung (bench.dist)",
                            ["machine", "op", "size", "NCCL us", "NCCL busbw GB/s", "p2p memcpy GB/s", "harness/plain",
                             "torch / NCCL", "CuPy / NCCL", "MLX / NCCL", "date"], gap,
                            note="Ratios: the median of per-round ratios of engines interleaved in one launch [95% "
                                 "interval]; harness/plain: rounds of fresh processes. busbw as nccl-tests defines it."))
    if scale:
        out.append(rk.Table("Communication: data-parallel scaling beside its prediction (bench.train --nproc)",
                            ["machine", "run", "step ms [p10-p90]", "tokens/s", "weak scaling", "predicted",
                             "exposed comm ms", "peak GiB/rank", "date"], scale,
                            note="Prediction: t1 / (t1 + gradient bytes x bus factor / all-reduce busbw at the bucket "
                                 "size), i.e. no overlap of communication with compute."))
    return out

