"""Does the device memory a process holds, or has held, set the level of torch's 16 Mi-element cuBLAS
cases? (issue 35; findings/between-runs.md, "A state each process draws".)

hold_probe.py found the level outside the kernel independent of how long the gate holds the stream, and
found the two cases faster in a fresh process (12.38, 12.46 us on an H200) than after a default bench.blas
run in the same process (12.72-12.82). A bench.blas run leaves the process with a large caching
allocator and driver page tables behind it. This times the same calls (hold_probe.CALLS, one call a
gate, no added hold) in STEPS within one process: as it is; after torch.cuda.empty_cache() (the
allocator's free blocks back to the driver); while HOLD_GIB more are held in 1 GiB tensors, each
written once; after they are dropped (kept in torch's cache); after the cache is emptied (freed to the
driver); and WAITS_S seconds after that. Each step's arms are interleaved in rounds (each round's
trimmed means kept: does a step's level fade?); the outputs are checked (poisoned first) before the first step and after the last. With
RUN, a default bench.blas run goes first in the same process.

    python docs/results/footprint_probe.py OUT.json [RUN.json.gz]
    python docs/results/footprint_probe.py --table OUT.json ...

`--redraw OUT.json`: which events move the level, in a fresh process. After a baseline, a sequence of
REDRAW_EVENTS (each kind in turn, REDRAW_CYCLES times): nothing (a pause: does the level move by itself?),
256 MiB more held (allocation only), 32 MiB, 256 MiB and 1 GiB allocated, written and freed to the driver,
and a native BLAS case (fp16 GEMV 4096x4096: its slab, L2 scrub buffer, streams and gate) made and
destroyed, as bench.blas does for every case. After each event and REDRAW_PAUSE_S, both state cases are
timed (REDRAW_ROUNDS rounds of BLOCK one-call samples, interleaved). `--table` counts, per kind, the
events after which a case moved by more than REDRAW_MOVE_US. `--redraw split OUT.json`: SPLIT_EVENTS, the allocation
apart from the kernel that writes it, and a native case after either level.

`--decay OUT.json`: how long the slowdown after a free to the driver lasts, by the size freed. For each
of DECAY_GIB, in a fresh process: HOLD written 1 GiB tensors are freed to the driver (torch.cuda.empty_cache),
then GEMV 16384x1024 is timed one call a gate without a pause for DECAY_S seconds, each sample stamped
with its time since the free; DECAY_REST_S seconds of rest between sizes. `--table` groups the samples
in bins of time since the free.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hold_probe import CALLS, bench_first, gated_sampler, make_calls, read_doc, write_doc  # noqa: E402
from overhead_probe import _trimmed_us  # noqa: E402

ROUNDS, BLOCK = 16, 10
HOLD_GIB = 64
WAITS_S = (3, 10)
STEPS = ("as it is", "cache emptied", f"{HOLD_GIB} GiB held", "dropped, kept in torch's cache", "freed to the driver",
         *(f"{w} s later" for w in WAITS_S))


def main(out: str, run_path: str | None = None) -> None:
    rc = bench_first(run_path)
    import numpy as np

    torch, ad, calls, verify = make_calls()
    sample, hold, _ = gated_sampler(torch, ad)
    verify("before timing")
    for c in CALLS:  # each call once before timing (module loads outside any hold)
        sample(calls[c], 0.0, c)
    rng = np.random.default_rng(0)
    res: dict[str, dict[str, float]] = {}
    mem: dict[str, dict[str, int]] = {}
    held: list = []
    per_round: dict[str, dict[str, list[float]]] = {}
    waited = 0.0
    for step in STEPS:
        if step in (STEPS[1], STEPS[4]):
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        elif step == STEPS[2]:
            for _ in range(HOLD_GIB):
                t = torch.empty(1 << 28, device="cuda", dtype=torch.float32)
                t.fill_(1.0)  # written once: every page mapped
                held.append(t)
            torch.cuda.synchronize()
        elif step == STEPS[3]:
            held.clear()
            torch.cuda.synchronize()
        elif step != STEPS[0]:
            w = WAITS_S[STEPS.index(step) - 5]
            time.sleep(w - waited)
            waited = w
        mem[step] = {"allocated": int(torch.cuda.memory_allocated()), "reserved": int(torch.cuda.memory_reserved())}
        got: dict[str, list[float]] = {c: [] for c in CALLS}
        per_round[step] = {c: [] for c in CALLS}
        for _ in range(ROUNDS):
            for i in rng.permutation(len(CALLS)):
                c = CALLS[i]
                block = [sample(calls[c], 0.0, c) for _ in range(BLOCK)]
                got[c] += block
                per_round[step][c].append(round(_trimmed_us(block), 3))
        res[step] = {c: _trimmed_us(t) for c, t in got.items()}
    held.clear()
    torch.cuda.synchronize()
    verify("after timing")
    doc = {"device": torch.cuda.get_device_name(), "after_run": bool(run_path), "rc": rc,
           "invalid_samples": hold.invalid_samples, "steps": list(STEPS), "us": res, "memory": mem,
           "per_round_us": per_round}
    write_doc(doc, out, run_path)


REDRAW_EVENTS = ("pause", "hold 256 MiB", "free 32 MiB", "free 256 MiB", "free 1 GiB", "native case")
#: `--redraw split`: allocation apart from the kernel that writes it, and a native case after either level
SPLIT_EVENTS = ("hold 256 MiB", "native case", "free 32 MiB", "native case", "hold 256 MiB, unwritten", "free 32 MiB",
                "write a held 256 MiB", "free 32 MiB", "free 256 MiB, unwritten", "free 32 MiB")
#: `--redraw parity`: does each kernel launched toggle the level, on the timed stream or any?
PARITY_EVENTS = ("1 empty kernel", "2 empty kernels", "1 empty kernel, other stream", "3 empty kernels",
                 "1 empty kernel, other stream, synced", "1 empty kernel")
#: `--redraw balanced`: one empty kernel (a toggle) after each step, every call timed as bench.blas does and
#: with 1 and 2 empty kernels in turn between the gate and the start event (each parity alike, whatever the
#: call launches: every 4 samples hold both parities twice)
BALANCED_EVENTS = ("1 empty kernel",)
REDRAW_CYCLES, REDRAW_ROUNDS, REDRAW_PAUSE_S, REDRAW_MOVE_US = 8, 6, 0.02, 0.25


def redraw(out: str, events: tuple[str, ...] = REDRAW_EVENTS) -> None:
    import numpy as np

    from gapbench import _native
    from gapbench.core import native

    torch, ad, calls, verify = make_calls()
    sample, hold, _ = gated_sampler(torch, ad)
    verify("before timing")
    for c in CALLS:
        sample(calls[c], 0.0, c)
    pair = CALLS[:2]
    rng = np.random.default_rng(0)
    balanced = events == BALANCED_EVENTS

    def level_balanced() -> dict[str, float]:
        got = {(c, w): [] for c in CALLS for w in ("plain", "padded")}
        for _ in range(REDRAW_ROUNDS):
            for i in rng.permutation(len(got)):
                c, w = list(got)[i]
                got[(c, w)] += [sample(calls[c], 0.0, c, 0 if w == "plain" else 1 + j % 2) for j in range(2 * BLOCK // 4 * 4)]
        res = {}
        for c in CALLS:
            res[c] = round(_trimmed_us(got[(c, "plain")]), 3)
            res[c + " padded"] = round(_trimmed_us(got[(c, "padded")]), 3)
            res[c + " padded median"] = round(1e6 * sorted(got[(c, "padded")])[len(got[(c, "padded")]) // 2], 3)
        return res

    def level() -> dict[str, float]:
        if balanced:
            return level_balanced()
        got: dict[str, list[float]] = {c: [] for c in pair}
        for _ in range(REDRAW_ROUNDS):
            for i in rng.permutation(len(pair)):
                got[pair[i]] += [sample(calls[pair[i]], 0.0, pair[i]) for _ in range(BLOCK)]
        return {c: round(_trimmed_us(t), 3) for c, t in got.items()}

    def freed(nbytes: int) -> None:
        t = torch.empty(nbytes // 4, device="cuda", dtype=torch.float32)
        t.fill_(1.0)
        torch.cuda.synchronize()
        del t
        torch.cuda.empty_cache()

    held = []
    steps = [{"event": "baseline", **level()}]
    for _ in range(REDRAW_CYCLES if events in (REDRAW_EVENTS, BALANCED_EVENTS) else REDRAW_CYCLES // 2):
        for ev in events:
            if ev.startswith("hold 256 MiB"):
                t = torch.empty(1 << 26, device="cuda", dtype=torch.float32)
                if not ev.endswith("unwritten"):
                    t.fill_(1.0)
                held.append(t)
            elif "empty kernel" in ev:
                n = int(ev.split()[0])
                if "other stream" in ev:
                    side = torch.cuda.Stream()
                    with torch.cuda.stream(side):
                        for _ in range(n):
                            torch.cuda._sleep(0)
                    side.synchronize()
                else:
                    for _ in range(n):
                        torch.cuda._sleep(0)
            elif ev == "write a held 256 MiB":
                held[0].fill_(2.0)
            elif ev == "free 256 MiB, unwritten":
                t = torch.empty(1 << 26, device="cuda", dtype=torch.float32)
                torch.cuda.synchronize()
                del t
                torch.cuda.empty_cache()
            elif ev.startswith("free"):
                freed({"free 32 MiB": 32 << 20, "free 256 MiB": 256 << 20, "free 1 GiB": 1 << 30}[ev])
            elif ev == "native case":
                case = _native.cuda.BlasCase(native.op("gemv"), native.dtype("fp16"), 1, 4096, 1, 4096)
                steps_rot = case.rotations  # made: slab, scrub buffer, streams and gate
                del case
            torch.cuda.synchronize()
            time.sleep(REDRAW_PAUSE_S)
            steps.append({"event": ev, **level(), **({"rotations": steps_rot} if ev == "native case" else {})})
    held.clear()
    verify("after timing")
    doc = {"device": torch.cuda.get_device_name(), "plan": "redraw", "events": list(events),
           "invalid_samples": hold.invalid_samples, "steps": steps}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)


def balanced_table(doc: dict, name: str) -> str:
    steps = doc["steps"]
    lines = [f"\n{name}: one empty kernel on the timed stream after each step; trimmed mean (us) as bench.blas times "
             "(one call a gate), and with 1 and 2 empty kernels in turn before the start event (trimmed mean; median)\n",
             "| step | " + " | ".join(f"{c}: plain / padded / padded median" for c in CALLS) + " |",
             "|---|" + "---|" * len(CALLS)]
    for i, st in enumerate(steps):
        lines.append(f"| {i} {st['event']} | " + " | ".join(
            f"{st[c]:.2f} / {st[c + ' padded']:.2f} / {st[c + ' padded median']:.2f}" for c in CALLS) + " |")
    for c in CALLS:
        for w in ("", " padded"):
            v = [st[c + w] for st in steps]
            lines.append(f"- {c}{w or ' plain'}: steps span {max(v) - min(v):.2f} us; mean |move| from step to step "
                         f"{sum(abs(a - b) for a, b in zip(v, v[1:])) / (len(v) - 1):.3f} us")
    return "\n".join(lines)


def redraw_table(doc: dict, name: str, in_order: bool = True) -> str:
    """The counts of moves per event kind; with `in_order`, the levels after every event too (the first
    process of each plan: the others' are in their files)."""
    steps = doc["steps"]
    if tuple(doc.get("events") or ()) == BALANCED_EVENTS:
        return balanced_table(doc, name)
    lines = [f"\n{name}: levels (us) of {CALLS[0]} and {CALLS[1]} after each event, in order: "
             + "; ".join(f"{s['event']} {s[CALLS[0]]:.2f}/{s[CALLS[1]]:.2f}" for s in steps) + "\n" if in_order else
             f"\n{name} (the levels after every event are in its file):\n",
             f"| event | events | {CALLS[0]} moved > {REDRAW_MOVE_US} us | {CALLS[1]} moved |", "|---|---|---|---|"]
    for ev in dict.fromkeys(doc.get("events") or REDRAW_EVENTS):
        idx = [i for i, s in enumerate(steps) if s["event"] == ev]
        moved = [sum(abs(steps[i][c] - steps[i - 1][c]) > REDRAW_MOVE_US for i in idx) for c in CALLS[:2]]
        lines.append(f"| {ev} | {len(idx)} | {moved[0]} | {moved[1]} |")
    return "\n".join(lines)


DECAY_GIB = (1, 4, 16, 64)
DECAY_S, DECAY_REST_S = 1.5, 4.0
DECAY_BINS_MS = (0, 10, 30, 100, 300, 1000, 1e9)


def decay(out: str) -> None:
    torch, ad, calls, verify = make_calls()
    sample, hold, _ = gated_sampler(torch, ad)
    verify("before timing")
    gemv = calls[CALLS[0]]
    for c in CALLS:
        sample(calls[c], 0.0, c)
    base = [sample(gemv, 0.0, CALLS[0]) for _ in range(400)]
    runs = {}
    for gib in DECAY_GIB:
        held = []
        for _ in range(gib):
            t = torch.empty(1 << 28, device="cuda", dtype=torch.float32)
            t.fill_(1.0)
            held.append(t)
        torch.cuda.synchronize()
        time.sleep(DECAY_REST_S)  # the allocation's own after-effects, if any, gone
        held.clear()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.cuda.empty_cache()
        freed_s = time.perf_counter() - t0
        got = []
        while time.perf_counter() - t0 < DECAY_S:
            t = sample(gemv, 0.0, CALLS[0])
            got.append((round(1e3 * (time.perf_counter() - t0), 3), t))
        runs[str(gib)] = {"empty_cache_ms": round(1e3 * freed_s, 3), "samples": got}
        time.sleep(DECAY_REST_S)
    verify("after timing")
    doc = {"device": torch.cuda.get_device_name(), "plan": "decay", "invalid_samples": hold.invalid_samples,
           "base_us": _trimmed_us(base), "runs": runs}
    with open(out, "w") as f:
        json.dump(doc, f)


def decay_table(doc: dict, name: str) -> str:
    bins = list(zip(DECAY_BINS_MS, DECAY_BINS_MS[1:]))
    head = " | ".join(f"{lo:g}-{hi:g} ms" if hi < 1e9 else f">= {lo:g} ms" for lo, hi in bins)
    lines = [f"\n{name}: GEMV 16384x1024 one call a gate, trimmed mean (us, samples) by time since the free; "
             f"before any free {doc['base_us']:.2f} us.\n", f"| freed GiB | empty_cache ms | {head} |",
             "|---|---|" + "---|" * len(bins)]
    for gib, r in doc["runs"].items():
        cells = []
        for lo, hi in bins:
            ts = [t for ms, t in r["samples"] if lo <= ms < hi]
            cells.append(f"{_trimmed_us(ts):.2f} ({len(ts)})" if len(ts) >= 5 else "-")
        lines.append(f"| {gib} | {r['empty_cache_ms']:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table(paths: list[str]) -> str:
    lines = ["Generated by `python docs/results/footprint_probe.py --table`; do not edit by hand. Trimmed mean (us) of "
             "one-call gated samples of torch's calls in four steps of one process (torch's reserved memory in GiB "
             "beside each step); after a default bench.blas run in the same process or not (its torch state score).\n",
             "| process | after a run (score) | call | " + " | ".join(STEPS) + " |", "|---|---|---|" + "---|" * len(STEPS)]
    decays, seen = [], set()
    for p in paths:
        doc, after = read_doc(p)
        if doc.get("plan") == "decay":
            decays.append(decay_table(doc, Path(p).name.split(".")[0]))
            continue
        if doc.get("plan") == "redraw":
            plan = tuple(doc.get("events") or REDRAW_EVENTS)
            decays.append(redraw_table(doc, Path(p).name.split(".")[0], plan not in seen))
            seen.add(plan)
            continue
        gib = {s: doc["memory"][s]["reserved"] / 2**30 for s in doc["steps"]}
        lines.append(f"| {Path(p).name.split('.')[0]} | {after} | (reserved GiB) | "
                     + " | ".join(f"{gib[s]:.1f}" for s in doc["steps"]) + " |")
        for c in CALLS:
            lines.append(f"| | | {c} | " + " | ".join(f"{doc['us'][s][c]:.2f}" for s in doc["steps"]) + " |")
        fr = doc.get("per_round_us", {}).get(STEPS[4])
        if fr:
            lines.append(f"| | | {STEPS[4]}, its rounds in order | " + "; ".join(
                f"{c}: {', '.join(f'{t:.2f}' for t in fr[c])}" for c in CALLS[:2]) + " |" + " |" * (len(STEPS) - 1))
    return ("\n".join(lines) if len(lines) > 3 else "Generated by `python docs/results/footprint_probe.py --table`; "
            "do not edit by hand.") + "\n".join(decays)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--table"]:
        print(table(sys.argv[2:]))
    elif sys.argv[1:2] == ["--decay"]:
        decay(sys.argv[2])
    elif sys.argv[1:2] == ["--redraw"]:
        redraw(sys.argv[-1], {"split": SPLIT_EVENTS, "parity": PARITY_EVENTS,
                              "balanced": BALANCED_EVENTS}.get(sys.argv[2], REDRAW_EVENTS))
    else:
        main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
