"""Fit gapbench compare's per-row noise model on committed A/A runs, and judge it out of sample
(issue 35). Writes the model compare applies by default (python/gapbench/core/compare_noise.json)
and prints the Markdown report (docs/results/compare-calibration-*.md):

    python docs/results/calibrate_compare.py > docs/results/compare-calibration.md

The runs: STARTS below names, per machine start of a lent GPU, the committed result files made on
it, in the tree or `git:REV:PATH` (committed at REV, then kept in git history only for the docs
budget: INDEX.md lists each with its blob; read with `git show`, so this needs a full clone) (default and --quick runs of bench.blas and bench.launch, some with a test-only delay injected
on torch-cuda). An A/A row pair is one row of two runs of the same benchmark and mode (default or
quick) on the same GPU model, on one start or two (rows of the injected backend are left out where
a side is injected). Its shift is d = log(median B / median A).

Out of sample: for each start, the model is fitted on the pairs that touch no run of that start,
then judged on the pairs that do (within the start, and between it and the others). The report
gives, per GPU model and benchmark, how many rows compare calls same, faster or slower (false
alarms) or can't tell, and how many injected slowdowns it finds, by their size. The shipped model
is then fitted on every pair. Every number here comes from the files; nothing is typed in.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python"))

from gapbench.core import compare as cmp  # noqa: E402
from gapbench.core import noise  # noqa: E402
from gapbench.core.shifts import judged_shifts  # noqa: E402
from gapbench.core import ratio_ci  # noqa: E402
import numpy as np  # noqa: E402
from gapbench.core.names import Parity  # noqa: E402
from gapbench.core.result import OK, load_run  # noqa: E402

OUT = ROOT / "python/gapbench/core/compare_noise.json"
INJECTED = "torch-cuda"
#: the injected delay reaches these launch metrics (a host busy-wait per op); BLAS: every torch row
REACHES = {"launch": {"submit", "roundtrip", "stream_b2b"}, "blas": None}
#: per machine start of a lent GPU, its result files (relative to docs/results). Starts are told
#: apart by time: a session holds one machine at a time, so runs an hour or another kind apart
#: are other starts (from 2026-11-26 each file also records its boot id).
STARTS = {
    "h100-80gb-hbm3": {
        "2026-11-25 15:01 (calibration)": ["calib/calib-blas-a1-h100-80gb-hbm3-2026-11-25.json.gz",
                                           "calib/calib-blas-a2-h100-80gb-hbm3-2026-11-25.json.gz",
                                           "calib/calib-blas-inj-h100-80gb-hbm3-2026-11-25.json.gz",
                                           "calib/calib-launch-a1-h100-80gb-hbm3-2026-11-25.json.gz",
                                           "calib/calib-launch-a2-h100-80gb-hbm3-2026-11-25.json.gz",
                                           "calib/calib-launch-inj-h100-80gb-hbm3-2026-11-25.json.gz"],
        "2026-11-25 15:27 (launch x3)": [f"git:9c1b2e2520c7:docs/results/calib/repeat-h100/launch-{k}.json.gz"
                                         for k in ("a1", "a2", "a3", "inj1", "inj2", "inj3")],
        "2026-11-25 16:31 (813b201)": ["blas-h100-2026-11-25-rerun.json.gz"],
        "2026-11-25 16:41 (31145c2)": ["blas-h100-2026-11-25-default.json.gz", "launch-h100-2026-11-25-default.json.gz"],
        "2026-11-26 07:2x (A/A)": ["calib/aa-2026-11-26/aa-blas-a1-h100-80gb-hbm3-2026-11-26.json.gz",
                                   "calib/aa-2026-11-26/aa-blas-a2-h100-80gb-hbm3-2026-11-26.json.gz",
                                   "calib/aa-2026-11-26/aa-launch-a1-h100-80gb-hbm3-2026-11-26.json.gz",
                                   "calib/aa-2026-11-26/aa-launch-a2-h100-80gb-hbm3-2026-11-26.json.gz"],
        "2026-11-26 10:0x (4 x H100 host, GPU 0)": [f"calib/aa-2026-11-26-4xh100/aa-{b}-{k}-4xh100-gpu0-2026-11-26.json.gz"
                                                    for b in ("blas", "launch") for k in ("a1", "a2")],
        "2026-11-26 10:2x (A/A, injected)": [f"calib/aa-2026-11-26-h100b/aa-{b}-{k}-h100b-2026-11-26.json.gz"
                                             for b, k in (("blas", "a1"), ("blas", "a2"), ("launch", "a1"), ("launch", "a2"),
                                                          ("blas", "inj1"), ("blas", "inj3"))],
        "2026-11-26 12:4x (run --repeat 3)": [f"calib/repeat-2026-11-26-h100/{b}-{k}.json.gz"
                                               for b in ("blas", "launch") for k in (1, 2, 3)],
        "2026-11-26 12:5x (run --repeat 3)": [f"calib/repeat-2026-11-26-h100b/{b}-{k}.json.gz"
                                               for b in ("blas", "launch") for k in (1, 2, 3)],
        "2026-11-26 15:2x (run --repeat 3, 4191390)": [f"calib/repeat-2026-11-26-h100e/{b}-{k}.json.gz"
                                                      for b in ("blas", "launch") for k in (1, 2, 3)],
        "2026-11-26 19:4x (run --repeat 3, 6afacf0, 8 streams)": [
            f"git:c1bbd43:docs/results/streams-2026-11-26/repeat-by-round-blas-{k}.json.gz" for k in (1, 2, 3)],
        "2026-11-26 22:31 (A/A, 8 streams)": [f"git:9c1b2e2520c7:docs/results/calib/streams-2026-11-26/h100-2231/aa-{b}-{k}.json.gz"
                                              for b in ("blas", "launch") for k in ("a1", "a2")],
        "2026-11-26 22:35 (A/A, 8 streams)": [f"git:9c1b2e2520c7:docs/results/calib/streams-2026-11-26/h100-2235/aa-{b}-{k}.json.gz"
                                              for b in ("blas", "launch") for k in ("a1", "a2")],
        "2026-11-27 00:26 (A/A, run --repeat 3, 8c92f95)": [
            f"git:72d1d1f:docs/results/calib/h100-2026-11-27a/{f}-{b}-{k}.json.gz" for b in ("blas", "launch")
            for f, ks in (("aa", ("a1", "a2", "a3", "b1", "b2", "b3")), ("repeat", (1, 2, 3))) for k in ks],
        "2026-11-27 00:50 (A/A, run --repeat 3, 8c92f95)": [
            f"git:72d1d1f:docs/results/calib/h100-2026-11-27b/{f}-{b}-{k}.json.gz" for b in ("blas", "launch")
            for f, ks in (("aa", ("a1", "a2")), ("repeat", (1, 2, 3))) for k in ks],
        "2026-11-27 01:4x (A/A, run --repeat 3, 55dba86)": [
            f"git:23f9511:docs/results/calib/h100-2026-11-27c/{f}-{b}-{k}.json.gz" for b in ("blas", "launch")
            for f, ks in (("aa", ("a1", "a2", "a3")), ("repeat", (1, 2, 3))) for k in ks],
        "2026-11-27 02:4x (A/A, run --repeat 3, 129012b)": [
            f"git:39b6445:docs/results/calib/h100-2026-11-27d/{f}-{b}-{k}.json.gz" for b in ("blas", "launch")
            for f, ks in (("aa", ("a1", "a2", "a3")), ("repeat", (1, 2, 3))) for k in ks],
        "2026-11-27 03:1x (A/A, run --repeat 3, 0bc4fe7)": [
            f"git:b941a35:docs/results/calib/h100-2026-11-27e/{f}-{b}-{k}.json.gz" for b in ("blas", "launch")
            for f, ks in (("aa", ("a1", "a2", "a3")), ("repeat", (1, 2, 3))) for k in ks],
        "2026-11-27 03:33 (A/A, 1147fa7)": [f"git:bea69d3:docs/results/calib/h100-2026-11-27f/aa-{b}-{k}.json.gz"
                                            for b in ("blas", "launch") for k in ("a1", "a2")],
        "2026-11-27 05:08 (run --repeat 3, ad2c491)": [f"git:ef99847:docs/results/calib/h100-2026-11-27g/repeat-{b}-{k}.json.gz"
                                                      for b in ("blas", "launch") for k in (1, 2, 3)],
        "2026-11-27 05:15 (A/A, ad2c491)": [f"git:ef99847:docs/results/calib/h100-2026-11-27h/aa-{b}-{k}.json.gz"
                                            for b in ("blas", "launch") for k in ("a1", "a2", "a3", "a4")],
        "2026-11-27 15:58 (run --repeat 3, 5793259)": [f"git:2181ab4:docs/results/calib/h100-2026-11-27x/repeat-{b}-{k}.json.gz"
                                                      for b in ("blas", "launch") for k in (1, 2, 3)],
        "2026-11-27 16:19 (run --repeat 3, 7531cf2)": [f"git:2181ab4:docs/results/calib/h100-2026-11-27y/repeat-{b}-{k}.json.gz"
                                                      for b in ("blas", "launch") for k in (1, 2, 3)],
    },
    "h200": {
        "2026-11-25 15:10 (99c7ee1, calibration)": ["blas-h200-2026-11-25-default.json.gz",
                                                    "launch-h200-2026-11-25-default.json.gz",
                                                    "calib/calib-blas-a1-h200-2026-11-25.json.gz",
                                                    "calib/calib-blas-a2-h200-2026-11-25.json.gz",
                                                    "calib/calib-blas-inj-h200-2026-11-25.json.gz",
                                                    "calib/calib-launch-a1-h200-2026-11-25.json.gz",
                                                    "calib/calib-launch-a2-h200-2026-11-25.json.gz",
                                                    "calib/calib-launch-inj-h200-2026-11-25.json.gz"],
        "2026-11-26 07:16 (2 x H200 host)": ["blas-2xh200-2026-11-26-gpu1-cvd.json.gz",
                                             "blas-2xh200-2026-11-26-gpu1-flag.json.gz",
                                             "calib/aa-2026-11-26/launch-h200x2-2026-11-26-a1.json.gz",
                                             "calib/aa-2026-11-26/launch-h200x2-2026-11-26-a2.json.gz"],
        "2026-11-26 07:3x (A/A, injected)": ["calib/aa-2026-11-26/aa-blas-a1-h200-2026-11-26.json.gz",
                                             "calib/aa-2026-11-26/aa-blas-a2-h200-2026-11-26.json.gz",
                                             "calib/aa-2026-11-26/aa-blas-inj1-h200-2026-11-26.json.gz",
                                             "calib/aa-2026-11-26/aa-blas-inj3-h200-2026-11-26.json.gz",
                                             "calib/aa-2026-11-26/aa-launch-a1-h200-2026-11-26.json.gz",
                                             "calib/aa-2026-11-26/aa-launch-a2-h200-2026-11-26.json.gz"],
        "2026-11-26 21:48 (A/A, bench, run --repeat 3, 8 streams)": [
            f"git:9c1b2e2520c7:docs/results/calib/streams-2026-11-26/h200-2148/{f}.json.gz"
            for f in ("aa-blas-a1", "aa-blas-a2", "aa-blas-a3", "aa-launch-a1", "aa-launch-a2", "aa-launch-a3", "bench-blas",
                      "bench-launch", "repeat-blas-1", "repeat-blas-2", "repeat-blas-3", "repeat-launch-1",
                      "repeat-launch-2", "repeat-launch-3")],
        "2026-11-26 22:06 (A/A, 8 streams)": [f"git:9c1b2e2520c7:docs/results/calib/streams-2026-11-26/h200-2206/aa-{b}-{k}.json.gz"
                                              for b in ("blas", "launch") for k in ("a1", "a2", "a3")],
        "2026-11-26 22:39 (A/A, 8 streams)": [f"git:9c1b2e2520c7:docs/results/calib/streams-2026-11-26/h200-2239/aa-{b}-{k}.json.gz"
                                              for b in ("blas", "launch") for k in ("a1", "a2")],
        "2026-11-27 04:59 (A/A, ad2c491)": [f"git:ef99847:docs/results/calib/h200-2026-11-27a/aa-{b}-{k}.json.gz"
                                            for b in ("blas", "launch") for k in ("a1", "a2", "a3")],
        "2026-11-27 16:08 (run --repeat 3, b0f5810)": [f"git:2181ab4:docs/results/calib/h200-2026-11-27g/repeat-{b}-{k}.json.gz"
                                                      for b in ("blas", "launch") for k in (1, 2, 3)],
        "2026-11-27 16:29 (run --repeat 3, 7531cf2)": [f"git:2181ab4:docs/results/calib/h200-2026-11-27h/repeat-{b}-{k}.json.gz"
                                                      for b in ("blas", "launch") for k in (1, 2, 3)],
        # bench.launch A/A only: their bench.blas runs (the launch floor on) are judged in each start's judged.md
        **{f"2026-11-28 {t} (A/A launch, fdf2c2e)": [
            f"git:8640fc8:docs/results/calib/h200-2026-11-28{s}/aa-launch-a{i}-h200-2026-11-28.json.gz" for i in range(1, n + 1)]
           for t, s, n in (("12:50", "j", 6), ("12:55", "k", 8), ("13:04", "l", 8))},
        # bench.blas --parity balanced A/A (their own mode: the gated rows' classes "gated-balanced")
        "2026-11-28 15:43 (balanced, 8e067a4)": [
            f"git:c38ebc1:docs/results/state-2026-11-28/parity/blas-balanced-h200-2026-11-28-{i}.json.gz" for i in (1, 2)],
        **{f"2026-11-28 {t[:2]}:{t[2:]} (balanced A/A{', injected' if t == '1718' else ''}, 37c4967)": [
            f"git:3f74e50:docs/results/calib/balanced-2026-11-28/h200-{t}/aa-blas-{k}-h200-2026-11-28.json.gz"
            for k in ("a1", "a2", "a3") + (("inj1", "inj3") if t == "1718" else ())]
           for t in ("1714", "1718", "1725", "1730")},
        **{f"2026-11-28 {t[:2]}:{t[2:]} (balanced A/A, a1d7b89)": [
            f"git:a44b2fc:docs/results/calib/balanced-2026-11-28/h200-{t}/aa-blas-{k}-h200-2026-11-28.json.gz"
            for k in ("a1", "a2", "a3")]
           for t in ("2023", "2028", "2032")},
    },
}
#: detection is counted by the injected slowdown a row must show at least (delay / its A median)
BUCKETS = ((0.03, 0.05), (0.05, 0.10), (0.10, math.inf))


class HistoryUnavailable(RuntimeError):
    """A source kept in git history only (`git:REV:PATH`) that this checkout cannot read (no .git, or
    a shallow clone without REV): `git fetch --unshallow` brings it."""


_tmp = None

#: runs the shipped model names by their path in the tree (its `sources`), taken out of the tree later
#: for the docs budget: path -> the commit that last holds it (INDEX.md lists each with its blob). The
#: name stays what the model and its report cite; the bytes come from git history.
MOVED = {**{f"calib/repeat-2026-11-26-h100/{b}-{k}.json.gz": "bc4ec52" for b in ("blas", "launch") for k in (1, 2, 3)},
         **{f"calib/aa-2026-11-26/aa-blas-inj{us}-h200-2026-11-26.json.gz": "63ab7f1" for us in (1, 3)},
         **{f"calib/repeat-2026-11-26-{s}/{b}-{k}.json.gz": "daab750"
            for s in ("h100b", "h100e") for b in ("blas", "launch") for k in (1, 2, 3)}}


def source(rel: str) -> Path:
    """The file a STARTS entry names: a path under docs/results, or `git:REV:PATH` for a run kept in
    git history only (committed at REV, then taken out of the tree for the docs budget; INDEX.md
    lists each with its blob), read with `git show` into a temporary folder; a path in MOVED is read
    from its commit in the same way."""
    if not rel.startswith("git:"):
        if rel in MOVED and not (HERE / rel).exists():
            return source(f"git:{MOVED[rel]}:docs/results/{rel}")
        return HERE / rel
    global _tmp
    rev, path = rel[4:].split(":", 1)
    done = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True)
    if done.returncode != 0:
        raise HistoryUnavailable(f"{rel}: not readable here ({done.stderr.decode(errors='replace').strip()}); "
                                 "the calibration's runs kept in git history need a full clone (git fetch --unshallow)")
    if _tmp is None:
        _tmp = tempfile.TemporaryDirectory(prefix="gapbench-calib-")
    out = Path(_tmp.name) / rev / path
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(done.stdout)
    return out


class File:
    def __init__(self, rel: str, start: str, gpu: str | None = None):
        self.rel, self.start = rel, start
        self.run = load_run(source(rel))
        self.key = noise.device_class(self.run)  # the model's unit: GPU model, /quick for quick runs
        self.gpu = gpu or self.key.split("/")[0]
        self.probe = self.run.run.get("probe")
        self.mode = mode_of(self.run)
        self.injected = float(((self.run.run.get("config") or {}).get("inject_delay_us") or {}).get(INJECTED) or 0)
        self.medians = {cmp.row_key(r): (r.median(), r)
                        for r in self.run.records if r.status == OK and r.samples_s}
        assert self.key.split("/")[0] == self.gpu, (rel, self.key)


#: a run's mode: what its pairs and classes are kept apart by (a pair is two runs of one mode)
MODES = ("default", "balanced", "quick")


def mode_of(run) -> str:
    """quick (--quick: fewer samples), balanced (bench.blas --parity balanced: its gated rows padded to
    both launch parities, classes of their own) or default."""
    if noise.is_quick(run):
        return "quick"
    if (run.run.get("config") or {}).get("parity") == Parity.balanced.value:
        return "balanced"
    return "default"


def labelled_runs(arg: str) -> tuple[str, list]:
    """A command line's `LABEL=RUN,RUN,...` (each a path under docs/results or `git:REV:PATH`, as
    `source` reads it) as (label, the runs loaded)."""
    label, rels = arg.split("=", 1)
    return label, [load_run(source(rel)) for rel in rels.split(",")]


def default_blas(rels: list[str]):
    """The runs of `rels` (a start's STARTS entries) that are default bench.blas runs: no --quick, no
    --parity balanced, no injected delay, loaded in order."""
    for rel in rels:
        if "blas" not in rel or "inj" in rel:
            continue
        run = load_run(source(rel))
        if run.run.get("probe") == "blas" and mode_of(run) == "default":
            yield run


def load() -> list[File]:
    return [File(rel, start, gpu) for gpu, starts in STARTS.items() for start, rels in starts.items() for rel in rels]


def pairs(files: list[File]) -> list[tuple[File, File]]:
    """Every two runs of one benchmark and mode on one GPU model. Pairs with an injected run are
    for detection only: the delay also moves the arms paired with the injected one (CuPy's quick
    rows ran 4-6% faster beside a slowed torch), so they are no A/A pairs."""
    return [(a, b) for a, b in itertools.combinations(files, 2)
            if a.gpu == b.gpu and a.probe == b.probe and a.mode == b.mode]


def aa(ps: list[tuple[File, File]]) -> list[tuple[File, File]]:
    return [(a, b) for a, b in ps if not a.injected and not b.injected]


_shifts: dict = {}


def shifts(a: File, b: File):
    """(class, d) of every A/A row pair of two runs, as compare judges them (shifts.judged_shifts: rows
    a moved floor leaves without a verdict are out, host-timed launch rows are gaps to their floor)."""
    if (a.rel, b.rel) not in _shifts:
        _shifts[(a.rel, b.rel)] = judged_shifts(a.run, b.run, one_start=a.start == b.start)
    return _shifts[(a.rel, b.rel)]


def fit_model(ps: list[tuple[File, File]]) -> dict:
    """The model doc from these pairs: per GPU model, the fitted classes and where they came from."""
    devices = {}
    ps = aa(ps)
    for gpu in sorted({a.key for a, _ in ps}):
        mine = [(a, b) for a, b in ps if a.key == gpu]
        within = [(c, d, (a.rel, b.rel)) for a, b in mine if a.start == b.start for c, d in shifts(a, b)]
        across = [(c, d, tuple(sorted((a.start, b.start)))) for a, b in mine if a.start != b.start for c, d in shifts(a, b)]
        files = sorted({f.rel for p in mine for f in p})
        devices[gpu] = {"within": noise.fit(within), "across": noise.fit(across), "pairs": len(within) + len(across),
                        "pairs_within": len(within), "pairs_across": len(across), "run_pairs": len(mine),
                        "starts": sorted({f.start for p in mine for f in p}), "sources": files,
                        "commits": sorted({commit_of(f.run.env) for p in mine for f in p})}
    return {"generator": "docs/results/calibrate_compare.py", "min_pairs": noise.MIN_PAIRS,
            "devices": devices}


_commits: dict = {}


def commit_of(env: dict) -> str:
    """The commit whose sources hash to the build's content hash (the lent machine builds from a
    copy of the tree, so its own git state is not the code's), searched among the commits made
    up to a day after the run (provenance.commit_for_hash's `until`: the answer stays the same
    however many commits come later)."""
    if str(ROOT / "cmake") not in sys.path:
        sys.path.insert(0, str(ROOT / "cmake"))
    import provenance

    digest = env.get("source_hash", "")
    until = provenance.day_after(env.get("time"))
    if (digest, until) not in _commits:
        found = provenance.commit_for_hash(ROOT, digest, until=until) if digest else None
        _commits[digest, until] = found[:7] if found else f"unknown (content hash {digest[:12]})"
    return _commits[digest, until]



#: every bootstrap interval of one run a side computed so far, by what it depends on (the two
#: sample sets and the seed): a pair of runs of two starts is judged twice (once for each start
#: held out), and the bootstrap was nearly all of a comparison's time
_intervals: dict = {}
_compute_interval = ratio_ci.median_ratio_cis


def _interval_key(a, b, seed) -> bytes:
    h = hashlib.blake2b(digest_size=20)
    for x in (a, b):
        x = np.asarray(x, dtype=np.float64)
        h.update(x.size.to_bytes(8, "little"))
        h.update(x.tobytes())
    h.update(int(seed).to_bytes(8, "little", signed=True))
    return h.digest()


def memo_interval(a, b, n: int = ratio_ci.BOOTSTRAP, seed: int = 0, confidences=(0.95, 0.90)):
    """ratio_ci.median_ratio_cis, remembered (the same numbers: the draws depend only on the seed
    and the sizes)."""
    if n != ratio_ci.BOOTSTRAP or tuple(confidences) != (0.95, 0.90):
        return _compute_interval(a, b, n, seed, confidences)
    k = _interval_key(a, b, seed)
    if k not in _intervals:
        _intervals[k] = _compute_interval(a, b, n, seed, confidences)
    return _intervals[k]


def _pair_intervals(ab: tuple[File, File]) -> dict:
    """The bootstrap intervals judge's comparison of one pair of runs asks for (in a worker)."""
    a, b = ab
    base, inj = (b, a) if a.injected else (a, b)
    _intervals.clear()
    cmp.compare_runs(base.run, inj.run, model=None, one_start=a.start == b.start)
    return dict(_intervals)


def precompute_intervals(ps: list[tuple[File, File]]) -> None:
    """Every pair's bootstrap intervals, computed once, on every core (the runs are shared with the
    workers by fork); the report then looks them up (memo_interval)."""
    todo = [(a, b) for a, b in ps if not (a.injected and b.injected)]
    procs = min(len(todo), os.cpu_count() or 1)
    if procs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return
    with multiprocessing.get_context("fork").Pool(procs) as pool:
        for got in pool.imap_unordered(_pair_intervals, todo, chunksize=8):
            _intervals.update(got)


def judge(model: noise.NoiseModel, test: list[tuple[File, File]]) -> dict:
    """Verdict counts over the A/A rows of `test` (pairs of runs neither injected), and the injected
    rows found, by size (pairs with one injected run: its injected rows only)."""
    n = {v: 0 for v in (cmp.SAME, cmp.FASTER, cmp.SLOWER, cmp.CANT_TELL)}
    alarms, det = [], {bk: [0, 0] for bk in BUCKETS}
    launch_rows = {"graph_node": [0, 0], "stream_b2b": [0, 0]}
    cover = new_cover()
    for a, b in test:
        one_start = a.start == b.start
        if a.injected and b.injected:
            continue
        base, inj = (b, a) if a.injected else (a, b)
        for c in cmp.compare_runs(base.run, inj.run, model=model, one_start=one_start):
            if c.ratio is None or c.verdict == cmp.NOT_COMPARABLE:
                continue
            if inj.injected:  # only the injected rows: the delay moves the arms paired with them too
                if c.key[1] != INJECTED or (REACHES[base.probe] is not None and c.key[3] not in REACHES[base.probe]):
                    continue
                need = inj.injected * 1e-6 / c.quantiles["A"][0]
                for bk in BUCKETS:
                    if bk[0] <= need < bk[1]:
                        det[bk][1] += 1
                        det[bk][0] += c.verdict == cmp.SLOWER
                continue
            n[c.verdict] += 1
            covered(cover, c)
            if c.verdict in (cmp.FASTER, cmp.SLOWER):
                alarms.append((cmp.key_text(c.key), c.ratio, f"({a.rel} / {b.rel})"))
            if c.key[0] == "launch" and c.key[3] in launch_rows:
                launch_rows[c.key[3]][1] += 1
                launch_rows[c.key[3]][0] += c.verdict == cmp.SAME
    return {"n": n, "alarms": alarms, "detected": det, "launch_same": launch_rows, "cover": cover}


#: row sizes (the A median) the coverage of the interval is counted by: (label, from, to) seconds
SIZES = (("< 10 us", 0.0, 1e-5), ("10-100 us", 1e-5, 1e-4), (">= 100 us", 1e-4, math.inf))


def new_cover() -> dict:
    """Coverage counts by row size: {label: [intervals that hold 1, intervals]}, and under TOST
    what "same" rests on (equivalence): {"same95": [rows the 95% interval alone calls same, rows],
    "held90": [90% intervals that hold 1, intervals], "at_bound": [rows called same with B moved by
    exactly the min-effect (x1.03 and x0.97, each counted), rows x 2]}."""
    out = {label: [0, 0] for label, _, _ in SIZES}
    out.update({k: [0, 0] for k in TOST_KEYS})
    return out


#: new_cover's counts of the "same" test (the rest are by row size)
TOST_KEYS = ("same95", "held90", "at_bound")


def covered(cover: dict, c) -> None:
    """Count an A/A row judged by its interval (not one left without a verdict for a reason) into
    `cover` by its size: [intervals that hold 1, intervals]. An A/A pair's true ratio is 1, so a 95%
    interval that says what it covers holds it in about 95% of pairs: much more, and it is wider
    than the noise (fewer `same` than the data allow); less, and it claims more than it knows."""
    cover["same95"][1] += 1
    if c.why or c.lo is None or c.hi is None:
        return
    cover["same95"][0] += cmp.classify(c.lo, c.hi) == cmp.SAME
    for label, lo, hi in SIZES:
        if lo <= c.quantiles["A"][0] < hi:
            cover[label][1] += 1
            cover[label][0] += c.lo <= 1.0 <= c.hi
    slo, shi = (c.same_lo, c.same_hi) if c.same_lo is not None else (c.lo, c.hi)
    cover["held90"][1] += 1
    cover["held90"][0] += slo <= 1.0 <= shi
    for f in (1 + cmp.MIN_EFFECT, 1 - cmp.MIN_EFFECT):  # a true change of exactly the min-effect
        cover["at_bound"][1] += 1
        cover["at_bound"][0] += cmp.classify(c.lo * f, c.hi * f, same=(slo * f, shi * f)) == cmp.SAME


def add_cover(into: dict, cover: dict) -> None:
    """Add one judge's coverage counts to a running total (both by row size)."""
    for label, (held, total) in cover.items():
        into[label][0] += held
        into[label][1] += total


def cover_total(cover: dict) -> str:
    """The share of 95% intervals that held 1, over every row size."""
    sizes = [v for k, v in cover.items() if k not in TOST_KEYS]
    return pct(sum(v[0] for v in sizes), sum(v[1] for v in sizes))


def cover_cell(cover: dict) -> str:
    """The share of 95% intervals that held 1, in all and by row size."""
    by = ", ".join(f"{label} {100 * v[0] / v[1]:.1f}%" for label, v in cover.items() if v[1] and label not in TOST_KEYS)
    return cover_total(cover) + (f" ({by})" if by else "")


def tost_cell(cover: dict) -> str:
    """What "same" rests on, in words (new_cover)."""
    return (f"by the 95% interval alone {pct(*cover['same95'])} same; the 90% interval held 1 in "
            f"{pct(*cover['held90'])}; a true change of {100 * cmp.MIN_EFFECT:g}% (B x{1 + cmp.MIN_EFFECT:g} or "
            f"x{1 - cmp.MIN_EFFECT:g} of the same pairs) called same in {pct(*cover['at_bound'])} (at most 5% by "
            "design)")


#: processes a side in the --repeat section (`gapbench run --repeat 3`, the README's default)
REPEAT = 3


def triples(files: list[File], n: int = REPEAT, mode: str = "default") -> list[list[File]]:
    """A start's A/A runs of one benchmark and mode (default or balanced; none injected) in the order
    they ran, cut into consecutive groups of n (the rest left out): each group stands for one side of
    a `gapbench run --repeat n`."""
    runs = sorted((f for f in files if f.mode == mode and not f.injected),
                  key=lambda f: str(f.run.run.get("started") or ""))
    return [runs[i:i + n] for i in range(0, len(runs) - n + 1, n)]


def judge_groups(model: noise.NoiseModel, test: list[tuple[list[File], list[File]]]) -> dict:
    """Verdict counts over the rows of pairs of run groups (several fresh processes a side: the
    interval on the spread of the processes' medians, with the model's class as its prior)."""
    n = {v: 0 for v in (cmp.SAME, cmp.FASTER, cmp.SLOWER, cmp.CANT_TELL)}
    alarms, cover = [], new_cover()
    for ga, gb in test:
        one_start = ga[0].start == gb[0].start
        for c in cmp.compare_groups([f.run for f in ga], [f.run for f in gb], model=model, one_start=one_start):
            if c.ratio is None or c.verdict == cmp.NOT_COMPARABLE:
                continue
            n[c.verdict] += 1
            covered(cover, c)
            if c.verdict in (cmp.FASTER, cmp.SLOWER):
                alarms.append((cmp.key_text(c.key), c.ratio, f"[{c.lo:.3f}-{c.hi:.3f}] "
                               f"({', '.join(f.rel for f in ga)} / {', '.join(f.rel for f in gb)})"))
    return {"n": n, "alarms": alarms, "cover": cover}


_models: dict = {}


def held_out_model(allp: list[tuple[File, File]], start: str) -> noise.NoiseModel:
    """The model fitted on every pair that touches no run of `start`."""
    if start not in _models:
        _models[start] = noise.NoiseModel(fit_model([(a, b) for a, b in allp if start not in (a.start, b.start)]))
    return _models[start]


def alarm_lines(title: str, alarms: list[tuple[str, float, str]]) -> list[str]:
    """The report's rows called faster or slower in A/A pairs, one line a row: (row, B/A, which
    runs) each; a row alarmed in several pairs gives how many, its range of B/A and the pair
    farthest from 1 ([] where there is none)."""
    by: dict[str, set] = {}
    for row, ratio, where in alarms:
        by.setdefault(row, set()).add((ratio, where))
    out = []
    for row in sorted(by):
        seen = sorted(by[row])
        far = max(seen, key=lambda x: (abs(math.log(x[0])), x[1]))
        if len(seen) == 1:
            out.append(f"- {row} {far[0]:.3f} {far[1]}")
        else:
            out.append(f"- {row}: {len(seen)} pairs, B/A {seen[0][0]:.3f}-{seen[-1][0]:.3f}; farthest from 1: "
                       f"{far[0]:.3f} {far[1]}")
    return [title, ""] + out + [""] if out else []


def shares(n: dict) -> tuple[str, str, str]:
    """(same, faster or slower, can't tell) of verdict counts, each as pct."""
    total = sum(n.values())
    return pct(n[cmp.SAME], total), pct(n[cmp.FASTER] + n[cmp.SLOWER], total), pct(n[cmp.CANT_TELL], total)


def pct(k: int, total: int) -> str:
    return f"{k}/{total} ({100 * k / total:.1f}%)" if total else "0/0"


def main() -> None:
    files = load()
    allp = pairs(files)
    cmp.median_ratio_cis = memo_interval  # the same intervals, each computed once
    precompute_intervals(allp)
    lines = ["# gapbench compare: the noise model, judged on machine starts it was not fitted on", "",
             "Generated by `python docs/results/calibrate_compare.py` from the committed runs it names (its STARTS); "
             "do not edit by hand. For each machine start, the model is fitted on the A/A row pairs of the other "
             "starts only, then judged on every pair of runs that includes a run of the held-out start (within it, "
             "and between it and the others). One run a side, default min-effect "
             f"{100 * cmp.MIN_EFFECT:g}%, the verdicts gapbench compare prints (same: the 90% interval within the band, "
             "two one-sided tests at 5%; faster or slower: the 95% interval beyond it). Injected rows: torch-cuda slowed "
             "by a test-only delay (`--inject-delay-us`), counted by the slowdown the delay must at least cause "
             "(delay / the row's A median; the spin's own launch gap comes on top).", ""]
    for gpu in STARTS:
        for probe in ("blas", "launch"):
            for mode in MODES:
                mine = [(a, b) for a, b in allp if a.gpu == gpu and a.probe == probe and a.mode == mode]
                if not mine:
                    continue
                lines += [f"## {gpu}, {probe} ({mode} runs)", "",
                          "| held-out start | pairs | run pairs | same | faster or slower | can't tell | injected found "
                          "(3-5% / 5-10% / >=10%) | 95% interval holds 1 |" +
                          (" graph-node, back-to-back same |" if probe == "launch" else ""),
                          "|---|---|---|---|---|---|---|---|" + ("---|" if probe == "launch" else "")]
                tot = {v: 0 for v in (cmp.SAME, cmp.FASTER, cmp.SLOWER, cmp.CANT_TELL)}
                by_scope = {sc: dict(tot) for sc in ("within it", "with others")}
                cov_scope = {sc: new_cover() for sc in by_scope}
                all_alarms = []
                for start in STARTS[gpu]:
                    model = held_out_model(allp, start)
                    for scope, test in (("within it", [(a, b) for a, b in mine if a.start == b.start == start]),
                                        ("with others", [(a, b) for a, b in mine if (a.start == start) != (b.start == start)])):
                        if not test:
                            continue
                        res = judge(model, test)
                        n = res["n"]
                        total = sum(n.values())
                        for v in tot:
                            tot[v] += n[v]
                            by_scope[scope][v] += n[v]
                        all_alarms += res["alarms"]
                        add_cover(cov_scope[scope], res["cover"])
                        det = " / ".join(pct(*res["detected"][bk]) for bk in BUCKETS)
                        row = (f"| {start} | {scope} | {len(test)} | {pct(n[cmp.SAME], total)} | "
                               f"{pct(n[cmp.FASTER] + n[cmp.SLOWER], total)} | {pct(n[cmp.CANT_TELL], total)} | {det} | "
                               f"{cover_total(res['cover'])} |")
                        if probe == "launch":
                            ls = res["launch_same"]
                            row += f" {pct(*ls['graph_node'])}, {pct(*ls['stream_b2b'])} |"
                        lines.append(row)
                total = sum(tot.values())
                lines += ["", f"All held-out rows: {pct(tot[cmp.SAME], total)} same, "
                              f"{pct(tot[cmp.FASTER] + tot[cmp.SLOWER], total)} faster or slower, "
                              f"{pct(tot[cmp.CANT_TELL], total)} can't tell (a pair of runs of two starts counts once "
                              "for each)."]
                for scope, what in (("within it", "two runs of one machine start (a before/after on one machine)"),
                                    ("with others", "runs of two machine starts")):
                    if sum(by_scope[scope].values()):
                        same, alarm, _ = shares(by_scope[scope])
                        lines.append(f"- {what}: {same} same, {alarm} faster or slower; the 95% interval held 1 "
                                     f"in {cover_cell(cov_scope[scope])} of the rows it judged; "
                                     f"{tost_cell(cov_scope[scope])}")
                lines += [""] + alarm_lines("False alarms (row, B/A, runs; a row alarmed in several pairs once):", all_alarms)
    lines += repeat_sections(files, allp)
    doc = fit_model(allp)
    lines += ["## The shipped model (every pair)", "",
              "| GPU model (runs) | machine starts | run pairs | A/A row pairs within a start / across | classes | commits |",
              "|---|---|---|---|---|---|"]
    for gpu, d in doc["devices"].items():
        lines.append(f"| {gpu} | {len(d['starts'])} | {d['run_pairs']} | {d['pairs_within']} / {d['pairs_across']} | "
                     f"{len(d['within'])} / {len(d['across'])} | {', '.join(d['commits'])} |")
    main_devs = [g for g in doc["devices"] if "/" not in g]
    lines += ["", "Scale of the BLAS classes of any framework (the half-width of the 95% prediction interval of a "
                  "new pair's shift over 1.96, %, with its row pairs), within one start / across starts:", "",
              "| class | " + " | ".join(main_devs) + " |", "|---|" + "---|" * len(main_devs)]
    keys = sorted({k for g in main_devs for sc in ("within", "across") for k in doc["devices"][g][sc]
                   if k.startswith("blas/time/*/")})
    for k in keys:
        cells = []
        for g in main_devs:
            parts = [f"{100 * doc['devices'][g][sc][k]['scale']:.2f} ({doc['devices'][g][sc][k]['n']})"
                     if k in doc["devices"][g][sc] else "-" for sc in ("within", "across")]
            cells.append(" / ".join(parts))
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    # the launch floor's section is floor_model.py's (its own runs): kept as it is
    kept = noise.NoiseModel.load(OUT).doc.get("floor")
    OUT.write_text(dump({**doc, **({"floor": kept} if kept else {})}))


def dump(doc: dict) -> str:
    """The model as JSON, one fitted level a line (the file holds one per row and class), the floor
    section (floor_model.py) laid out as the devices are."""
    out = ["{"]
    for i, (k, v) in enumerate(sorted(doc.items())):
        sep = "," if i < len(doc) - 1 else ""
        if k not in ("devices", "floor"):  # per device class: one fitted level a line
            out.append(f" {json.dumps(k)}: {json.dumps(v, sort_keys=True)}{sep}")
            continue
        out.append(f' {json.dumps(k)}: {{')
        for j, (dev, d) in enumerate(sorted(v.items())):
            out.append(f"  {json.dumps(dev)}: {{")
            items = sorted(d.items())
            for m, (field, val) in enumerate(items):
                tail = "," if m < len(items) - 1 else ""
                if field in ("within", "across"):
                    rows = [f"    {json.dumps(c)}: {json.dumps(e, sort_keys=True, separators=(',', ':'))}"
                            for c, e in sorted(val.items())]
                    out.append(f"   {json.dumps(field)}: {{\n" + ",\n".join(rows) + f"\n   }}{tail}")
                else:
                    out.append(f"   {json.dumps(field)}: {json.dumps(val, sort_keys=True)}{tail}")
            out.append("  }" + ("," if j < len(v) - 1 else ""))
        out.append(" }" + sep)
    return "\n".join(out) + "\n}\n"


def repeat_sections(files: list[File], allp: list[tuple[File, File]]) -> list[str]:
    """`gapbench run --repeat 3` held out: each start's default A/A runs in groups of three (in the
    order they ran), a group of the held-out start against another group of it (within) and against
    every group of the other starts (with others), judged by the model fitted without that start."""
    lines = [f"## --repeat {REPEAT}: {REPEAT} fresh processes a side, held out", "",
             f"Each machine start's default A/A runs of a benchmark, in the order they ran, in groups of {REPEAT} (the "
             f"rest left out); a group stands for one side of `gapbench run --repeat {REPEAT}`. compare's interval is "
             "then the t interval on the processes' log medians with the held-out model's class as its prior "
             "(core/ratio_ci.py process_ratio_ci).", "",
             "| GPU model, benchmark | held-out start | group pairs | same | faster or slower | can't tell | "
             "95% interval holds 1 |",
             "|---|---|---|---|---|---|---|"]
    alarms = []
    for gpu, probe, mode in itertools.product(STARTS, ("blas", "launch"), ("default", "balanced")):
        what_runs = f"{gpu}, {probe}" + ("" if mode == "default" else f" ({mode} runs)")
        groups = {st: triples([f for f in files if f.gpu == gpu and f.probe == probe and f.start == st], mode=mode)
                  for st in STARTS[gpu]}
        tot = {sc: {v: 0 for v in (cmp.SAME, cmp.FASTER, cmp.SLOWER, cmp.CANT_TELL)} for sc in ("within", "across")}
        cov = {sc: new_cover() for sc in tot}
        for start, mine in groups.items():
            if not mine:
                continue
            model = held_out_model(allp, start)
            others = [g for st, gs in groups.items() if st != start for g in gs]
            for scope, test in (("within", list(itertools.combinations(mine, 2))),
                                ("across", [(g, h) for g in mine for h in others])):
                if not test:
                    continue
                res = judge_groups(model, test)
                n = res["n"]
                for v in n:
                    tot[scope][v] += n[v]
                add_cover(cov[scope], res["cover"])
                alarms += res["alarms"]
                cells = " | ".join(shares(n))
                lines.append(f"| {what_runs} | {start}: {'within it' if scope == 'within' else 'with others'} | "
                             f"{len(test)} | {cells} | {cover_total(res['cover'])} |")
        for scope, what in (("within", "groups of one start"), ("across", "groups of two starts")):
            if sum(tot[scope].values()):
                same, alarm, cant = shares(tot[scope])
                lines.append(f"| **{what_runs}: all {what}** | | | **{same}** | **{alarm}** | {cant} | "
                             f"{cover_cell(cov[scope])}; {tost_cell(cov[scope])} |")
    return lines + [""] + alarm_lines("False alarms (row, B/A [interval], groups; a row alarmed in several pairs once):", alarms)


if __name__ == "__main__":
    main()
