"""bench.dist's tables (rich, within 100 columns), Markdown and figures, from result records."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ..result import OK, Record
from .config import COLLECTIVE_RUNGS, OPS, human_bytes

FRAMEWORKS = ("torch", "cupy", "mlx")


def coll(records: list[Record]) -> list[Record]:
    return [r for r in records if r.probe == "dist" and r.backend in COLLECTIVE_RUNGS + ("nccl-plain",)
            and r.metric in OPS and r.params.get("size")]


def t_us(r: Record) -> float:
    return r.summary().median * 1e6


def algbw(r: Record) -> float:
    return r.params["size"] / (r.summary().median) / 1e9


def busbw(r: Record) -> float:
    return algbw(r) * r.params.get("bus_factor", 1.0)


def _index(records):
    idx = {}
    for r in coll(records):
        if r.status == OK:
            idx[(r.backend, r.metric, r.params["dtype"], r.params["placement"], r.params["size"])] = r
    return idx


def gap_rows(records: list[Record]) -> list[dict]:
    """Per op, dtype, size: direct NCCL time and busbw, each framework's time and its gap
    (framework / direct NCCL, same placement when NCCL has it, else NCCL out of place)."""
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
        for fw in FRAMEWORKS:
            r = idx.get((fw, op, dt, "out", size)) or idx.get((fw, op, dt, "in", size))
            if not r:
                continue
            row[f"{fw}_us"] = t_us(r)
            ref = idx.get(("nccl", op, dt, r.params["placement"], size)) or nccl
            if ref:
                row[f"{fw}_gap"] = t_us(r) / t_us(ref)
        if len(row) > 3:
            rows.append(row)
    return rows


def _f(v, fmt="{:.1f}"):
    return "" if v is None else fmt.format(v)


def gap_table(records: list[Record]):
    from rich.table import Table

    rows = gap_rows(records)
    if not rows:
        return None
    cols = [("op", lambda r: f"{r['op']} {r['dtype']}"), ("size", lambda r: human_bytes(r["size"])),
            ("NCCL us", lambda r: _f(r.get("nccl_us"))), ("busbw", lambda r: _f(r.get("nccl_busbw"))),
            ("plain us", lambda r: _f(r.get("plain_us")))]
    for fw in FRAMEWORKS:
        cols += [(f"{fw} us", lambda r, fw=fw: _f(r.get(f"{fw}_us"))),
                 (f"{fw} gap", lambda r, fw=fw: _f(r.get(f"{fw}_gap"), "{:.2f}x"))]
    cols = [(h, g) for h, g in cols if any(g(r) for r in rows)]  # only columns with data
    t = Table(title="Collective gap: framework time / direct NCCL time (host-timed)", title_justify="left")
    for h, _ in cols:
        t.add_column(h, justify="left" if h == "op" else "right", no_wrap=True)
    for r in rows:
        t.add_row(*[g(r) for _, g in cols])
    return t


def rung_table(records: list[Record], rung: str):
    """nccl-tests' columns for one rung: size, count, type, place, time, algbw, busbw, over ranks."""
    from rich.table import Table

    rs = [r for r in coll(records) if r.backend == rung and r.status == OK]
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


def all_tables(records: list[Record]) -> list:
    out = [gap_table(records), p2p_table(records)]
    out += [rung_table(records, r) for r in COLLECTIVE_RUNGS + ("nccl-plain",)]
    out.append(problem_table(records))
    return [t for t in out if t is not None]


def markdown(records: list[Record]) -> str:
    rows = gap_rows(records)
    if not rows:
        return ""
    lines = ["### Collectives: direct NCCL and the frameworks", "",
             "| op | size | NCCL us | NCCL busbw GB/s | torch us | torch gap | CuPy gap | MLX us | MLX gap |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['op']} {r['dtype']} | {human_bytes(r['size'])} | {_f(r.get('nccl_us'))} | "
                     f"{_f(r.get('nccl_busbw'))} | {_f(r.get('torch_us'))} | {_f(r.get('torch_gap'), '{:.2f}x')} | "
                     f"{_f(r.get('cupy_gap'), '{:.2f}x')} | {_f(r.get('mlx_us'))} | {_f(r.get('mlx_gap'), '{:.2f}x')} |")
    return "\n".join(lines) + "\n"


def figures(records: list[Record], stem: Path) -> list[Path]:
    """Bus bandwidth against message size, one line per rung (p2p: memcpy bandwidth of pair
    0->1), one panel per op, the datasheet link rate dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = defaultdict(list)
    for r in coll(records):
        if r.status == OK:
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
