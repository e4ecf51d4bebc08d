"""The floors each run measures of its own machine, and what tells two runs' hosts apart
(gapbench compare's "what moved"): the empty event pair behind the gate, the plain C++ launch loops,
native-cpu's no-op; the host record of gapbench.core.env (CPU identity, kernel, machine and boot
digests, runs this boot)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gapbench.core.names import Backend
from gapbench.core.result import OK, Record, Run

#: a floor moved when its B/A lies outside 1 +- this
FLOOR_TOL = 0.10
#: device-timed rows shorter than this many empty event pairs move with the event-pair floor
EVENT_ROWS = 50
#: the floor of the host's CPU itself: native-cpu's bound no-op, one call through the binding
HOST_CPU = "native-cpu no-op"


@dataclass(frozen=True)
class FloorMove:
    """A floor a run measures of its own machine, and how it moved from A to B."""
    name: str
    a: float
    b: float
    unit: str

    @property
    def ratio(self) -> float:
        return self.b / self.a

    def text(self) -> str:
        r = self.ratio
        way = "slower" if r > 1 else "faster"
        scale = 1e6 if self.unit == "us" else 1.0
        return (f"{self.name} {max(r, 1 / r):.2f}x {way} ({self.a * scale:.3g} -> {self.b * scale:.3g} {self.unit})")


def host_env(run: Run) -> dict:
    """The run's host record (gapbench.core.env.host): env["host_id"]; runs of 2026-11-26 before the
    rename kept it under env["host"], where a bundle's runs keep their host label (a string)."""
    for k in ("host_id", "host"):
        v = run.env.get(k)
        if isinstance(v, dict):
            return v
    return {}


def floors(run: Run) -> dict[str, tuple[float, str]]:
    """The floors `run` measured of its machine: the empty event pair behind the gate (device
    seconds, median over the records that carry it), the plain C++ launch loop per metric (seconds
    per op) and native-cpu's no-op round trip. (The host's fixed interpreted loop, env.host's
    speed_ns_per_op, is recorded but is no floor: it moved 1.85x between two runs of one boot.)"""
    out: dict[str, tuple[float, str]] = {}
    pairs = [float((r.conditions or {})["event_pair_s"]) for r in run.records
             if (r.conditions or {}).get("event_pair_s")]
    if pairs:
        out["event pair"] = (float(np.median(pairs)), "us")
    for r in run.records:
        if r.status == OK and r.samples_s and r.probe == "launch":
            if r.backend == Backend.plain_cuda.value:
                out[f"plain {r.metric}"] = (float(np.median(r.per_op())), "us")
            elif r.backend == Backend.native_cpu.value and r.metric == "roundtrip" and r.variant in ("noop", ""):
                # the bound no-op (its Python-function sibling, py-noop, is a row, not this floor)
                out[HOST_CPU] = (float(np.median(r.per_op())), "us")
    return out


def floor_moves(a: Run, b: Run, tol: float = FLOOR_TOL) -> list[FloorMove]:
    """The floors both runs measured whose B/A lies outside 1 +- tol."""
    fa, fb = floors(a), floors(b)
    out = []
    for name in fa.keys() & fb.keys():
        (va, unit), (vb, _) = fa[name], fb[name]
        if va > 0 and vb > 0 and abs(math.log(vb / va)) > math.log1p(tol):
            out.append(FloorMove(name, va, vb, unit))
    return sorted(out, key=lambda m: m.name)


def host_differences(a: Run, b: Run) -> list[str]:
    """What tells the two runs' hosts apart (host_env), in words; [] where nothing
    recorded differs or a side does not record it."""
    ha, hb = host_env(a), host_env(b)
    out = []
    if ha.get("cpu_id") and hb.get("cpu_id") and ha["cpu_id"] != hb["cpu_id"]:
        diff = [k for k in ha["cpu_id"] if ha["cpu_id"].get(k) != hb["cpu_id"].get(k)]
        out.append("another CPU (" + ", ".join(f"{k} {ha['cpu_id'].get(k)} -> {hb['cpu_id'].get(k)}" for k in diff) + ")")
    for k, what in (("kernel", "another kernel"), ("machine_id", "another machine")):
        if ha.get(k) and hb.get(k) and ha[k] != hb[k]:
            out.append(what + (f" ({ha[k]} -> {hb[k]})" if k == "kernel" else ""))
    ga, gb = (str((r.env.get("gpu") or {}).get("uuid") or "") for r in (a, b))
    if ga and gb and ga != gb:  # one GPU model, another unit: a 16384^2 GEMV ran 4.7% apart on two H200s
        out.append(f"another GPU (uuid ...{ga[-6:]} -> ...{gb[-6:]})")
    if ha.get("boot_id") and hb.get("boot_id") and ha["boot_id"] != hb["boot_id"] and "another machine" not in out:
        out.append("another machine start (boot)")
    for side, h in (("A", ha), ("B", hb)):
        if h.get("runs_this_boot") == 0:
            out.append(f"{side} is the first run after its machine start (page and compile caches cold)")
    return out


def same_start(a: Run, b: Run) -> bool:
    """Whether both runs ran on one machine start: one boot of one host (host_env's digests; a
    side that does not record them counts as another start)."""
    ha, hb = host_env(a), host_env(b)
    return bool(ha.get("boot_id")) and ha.get("boot_id") == hb.get("boot_id") and ha.get("machine_id") == hb.get("machine_id")


def first_run(run: Run) -> bool:
    return host_env(run).get("runs_this_boot") == 0


def cold_caches(run: Run) -> set[str]:
    """The compile caches (CuPy's kernels, torch's bytecode, ...) that were empty when the run
    started: what its first calls compiled instead of loading."""
    caches = host_env(run).get("caches") or {}
    return {k for k, v in caches.items() if v == 0}


def cold_start_differs(a: Run, b: Run) -> str:
    """Why one run started colder than the other ("" where they started alike): a first run after a
    machine start against a later one, or a compile cache empty for one and filled for the other
    (a bundle's first benchmark is its boot's second gapbench process, but its caches are still
    cold). Single-sample rows (import, context, cold, first warm) move with it by up to 8x."""
    if first_run(a) != first_run(b):
        return "a first run after a machine start against a later one (cold caches)"
    ca, cb = cold_caches(a), cold_caches(b)
    known = set((host_env(a).get("caches") or {})) & set((host_env(b).get("caches") or {}))
    differ = sorted((ca ^ cb) & known)
    if differ:
        return f"compile caches cold in one run only ({', '.join(differ)})"
    return ""


#: the clocks of rows bound by the host's speed: host wall, events as the host issues the work, the plain loops
HOST_BOUND = ("host", "issued", "plain")

def is_floor(r: Record) -> bool:
    """A row that is itself a host floor: the plain C++ loops, native-cpu's no-op."""
    return r.backend == Backend.plain_cuda.value or (r.backend == Backend.native_cpu.value and r.metric == "roundtrip")


def plain_floors(a: Run, b: Run) -> dict[str, FloorMove]:
    """Per metric, the plain C++ loop's row in both runs, as a floor (moved or not): across machine
    starts a host-bound row is judged as its gap to the one of its metric."""
    fa, fb = floors(a), floors(b)
    return {name[len("plain "):]: FloorMove(name, fa[name][0], fb[name][0], fa[name][1])
            for name in fa.keys() & fb.keys() if name.startswith("plain ") and fa[name][0] > 0 and fb[name][0] > 0}
