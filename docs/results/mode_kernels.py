"""Which kernel does each mode of the 16 Mi-element cuBLAS GEMV run? (issue 35; findings/between-runs.md,
"Two modes of a 16 us cuBLAS GEMV"). torch's and CuPy's fp16 GEMV 16384x1024 and VJP dx 1024x16384
take one of two medians about 5% apart, the same mode for both frameworks in one process, mostly in
full runs. This probe, in one fresh process:

1. runs a default bench.blas's cases (gapbench.benchmarks.blas.run.iterate: the default config and
   backends, every case verified and timed as bench.blas does; no plain check, one process) and keeps
   the medians of those rows: the process's mode;
2. times the two cases again in the same process (iterate on them alone, new buffers): does the mode
   stay with the process?
3. last (CUPTI's hooks slow every later launch: findings/training-cupti-effect.md), profiles one call
   of each framework's op on new arrays with torch's profiler, which sees every kernel of the
   process (CuPy's too), and keeps each kernel's name and its device time.

    python docs/results/mode_kernels.py OUT.json

Writes {"device", "seed", "full": {row: median s}, "again": {...}, "kernels": {call: [[name, us], ...]}}.
"""
from __future__ import annotations

import json
import sys

import numpy as np

ROWS = (("gemv", "16384x1024"), ("vjp_dx", "1024x16384"))


def medians(records) -> dict[str, float]:
    out = {}
    for r in records:
        p = r.params or {}
        if (r.status == "ok" and r.samples_s and r.metric == "time" and p.get("dtype") == "fp16"
                and (p.get("op"), p.get("shape_text")) in ROWS):
            out[f"{p['op']} {p['shape_text']} {r.backend}/{r.variant}"] = float(np.median(r.per_op()))
    return out


def kernels(calls: dict) -> dict[str, list]:
    """Each call (name -> function) once under torch's profiler, after a warm call: its CUDA kernels."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for name, fn in calls.items():
        try:
            fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
        except Exception as e:  # a probe: say what failed, keep the other calls
            out[name] = [[f"error: {type(e).__name__}: {e}", None]]
            continue
        out[name] = [[e.name, round(float(e.time_range.elapsed_us()), 3)] for e in prof.events()
                     if "CUDA" in str(getattr(e, "device_type", ""))]
    return out


def main(path: str) -> None:
    from gapbench import ops
    from gapbench.backends import registry
    from gapbench.benchmarks.blas.config import Config, ops_for_shapes, parse_shapes
    from gapbench.benchmarks.blas.run import iterate
    from gapbench.core.names import Backend, DType

    doc: dict = {"rows": [" ".join(r) for r in ROWS]}

    def save():
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)

    cfg = Config()
    doc["seed"] = cfg.run_seed()
    backends = [Backend.native_cuda, Backend.torch_cuda, Backend.cupy]
    doc["device"] = registry.info(Backend.native_cuda).device
    doc["full"] = medians(iterate(cfg, backends))
    save()
    shapes = parse_shapes(",".join(s for _, s in ROWS))
    again = Config(ops=ops_for_shapes([ops.get(o) for o, _ in ROWS], shapes, explicit=True), dtypes=[DType.fp16],
                   shapes=shapes, seed=doc["seed"])
    doc["again"] = medians(iterate(again, backends))
    save()

    import cupy
    import torch

    A = torch.randn(16384, 1024, device="cuda", dtype=torch.float16)
    x = torch.randn(1024, device="cuda", dtype=torch.float16)
    W = torch.randn(1024, 16384, device="cuda", dtype=torch.float16)
    v = torch.randn(1024, device="cuda", dtype=torch.float16)
    ones = torch.ones(16384, device="cuda", dtype=torch.float16)
    _, vjp = torch.func.vjp(lambda x_: W @ x_, ones)
    Ac, xc, Wc, vc = (cupy.asarray(t) for t in (A, x, W, v))
    doc["kernels"] = kernels({"torch.mv(A, x) 16384x1024": lambda: torch.mv(A, x),
                              "torch.func.vjp(W @ x, x)(v) 1024x16384": lambda: vjp(v)[0],
                              "cupy A @ x 16384x1024": lambda: Ac @ xc,
                              "cupy W.T @ v 1024x16384": lambda: Wc.T @ vc})
    save()


if __name__ == "__main__":
    main(sys.argv[1])
