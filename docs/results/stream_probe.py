"""Which per-case state moves a small kernel's time: its stream or its buffers? (issue 35; see
placement_probe.py, which re-creates whole cases)

A 1-element-per-thread fp16 multiply of 256x256 (torch.mul(out=)), device-timed by events queued
behind a torch.cuda._sleep spin of ~50 us, so the events see only device work (a diagnostic: the
harness itself gates on a host-released kernel). Three ways, each a median of RUNS timings per
setting, settings in order:
  streams  the same buffers on STREAMS fresh streams
  buffers  fresh buffers (kept alive, each behind a 4 MiB spacer so it lands elsewhere) on one stream
  repeat   the same buffers on the same stream, STREAMS times (the floor: what a setting's median
           moves by itself)

    python docs/results/stream_probe.py OUT.json
"""
from __future__ import annotations

import json
import sys

import numpy as np
import torch

STREAMS, RUNS, SPIN = 12, 40, 100_000  # SPIN cycles: ~50 us at 1980 MHz


def timed(stream: torch.cuda.Stream, x, y, out) -> float:
    ts = []
    with torch.cuda.stream(stream):
        for _ in range(RUNS + 5):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(SPIN)
            e0.record(stream)
            torch.mul(x, y, out=out)
            e1.record(stream)
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) * 1e3)  # us
    return float(np.median(ts[5:]))


def main(out_path: str) -> None:
    torch.cuda.init()
    shape, dt = (256, 256), torch.float16
    x, y = torch.randn(shape, device="cuda", dtype=dt), torch.randn(shape, device="cuda", dtype=dt)
    out = torch.empty_like(x)
    expected = (x.float() * y.float()).half()
    s0 = torch.cuda.Stream()
    doc = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "runs": RUNS, "spin_cycles": SPIN,
           "streams": [timed(torch.cuda.Stream(), x, y, out) for _ in range(STREAMS)]}
    assert torch.equal(out, expected)
    keep, buffers = [], []
    for _ in range(STREAMS):
        keep.append(torch.empty(4 << 20, device="cuda", dtype=torch.uint8))
        a, b = torch.randn(shape, device="cuda", dtype=dt), torch.randn(shape, device="cuda", dtype=dt)
        o = torch.empty_like(a)
        keep += [a, b, o]
        buffers.append(timed(s0, a, b, o))
        assert torch.equal(o, (a.float() * b.float()).half())
    doc["buffers"] = buffers
    doc["repeat"] = [timed(s0, x, y, out) for _ in range(STREAMS)]
    for k in ("streams", "buffers", "repeat"):
        v = np.array(doc[k])
        print(f"{k:8s} median {np.median(v):.3f} us, range {v.min():.3f}-{v.max():.3f} "
              f"({100 * (v.max() / v.min() - 1):.1f}%), sd {100 * np.std(np.log(v), ddof=1):.2f}%", flush=True)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
