"""bench.dist's tables (rich, within 100 columns), Markdown and figures, from result records."""
from __future__ import annotations

from collections import defaultdict
from statistics import median
from pathlib import Path

from gapbench.core.result import OK, Record
from gapbench.core.names import Placement, Rung
from gapbench.benchmarks.collectives.config import COLLECTIVE_RUNGS, OPS, human_bytes

FRAMEWORKS = tuple(r for r in COLLECTIVE_RUNGS if r.is_framework)


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


def _launch_reference(idx, fw: Record, op, dt, pl, size) -> Record | None:
    """Direct NCCL measured in the framework's own launch and in its placement: the only run its
    gap may be taken against (its rounds interleave with the framework's, and NCCL in place and
    out of place are different programs)."""
    grp = fw.params.get("group")
    for key in (("nccl", op, dt, pl, size, grp), ("nccl", op, dt, pl, size)):
        c = idx.get(key)
        if c is not None and c.params.get("group") == grp:
            return c
    return None


def _placement_words(pl: str) -> str:
    return "in place" if pl == Placement.in_ else "out of place"


def gap_rows(records: list[Record]) -> list[dict]:
    """Per op, dtype, placement and size: direct NCCL's time and busbw (the main launch), the plain
    loop's harness/plain ratio (out of place), each framework's time and its gap. A gap is taken
    only against direct NCCL in the framework's own launch and in the same placement: where that
    is the NCCL run of the row it stands beside it; where it is another launch's own reference
    (MLX's), that reference's time is in the row too (`<fw>_ref_us`); where there is none, the row
    says why the framework is not comparable (`<fw>_why`) and has no gap."""
    from gapbench.core.plaincheck import plain_ratio

    idx = _index(records)
    keys = sorted({(k[1], k[2], k[3], k[4]) for k in idx},
                  key=lambda k: (OPS.index(k[0]), k[1], k[2] != Placement.out, k[3]))
    has_nccl = any(k[0] == Rung.nccl for k in idx)  # else (a CPU run of the frameworks) no gap is asked for
    rows = []
    for op, dt, pl, size in keys:
        row = {"op": op, "dtype": dt, "placement": pl, "size": size}
        nccl = idx.get(("nccl", op, dt, pl, size))
        if nccl:
            row["nccl_us"], row["nccl_busbw"] = t_us(nccl), busbw(nccl)
        plain = idx.get(("nccl-plain", op, dt, pl, size))
        if plain:
            row["plain_us"] = t_us(plain)
            row["plain_ratio"] = plain_ratio(plain)
        for fw in FRAMEWORKS:
            r = idx.get((fw, op, dt, pl, size))
            if not r:
                continue
            row[f"{fw}_us"] = t_us(r)
            ref = _launch_reference(idx, r, op, dt, pl, size)
            if ref is None and has_nccl:
                row[f"{fw}_why"] = (f"not comparable: no direct NCCL {_placement_words(pl)} in {fw}'s launch "
                                    f"({r.params.get('group') or 'its own'})")
            if ref is None:
                continue
            row[f"{fw}_gap"] = paired_gap(r, ref)
            if ref is not nccl:
                row[f"{fw}_ref_us"] = t_us(ref)
        if len(row) > 4:
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


def _gap_cell(r: dict, fw: str, short: bool = False) -> str:
    return "not comparable" if short and f"{fw}_why" in r else r.get(f"{fw}_why") or _ci(r.get(f"{fw}_gap"), short)


def _notes(rows: list[dict]) -> list[str]:
    """One line per framework and reason it was not comparable somewhere."""
    seen = {}
    for r in rows:
        for fw in FRAMEWORKS:
            if f"{fw}_why" in r:
                seen.setdefault(r[f"{fw}_why"], []).append(f"{r['op']} {r['dtype']} {human_bytes(r['size'])}")
    return [f"{why}: {', '.join(where)}" for why, where in seen.items()]


GAP_TITLE = ("Collective gap: framework time / the direct NCCL time beside it (same launch, same placement), "
             "median of paired rounds [95% interval]")


def gap_table(records: list[Record]):
    from rich.table import Table

    rows = gap_rows(records)
    if not rows:
        return None
    cols = [("pl", lambda r: r["placement"]), ("size", lambda r: human_bytes(r["size"])),
            ("NCCL us", lambda r: _f(r.get("nccl_us"))),
            ("busbw", lambda r: _f(r.get("nccl_busbw"))), ("harness/plain", lambda r: _ci(r.get("plain_ratio"), True)),
            ("torch us", lambda r: _f(r.get("torch_us")))]
    for fw in FRAMEWORKS:
        cols.append((f"{fw}'s NCCL us", lambda r, fw=fw: _f(r.get(f"{fw}_ref_us"))))
        cols.append((f"{fw} gap", lambda r, fw=fw: _gap_cell(r, fw, True)))
    cols = [(h, g) for h, g in cols if any(g(r) for r in rows)]  # only columns with data
    t = Table(title=GAP_TITLE, title_justify="left", caption="\n".join(_notes(rows)) or None, caption_justify="left")
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

    rs = [r for r in records if r.backend == Rung.p2p and r.status == OK]
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
             "Gap = framework time / the direct NCCL time beside it, measured in the same launch and the same "
             "placement (pl: out of place or in place): the median of the paired rounds' ratios [95% interval]. "
             "MLX runs in a launch of its own, so its gap is against that launch's NCCL run, shown as MLX's NCCL "
             "us. harness/plain: bench.dist's direct-NCCL timing against a plain C++ loop, rounds of fresh "
             "processes.", "",
             "| op | pl | size | NCCL us | NCCL busbw GB/s | harness/plain | torch us | torch gap | CuPy gap | MLX us "
             "| MLX's NCCL us | MLX gap |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['op']} {r['dtype']} | {r['placement']} | {human_bytes(r['size'])} | {_f(r.get('nccl_us'))} | "
                     f"{_f(r.get('nccl_busbw'))} | {_ci(r.get('plain_ratio'))} | {_f(r.get('torch_us'))} | "
                     f"{_gap_cell(r, Rung.torch)} | {_gap_cell(r, Rung.cupy)} | {_f(r.get('mlx_us'))} | "
                     f"{_f(r.get('mlx_ref_us'))} | {_gap_cell(r, Rung.mlx)} |")
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
                 if r.backend == Rung.p2p and r.status == OK and r.metric == "memcpy_peer"
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
                     if r.backend == Rung.p2p and r.status == OK and r.metric == "memcpy_peer"
                     and (r.params.get("src"), r.params.get("dst")) == (0, 1)}
            for row in gap_rows(run.records):
                p2p = floor.get(row["size"])
                gap.append([where, f"{row['op']} {row['dtype']}", row["placement"], human_bytes(row["size"]),
                            _f(row.get("nccl_us")), _f(row.get("nccl_busbw")), _f(p2p) if p2p else "-",
                            _ci(row.get("plain_ratio")) or "-", _gap_cell(row, Rung.torch) or "-",
                            _gap_cell(row, Rung.cupy) or "-", _f(row.get("mlx_ref_us")) or "-",
                            _gap_cell(row, Rung.mlx) or "-", rk.date(run)])
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
                            ["machine", "op", "pl", "size", "NCCL us", "NCCL busbw GB/s", "p2p memcpy GB/s",
                             "harness/plain", "torch / NCCL", "CuPy / NCCL", "MLX's NCCL us", "MLX / its NCCL", "date"],
                            gap,
                            note="Ratios: the median of per-round ratios of engines interleaved in one launch, each "
                                 "against direct NCCL in the same launch and the same placement (pl) [95% interval]; "
                                 "MLX's launch has its own NCCL run, shown beside its ratio; harness/plain: rounds of "
                                 "fresh processes. busbw as nccl-tests defines it."))
    if scale:
        out.append(rk.Table("Communication: data-parallel scaling beside its prediction (bench.train --nproc)",
                            ["machine", "run", "step ms [p10-p90]", "tokens/s", "weak scaling", "predicted",
                             "exposed comm ms", "peak GiB/rank", "date"], scale,
                            note="Prediction: t1 / (t1 + gradient bytes x bus factor / all-reduce busbw at the bucket "
                                 "size), i.e. no overlap of communication with compute."))
    return out

