"""Does how long the release gate holds the stream move a framework row's sample? (issue 35;
findings/between-runs.md, "A state each process draws".)

A framework row's sample is one call behind the release gate: the gate kernel spins until the host has
queued the start event, the op and the stop event. So the GPU idles (one SM spinning) for as long as the
host takes to queue, a few microseconds for the native rows' C++ and more for torch's Python, and that
time is the host's: its core, its clock, what the interpreter does. The state of torch's 16 Mi-element
cases is 0.6 us outside the kernel. This times torch's fp16 GEMV 16384x1024 and VJP dx 1024x16384, a
GEMV 1024x1024 and an empty kernel (torch.cuda._sleep(0)), one call a gate on SETS rotated input sets,
with the hold made DELAYS_US longer than the host needs (a host busy-wait after the stop event is
queued, before the release), every (call, delay) arm in a new order each round. Writes each arm's
trimmed mean (us) and the host's queueing time per call (us, no added delay; hold.md's runs, at
5485d5a, counted the gate's hold() call in it too; since the probes time by StreamHold.sample, they
count the pads, the events and the call). With RUN, a default
bench.blas run goes first in the same process (so the process has drawn its state as bench.blas's do).

    python docs/results/hold_probe.py OUT.json [RUN.json.gz]
    python docs/results/hold_probe.py --table OUT.json ...
"""
from __future__ import annotations

import gzip
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_state_probe import state_inputs  # noqa: E402
from overhead_probe import _trimmed_us  # noqa: E402

ROUNDS, BLOCK, SETS = 24, 10, 4
#: how much longer than the host's queueing the gate holds the stream (us)
DELAYS_US = (0, 3, 10, 30, 100, 300)
CALLS = ("gemv 16384x1024", "vjp_dx 1024x16384", "gemv 1024x1024", "empty kernel")


def _check(torch, got, want, what: str) -> None:
    """A call's output against its float32 reference: 5% of the output's largest magnitude (fp16
    inputs, k = 1024 or 16384; a dropped or unwritten row is off by the row's whole value)."""
    err = (got.float() - want).abs().max().item()
    if not err <= 0.05 * want.abs().max().item():
        raise SystemExit(f"{what}: output wrong by {err} (bound {0.05 * want.abs().max().item()})")




def bench_first(run_path: str | None):
    """A default bench.blas run in this process first, written to run_path (the process then has
    drawn its state as bench.blas's do); its exit code, or None without run_path."""
    if not run_path:
        return None
    from gapbench.benchmarks.blas.command import main as blas_main

    return blas_main(["--no-progress", "--no-plots", "--out", run_path])


def write_doc(doc: dict, out: str, run_path: str | None) -> None:
    """The probe's document to `out`, with the torch state score of the run that went first."""
    if run_path:
        from gapbench.benchmarks.blas.states import scores
        from gapbench.core.result import load_run

        doc["run_score"] = scores(load_run(run_path)).get("torch-cuda")
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)



def read_doc(path: str) -> tuple[dict, str]:
    """(a probe's document, "yes (+score)" / "yes" / "no": whether a bench.blas run went first in its
    process, and that run's torch state score)."""
    doc = json.loads(gzip.open(path, "rt").read() if path.endswith(".gz") else Path(path).read_text())
    if not doc.get("after_run"):
        return doc, "no"
    return doc, f"yes ({doc['run_score']:+.1f})" if doc.get("run_score") is not None else "yes"


def make_calls():
    """(torch, its adapter, {call name: one call on the next of SETS input sets}, verify(when)): the CALLS on the GPU,
    each GEMV writing into an output of its own set, which verify() poisons and checks against float32."""
    torch, ad, dev, (A, x, W, v) = state_inputs(SETS)
    if dev != "cuda":
        raise SystemExit("this probe needs a CUDA GPU (the release gate is the native CUDA part's)")
    S = [torch.randn(1024, 1024, device=dev, dtype=A[0].dtype) for _ in range(SETS)]
    s = [torch.randn(1024, device=dev, dtype=A[0].dtype) for _ in range(SETS)]
    y_big = [torch.empty(16384, device=dev, dtype=A[0].dtype) for _ in range(SETS)]
    y_small = [torch.empty(1024, device=dev, dtype=A[0].dtype) for _ in range(SETS)]
    turn = [0]

    def nxt() -> int:
        turn[0] += 1
        return turn[0] % SETS

    sleep = torch.cuda._sleep
    calls = {
        CALLS[0]: lambda: (lambda i: torch.mv(A[i], x[i], out=y_big[i]))(nxt()),
        CALLS[1]: lambda: (lambda i: torch.mv(W[i].t(), v[i], out=y_big[i]))(nxt()),
        CALLS[2]: lambda: (lambda i: torch.mv(S[i], s[i], out=y_small[i]))(nxt()),
        CALLS[3]: lambda: sleep(0),
    }

    def verify(when: str) -> None:
        """Every input set of the three GEMVs, its output poisoned first, against float32."""
        for i in range(SETS):
            for y in (y_big[i], y_small[i]):
                y.fill_(float("nan"))
            torch.mv(A[i], x[i], out=y_big[i])
            _check(torch, y_big[i], A[i].float() @ x[i].float(), f"{when}: gemv 16384x1024 set {i}")
            y_big[i].fill_(float("nan"))
            torch.mv(W[i].t(), v[i], out=y_big[i])
            _check(torch, y_big[i], W[i].float().t() @ v[i].float(), f"{when}: vjp_dx 1024x16384 set {i}")
            torch.mv(S[i], s[i], out=y_small[i])
            _check(torch, y_small[i], S[i].float() @ s[i].float(), f"{when}: gemv 1024x1024 set {i}")

    return torch, ad, calls, verify


def gated_sampler(torch, ad):
    """(sample(fn, delay_s, name, pad=0) -> device seconds of one call held behind the release gate by
    the framework rows' own path (backends/hold.py StreamHold.sample: retried while the hold times
    out, counted in its invalid_samples), the hold delay_s longer than the host needed to queue and
    `pad` empty kernels launched between the gate and the start event; the StreamHold; {name: the
    host's queueing times (pads, events and the call) of the samples without delay})."""
    hold = ad._stream_hold()
    if hold.gate is None:
        raise SystemExit(f"no release gate here: {hold.method}")
    stream = torch.cuda.current_stream()
    handle = stream.cuda_stream
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    queued: dict[str, list[float]] = {c: [] for c in CALLS}
    sleep = torch.cuda._sleep

    def sample(fn, delay_s: float, name: str, pad: int = 0) -> float:
        def enqueue():
            t0 = time.perf_counter()
            for _ in range(pad):  # empty kernels after the gate, before the start event: not timed
                sleep(0)
            start.record(stream)
            fn()
            stop.record(stream)
            t1 = time.perf_counter()
            if delay_s:  # the hold released only this much later
                while time.perf_counter() - t1 < delay_s:
                    pass
            else:
                queued[name].append(t1 - t0)

        def finish() -> float:
            stop.synchronize()
            return start.elapsed_time(stop) * 1e-3

        return hold.sample(handle, enqueue, finish)

    return sample, hold, queued


def main(out: str, run_path: str | None = None) -> None:
    rc = bench_first(run_path)
    import numpy as np

    torch, ad, calls, verify = make_calls()
    sample, hold, queued = gated_sampler(torch, ad)
    verify("before timing")
    arms = [(c, d) for c in CALLS for d in DELAYS_US]
    for c, d in arms:  # every arm once before timing (module loads outside any hold)
        sample(calls[c], d * 1e-6, c)
    for c in CALLS:
        queued[c].clear()
    got: dict[tuple, list[float]] = {a: [] for a in arms}
    rng = np.random.default_rng(0)
    for _ in range(ROUNDS):
        for i in rng.permutation(len(arms)):
            c, d = arms[i]
            got[(c, d)] += [sample(calls[c], d * 1e-6, c) for _ in range(BLOCK)]
    torch.cuda.synchronize()
    verify("after timing")
    doc = {"device": torch.cuda.get_device_name(), "after_run": bool(run_path), "rc": rc,
           "invalid_samples": hold.invalid_samples, "delays_us": list(DELAYS_US),
           "us": {f"{c} +{d}": _trimmed_us(t) for (c, d), t in got.items()},
           "queue_us": {c: {"median": 1e6 * statistics.median(q), "p90": 1e6 * sorted(q)[int(0.9 * len(q))]}
                        for c, q in queued.items() if q}}
    write_doc(doc, out, run_path)


def table(paths: list[str]) -> str:
    lines = ["Generated by `python docs/results/hold_probe.py --table`; do not edit by hand. Trimmed mean (us) of "
             "one-call gated samples of torch's calls, the gate held the given time longer than the host needed "
             "to queue; the host's queueing time per call (median, p90) beside. After a default bench.blas run "
             "in the same process or not (its torch state score).\n",
             "| process | after a run (score) | call | queued (us) | " + " | ".join(f"+{d} us" for d in DELAYS_US) + " |",
             "|---|---|---|---|" + "---|" * len(DELAYS_US)]
    for p in paths:
        doc, after = read_doc(p)
        for c in CALLS:
            q = doc["queue_us"].get(c) or {}
            lines.append(f"| {Path(p).name.split('.')[0]} | {after} | {c} | {q.get('median', 0):.1f}, {q.get('p90', 0):.1f} | "
                         + " | ".join(f"{doc['us'][f'{c} +{d}']:.2f}" for d in doc["delays_us"]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--table"]:
        print(table(sys.argv[2:]))
    else:
        main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
