"""Does a small kernel's time follow the hardware queue its stream lands on, and does one queue per
process (CUDA_DEVICE_MAX_CONNECTIONS=1) take that out? (issue 35; after stream_probe.py)

stream_probe.py found the same buffers on twelve fresh streams 4-7.5% apart and the same stream
repeated within 0.5%. CUDA spreads a process's streams over CUDA_DEVICE_MAX_CONNECTIONS hardware
queues (8 by default); with 1, every stream of the process shares one. One fresh process of this
script times three small fp16 ops (a 256x256 multiply, a 1024x1024 GEMV, a 256^3 GEMM; out=, so
nothing is allocated inside the timed region), each device-timed by events queued behind a
torch.cuda._sleep spin of ~50 us (a diagnostic: the harness itself gates on a host-released kernel):
  default  the process's default stream, REPEATS medians (what a framework row runs on)
  pool     POOL fresh streams from torch's pool, one median each
Each median is of RUNS timings after 5 untimed. Every op is checked against a float32 reference
of the same inputs before timing and after (outputs poisoned first). Run it in alternating fresh
processes under each setting and compare the spread across streams within a process and of the
medians between processes:

    CUDA_DEVICE_MAX_CONNECTIONS=1 python docs/results/queue_probe.py OUT.json
    python docs/results/queue_probe.py --summary OUT1.json OUT2.json ...   (the table, by setting)
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch

POOL, REPEATS, RUNS, SPIN = 8, 3, 60, 100_000  # SPIN cycles: ~50 us at 1980 MHz


def ops(dev: str):
    """name -> (run(out), out, float32 reference, tolerance): small fp16 ops with preallocated outputs."""
    g = torch.Generator(device="cpu").manual_seed(1)
    h = lambda *s: torch.randn(*s, generator=g).to(dev, torch.float16)  # noqa: E731
    x, y, a, v, b, c = h(256, 256), h(256, 256), h(1024, 1024), h(1024), h(256, 256), h(256, 256)
    out = {"mul": torch.empty(256, 256, device=dev, dtype=torch.float16),
           "gemv": torch.empty(1024, device=dev, dtype=torch.float16),
           "gemm": torch.empty(256, 256, device=dev, dtype=torch.float16)}
    return {
        "mul 256x256": (lambda: torch.mul(x, y, out=out["mul"]), out["mul"], x.float() * y.float(), 1e-3),
        "gemv 1024x1024": (lambda: torch.mv(a, v, out=out["gemv"]), out["gemv"], a.float() @ v.float(), 3e-2),
        "gemm 256^3": (lambda: torch.mm(b, c, out=out["gemm"]), out["gemm"], b.float() @ c.float(), 3e-2),
    }


def verify(name: str, run, out, ref, tol: float, poison: bool = True) -> None:
    """The output against the reference: after one run over a poisoned output (poison=True), or
    as the last timed run left it (poison=False)."""
    if poison:
        out.fill_(float("nan"))
        run()
    torch.cuda.synchronize()
    err = ((out.float() - ref).abs() / (ref.abs() + 1.0)).max().item()
    if not err <= tol:  # NaN (poison left) fails too
        raise SystemExit(f"{name}: max error {err:.3g} over {tol} (or poison left)")


def median_us(stream: torch.cuda.Stream, run) -> float:
    ts = []
    with torch.cuda.stream(stream):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for i in range(RUNS + 5):
            torch.cuda._sleep(SPIN)
            e0.record(stream)
            run()
            e1.record(stream)
            e1.synchronize()
            if i >= 5:
                ts.append(e0.elapsed_time(e1) * 1e3)
    return float(np.median(ts))


def main(out_path: str) -> None:
    torch.cuda.init()
    doc = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "runs": RUNS, "spin_cycles": SPIN,
           "setting": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "unset"), "pid": os.getpid(), "kernels": {}}
    default = torch.cuda.current_stream()
    pool = [torch.cuda.Stream() for _ in range(POOL)]
    for name, (run, out, ref, tol) in ops("cuda").items():
        verify(name, run, out, ref, tol)
        doc["kernels"][name] = {"default": [median_us(default, run) for _ in range(REPEATS)],
                                "pool": [median_us(s, run) for s in pool]}
        verify(name, run, out, ref, tol, poison=False)  # the last timed run's own output
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    for name, k in doc["kernels"].items():
        p = np.array(k["pool"])
        print(f"{doc['setting']:>5} {name:15s} default {np.median(k['default']):.3f} us "
              f"pool {np.median(p):.3f} us, range {100 * (p.max() / p.min() - 1):.1f}%", flush=True)


def summary(paths: list[str]) -> None:
    """By setting and kernel: the sd (of logs) of the processes' default-stream medians and of
    their pool means, the mean sd across one process's pool streams, and of its repeats."""
    by: dict[str, list[dict]] = {}
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        by.setdefault(d["setting"], []).append(d)
    print("| CUDA_DEVICE_MAX_CONNECTIONS | kernel | processes | default stream, median | between processes: "
          "default stream | between processes: mean of the pool | within a process: across pool streams | "
          "within a process: same stream repeated |\n|---|---|---|---|---|---|---|---|")
    for setting, docs in sorted(by.items()):
        for k in docs[0]["kernels"]:
            ks = [d["kernels"][k] for d in docs]
            dm = np.log([np.median(x["default"]) for x in ks])
            pm = [np.mean(np.log(x["pool"])) for x in ks]
            within = np.mean([np.std(np.log(x["pool"]), ddof=1) for x in ks])
            rep = np.mean([np.std(np.log(x["default"]), ddof=1) for x in ks])
            print(f"| {setting} | {k} | {len(ks)} | {np.exp(np.median(dm)):.3f} us | {100 * np.std(dm, ddof=1):.2f}% | "
                  f"{100 * np.std(pm, ddof=1):.2f}% | {100 * within:.2f}% | {100 * rep:.2f}% |")
    # In nanoseconds: does a stream add the same offset to every kernel on it? Each process's pool
    # streams' deviations from their kernel's mean, their sd, and how two kernels' deviations
    # correlate stream by stream (median over processes), and across processes on the default stream.
    print("\n| CUDA_DEVICE_MAX_CONNECTIONS | kernels | sd of a pool stream's offset, ns (each kernel) | "
          "correlation of the offsets across one process's pool streams: median (range) | "
          "correlation across processes, default stream |\n|---|---|---|---|---|")
    for setting, docs in sorted(by.items()):
        names = list(docs[0]["kernels"])
        dev = [np.array([d["kernels"][k]["pool"] for k in names]) for d in docs]
        dev = [x - x.mean(axis=1, keepdims=True) for x in dev]
        sd = np.concatenate(dev, axis=1).std(axis=1) * 1e3
        default = np.array([[np.median(d["kernels"][k]["default"]) for k in names] for d in docs])
        across = np.corrcoef((default - default.mean(axis=0)).T)
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                r = [float(np.corrcoef(x[i], x[j])[0, 1]) for x in dev]
                print(f"| {setting} | {names[i]} / {names[j]} | {sd[i]:.0f} / {sd[j]:.0f} | {np.median(r):.2f} "
                      f"({min(r):.2f} to {max(r):.2f}) | {across[i, j]:.2f} |")


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2:])
    else:
        main(sys.argv[1])
