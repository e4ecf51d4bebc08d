"""Is what moves a row between processes the kernel, or the time a one-call sample holds beside it?
(issue 35; findings/between-runs.md, "Where the two levels come from": in the one slow state profiled,
torch's 16 us GEMV took 0.6 us longer between its events while its kernel, under the profiler, took
the same time. Rows under 10 us move 1.2-2.5% rms between processes, what keeps one run a side under
80% `same`: is that the same part?)

One fresh process per call of this script. For each CASE and framework (torch-cuda, CuPy): 4 input sets
rotated, SAMPLES calls each behind gapbench's release gate, then PROFILED calls under torch's profiler
(mode_history.gated_and_profiled, the probe of its plan `profile`): the sample's median and each call's
kernel time; then the batch arm: BATCH_SAMPLES samples of BATCH calls each behind one gate (per call). Run it in several fresh
processes, then `--table` says, case by case, how far the sample's median and the kernel's moved
between processes and what the rest (sample minus kernel) did.

    python docs/results/overhead_probe.py OUT.json
    python docs/results/overhead_probe.py --table RUN.json ...   # Markdown over several processes

"""
from __future__ import annotations

import json
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
                 "module_loading": os.environ.get("CUDA_MODULE_LOADING", "")}
    for label, kind, dims in CASES:
        for fw, ad in adapters.items():
            sample_us, acts = gated_and_profiled(ad, calls(libs[fw], kind, dims), SAMPLES, PROFILED, sync)
            kernels = [a for a in acts if a["cat"] == "kernel"]
            fns, turn = calls(libs[fw], kind, dims), [0]

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


def _spread(values: list[float]) -> str:
    """mean, and the sd across processes as a share of the mean."""
    m = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{m:.3f} ({100 * sd / m:.2f}%)" if m else "-"


def table(paths: list[str]) -> str:
    """Per row over the processes given: the sample's median, the kernel's median per call (the sum of
    a call's kernels) and the rest, each as its mean with its sd across processes; and the batch arm's
    median per call (several calls behind one gate), with its sd across processes."""
    docs = [json.load(open(p)) for p in paths]
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


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        sys.stdout.write(table(sys.argv[2:]))
    else:
        main(sys.argv[1])
