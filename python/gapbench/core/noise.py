"""The between-run noise model of `gapbench compare`: how far one run's median of a row moves
between two runs of the same code on the same GPU model (fresh processes, on one machine start or
several), by what the row is.

A row's shift between two such runs is d = log(median B / median A). Its size depends on the row:
a 4 us gated GEMV moves by about 1.5% (rms) between processes, a 100 us one by 0.3%, a host-timed
round trip by tens of percent across machine starts (the host moves with it), a single-sample
cold start by more. So the model is kept per row where a row was seen on enough pairs
(ROW_MIN_PAIRS), else per row class (`row_class`: benchmark, metric, framework, clock, single or many
samples, time scale in half decades; rows of one class differ: most 10-32 us torch rows of an H200
move 0.5% rms, its 16384x1024 GEMVs 3.5%), each level with the rms of d over
the A/A row pairs fitted, raised to its 95% upper confidence bound for the number of independent
groups behind it (pairs of runs within a start, pairs of starts across them: a class seen on few
machine starts gets a wider scale). A class with too few pairs falls back to a coarser one
(`levels`). The model is kept per GPU model (`device_class`): a scale fitted on H100s says nothing
about a CPU or another GPU; there compare says "uncalibrated here" and asks for --repeat. And it is
kept twice: for two runs on one machine start (one boot of one host: a before/after on one
machine) and across starts (another host of the same GPU model moves rows more: its CPU, its
event-pair floor), each fitted on pairs of that kind.

The shipped model (compare_noise.json) is written by docs/results/calibrate_compare.py from the
committed A/A runs, with its sources and commits; the calibration report judges it only on machine
starts it was not fitted on.

bench.blas runs (by default since 473ff8b; `--launch-floor`) time an empty kernel beside each short
row, in the same rounds on the same stream (the row's launch floor, `floor_s`). Much of a short
row's move between processes is its floor's: compare takes a share b of the floor's move off the
row's B (B - b (floor B - floor A)) and judges what is left by floor classes (clock "gated-floor"),
fitted on runs with it. The model's "floor" section (docs/results/floor_model.py) holds, per GPU
model, b for native and for framework rows, and those classes; it is judged on machine starts it
was not fitted on too.
"""
from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Iterable, Sequence

from gapbench.core.conditions import Clock
from gapbench.core.names import Backend, Parity
from gapbench.core.result import Record, Run

MODEL_FILE = Path(__file__).with_name("compare_noise.json")
#: clocks whose rows jump between processes (the host's scheduling: 1.2-1.9x on one machine start):
#: a class of them, like a single-sample class, takes the larger of its rms raised to its UPPER
#: confidence bound for the number of groups behind it and the 99th percentile of its shifts
HEAVY_CLOCKS = ("host", "issued", "plain")
UPPER = 0.95
#: a class is used only when fitted on at least this many A/A row pairs (else a coarser one)
MIN_PAIRS = 10
#: a row's own level only with at least this many (else its class)
ROW_MIN_PAIRS = 20
_CLOCK = {Clock.GATED: "gated", Clock.ISSUED: "issued", Clock.GRAPH: "graph", Clock.HOST: "host",
          Clock.GPU_TIMESTAMPS: "gpu-ts"}
#: clocks that see only the device's work: the queue held behind the gate, or one graph launch
DEVICE_CLOCKS = ("gated", "graph", "gpu-ts")
#: the clock of a row judged less its launch floor's move (floor_s): its own classes
FLOORED = "-floor"
#: the clock of a gated row whose samples were padded to both launch parities of their stream
#: (bench.blas --parity balanced): classes of their own, looked up before the as-drawn ones
BALANCED = "-balanced"


def base_clock(kind: str) -> str:
    """A class's clock without its floor and parity suffixes: gated, graph, issued, host, ..."""
    return kind.removesuffix(FLOORED).removesuffix(BALANCED)


def clock_kind(r: Record) -> str:
    """gated / graph / issued / host / gpu-ts from the conditions, or plain for the standalone C++
    loops' host-bound rows (their device-bound rows, gated or one graph launch, keep their clock:
    they move as the device does, not as the host)."""
    cond = r.conditions or {}
    kind = _CLOCK.get(cond.get("clock"), "host" if r.clock == "host_wall" else "other")
    if r.backend.startswith("plain-") and kind not in DEVICE_CLOCKS:
        return "plain"
    if kind == "gated" and cond.get("parity") == Parity.balanced.value:
        return kind + BALANCED
    return kind


def decade(seconds: float) -> str:
    """The time scale of a per-op median in half decades: 'e-6.0' for 1-3.2 us, 'e-6.5' for
    3.2-10 us, 'e-5.0' for 10-32 us, ..."""
    half = math.floor(2 * math.log10(max(seconds, 1e-12))) / 2
    return f"e{math.floor(half)}.{5 if half % 1 else 0}"


def row_key(r: Record) -> tuple[str, ...]:
    """What a row is, whatever run it is in: benchmark, backend, variant, metric and its case."""
    p = r.params or {}
    case = str(p.get("label") or " ".join(str(p.get(k) or "") for k in ("op", "dtype", "shape_text")).strip())
    return (r.probe, r.backend, r.variant, r.metric, case)


def floor_s(r: Record) -> float | None:
    """The median of the empty kernel timed beside the row in the same rounds on the same stream
    (bench.blas --launch-floor: `params.launch_floor`), or None."""
    fl = (r.params or {}).get("launch_floor") or {}
    m = fl.get("median_s") if isinstance(fl, dict) else None
    return float(m) if m else None


def floor_group(r: Record) -> str:
    """Which floor share a row takes: "native" (gapbench's own kernels and the vendor library
    called directly) or "framework"."""
    return "native" if r.backend.startswith("native") else "framework"


def row_class(r: Record, median_s: float, floored: bool = False) -> tuple[str, ...]:
    """What a row is, for its noise: (benchmark, metric, framework, clock, single|many, decade, row);
    `floored`: judged less its launch floor's move (clock "gated-floor": classes of their own); the
    framework carries the number of streams its rows were timed on where that is more than one
    ("native-streams8"); the row is its backend, variant and case (row_key), for the row's own level
    (levels)."""
    try:
        family = Backend(r.backend).family.value
    except ValueError:  # a name this version does not know: its own class
        family = r.backend
    streams = (r.conditions or {}).get("streams")
    if streams and int(streams) > 1:
        # timed on several streams, one a paired round (cuda/blas.h kTimingStreams): its short rows
        # no longer move with one stream's place among the hardware queues, so they are another
        # class than the same backend's rows timed on one stream (every run before 6afacf0)
        family = f"{family}-streams{int(streams)}"
    single = "single" if len(r.samples_s or ()) <= 1 else "many"
    k = row_key(r)
    clock = clock_kind(r) + (FLOORED if floored else "")
    return (r.probe, r.metric, family, clock, single, decade(median_s), "|".join((k[1], k[2], k[4])))


def is_heavy(cls: Sequence[str]) -> bool:
    """A class whose shifts are heavy-tailed: single samples, or a host-bound clock (HEAVY_CLOCKS)."""
    return cls[4] == "single" or cls[3] in HEAVY_CLOCKS


def levels(cls: Sequence[str]) -> list[tuple[str, ...]]:
    """The row itself (any time scale: its own shifts, where it was seen on enough pairs), then its
    class and coarser ones (any framework; any time scale; any metric), most specific first."""
    probe, metric, family, clock, single, dec = cls[:6]
    row = [(probe, metric, family, clock, single, "*", cls[6])] if len(cls) > 6 and cls[6] else []
    return row + [(probe, metric, family, clock, single, dec), (probe, metric, "*", clock, single, dec),
                  (probe, metric, "*", clock, single, "*"), (probe, "*", "*", clock, single, "*")]


def lookup_levels(cls: Sequence[str]) -> list[tuple[str, ...]]:
    """The levels a scale is looked up at: `levels(cls)`, then, for a balanced row (clock with
    BALANCED), the as-drawn row's levels: until runs with the pads are fitted, a balanced row is judged
    by the classes of the method it refines (wider where the parity moved the row, the same elsewhere).
    A fit never files a shift under them (fit uses `levels`)."""
    own = levels(cls)
    if BALANCED not in cls[3]:
        return own
    return own + levels((*cls[:3], cls[3].replace(BALANCED, ""), *cls[4:]))


def key(cls: Sequence[str]) -> str:
    return "/".join(cls)


def device_class(run: Run) -> str:
    """The GPU model a run measured on, as one word ("h100-80gb-hbm3", "h200"), or "cpu:<model>"
    for a run without an NVIDIA GPU, and "/quick" after it for a --quick run (fewer samples: other
    noise): the unit a noise model is fitted and applied per."""
    gpus = run.env.get("nvidia_smi") or []
    name = str(gpus[0].get("name") or "") if gpus else ""
    if name:
        dev = re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "")).strip("-")
    else:
        dev = "cpu:" + re.sub(r"[^a-z0-9]+", "-", str(run.env.get("cpu") or run.env.get("machine") or "unknown").lower()).strip("-")
    return dev + ("/quick" if is_quick(run) else "")


def is_quick(run: Run) -> bool:
    cfg = run.run.get("config") or {}
    return bool(cfg.get("quick")) or "--quick" in str(run.run.get("command") or "").split()


Z95 = 1.959964
#: the normal's 95% quantile: "same" is two one-sided tests at 5% each (TOST), so its interval is the
#: two-sided 90% one (compare.classify); faster and slower keep the 95% one
Z90 = 1.644854
#: the 97.5% quantile of Student's t for 1..30 degrees of freedom
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: float) -> float:
    """Student's t 97.5% quantile (two-sided 95%) for df >= 1: exact table to 30 (df rounded down,
    never narrower), the Cornish-Fisher expansion above."""
    return _t(df, _T975, Z95)


def _t(df: float, table: tuple, z: float) -> float:
    """A Student's t quantile from its table for df 1..30 (df rounded down, never narrower), else the
    Cornish-Fisher expansion around the normal quantile z."""
    if df < 1:
        raise ValueError("a t quantile needs at least 1 degree of freedom")
    if df <= 30:
        return table[int(df) - 1]
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


#: the 95% quantile of Student's t for 1..30 degrees of freedom (one-sided 5%: the two-sided 90% interval)
_T95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753,
        1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697)


def t95(df: float) -> float:
    """Student's t 95% quantile (two-sided 90%) for df >= 1, as t975."""
    return _t(df, _T95, Z90)


#: the two interval levels compare uses: (normal quantile, t table, the model's scale key) for the
#: 95% interval (faster, slower) and the 90% one ("same")
_LEVELS = {0.95: (Z95, _T975, "scale"), 0.90: (Z90, _T95, "scale90")}


def _level(confidence: float) -> tuple[float, tuple, str]:
    if confidence not in _LEVELS:
        raise ValueError(f"confidence {confidence}: 0.95 or 0.90")
    return _LEVELS[confidence]


def t_quantile(df: float, confidence: float) -> float:
    """The two-sided `confidence` interval's t quantile: 0.95 (t975) or 0.90 (t95)."""
    z, table, _ = _level(confidence)
    return _t(df, table, z)


def z_of(confidence: float) -> float:
    """The two-sided `confidence` interval's normal quantile: 0.95 (Z95) or 0.90 (Z90)."""
    return _level(confidence)[0]


#: chi-square's 5% quantile for 1..10 degrees of freedom (where Wilson-Hilferty is poor)
_CHI2_05 = (0.003932, 0.1026, 0.3518, 0.7107, 1.1455, 1.6354, 2.1673, 2.7326, 3.3251, 3.9403)


def chi2_quantile(p: float, df: int) -> float:
    """The p-quantile of chi-square with df degrees of freedom: the exact table at p = 0.05 for
    df <= 10, else Wilson-Hilferty (within 1% there)."""
    if abs(p - 0.05) < 1e-12 and df <= len(_CHI2_05):
        return _CHI2_05[df - 1]
    z = _normal_quantile(p)
    h = 2.0 / (9.0 * df)
    return df * max(1.0 - h + z * math.sqrt(h), 1e-6) ** 3


def _normal_quantile(p: float) -> float:
    """Acklam's rational approximation of the standard normal quantile (relative error < 1.2e-9)."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    if p < 0.02425:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    if p > 1 - 0.02425:
        return -_normal_quantile(1 - p)
    q = p - 0.5
    r = q * q
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


def components(by_group: dict) -> tuple[float, float, float, int, int]:
    """(var_common, var_row, total rms, df_common, df_row) of A/A shifts grouped by the pair of runs
    (or of machine starts) they came from. Rows of one pair move together by a common amount c_g
    (the pair's clocks, placement, host) plus their own e: d = c_g + e. The rows' own variance is
    the spread around their group's mean (df = rows - groups); the common variance is what the
    group means hold beyond it (A/A: the true shift is 0, so the means are not centred; df = groups).
    Where every group gave one row of the class (launch: one row of a metric per backend and run),
    the two parts cannot be told apart: the total is the mean square of the shifts, each shift an
    independent draw around the known zero, so it has n degrees of freedom (not 1: that made a
    prediction 6x wider than the data, and no launch row could ever be `same`)."""
    n = sum(len(v) for v in by_group.values())
    g = len(by_group)
    ss_within = sum(sum((x - m) ** 2 for x in v) for v, m in ((v, sum(v) / len(v)) for v in by_group.values()))
    df_row = n - g
    if df_row == 0:
        return 0.0, sum(x * x for v in by_group.values() for x in v) / n, \
            math.sqrt(sum(x * x for v in by_group.values() for x in v) / n), g, n
    var_row = ss_within / df_row
    means = [sum(v) / len(v) for v in by_group.values()]
    inv_n = sum(1 / len(v) for v in by_group.values()) / g
    var_common = max(0.0, sum(m * m for m in means) / g - var_row * inv_n)
    return var_common, var_row, math.sqrt(var_common + var_row), g, df_row


def fit(shifts: Iterable[tuple], min_pairs: int = MIN_PAIRS) -> dict[str, dict]:
    """{class key: {"n", "groups", "rms", "df", "q99", "scale"}} for every level of every class with
    at least `min_pairs` A/A row pairs. Each shift is (class, d, group): rows of one pair of runs (or
    of one pair of machine starts) share a common move, so the variance is split in two
    (components): the rows' own, known from many rows, and the common one, known only from the
    groups. `rms` is the square root of their sum; `df` its effective degrees of freedom
    (Welch-Satterthwaite: few when the common part dominates and the groups are few). A new pair's
    shift then lies within +-t975(df) x rms with 95% probability (a prediction interval): `scale` is
    that half-width over 1.96, the between-run scale compare adds in quadrature to a row's bootstrap
    interval. `scale90` is the same for the 90% prediction interval (t95, the 90th percentile of
    |d|, over 1.645): what "same" is judged by (two one-sided tests at 5%). Single-sample classes
    (launch's cold starts move by up to 8x: heavy tails) take at least the 99th percentile of |d|
    over 1.96, for "same" too."""
    by: dict[str, dict] = {}
    for cls, d, group in shifts:
        for lv in levels(cls):
            by.setdefault(key(lv), {}).setdefault(group, []).append(d)
    out = {}
    for k, groups in sorted(by.items()):
        ds = [x for v in groups.values() for x in v]
        n = len(ds)
        parts = k.split("/")
        if n < (max(min_pairs, ROW_MIN_PAIRS) if len(parts) > 6 else min_pairs):
            continue
        vc, vr, rms, dfc, dfr = components(groups)
        den = (vc * vc / dfc if dfc else 0.0) + vr * vr / dfr
        df = (vc + vr) ** 2 / den if den > 0 else float(dfr)
        ad = sorted(abs(x) for x in ds)
        q90, q95, q99 = (ad[min(n - 1, math.ceil(q * n) - 1)] for q in (0.90, 0.95, 0.99))
        if is_heavy(parts):  # heavy tails: bounds, not a normal prediction, and no narrower one for "same"
            g = len(groups)
            scale = scale90 = max(rms * math.sqrt(g / chi2_quantile(1 - UPPER, g)), q99 / Z95)
        else:
            scale = max(rms * t975(max(df, 1.0)), q95) / Z95
            scale90 = max(rms * t95(max(df, 1.0)), q90) / Z90
        out[k] = {"n": n, "groups": len(groups), "rms": round(rms, 6), "common": round(math.sqrt(vc), 6),
                  "df": round(df, 1), "q90": round(q90, 6), "q95": round(q95, 6), "q99": round(q99, 6),
                  "scale": round(scale, 6), "scale90": round(scale90, 6)}
    return out


def _lookup(cls: Sequence[str], same_start: bool) -> list[tuple[str, tuple[str, ...]]]:
    """(scope, level) in the order a scale is looked up: across starts, the levels most specific
    first; within one start, at each level the start's own scope, then across starts (a row's scale
    across starts bounds what it does within one), except for host-bound classes, whose rows are
    judged across starts as gaps to the host floor (another quantity): all their within-start
    levels first; and for a balanced row (clock with BALANCED), at each level its own and its as-drawn
    row's within one start before either across starts."""
    lvs = lookup_levels(cls)
    if not same_start:
        return [("across", lv) for lv in lvs]
    if cls[3] in HEAVY_CLOCKS:
        return [("within", lv) for lv in lvs] + [("across", lv) for lv in lvs]
    if BALANCED in cls[3]:
        # a balanced row within one start: at each level its own fit, then the as-drawn row's within one
        # start (the pads take the parity's spread off a row and add at most 0.05 us: its as-drawn spread
        # bounds its own), before either across starts, which add what a start adds
        own, drawn = lvs[:len(lvs) // 2], lvs[len(lvs) // 2:]  # lookup_levels: the row's, then as-drawn's
        return [(scope, lv) for pair in zip(own, drawn) for scope in ("within", "across") for lv in pair]
    return [(scope, lv) for lv in lvs for scope in ("within", "across")]


class NoiseModel:
    """A fitted model: per device class, the class scales (fit's output) and where they came from."""

    def __init__(self, doc: dict):
        self.doc = doc
        self.devices: dict[str, dict] = doc.get("devices", {})
        #: per device class: {"share": {"native": b, "framework": b}, "within": ..., "across": ...}
        self.floors: dict[str, dict] = doc.get("floor", {})

    def _section(self, device: str, cls: Sequence[str]) -> dict | None:
        """Where a class's fits are: the floor section for floored classes, else the device's."""
        return (self.floors if cls[3].endswith(FLOORED) else self.devices).get(device)

    def floor_share(self, device: str, group: str) -> float | None:
        """b: the share of a launch floor's move taken off a row of `group` (floor_group) on
        `device`, or None where the model has no floor fit there (the row is judged as it is)."""
        b = ((self.floors.get(device) or {}).get("share") or {}).get(group)
        return float(b) if b is not None else None

    @classmethod
    def load(cls, path: Path | str = MODEL_FILE) -> "NoiseModel":
        try:
            return cls(json.loads(Path(path).read_text()))
        except (OSError, ValueError):
            return cls({})

    def scale(self, device: str, cls: Sequence[str], same_start: bool = False,
              confidence: float = 0.95) -> tuple[float | None, str]:
        """(the between-run scale (log) of a row of class `cls` on `device`, the class it came from),
        or (None, why there is none). `same_start`: both runs on one machine start (one boot of one
        host), where rows move less than across starts. The most specific level fitted wins (the row
        itself, then its class, then coarser ones), within one start before across starts at each
        level: a row's own scale across starts bounds what it does within one (starts add to it),
        where too few pairs of one start saw it, better than a class whose loudest rows set its tail.
        `confidence` 0.90: the scale of the 90% prediction interval ("same"; a model fitted before
        it was kept gives its 95% one, which is wider)."""
        if self._section(device, cls) is None:
            have = ", ".join(sorted(self.devices)) or "none"
            return None, f"uncalibrated on {device} (calibrated: {have}): use --repeat"
        found = self._fitted(device, cls, same_start)
        if found is None:
            return None, f"no calibrated class for {key(cls)} on {device}: use --repeat"
        scope, k, hit = found
        s = hit.get(_level(confidence)[2], hit["scale"])
        return float(s), f"{scope} starts: {k}" if scope == "across" else f"one start: {k}"

    def prior(self, device: str, cls: Sequence[str], same_start: bool = False) -> tuple[float, int] | None:
        """(rms of the class's shifts, groups behind it) for a --repeat interval's prior, or None."""
        found = self._fitted(device, cls, same_start)
        return (float(found[2]["rms"]), int(found[2].get("groups", 1))) if found else None

    def _fitted(self, device: str, cls: Sequence[str], same_start: bool) -> tuple[str, str, dict] | None:
        """(scope, level key, its fit) of the first level fitted, in _lookup's order, or None."""
        dev = self._section(device, cls) or {}
        for scope, lv in _lookup(cls, same_start):
            hit = dev.get(scope, {}).get(key(lv))
            if hit is not None:
                return scope, key(lv), hit
        return None

    def start_term(self, device: str, cls: Sequence[str]) -> float:
        """The rms of what a machine start adds to a row's shift (another host, another GPU unit of
        the model: one H200's 16384^2 GEMV ran 4.7% slower than two others in every run), beyond
        what two processes of one start differ by: sqrt(rms across starts^2 - rms within one
        start^2) at the most specific level fitted in both scopes; 0 where there is none. Several
        processes of one start say nothing of it, so a --repeat interval across starts adds it."""
        dev = self._section(device, cls) or {}
        within, across = dev.get("within", {}), dev.get("across", {})
        for lv in lookup_levels(cls):
            w, a = within.get(key(lv)), across.get(key(lv))
            if w is not None and a is not None:
                return math.sqrt(max(0.0, float(a["rms"]) ** 2 - float(w["rms"]) ** 2))
        return 0.0

    def describe(self) -> str:
        if not self.devices:
            return "no noise model"
        def n(k: int, what: str) -> str:
            return f"{k} {what}{'' if k == 1 else 's'}"

        parts = [f"{d} ({n(len(v.get('starts', [])), 'machine start')}, {n(v.get('pairs', 0), 'A/A row pair')})"
                 for d, v in sorted(self.devices.items())]
        floors = [f"{d} ({n(len(v.get('starts', [])), 'start')})" for d, v in sorted(self.floors.items())]
        return (f"per-row noise model of {', '.join(parts)} ({self.doc.get('generator', '?')})"
                + (f"; launch floors of {', '.join(floors)}" if floors else ""))


@functools.cache
def shipped() -> NoiseModel:
    """The model that ships with gapbench (compare_noise.json), read once."""
    return NoiseModel.load()
