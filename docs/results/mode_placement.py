"""Does where a buffer lands set the mode of the 16 Mi-element cuBLAS GEMV? (issue 35; findings/
between-runs.md, "Two modes of a 16 us cuBLAS GEMV": one kernel, the mode follows the case's buffers.)

In one process, PLACEMENTS times over: a pad of a random size (0-62 MiB in 2 MiB steps) is allocated
and kept, so the next buffers land elsewhere; then 4 input sets (as bench.blas rotates them past the
L2) of the GEMV 16384x1024 fp16 (torch.mv) and of the VJP dx 1024x16384 (W.t() @ v), each timed
rotating through its sets: the stream held by torch.cuda._sleep while SAMPLES calls are queued with
an event pair each (a probe's fixed hold, not bench.blas's release gate), median per placement.
Each placement keeps its sets' device addresses, to see whether an address bit goes with the mode.

    python docs/results/mode_placement.py OUT.json [PLACEMENTS]
"""
from __future__ import annotations

import json
import random
import sys

import torch

SETS, SAMPLES, WARMUP = 4, 200, 20
MiB = 1 << 20


def timed(fn, sets) -> float:
    for i in range(WARMUP):
        fn(sets[i % SETS])
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(SAMPLES)]
    torch.cuda._sleep(40_000_000)  # about 20 ms: the host queues every call before the first runs
    for i, (a, b) in enumerate(ev):
        a.record()
        fn(sets[i % SETS])
        b.record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) * 1e3 for a, b in ev)
    return t[len(t) // 2]


def main(path: str, placements: int = 24) -> None:
    rng = random.Random()
    keep = []
    doc = {"device": torch.cuda.get_device_name(), "placements": []}
    x = torch.randn(1024, device="cuda", dtype=torch.float16)
    v = torch.randn(1024, device="cuda", dtype=torch.float16)
    for _ in range(placements):
        pad = rng.randrange(0, 32) * 2 * MiB
        keep.append(torch.empty(max(pad, 1), dtype=torch.uint8, device="cuda"))
        A = [torch.randn(16384, 1024, device="cuda", dtype=torch.float16) for _ in range(SETS)]
        W = [torch.randn(1024, 16384, device="cuda", dtype=torch.float16) for _ in range(SETS)]
        keep += A + W
        doc["placements"].append({
            "pad_mib": pad // MiB,
            "gemv_us": timed(lambda a: torch.mv(a, x), A),
            "vjp_dx_us": timed(lambda w: torch.mv(w.t(), v), W),
            "gemv_ptrs": [a.data_ptr() for a in A],
            "vjp_dx_ptrs": [w.data_ptr() for w in W],
        })
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
