"""Print the paired ratios of result files as Markdown. BLAS files: per op, dtype and shape, each
row's speed against the vendor arm of its case (cuBLAS, or cudaMemcpy for copy), the median of
per-round ratios with its distribution-free 95% interval and the verdict that interval gives (1%
band). Launch files: each framework's time over the native floor's (xfloor, paired in its own
process) and the harness's over the plain C++ loop's, with their intervals. Every number comes
from the files; nothing is typed in. Generates docs/results/ratios-*.md:

    python docs/results/ratio_table.py docs/results/blas-h100-2026-11-25-default.json.gz \
        docs/results/blas-h200-2026-11-25-default.json.gz docs/results/launch-h100-2026-11-25-default.json.gz \
        docs/results/launch-h200-2026-11-25-default.json.gz docs/results/launch-h100-2026-11-25-plain16.json.gz \
        > docs/results/ratios-2026-11-25.md
"""
from __future__ import annotations

import sys
from pathlib import Path

from gapbench.benchmarks.blas.params import BlasParams
from gapbench.core.result import NOT_APPLICABLE, OK, UNAVAILABLE, load_run

ROWS = ("gapbench", "torch", "cupy", "cublas-tf32")


def cell(r) -> str:
    """vendor time / this row's time: the paired ratio as the file holds it (never inverted), * when
    the ratio's own interval stopped short of its target, n/c (field) when the two arms ran under
    different conditions."""
    p = BlasParams.of(r).paired
    if p is None:
        return ""
    if p.not_comparable:
        return f"n/c ({p.not_comparable})"
    if p.speed_ratio is None:
        return ""
    if p.perturbed:
        return f"{p.speed_ratio_alone:.3f} alone (paired perturbed)"
    star = "*" if p.converged is False else ""
    word = {"faster": "**faster**", "slower": "**slower**"}.get(p.verdict, p.verdict)
    return f"{p.speed_ratio:.3f} [{p.lo:.3f}-{p.hi:.3f}]{star} {word}"


def commit_of(env: dict) -> str:
    """The commit of the code that wrote the file: its recorded source_commit where the build's
    sources were that commit's, else the commit whose sources hash to the file's source_hash (the
    lent machine builds from a copy of the tree without git), else says it is unknown."""
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "cmake"))
    import provenance

    digest = env.get("source_hash", "")
    found = provenance.commit_for_hash(root, digest, until=provenance.day_after(env.get("time"))) if digest else None
    if found:
        return f"source commit {found[:7]} (found by the content hash {digest[:12]})"
    return (f"source commit {env.get('source_commit', '?')[:7]}{' (dirty)' if env.get('dirty') else ''}, "
            f"content hash {digest[:12] or '?'} (no commit of this repository has those sources)")


def header(path: str, run) -> list[str]:
    env, cfg = run.env, run.run
    gpu = (env.get("nvidia_smi") or [{}])[0]
    return [f"## {gpu.get('name', '?')} (driver {gpu.get('driver_version', '?')}): {cfg.get('probe', '?')}", "",
            f"- file: [{Path(path).name}]({Path(path).name})",
            f"- command: `{cfg.get('command', '?')}`",
            f"- date: {cfg.get('started', '?')} to {cfg.get('finished', 'not finished (cut short)')}",
            f"- {commit_of(env)}; torch {env.get('libraries', {}).get('torch', '-')}, "
            f"cupy {env.get('libraries', {}).get('cupy-cuda13x', '-')}", ""]


def launch_table(path: str, run) -> str:
    from gapbench.benchmarks.launch.tables import plain_comparison

    lines = ["| framework | metric | vs | framework / floor (time) | rounds |", "|---|---|---|---|---|"]
    for r in run.records:
        p = r.params.get("paired") if r.status == OK else None
        if p and p.get("x_floor") is not None:
            lo = "-" if p.get("lo") is None else f"{p['lo']:.3f}"
            hi = "-" if p.get("hi") is None else f"{p['hi']:.3f}"
            if p.get("perturbed"):  # an arm moved between the rounds and its standalone timing
                cell = (f"{p['x_standalone']:.3f} alone (paired {p['x_floor']:.3f} [{lo}-{hi}] perturbed: "
                        f"{p['perturbed']})")
            else:
                cell = f"{p['x_floor']:.3f} [{lo}-{hi}]"
            lines.append(f"| {r.backend} | {r.metric} | {p['vs']} | {cell} | {p['rounds']} |")
    lines += ["", "| harness / plain C++ loop (native-cuda null kernel, time) | ratio [95% interval] |", "|---|---|"]
    lines += [f"| {m} | {r:.3f} [{lo:.3f}-{hi:.3f}] |" for m, r, lo, hi in plain_comparison(run.records)]
    wall = ""
    if run.run.get("started") and run.run.get("finished"):
        from datetime import datetime

        t = datetime.fromisoformat(run.run["finished"]) - datetime.fromisoformat(run.run["started"])
        wall = f"Run wall time (started to finished, whole seconds in the file): {t.total_seconds():.0f} s. "
    fresh = any("fresh" in str(r.params.get("processes", "")) for r in run.records if r.backend == "plain-cuda")
    where = ("each round a fresh harness process and a fresh plain loop" if fresh
             else "one harness process and one plain loop for all rounds")
    foot = ["", wall + "Both ratios are medians of per-round ratios with their distribution-free 95% interval, "
            "from rounds in random order: xfloor's interleaved in the framework's own process, "
            f"harness/plain's {where}."]
    return "\n".join(header(path, run) + lines + foot) + "\n"


def table(path: str) -> str:
    run = load_run(path)
    if run.run.get("probe") == "launch":
        return launch_table(path, run)
    env, cfg = run.env, run.run
    gpu = (env.get("nvidia_smi") or [{}])[0]
    head = [f"## {gpu.get('name', '?')} (driver {gpu.get('driver_version', '?')})", "",
            f"- file: [{Path(path).name}]({Path(path).name})",
            f"- command: `{cfg.get('command', '?')}`",
            f"- date: {cfg.get('started', '?')} to {cfg.get('finished', 'not finished (cut short)')}",
            f"- {commit_of(env)}; torch {env.get('libraries', {}).get('torch', '-')}, "
            f"cupy {env.get('libraries', {}).get('cupy-cuda13x', '-')}",
            f"- wall time by phase (s): {cfg.get('wall_s', 'not recorded')}", ""]
    cases: dict = {}
    for r in run.records:
        if r.metric == "time" and r.params.get("op") and r.backend in ("native-cuda", "torch-cuda", "cupy"):
            cases.setdefault((r.params["op"], r.params["dtype"], r.params["shape_text"]), []).append(r)
    lines = ["| op | dtype | shape | gapbench kernel | gapbench / vendor | torch / vendor | cupy / vendor | cuBLAS-TF32 / vendor |",
             "|---|---|---|---|---|---|---|---|"]
    bad, absent = [], {}
    for (op, dt, shape), rs in cases.items():
        by = {}
        for r in rs:
            if r.status in (UNAVAILABLE, NOT_APPLICABLE):
                absent[r.reason] = absent.get(r.reason, 0) + 1
                continue
            if r.status != OK:
                bad.append(f"{op} {dt} {shape} {r.backend}/{r.variant}: {r.status}: {r.reason[:160]}")
                continue
            by[r.variant.split("@")[0]] = r
        g = by.get("gapbench")
        lines.append(f"| {op} | {dt} | {shape} | {g.params.get('strategy', '') if g else ''} | "
                     + " | ".join(cell(by[v]) if v in by else "" for v in ROWS) + " |")
    roof = (run.run.get("roofline") or {}).get("cuda", {}).get("bytes_per_s", {}).get("value")
    own = [("| op | dtype | shape | row | TB/s | % of copy | vs the dispatcher |"), "|---|---|---|---|---|---|---|"]
    for (op, dt, shape), rs in cases.items():
        if any(r.variant in ("cublas", "memcpy") for r in rs) or not roof:
            continue
        for r in rs:
            if r.status == OK:
                rate = r.rates().get("bytes_per_s", 0)
                own.append(f"| {op} | {dt} | {shape} | {r.backend}/{r.variant} | {rate / 1e12:.3f} | "
                           f"{100 * rate / roof:.1f}% | {cell(r)} |")
    if len(own) > 2:
        lines += ["", "Ops no vendor library has: each row's rate against the copy bandwidth measured in the run "
                      f"({roof / 1e12:.3f} TB/s), and its paired ratio against the dispatcher where the run took one.",
                  ""] + own
    foot = ["", "Speed ratio = vendor time / row time (> 1: faster than the vendor), hot cache; * the ratio's "
            "interval did not reach its 1% target within the case's budget; n/c: the row and the vendor ran under "
            "different conditions (the field named), so no ratio. torch rows at fp32 may run at TF32 "
            "(`torch@tf32` in the file)."]
    foot += ["", "Rows that failed verification or errored: " + (str(len(bad)) if bad else "none."), ""]
    foot += [f"- {b}" for b in bad]
    foot += [f"- {n} row(s) not applicable here: {why}" for why, n in absent.items()]
    return "\n".join(head + lines + foot) + "\n"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    print("# Paired ratios per machine: the BLAS dispatcher, frameworks and cuBLAS-TF32 against the vendor "
          "library; launch's frameworks against the native floor, and the harness against the plain loop\n")
    print("Generated by `python docs/results/ratio_table.py FILES` from the result files it names; "
          "do not edit by hand.\n")
    for p in argv:
        print(table(p))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
