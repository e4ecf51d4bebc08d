"""The state a process draws for the frameworks' cuBLAS cases, and what taking it off would cost
(issue 35; findings/between-runs.md, "A state each process draws").

1. Per machine start of the committed default bench.blas runs: each run's state score (mode_state.py:
   100 x log(GEMV fp16 16384x1024 / VJP dx fp16 1024x16384), torch's rows).
2. H200, framework rows (torch and CuPy), each start held out in turn: the process-to-process moves
   as latent factors, fitted on the other starts (the first K principal components of the runs' log
   medians, centred within each start), then taken off each held-out pair of runs, a row's factor
   scores estimated from the pair's other rows (leave one out). A stand-in for compare's `same`
   (|d| + 1.645 rms <= 3%, the rms of the row's moves over the training starts' pairs, raw or with
   the factors taken off) says what that would buy; the injected runs (a test-only 1 and 3 us delay on
   torch, against the A/A runs of their start, factors fitted without that start) say what it would
   hide: of the torch rows whose delay must move them by 3% or more, how many still move by 3% with
   the factors taken off, and how much of each one's measured move is left.

3. Why more rounds would not help: over floor_model.py's FLOOR_STARTS, the short rows' move between
   two runs of a start (less the floor's share, as compare takes it off) against what the runs'
   own sampling gives (each median's bootstrap sd, both runs).
4. What moves together: over the same runs, the correlation of two rows' moves (as in 3) by how
   they relate: torch's and CuPy's row of one case, torch's row and the native cuBLAS row of one
   case, and each of these across neighbouring (1-2 apart in the run) and other cases.
5. The main model refitted with the H200's default runs of EXTRA that came before 2026-11-28 08:00
   (four starts), judged one run a side on the four later starts, which neither fit saw, beside the
   shipped model (both with the shipped floor section).

    python docs/results/state_factor.py > docs/results/state-2026-11-28/state-factor.md
"""
from __future__ import annotations

import collections
import itertools
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibrate_compare as cc  # noqa: E402
import mode_state  # noqa: E402

_C = "docs/results/calib"
_S = "docs/results/state-2026-11-28"
#: default bench.blas A/A runs after the model's STARTS (git:REV:PATH; INDEX.md lists each)
EXTRA = {
    "h200": {
        "2026-11-27 19:11 (repeat)": [f"git:651d56c:{_C}/h200-2026-11-27-1911/repeat-blas-{k}.json.gz" for k in range(1, 7)],
        **{f"2026-11-28 {t} (64698a6)": [f"git:8d5bb3f:{_C}/h200-2026-11-28{s}/aa-blas-a{i}-h200-2026-11-28.json.gz"
                                         for i in ((1, 2, 3) if s == "a" else (1, 2))]
           for s, t in (("a", "05:5x"), ("b", "06:0x"), ("c", "06:1x"))},
        **{f"2026-11-28 {t} (473ff8b)": [f"git:d34bbcf:{_C}/h200-2026-11-28{s}/aa-blas-a{i}-h200-2026-11-28.json.gz"
                                         for i in (1, 2, 3)] for s, t in (("d", "08:3x"), ("e", "08:5x"))},
        "2026-11-28 10:5x (7c9d32e, lazy)": [f"git:cddfff7:{_S}/loading/blas-lazy-h200-2026-11-28-{i}.json.gz"
                                             for i in (2, 5)],
        "2026-11-28 11:1x (7c9d32e)": [f"git:cddfff7:{_S}/floorcost/blas-floor-h200-2026-11-28-{i}.json.gz"
                                       for i in (1, 2, 3)],
    },
    "h100-80gb-hbm3": {
        **{f"2026-11-28 {t} (473ff8b)": [f"git:d34bbcf:{_C}/h100-2026-11-28{s}/aa-blas-a{i}-h100-80gb-hbm3-2026-11-28.json.gz"
                                         for i in (1, 2, 3)] for s, t in (("b", "08:4x"), ("c", "08:5x"))},
    },
}
FRAMEWORKS = ("torch-cuda", "cupy")
KS = (1, 2, 3)


def load() -> list[cc.File]:
    files = [f for f in cc.load() if f.probe == "blas" and f.mode == "default"]
    return files + [cc.File(rel, start, gpu) for gpu, starts in EXTRA.items() for start, rels in starts.items()
                    for rel in rels]


def score_table(files: list[cc.File]) -> list[str]:
    out = ["| GPU model | machine start | runs: state score (torch), in the order they ran |", "|---|---|---|"]
    by = collections.defaultdict(list)
    for f in files:
        if not f.injected:
            by[(f.gpu, f.start)].append(mode_state.scores(f.run).get("torch-cuda"))
    for (gpu, start), v in by.items():
        out.append(f"| {gpu} | {start} | {' '.join('-' if x is None else f'{x:+.1f}' for x in v)} |")
    return out


def _centred(fs: list[cc.File], keys: list) -> np.ndarray:
    m = np.array([[math.log(f.medians[k][0]) for k in keys] for f in fs])
    return m - m.mean(axis=0)


def _d(a: cc.File, b: cc.File, keys: list) -> np.ndarray:
    return np.array([math.log(b.medians[k][0] / a.medians[k][0]) for k in keys])


def _take_off(d: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """d less its factors, each row's factor scores fitted on the pair's other rows."""
    out = np.empty_like(d)
    for r in range(len(d)):
        keep = np.arange(len(d)) != r
        coef, *_ = np.linalg.lstsq(basis[:, keep].T, d[keep], rcond=None)
        out[r] = d[r] - basis[:, r] @ coef
    return out


def factor_table(files: list[cc.File]) -> list[str]:
    h200 = [f for f in files if f.gpu == "h200"]
    aa = [f for f in h200 if not f.injected]
    keys = sorted(k for k in set.intersection(*[set(f.medians) for f in h200]) if k[1] in FRAMEWORKS)
    by = collections.defaultdict(list)
    for f in aa:
        by[f.start].append(f)
    starts = [s for s, v in by.items() if len(v) >= 2]
    inj = [f for f in h200 if f.injected]
    torch_rows = np.array([k[1] == "torch-cuda" for k in keys])
    out = [f"H200: {len(keys)} framework rows in every run, {len(starts)} machine starts with two runs or more, "
           f"{sum(len(by[s]) * (len(by[s]) - 1) // 2 for s in starts)} pairs of runs within a start.", "",
           "| factors taken off | framework rows `same` (stand-in), held out | injected torch rows moved >= 3%: still >= 3% "
           "after | their move with the factors off / as measured (median, least) |", "|---|---|---|---|"]
    for K in (0,) + KS:
        same = [0, 0]
        kept, still = [], [0, 0]
        for held in starts + sorted({f.start for f in inj}):
            train = [s for s in starts if s != held]
            basis = np.linalg.svd(np.vstack([_centred(by[s], keys) for s in train]), full_matrices=False)[2][:K]
            adj = (lambda d: _take_off(d, basis)) if K else (lambda d: d)
            if held in starts:
                moves = np.array([adj(_d(a, b, keys)) for s in train for a, b in itertools.combinations(by[s], 2)])
                rms = np.sqrt(np.mean(moves ** 2, axis=0))
                for a, b in itertools.combinations(by[held], 2):
                    same[0] += int(np.sum(np.abs(adj(_d(a, b, keys))) + 1.645 * rms <= cc.cmp.MIN_EFFECT))
                    same[1] += len(keys)
            for f in (f for f in inj if f.start == held):
                for a in by[held]:
                    want = np.array([math.log1p(f.injected * 1e-6 / a.medians[k][0]) for k in keys])
                    pick = torch_rows & (want >= cc.cmp.MIN_EFFECT)
                    raw = _d(a, f, keys)
                    got = adj(raw)
                    still[0] += int(np.sum(got[pick] >= cc.cmp.MIN_EFFECT))
                    still[1] += int(np.sum(pick))
                    kept += list(got[pick] / raw[pick])
        out.append(f"| {K or 'none'} | {cc.pct(*same)} | {cc.pct(*still)} | {np.median(kept):.2f}, {min(kept):.2f} |")
    return out


def _floor_rows(run, rng) -> dict:
    """{row key: (median s, floor median s, bootstrap sd of log median)} of a run's rows with a floor."""
    from gapbench.benchmarks.blas.params import BlasParams
    from gapbench.core import noise

    out = {}
    for r in run.records:
        fl = BlasParams.of(r).launch_floor if r.status == "ok" and r.samples_s and r.metric == "time" else None
        if fl is not None and fl.median_s:
            v = np.asarray(r.per_op())
            boot = np.median(rng.choice(v, size=(200, v.size)), axis=1)
            out[noise.row_key(r)] = (float(np.median(v)), float(fl.median_s), float(np.std(np.log(boot))))
    return out


def floor_pairs():
    """Per GPU model, (row key, d less the floor's share, sampling sd of d, case order) over every two
    runs of a FLOOR_STARTS start, and each pair's moves keyed by (backend's row kind, case)."""
    import floor_model as fm

    rng = np.random.default_rng(0)
    out = {}
    for gpu, starts in fm.load().items():
        share = fm.noise.shipped().doc["floor"][gpu]["share"]
        rows, pairs = [], []
        for fs in starts.values():
            runs = [_floor_rows(f.run, rng) for f in fs]
            for a, b in itertools.combinations(runs, 2):
                order = {c: i for i, c in enumerate(dict.fromkeys(k[4] for k in a))}
                moves = {}
                for k in a.keys() & b.keys():
                    sh = share["native"] if k[1].startswith("native") else share["framework"]
                    d = math.log((b[k][0] - sh * (b[k][1] - a[k][1])) / a[k][0])
                    rows.append((k, d, math.hypot(a[k][2], b[k][2])))
                    moves[(k[2], k[4])] = d
                pairs.append((moves, order))
        out[gpu] = (rows, pairs)
    return out


def sampling_table(fp) -> list[str]:
    out = ["| GPU model | rows | row pairs | rms of the move between runs | what sampling alone gives |", "|---|---|---|---|---|"]
    for gpu, (rows, _) in fp.items():
        by = collections.defaultdict(list)
        for k, d, sd in rows:
            by["native" if k[1].startswith("native") else k[1]].append((d, sd))
        for g, v in sorted(by.items()):
            rms = 100 * math.sqrt(np.mean([d * d for d, _ in v]))
            samp = 100 * math.sqrt(np.mean([sd * sd for _, sd in v]))
            out.append(f"| {gpu} | {g} | {len(v)} | {rms:.2f}% | {samp:.2f}% |")
    return out


def together_table(fp) -> list[str]:
    kinds = (("torch", "cupy"), ("torch", "cublas"), ("cupy", "cublas"))
    out = ["| GPU model | rows | one case | neighbouring cases | other cases |", "|---|---|---|---|---|"]
    for gpu, (_, pairs) in fp.items():
        for x, y in kinds:
            got = {"one case": [], "neighbouring cases": [], "other cases": []}
            for moves, order in pairs:
                xs = {c: d for (kind, c), d in moves.items() if kind == x}
                ys = {c: d for (kind, c), d in moves.items() if kind == y}
                for ca, da in xs.items():
                    for cb, db in ys.items():
                        gap = abs(order[ca] - order[cb])
                        got["one case" if gap == 0 else "neighbouring cases" if gap <= 2 else "other cases"].append((da, db))
            cells = [f"{np.corrcoef(np.array(v).T)[0, 1]:+.2f} ({len(v)})" for v in got.values()]
            out.append(f"| {gpu} | {x} and {y} | {' | '.join(cells)} |")
    return out


def refit_table(files: list[cc.File]) -> list[str]:
    from gapbench.core import noise

    shipped = noise.shipped()
    extra = [f for f in files if f.gpu == "h200" and f.start in EXTRA["h200"]]
    early = [f for f in extra if f.start < "2026-11-28 08"]
    late = collections.defaultdict(list)
    for f in extra:
        if f.start >= "2026-11-28 08":
            late[f.start].append(f)
    cc.cmp.median_ratio_cis = cc.memo_interval
    doc = cc.fit_model(cc.pairs([f for f in files if f.gpu == "h200" and f.start not in EXTRA["h200"]] + early))
    doc["floor"] = shipped.doc["floor"]
    refit = noise.NoiseModel(doc)
    out = [f"Refitted: the shipped model's H200 runs and {len(early)} more of {len({f.start for f in early})} starts; "
           "both judge with the shipped floor section.", "",
           "| held-out start | pairs | shipped model: same, faster or slower | refitted: same, faster or slower |",
           "|---|---|---|---|"]
    for start, fs in late.items():
        ps = [(a, b) for a, b in itertools.combinations(fs, 2)]
        cells = []
        for m in (shipped, refit):
            n = cc.judge(m, ps)["n"]
            cells.append(", ".join(cc.shares(n)[:2]))
        out.append(f"| {start} | {len(ps)} | {cells[0]} | {cells[1]} |")
    return out


def main() -> None:
    files = load()
    print("# A state each process draws, and what taking it off would hide\n")
    print("Generated by `python docs/results/state_factor.py` from the committed runs it names; do not edit by hand.\n")
    print("## The state score of every default bench.blas run\n")
    print("\n".join(score_table(files)) + "\n")
    print("## Taking latent factors off the framework rows (H200, held out by machine start)\n")
    print("\n".join(factor_table(files)) + "\n")
    fp = floor_pairs()
    print("## Sampling within a run against the move between runs (short rows, the floor's share taken off)\n")
    print("\n".join(sampling_table(fp)) + "\n")
    print("## Which rows move together between two runs (correlation of their moves, row pairs)\n")
    print("\n".join(together_table(fp)) + "\n")
    print("## The main model refitted with more H200 starts\n")
    print("\n".join(refit_table(files)))


if __name__ == "__main__":
    main()
