"""Is what moves a row between processes the kernel, or the time a one-call sample holds beside it?
(issue 35; findings/between-runs.md, "Where the two levels come from": in the one slow state profiled,
torch's 16 us GEMV took 0.6 us longer between its events while its kernel, under the profiler, took
the same time. Rows under 10 us move 1.2-2.5% rms between processes, what keeps one run a side under
80% `same`: is that the same part?)

One fresh process per call of this script. For each CASE and framework (torch-cuda, CuPy): 4 input sets
rotated, SAMPLES calls each behind gapbench's release gate, then PROFILED calls under torch's profiler
(mode_history.gated_and_profiled, the probe of its plan `profile`): the sample's median and each call's
kernel time; then the batch arm: BATCH_SAMPLES samples of BATCH calls each behind one gate (per call).
Last, `floors`: per stream, an empty kernel beside the GEMV 1024x1024 (does a floor move with the rows?). Run it in several fresh
processes, then `--table` says, case by case, how far the sample's median and the kernel's moved
between processes and what the rest (sample minus kernel) did.

    python docs/results/overhead_probe.py OUT.json
    python docs/results/overhead_probe.py --table RUN.json ...   # Markdown over several processes
    python docs/results/overhead_probe.py --floors RUN.json ...  # per process: its floors, its short rows
    python docs/results/overhead_probe.py --offsets RUN.json ... # the common offset, and the floor against it
    python docs/results/overhead_probe.py --report DIR ...       # all of them per folder (overhead.md)

"""
from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (label, framework call builder args): fp16 cases of the default run's short rows and one long one
CASES = (("gemm 8x256x256x256", "bmm", (8, 256, 256, 256)),
         ("gemv 256x256", "mv", (256, 256)),
         ("gemv 1024x1024", "mv", (1024, 1024)),
         ("gemv 4096x4096", "mv", (4096, 4096)),
         ("gemv 16384x1024", "mv", (16384, 1024)))
SETS, SAMPLES, PROFILED = 4, 400, 24
#: the batch arm: BATCH calls (the sets in turn) between one pair of events behind one gate, as
#: nvbench's "batch" time and a training step's back-to-back kernels see them; BATCH_SAMPLES samples
BATCH, BATCH_SAMPLES = 8, 100


def calls(xp, kind: str, dims: tuple) -> list:
    """One callable per input set, for numpy-like `xp` (torch or cupy) in fp16."""
    out = []
    for _ in range(SETS):
        if kind == "mv":
            m, k = dims
            if xp.__name__ == "torch":
                A = xp.randn(m, k, device="cuda", dtype=xp.float16)
                x = xp.randn(k, device="cuda", dtype=xp.float16)
                out.append(lambda A=A, x=x, t=xp: t.mv(A, x))
            else:
                A = xp.random.standard_normal((m, k), dtype=xp.float32).astype(xp.float16)
                x = xp.random.standard_normal((k,), dtype=xp.float32).astype(xp.float16)
                out.append(lambda A=A, x=x: A @ x)
        else:
            b, m, n, k = dims
            if xp.__name__ == "torch":
                A = xp.randn(b, m, k, device="cuda", dtype=xp.float16)
                B = xp.randn(b, k, n, device="cuda", dtype=xp.float16)
                out.append(lambda A=A, B=B, t=xp: t.bmm(A, B))
            else:
                A = xp.random.standard_normal((b, m, k), dtype=xp.float32).astype(xp.float16)
                B = xp.random.standard_normal((b, k, n), dtype=xp.float32).astype(xp.float16)
                out.append(lambda A=A, B=B, c=xp: c.matmul(A, B))
    return out


def _trimmed_us(t: list[float]) -> float:
    """The mean of the middle 80% of samples (us): the event timer ticks in 32 ns steps on these GPUs,
    so medians of short samples move in whole steps; the trimmed mean resolves between them."""
    t = sorted(t)
    mid = t[len(t) // 10: len(t) - len(t) // 10]
    return 1e6 * sum(mid) / len(mid)


def floors(torch, ad, n_streams: int = 8) -> list[dict]:
    """Per stream (torch's current stream, then the native part's `n_streams` timing streams): an empty
    kernel (torch.cuda._sleep(0)) and the fp16 GEMV 1024x1024, SAMPLES one-call samples each behind
    the gate, interleaved in blocks, and BATCH_SAMPLES samples of BATCH empty kernels; trimmed means
    (us). Does a process's and a stream's floor move as its short rows do?"""
    A = [torch.randn(1024, 1024, device="cuda", dtype=torch.float16) for _ in range(SETS)]
    x = [torch.randn(1024, device="cuda", dtype=torch.float16) for _ in range(SETS)]
    turn = [0]

    def gemv():
        turn[0] += 1
        return torch.mv(A[turn[0] % SETS], x[turn[0] % SETS])

    def empty():
        torch.cuda._sleep(0)

    out = []
    streams = [None] + list(range(ad.timing_streams(n_streams)))
    for s in streams:
        if s is not None:
            ad.use_stream(s)
        for _ in range(2 * SETS):
            gemv(), empty()
        torch.cuda.synchronize()
        e, g = [], []
        for _ in range(SAMPLES // 50):  # interleaved blocks: both see the same moments of the process
            e += ad.time_device_each(empty, 50)
            g += ad.time_device_each(gemv, 50)
        batch = [ad.time_device(empty, BATCH) / BATCH for _ in range(BATCH_SAMPLES)]
        out.append({"stream": "current" if s is None else s, "empty_us": _trimmed_us(e),
                    "empty_median_us": 1e6 * sorted(e)[len(e) // 2], "gemv_us": _trimmed_us(g),
                    "gemv_median_us": 1e6 * sorted(g)[len(g) // 2], "empty_batch_us": _trimmed_us(batch)})
    torch.cuda.set_stream(torch.cuda.default_stream())
    return out


def main(path: str) -> None:
    import cupy
    import torch

    from gapbench.backends import registry
    from gapbench.core.names import Backend
    from mode_history import gated_and_profiled

    adapters = {"torch-cuda": registry.make_adapter(Backend.torch_cuda), "cupy": registry.make_adapter(Backend.cupy)}
    for ad in adapters.values():
        ad.setup_context()
    libs = {"torch-cuda": torch, "cupy": cupy}

    def sync():
        torch.cuda.synchronize()
        cupy.cuda.Device().synchronize()

    import os

    doc: dict = {"device": torch.cuda.get_device_name(), "rows": {},
                 "module_loading": os.environ.get("CUDA_MODULE_LOADING", ""),
                 "max_connections": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "")}
    for label, kind, dims in CASES:
        for fw, ad in adapters.items():
            fns, turn = calls(libs[fw], kind, dims), [0]  # the one arm's sets, the batch arm's too
            sample_us, acts = gated_and_profiled(ad, fns, SAMPLES, PROFILED, sync)
            kernels = [a for a in acts if a["cat"] == "kernel"]

            def run_next(fns=fns, turn=turn):
                turn[0] += 1
                return fns[turn[0] % len(fns)]()

            for _ in range(2 * len(fns)):
                run_next()
            sync()
            batch = sorted(ad.time_device(run_next, BATCH) / BATCH for _ in range(BATCH_SAMPLES))
            doc["rows"][f"{label} {fw}"] = {
                "sample_us": sample_us,
                "kernels": sorted({(a["name"] or "")[:80] for a in kernels}),
                "kernel_us": [a["us"] for a in kernels],
                "kernels_per_call": len(kernels) / PROFILED,
                "batch_us": [1e6 * batch[len(batch) // 10], 1e6 * batch[len(batch) // 2],
                             1e6 * batch[9 * len(batch) // 10]], "batch": BATCH}
            with open(path, "w") as f:
                json.dump(doc, f, indent=1)
    doc["floors"] = floors(torch, adapters["torch-cuda"])
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def _load(path) -> dict:
    """A probe file, as written (.json) or gzipped as committed (.json.gz)."""
    import gzip

    path = str(path)
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def _spread(values: list[float]) -> str:
    """mean, and the sd across processes as a share of the mean."""
    m = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{m:.3f} ({100 * sd / m:.2f}%)" if m else "-"


def table(paths: list[str]) -> str:
    """Per row over the processes given: the sample's median, the kernel's median per call (the sum of
    a call's kernels) and the rest, each as its mean with its sd across processes; and the batch arm's
    median per call (several calls behind one gate), with its sd across processes."""
    docs = [_load(p) for p in paths]
    rows = sorted({k for d in docs for k in d.get("rows", {})})
    out = ["Generated by `python docs/results/overhead_probe.py --table` from the files named in INDEX.md; do not "
           f"edit by hand. {len(docs)} processes ({', '.join(sorted({d.get('device', '?') for d in docs}))}). Per row: "
           "mean over the processes (us) and, in brackets, the sd of the processes' values as a share of that mean.\n",
           "| row | sample median | kernel per call | sample - kernel | sd of sample - kernel, ns | kernels a call "
           "| batch: per call, n behind one gate |",
           "|---|---|---|---|---|---|---|"]
    for k in rows:
        got = [d["rows"][k] for d in docs if k in d.get("rows", {})]
        sample = [g["sample_us"][1] for g in got]
        batched = [g["batch_us"][1] for g in got if g.get("batch_us")]
        ns = sorted({g["batch"] for g in got if g.get("batch_us")})
        batch = f"{_spread(batched)}, n={'/'.join(map(str, ns))}" if len(batched) == len(got) else "-"
        kernel = [statistics.median(g["kernel_us"]) * g["kernels_per_call"] for g in got if g["kernel_us"]]
        if len(kernel) != len(sample):
            out.append(f"| {k} | {_spread(sample)} | - | - | - | - | {batch} |")
            continue
        rest = [s - q for s, q in zip(sample, kernel)]
        sd_ns = 1e3 * statistics.stdev(rest) if len(rest) > 1 else 0.0
        per_call = sorted({g["kernels_per_call"] for g in got})
        out.append(f"| {k} | {_spread(sample)} | {_spread(kernel)} | {_spread(rest)} | {sd_ns:.0f} | "
                   f"{', '.join(f'{c:g}' for c in per_call)} | {batch} |")
    return "\n".join(out) + "\n"


def floor_table(paths: list[str]) -> str:
    """Per process: its empty kernel and GEMV 1024x1024 on torch's current stream (trimmed means, us),
    the empty kernel's per-call time in a batch, and the range of both over the native timing streams;
    then the correlation across processes of the current stream's empty kernel with the mean of the
    short framework rows' sample medians (the process's common offset)."""
    docs = [(Path(p).name, _load(p)) for p in paths]
    docs = [(n, d) for n, d in docs if d.get("floors")]
    out = ["| process | loading | empty, current stream | empty, batched | GEMV 1024 | empty, 8 streams | GEMV 1024, 8 streams | short rows' mean sample |",
           "|---|---|---|---|---|---|---|---|"]
    xs, ys = [], []
    for name, d in docs:
        cur = next(f for f in d["floors"] if f["stream"] == "current")
        rest = [f for f in d["floors"] if f["stream"] != "current"]
        short = [r["sample_us"][1] for k, r in d["rows"].items() if k in SHORT]
        level = statistics.fmean(short) if short else float("nan")
        if short:
            xs.append(cur["empty_us"])
            ys.append(level)
        rng = (lambda key: f"{min(f[key] for f in rest):.3f}-{max(f[key] for f in rest):.3f}" if rest else "-")
        out.append(f"| {name} | {d.get('module_loading') or 'driver default'} | {cur['empty_us']:.3f} | {cur['empty_batch_us']:.3f} "
                   f"| {cur['gemv_us']:.3f} | {rng('empty_us')} | {rng('gemv_us')} | {level:.3f} |")
    if len(xs) > 2 and statistics.pstdev(xs) > 0 and statistics.pstdev(ys) > 0:
        out.append(f"\nAcross {len(xs)} processes, the current stream's empty kernel against the short rows' mean: "
                   f"correlation {statistics.correlation(xs, ys):.2f}.")
    # within each process: each stream's empty kernel and GEMV less the process's mean over its streams
    es, gs = [], []
    for _, d in docs:
        fl = d["floors"]
        me, mg = statistics.fmean(f["empty_us"] for f in fl), statistics.fmean(f["gemv_us"] for f in fl)
        es += [f["empty_us"] - me for f in fl]
        gs += [f["gemv_us"] - mg for f in fl]
    pe = [f["empty_us"] for _, d in docs for f in d["floors"]]
    pg = [f["gemv_us"] for _, d in docs for f in d["floors"]]
    if len(pe) > 2 and statistics.pstdev(pe) > 0 and statistics.pstdev(pg) > 0:
        # every stream of every process: the empty kernel timed in the GEMV's interleaved blocks
        lg = [math.log(g) for g in pg]
        la = [math.log(g - (e - statistics.fmean(pe))) for g, e in zip(pg, pe)]
        out.append(f"\nOver every stream of every process ({len(pe)}), the empty kernel interleaved with the GEMV: "
                   f"correlation {statistics.correlation(pe, pg):.2f}; the GEMV's sd {100 * statistics.pstdev(lg):.2f}%, "
                   f"{100 * statistics.pstdev(la):.2f}% after the empty kernel's move (us) is taken off.")
    if len(es) > 2 and statistics.pstdev(es) > 0 and statistics.pstdev(gs) > 0:
        out.append(f"\nWithin a process, stream to stream (each less its process's mean over its streams): the empty "
                   f"kernel's sd {1e3 * statistics.pstdev(es):.0f} ns, the GEMV's {1e3 * statistics.pstdev(gs):.0f} ns, "
                   f"correlation {statistics.correlation(es, gs):.2f}.")
    return "\n".join(out) + "\n"


#: the short rows of the offsets table: the framework rows of the cases under 10 us (CuPy's batched
#: GEMM is 4 kernels and 28 us a call: not one of them)
SHORT = ("gemm 8x256x256x256 torch-cuda", "gemv 256x256 torch-cuda", "gemv 256x256 cupy",
         "gemv 1024x1024 torch-cuda", "gemv 1024x1024 cupy")


def _rms(values: list[float]) -> float:
    return math.sqrt(statistics.fmean([v * v for v in values])) if values else float("nan")


def offsets(paths: list[str]) -> str:
    """How much of the short rows' moves between processes one offset per process explains, and
    whether the process's empty kernel (`floors`, torch's current stream) measures it. For the
    one-call samples and the batch arm: each row's log median less its mean over the processes; the
    process's common offset (the mean over SHORT rows); the rms of the rows' moves, of what is left
    beside the common offset, and of what is left after the process's empty kernel's own move
    (microseconds, one-call or batched) is taken off each row; and the correlation of the empty
    kernel's move with the common offset. sd across processes, as a share of the row."""
    docs = [_load(p) for p in paths]
    docs = [d for d in docs if all(k in d.get("rows", {}) for k in SHORT)]
    if len(docs) < 3:
        return "fewer than 3 processes with every short row: no offsets table\n"
    with_floor = all(d.get("floors") for d in docs)  # files of the probe before its floors: no floor columns
    cur = [next(f for f in d["floors"] if f["stream"] == "current") for d in docs] if with_floor else []
    out = [f"{len(docs)} processes ({', '.join(sorted({d.get('device', '?') for d in docs}))}); rows: {', '.join(SHORT)}.\n",
           "| samples | rms of the rows' moves | beside the common offset | after the empty kernel's move | "
           "correlation: empty kernel, common offset | common offset per process |",
           "|---|---|---|---|---|---|"]
    for arm, field, floor in (("one call each", "sample_us", "empty_us"), ("batch, per call", "batch_us", "empty_batch_us")):
        f = [c[floor] for c in cur] if with_floor else [0.0] * len(docs)
        fm = statistics.fmean(f)
        moves, left, adjusted = [], [], []
        per_row = {}
        for k in SHORT:
            v = [d["rows"][k][field][1] for d in docs]
            lv = [math.log(x) for x in v]
            m = statistics.fmean(lv)
            per_row[k] = [x - m for x in lv]
            a = [math.log(x - (fi - fm)) for x, fi in zip(v, f)]
            am = statistics.fmean(a)
            adjusted += [x - am for x in a]
        common = [statistics.fmean(per_row[k][i] for k in SHORT) for i in range(len(docs))]
        for k in SHORT:
            moves += per_row[k]
            left += [x - c for x, c in zip(per_row[k], common)]
        if with_floor and statistics.pstdev(f) > 0 and statistics.pstdev(common) > 0:
            floor_cells = f"{100 * _rms(adjusted):.2f}% | {statistics.correlation(f, common):.2f}"
        else:
            floor_cells = "- | -"
        out.append(f"| {arm} | {100 * _rms(moves):.2f}% | {100 * _rms(left):.2f}% | {floor_cells} | "
                   f"{', '.join(f'{100 * c:+.2f}%' for c in common)} |")
    return "\n".join(out) + "\n"


def report(dirs: list[str]) -> str:
    """overhead.md: per folder of one machine start's processes (in the order given), the table per
    CUDA module loading the processes ran with, then where the files have them the floors and the
    offsets."""
    out = ["# Sample, kernel and the rest: short rows between processes (overhead_probe.py)\n",
           "Generated by `python docs/results/overhead_probe.py --report DIR ...` from the folders INDEX.md names; "
           "do not edit by hand.\n"]
    for d in dirs:
        files = sorted(str(p) for p in Path(d).glob("*.json*"))
        out.append(f"## {Path(d).name}\n")
        by: dict[str, list[str]] = {}
        for f in files:
            by.setdefault(_load(f).get("module_loading") or "the driver's default (lazy)", []).append(f)
        for loading, fs in by.items():
            out.append(f"CUDA module loading: {loading}\n")
            out.append(table(fs))
            out.append(offsets(fs))
        if any(_load(f).get("floors") for f in files):
            out += ["Floors per process (us):\n", floor_table(files)]
    return "\n".join(out)


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        sys.stdout.write(table(sys.argv[2:]))
    elif sys.argv[1] == "--floors":
        sys.stdout.write(floor_table(sys.argv[2:]))
    elif sys.argv[1] == "--offsets":
        sys.stdout.write(offsets(sys.argv[2:]))
    elif sys.argv[1] == "--report":
        sys.stdout.write(report(sys.argv[2:]))
    else:
        main(sys.argv[1])
