"""bench.train's figures: memory and clocks over a step's timeline, from result records with matplotlib."""
from __future__ import annotations

from pathlib import Path

from gapbench.core.result import OK, Record


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
