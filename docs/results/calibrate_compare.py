"""Calibrate gapbench compare's between-run margin from A/A runs, and measure its false-alarm and
detection rates (issue 30). Reads the calibration runs in docs/results/calib/: per GPU, the default
bench.launch and bench.blas --quick twice (a1, a2: fresh processes, same commit) and once more with
a test-only injected delay on torch-cuda (inj: `bash .ci/gpu calib`). Writes the margins that
`gapbench compare` applies by default (python/gapbench/core/compare_margins.json) and prints the
Markdown report (docs/results/compare-calibration-*.md):

    python docs/results/calibrate_compare.py docs/results/calib > docs/results/compare-calibration-2026-11-25.md

The model: one run's interval covers the noise within that run only; between two runs a row also
moves by a between-run shift d = log(median B / median A) that one run cannot see. The margin for
a benchmark is the 98th percentile of |d| over every A/A row pair (rows of the injected backend
left out of the pairs with an injected run), so that at most ~2% of A/A rows fall outside it.
compare widens a single run's interval by it on the log scale. Every number here comes from the
files; nothing is typed in.
"""
from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import numpy as np

from gapbench.core import compare as cmp
from gapbench.core.result import OK, load_run

QUANTILE = 0.98  # the margin covers this share of A/A row shifts
FIVE = 0.05  # the injected slowdowns counted for detection: expected >= 5%
#: the injected backend and which of its rows the delay reaches (launch: a host busy-wait per op,
#: invisible to the gated device-time and graph rows; blas: a device spin after every timed op)
INJECTED = "torch-cuda"
REACHES = {"launch": {"submit", "roundtrip", "stream_b2b"}, "blas": None}
OUT = Path(__file__).resolve().parents[2] / "python/gapbench/core/compare_margins.json"


def commit_of(env: dict) -> str:
    """The commit whose sources hash to the build's content hash (the lent machine builds from a
    copy of the tree, so its own git state is not the code's)."""
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "cmake"))
    import provenance

    digest = env.get("source_hash", "")
    found = provenance.commit_for_hash(root, digest) if digest else None
    return found[:7] if found else f"unknown (content hash {digest[:12]})"


def per_metric(sides: list[dict]) -> dict:
    """{metric: (98th percentile of |shift|, pairs)} over the A/A row pairs of these GPUs."""
    by: dict = {}
    for side in sides:
        for metric, d in aa_pairs(side):
            by.setdefault(metric, []).append(abs(d))
    return {m: (float(np.quantile(v, QUANTILE)), len(v)) for m, v in sorted(by.items())}


def repeat_section(folder: Path) -> list[str]:
    """Launch with several fresh processes a side (repeat-*/: launch-a*.json.gz against
    launch-inj*.json.gz): compare's between-process intervals, their false alarms and detections."""
    out = []
    for sub in sorted(folder.glob("repeat-*")):
        a = [load_run(f) for f in sorted(sub.glob("launch-a*.json.gz"))]
        b = [load_run(f) for f in sorted(sub.glob("launch-inj*.json.gz"))]
        if len(a) < 2 or len(b) < 2:
            continue
        changes = [c for c in cmp.compare_groups(a, b) if c.ratio is not None]
        other = [c for c in changes if c.key[1] != INJECTED]
        bad = [c for c in other if c.verdict in (cmp.FASTER, cmp.SLOWER)]
        hit = [c for c in changes if c.key[1] == INJECTED and c.key[3] in REACHES["launch"]]
        out += [f"## launch, {len(a)} + {len(b)} fresh processes a side ({sub.name})", "",
                f"`gapbench compare` on folders of {len(a)} default runs against {len(b)} runs with "
                f"`--inject-delay-us {INJECTED}={injected_us(b[0]):g}`: each row's interval is a bootstrap over the "
                f"processes' medians. Rows of other backends called faster or slower: {len(bad)}/{len(other)}.", "",
                "| injected row | A median us | expected B/A | B/A [95%, between processes] | verdict |", "|---|---|---|---|---|"]
        for c in hit:
            t = float(np.median(c.a.per_op()))
            out.append(f"| {cmp.key_text(c.key)} | {t * 1e6:.3g} | {1 + injected_us(b[0]) * 1e-6 / t:.3f} | "
                       f"{c.ratio:.3f} [{c.lo:.3f}-{c.hi:.3f}] | {c.verdict} |")
        out.append("")
    return out


def runs(folder: Path) -> dict:
    """{(probe, gpu): {"a1": Run, "a2": Run, "inj": Run}} from calib-<probe>-<k>-<gpu>-<date>.json.gz."""
    out: dict = {}
    for f in sorted(folder.glob("calib-*-*-*.json.gz")):
        m = re.match(r"calib-(launch|blas)-(a1|a2|inj)-(.+)-\d{4}-\d\d-\d\d\.json\.gz$", f.name)
        if m:
            out.setdefault((m[1], m[3]), {})[m[2]] = (f, load_run(f))
    return out


def shifts(a, b, skip_injected: bool) -> list[tuple[str, float]]:
    """(metric, log(median B / median A)) per row measured in both (the injected backend's rows
    left out where one side is the injected run)."""
    ia = {cmp.row_key(r): r for r in a.records if r.status == OK and r.samples_s}
    d = []
    for r in b.records:
        k = cmp.row_key(r)
        if k in ia and r.status == OK and r.samples_s and not (skip_injected and r.backend == INJECTED):
            d.append((r.metric, math.log(np.median(r.per_op()) / np.median(ia[k].per_op()))))
    return d


def aa_pairs(side: dict) -> list[tuple[str, float]]:
    """Every A/A row pair of one GPU: a1 against a2, and each against the injected run."""
    (_, a1), (_, a2), (_, inj) = side["a1"], side["a2"], side["inj"]
    return shifts(a1, a2, False) + shifts(a1, inj, True) + shifts(a2, inj, True)


def aa_shifts(side: dict) -> list[float]:
    return [d for _, d in aa_pairs(side)]


def false_alarms(side: dict, margin: float) -> tuple[int, int, list[str]]:
    """(rows called faster/slower, rows compared, their names) over the A/A pairs at this margin."""
    (_, a1), (_, a2), (_, inj) = side["a1"], side["a2"], side["inj"]
    bad, n, names = 0, 0, []
    for a, b, skip in ((a1, a2, False), (a1, inj, True), (a2, inj, True)):
        for c in cmp.compare_runs(a, b, margin=margin):
            if c.ratio is None or (skip and c.key[1] == INJECTED):
                continue
            n += 1
            if c.verdict in (cmp.FASTER, cmp.SLOWER):
                bad += 1
                names.append(f"{cmp.key_text(c.key)} {c.ratio:.3f}")
    return bad, n, names


def injected_us(run) -> float:
    return float((run.run.get("config") or {}).get("inject_delay_us", {}).get(INJECTED))


def detection(probe: str, side: dict, margin: float) -> tuple[int, int, int, list[str]]:
    """(detected, rows expected >= 5% and above the noise, rows expected >= 5%, missed) over
    a1 -> inj and a2 -> inj: a row's expected slowdown is (t + delay) / t from its A median t; it is
    above the noise when that exceeds the margin and the minimum effect together."""
    _, inj = side["inj"]
    delay = injected_us(inj) * 1e-6
    hit = above = five = 0
    missed = []
    for key in ("a1", "a2"):
        _, a = side[key]
        for c in cmp.compare_runs(a, inj, margin=margin):
            if c.ratio is None or c.key[1] != INJECTED or (REACHES[probe] and c.key[3] not in REACHES[probe]):
                continue
            expected = 1 + delay / float(np.median(c.a.per_op()))
            if expected - 1 < FIVE:
                continue
            five += 1
            m = margin if not isinstance(margin, dict) else margin.get(c.key[3], margin["*"])
            if math.log(expected) <= m + math.log(1 + cmp.MIN_EFFECT):
                continue
            above += 1
            if c.verdict == cmp.SLOWER:
                hit += 1
            else:
                missed.append(f"{cmp.key_text(c.key)} expected {expected:.3f}, got {c.ratio:.3f} ({c.verdict})")
    return hit, above, five, missed


def main(folder: str) -> None:
    data = runs(Path(folder))
    probes = sorted({p for p, _ in data})
    margins, lines = {}, []
    lines += ["# gapbench compare: A/A false alarms and injected-slowdown detection", "",
              f"Generated by `python docs/results/calibrate_compare.py {folder}` from the runs in {folder} "
              "(`bash .ci/gpu calib`: per GPU the default `bench.launch` and `bench.blas --quick` twice, fresh "
              "processes, same commit, then once with `--inject-delay-us torch-cuda=US`, test only). The margin of "
              f"a benchmark is the {100 * QUANTILE:g}th percentile of |log(B/A)| over every A/A row pair on both GPUs; "
              "`gapbench compare` widens one run's interval by it (`--margin auto`, the default). Rows of the "
              "injected backend are left out of the pairs with the injected run. Minimum effect "
              f"{100 * cmp.MIN_EFFECT:g}%.", ""]
    for probe in probes:
        gpus = sorted(g for p, g in data if p == probe)
        pooled = [x for g in gpus for x in aa_shifts(data[(probe, g)])]
        margin = float(np.quantile(np.abs(pooled), QUANTILE))
        sources = sorted(str(f.name) for g in gpus for f, _ in data[(probe, g)].values())
        commits = sorted({commit_of(r.env) for g in gpus for _, r in data[(probe, g)].values()})
        metric_margins = per_metric([data[(probe, g)] for g in gpus])
        margins[probe] = {"margin_log": round(margin, 5), "quantile": QUANTILE, "aa_row_pairs": len(pooled),
                          "per_metric": {m: round(q, 5) for m, (q, n) in metric_margins.items()} if probe == "launch" else {},
                          "gpus": gpus, "sources": sources, "commits": commits,
                          "generator": "docs/results/calibrate_compare.py"}
        lines += [f"## {probe}", "",
                  f"Margin: +-{100 * (math.exp(margin) - 1):.1f}% ({len(pooled)} A/A row pairs; median |shift| "
                  f"{100 * (math.exp(float(np.median(np.abs(pooled)))) - 1):.1f}%, largest "
                  f"{100 * (math.exp(float(np.max(np.abs(pooled)))) - 1):.1f}%).", "",
                  "| GPU | margin | A/A false alarms | injected | rows >= 5% | of those above the noise | detected |",
                  "|---|---|---|---|---|---|---|"]
        notes = []
        for g in gpus:
            side = data[(probe, g)]
            other = [x for h in gpus if h != g for x in aa_shifts(data[(probe, h)])]
            rows = [("none (within-run only)", 0.0), ("pooled", margin)]
            if probe == "launch":
                rows.append(("per metric (pooled)", {"*": margin, **{m: q for m, (q, n) in metric_margins.items()}}))
            if other:
                rows.append((f"from the other GPU only", float(np.quantile(np.abs(other), QUANTILE))))
            for label, m in rows:
                bad, n, names = false_alarms(side, m)
                hit, above, five, missed = detection(probe, side, m)
                shown = f"+-{100 * math.expm1(m):.1f}%" if not isinstance(m, dict) else "per metric, below"
                lines.append(f"| {g} | {label}: {shown} | {bad}/{n} ({100 * bad / max(n, 1):.1f}%) "
                             f"| {injected_us(side['inj'][1]):g} us | {five} | {above} | "
                             f"{hit}/{above} ({100 * hit / max(above, 1):.0f}%) |")
                if label == "pooled":
                    notes += [f"- {g}, pooled margin: false alarm {x}" for x in names]
                    notes += [f"- {g}, pooled margin: missed {x}" for x in missed]
        lines += [""] + (notes or ["(no false alarms and no misses at the pooled margin)"]) + [""]
        if probe == "launch":
            lines += ["Per metric (98th percentile of |shift| over the A/A row pairs, both GPUs):", "",
                      "| metric | margin | pairs |", "|---|---|---|"]
            lines += [f"| {m} | +-{100 * math.expm1(q):.1f}% | {n} |"
                      for m, (q, n) in metric_margins.items()]
            lines.append("")
    lines += repeat_section(Path(folder))
    print("\n".join(lines))
    OUT.write_text(json.dumps(margins, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parent / "calib"))
