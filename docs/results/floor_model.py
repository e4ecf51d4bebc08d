"""The noise model's launch-floor section (issue 35), fitted on committed `bench.blas --launch-floor`
runs (`bash .ci/gpu floor`: three fresh processes a machine start) and judged on machine starts it
was not fitted on.

Per GPU model: b, the share of the floor's move taken off a row's B (least squares over the row
pairs of two runs of one start, on a grid of 0 to 1.5, per group: native and framework rows), then
the floor classes (clock "gated-floor", noise.fit) of what is left, within one start and across
starts, exactly as compare judges them (shifts.judged_shifts with the shares). For each start held
out, b and the classes are fitted on the other starts of its GPU model only, and its pairs are then
judged one run a side by `gapbench compare` twice: with the shipped model as it is without the floor
section (the rows as a default run's compare sees them) and with the held-out floor fit. Every
other row is judged by the shipped model in both, which was fitted on none of these starts; the
`--parity balanced` starts (calibrate_compare.py's too: classes "gated-balanced-floor") by the
classes calibrate_compare.py fits without the held-out start.

    python docs/results/floor_model.py            # the report (Markdown) on stdout; writes the
                                                  # "floor" section of compare_noise.json
"""
from __future__ import annotations

import functools
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibrate_compare as cc  # noqa: E402  (source, File, covered, pct, commit_of, dump)
import floor_runs as fr  # noqa: E402  (the share's fit)
from gapbench.core import compare as cmp  # noqa: E402
from gapbench.core import noise  # noqa: E402
from gapbench.core.shifts import judged_shifts  # noqa: E402

_FLOOR = "docs/results/floor-2026-11-28"
_CALIB = "docs/results/calib"
#: per GPU model, machine start: its --launch-floor runs (a path under docs/results, or git:REV:PATH
#: for a run kept in git history; INDEX.md lists each)
FLOOR_STARTS = {
    "h100-80gb-hbm3": {
        "2026-11-28 02:14 (0537d43)": [f"git:e48e939:{_FLOOR}/blas-floor-h100-80gb-hbm3-2026-11-28-{i}.json.gz"
                                       for i in (1, 2, 3)],
        "2026-11-28 03:27 (2c1fd8c)": [f"git:07f6f60:{_FLOOR}/start2/blas-floor-h100-80gb-hbm3-2026-11-28-{i}.json.gz"
                                       for i in (1, 2, 3)],
        "2026-11-28 03:50 (c77b08b8f4da)": [
            f"git:07f6f60:{_FLOOR}/start3/blas-floor-h100-80gb-hbm3-2026-11-28-{i}.json.gz" for i in (1, 2, 3)],
        "2026-11-28 04:4x (7f88c48)": [f"git:f73e02e:{_FLOOR}/start4/blas-floor-h100-80gb-hbm3-2026-11-28-{i}.json.gz"
                                       for i in (1, 2, 3)],
        # default runs since 473ff8b: the floor on, riding along in the rounds (it no longer holds them)
        **{f"2026-11-28 {t} (473ff8b, default)": [
            f"git:d34bbcf:{_CALIB}/h100-2026-11-28{s}/aa-blas-a{i}-h100-80gb-hbm3-2026-11-28.json.gz" for i in (1, 2, 3)]
           for s, t in (("b", "08:4x"), ("c", "08:5x"))},
    },
    "h200": {
        **{f"2026-11-28 {t} (64698a6)": [f"git:8d5bb3f:{_FLOOR}/h200-start{n}/blas-floor-h200-2026-11-28-{i}.json.gz"
                                         for i in (1, 2, 3)]
           for n, t in ((1, "05:5x"), (2, "06:0x"), (3, "06:1x"))},
        **{f"2026-11-28 {t} (473ff8b, default)": [f"git:d34bbcf:{_CALIB}/h200-2026-11-28{s}/aa-blas-a{i}-h200-2026-11-28.json.gz"
                                                  for i in (1, 2, 3)]
           for s, t in (("d", "08:3x"), ("e", "08:5x"))},
        # default runs with --parity balanced (the floor on; their rows' floor classes "gated-balanced-floor"):
        # calibrate_compare.py's balanced starts, each judged here by classes fitted without it there too
        **{start: [rel for rel in rels if "inj" not in rel] for start, rels in cc.STARTS["h200"].items()
           if "balanced" in start},
    },
}
#: per GPU model, runs with a test-only device delay on torch-cuda, each with the FLOOR_STARTS start it
#: ran on (None: another machine start)
FLOOR_INJECTED = {"h200": [(f"git:8d5bb3f:{_FLOOR}/h200-inj/blas-floor-inj3-h200-2026-11-28-1.json.gz", None)] + [
                      (rel, start) for start, rels in cc.STARTS["h200"].items() if "balanced" in start
                      for rel in rels if "inj" in rel],
                  "h100-80gb-hbm3": [(f"git:d34bbcf:{_CALIB}/h100-2026-11-28c/aa-blas-inj{us}-h100-80gb-hbm3-2026-11-28.json.gz",
                                      "2026-11-28 08:5x (473ff8b, default)") for us in (1, 3)]}
GROUPS = ("native", "framework")


def load() -> dict[str, dict[str, list[cc.File]]]:
    return {gpu: {start: [cc.File(rel, start, gpu) for rel in rels] for start, rels in starts.items()}
            for gpu, starts in FLOOR_STARTS.items()}


def fit_share(starts: dict[str, list[cc.File]]) -> dict[str, float]:
    """b per group: least squares of log((B - b (floor B - floor A)) / A) over the row pairs of two
    runs of one start, every start given (floor_runs.py's fit)."""
    out = {}
    for group, pick in zip(GROUPS, (fr.GROUPS["native rows"], fr.GROUPS["framework rows"])):
        ps = [p for files in starts.values() for p in fr._pairs([fr._rows(f.run) for f in files], pick)]
        if ps:
            out[group] = fr.fit_beta(ps)
    return out


def fit_floor(starts: dict[str, list[cc.File]]) -> dict:
    """One GPU model's floor section: the shares, and the floor classes within a start and across."""
    shares = fit_share(starts)
    files = [f for fs in starts.values() for f in fs]
    within, across = [], []
    for a, b in itertools.combinations(files, 2):
        one = a.start == b.start
        group = (a.rel, b.rel) if one else tuple(sorted((a.start, b.start)))
        for c, d in judged_shifts(a.run, b.run, one_start=one, floor_shares=shares):
            if c[3].endswith(noise.FLOORED):
                (within if one else across).append((c, d, group))
    return {"share": shares, "within": noise.fit(within), "across": noise.fit(across),
            "pairs_within": len(within), "pairs_across": len(across), "starts": sorted(starts),
            "sources": sorted(f.rel for f in files), "commits": sorted({cc.commit_of(f.run.env) for f in files})}


def fit_all(floors: dict[str, dict[str, list[cc.File]]]) -> dict:
    return {gpu: fit_floor(starts) for gpu, starts in floors.items()}


def _judge(model: noise.NoiseModel, test: list[tuple[cc.File, cc.File]]) -> dict:
    """Verdicts of every A/A row of `test`, and of the rows with a floor alone, with the TOST counts
    (calibrate_compare.covered) of the rows with a floor."""
    n = {k: {v: 0 for v in (cmp.SAME, cmp.FASTER, cmp.SLOWER, cmp.CANT_TELL)} for k in ("all", "floor")}
    cover = cc.new_cover()
    for a, b in test:
        for c in cmp.compare_runs(a.run, b.run, model=model, one_start=a.start == b.start):
            if c.ratio is None or c.verdict == cmp.NOT_COMPARABLE:
                continue
            n["all"][c.verdict] += 1
            if noise.floor_s(c.a) and noise.floor_s(c.b):
                n["floor"][c.verdict] += 1
                cc.covered(cover, c)
    return {"n": n, "cover": cover}


def _cells(n: dict) -> str:
    total = sum(n.values())
    return ", ".join(cc.pct(k, total) for k in (n[cmp.SAME], n[cmp.FASTER] + n[cmp.SLOWER], n[cmp.CANT_TELL]))


@functools.cache
def _calibration_pairs() -> list:
    """calibrate_compare.py's A/A row pairs, loaded once."""
    return cc.pairs(cc.load())


@functools.cache
def _held_out_classes(start: str) -> dict:
    """calibrate_compare.py's classes fitted without `start`, fitted once (the held-out judging and the
    injected runs of that start both use them)."""
    return cc.held_out_model(_calibration_pairs(), start).doc


def rest_without(gpu: str, start: str, rest: dict) -> dict:
    """The model without its floor section that judges `start`: the shipped one (`rest`), or, for a start
    calibrate_compare.py also fits its classes on, those classes fitted on the other starts
    (calibrate_compare.held_out_model): every row of a held-out start is judged by a model that never
    saw it."""
    if start not in cc.STARTS.get(gpu, {}):
        return rest
    return {**rest, **_held_out_classes(start)}


def main() -> None:
    floors = load()
    rest = {k: v for k, v in noise.shipped().doc.items() if k != "floor"}  # the model without its floor
    lines = ["# The launch floor in gapbench compare, judged on machine starts it was not fitted on", "",
             "Generated by `python docs/results/floor_model.py` from the committed `bench.blas --launch-floor` runs "
             "it names (its FLOOR_STARTS); do not edit by hand. For each start held out, b and the floor classes are "
             "fitted on the other starts of its GPU model, then every pair of runs within the held-out start (and "
             "between it and the others) is judged one run a side by the shipped model without its floor section "
             "(as a default run is judged), and with the held-out floor fit. Every other row is judged by the shipped "
             "model both times (fitted on none of these starts; the `--parity balanced` starts, which "
             "calibrate_compare.py fits its classes on too, by those classes fitted without the held-out start). "
             "Runs of the two parities are not compared with each other. Cells: same, faster or slower, can't tell.", "",
             "| GPU model | held-out start | pairs | b native, framework (fitted on the others) | all rows, without the "
             "floor | all rows, with it | rows with a floor, without | rows with a floor, with it |",
             "|---|---|---|---|---|---|---|---|"]
    notes = []
    held_fits: dict[str, dict[str, dict]] = {}  # GPU model -> held-out start -> the section fitted without it
    for gpu, starts in floors.items():
        allf = [f for fs in starts.values() for f in fs]
        tot = {k: {s: {v: 0 for v in (cmp.SAME, cmp.FASTER, cmp.SLOWER, cmp.CANT_TELL)} for s in ("without", "with")}
               for k in ("within it", "with others")}
        cov = {k: cc.new_cover() for k in tot}
        for held in starts:
            section = held_fits.setdefault(gpu, {})[held] = fit_floor({s: fs for s, fs in starts.items() if s != held})
            classes = rest_without(gpu, held, rest)
            base = noise.NoiseModel(classes)
            model = noise.NoiseModel({**classes, "floor": {gpu: section}})
            for scope, test in (("within it", list(itertools.combinations(starts[held], 2))),
                                ("with others", [(a, b) for a in starts[held] for b in allf if b.start != held])):
                without, with_ = _judge(base, test), _judge(model, test)
                for s, res in (("without", without), ("with", with_)):
                    for v, k in res["n"]["all"].items():
                        tot[scope][s][v] += k
                cc.add_cover(cov[scope], with_["cover"])
                sh = section["share"]
                lines.append(f"| {gpu} | {held}, {scope} | {len(test)} | {sh.get('native', '-')}, {sh.get('framework', '-')} | "
                             f"{_cells(without['n']['all'])} | {_cells(with_['n']['all'])} | "
                             f"{_cells(without['n']['floor'])} | {_cells(with_['n']['floor'])} |")
        for scope in tot:
            a, b = (cc.shares(tot[scope][s]) for s in ("without", "with"))
            notes.append(f"- {gpu}, {scope}: all rows {a[0]} same without the floor, {b[0]} with it; faster or slower "
                         f"{a[1]} and {b[1]}. Rows with a floor, with it: {cc.tost_cell(cov[scope])}")
    doc = fit_all(floors)
    lines += ["", "All held-out pairs:", ""] + notes
    for gpu, rels in FLOOR_INJECTED.items():
        for rel, start in rels:
            # judged as compare would judge it (within its start where it ran on one of FLOOR_STARTS), by a
            # floor section that never saw its start: the shipped one, or one fitted on the other starts
            inj = cc.File(rel, start or "injected", gpu)
            section = doc[gpu] if start is None else held_fits[gpu][start]
            classes = rest if start is None else rest_without(gpu, start, rest)
            base = noise.NoiseModel(classes)
            held = noise.NoiseModel({**classes, "floor": {**doc, gpu: section}})
            test = [(a, inj) for fs in floors[gpu].values() for a in fs]
            cells = []
            for model in (base, held):
                det = cc.judge(model, test)["detected"]
                cells.append(" / ".join(cc.pct(*det[bk]) for bk in cc.BUCKETS))
            where = f"on the {start} start, after its A/A runs" if start else "another machine start"
            lines += ["", f"Detection ({gpu}): {rel}, torch-cuda delayed by {inj.injected:g} us a timed op ({where}), "
                          f"against each of the {len(test)} runs above; its torch-cuda rows found "
                          "`slower`, by the slowdown the delay must at least cause (3-5% / 5-10% / >=10%): without the "
                          f"floor {cells[0]}; with a floor section that never saw that start "
                          f"({'the shipped one' if start is None else 'fitted on the other starts'}) {cells[1]}."]
    lines += ["", "## The shipped floor section (every start)", "",
              "| GPU model | starts | b native | b framework | floor row pairs within a start / across | classes | commits |",
              "|---|---|---|---|---|---|---|"]
    for gpu, d in doc.items():
        lines.append(f"| {gpu} | {len(d['starts'])} | {d['share'].get('native')} | {d['share'].get('framework')} | "
                     f"{d['pairs_within']} / {d['pairs_across']} | {len(d['within'])} / {len(d['across'])} | "
                     f"{', '.join(d['commits'])} |")
    print("\n".join(lines))
    cc.OUT.write_text(cc.dump({**rest, "floor": doc}))


if __name__ == "__main__":
    main()
