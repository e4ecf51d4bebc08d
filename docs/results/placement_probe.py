"""Does where a case's buffers land move a small kernel's time? (issue 35: why small BLAS rows
move 1-3% between processes while their own samples agree to 0.2%)

In the committed A/A runs, rows under ~8 us are steady inside a run (all samples within a 32 ns
tick or two) yet move by 2-6 ticks between two processes of the same start, each row its own way,
with the SM clock at 1980 MHz in both. A case allocates its buffers once (one slab of rotated input
sets, cuda/blas.cu), so a fresh process is a fresh placement. This probe re-creates the same case
ALLOCS times in one process, keeping every earlier one alive so each gets new memory, and times the
dispatcher the way bench.blas does (hot, rotated sets, gated device events): if the medians spread
across allocations as they do across processes, placement is the cause, and a run that pools
several allocations per row would move less between runs.

    python docs/results/placement_probe.py OUT.json [ALLOCS]

Writes {"device", "allocs", "cases": [{"op", "dtype", "shape", "medians_us": [...]}]} (a median of
SAMPLES gated runs per allocation, in allocation order).
"""
from __future__ import annotations

import json
import sys

import numpy as np

from gapbench import _native, ops
from gapbench.core import dtypes, native
from gapbench.ops.spec import native_dims

CASES = [("vjp_dw", "fp16", {"m": 256, "k": 256}), ("gemv", "fp16", {"m": 256, "k": 256}),
         ("vjp_dx", "bf16", {"m": 256, "k": 256}), ("gemm", "fp16", {"batch": 8, "m": 256, "n": 256, "k": 256}),
         ("vjp_dx", "fp16", {"m": 4096, "k": 4096})]
SAMPLES, WARMUP = 30, 5


def main(out: str, allocs: int = 12) -> None:
    keep = []  # every case stays alive, so the next one cannot reuse its memory
    doc = {"device": _native.cuda.status(0), "allocs": allocs, "samples": SAMPLES, "cases": []}
    impl, hot = native.impl("dispatch"), native.cache("hot")
    for op, dt, shape in CASES:
        spec = ops.get(op)
        rounded = [dtypes.round_to(a, dt) for a in spec.inputs(shape, np.random.default_rng(1))]
        ref = spec.expected([a.astype(np.float64) for a in rounded], shape)
        medians = []
        for _ in range(allocs):
            case = _native.cuda.BlasCase(native.op(op), native.dtype(dt), *native_dims(shape), 0)
            for i, a in enumerate(rounded):
                case.set_input(i, dtypes.to_bytes(a, dt))
            ok, detail = dtypes.check(dtypes.from_bytes(case.run_once(impl), dt), ref, dt)
            assert ok, f"{op} {dt}: {detail}"
            medians.append(float(np.median(case.time(impl, SAMPLES, WARMUP, hot))) * 1e6)
            keep.append(case)
        doc["cases"].append({"op": op, "dtype": dt, "shape": shape, "strategy": case.strategy(impl),
                             "rotations": case.rotations, "medians_us": medians})
        m = np.array(medians)
        print(f"{op} {dt} {shape}: median over allocations {np.median(m):.3f} us, "
              f"range {m.min():.3f}-{m.max():.3f} ({100 * (m.max() / m.min() - 1):.1f}%)", flush=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 12)
