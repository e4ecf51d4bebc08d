"""Does where a framework's output lands set the process state of torch's 16 Mi-element cuBLAS cases?
(issue 35; findings/between-runs.md, "A state each process draws".)

The state is 0.6 us of a one-call gated sample outside the kernel, shared by torch and CuPy and not by
the native cuBLAS row of the same case, and it follows what the process ran before. The inputs were
ruled out (the same addresses in both levels); what torch and CuPy do and the native case does not is
take a fresh output from their allocator on every call. This times torch's fp16 GEMV 16384x1024 and
VJP dx 1024x16384 (bench.blas's framework calls, on SETS rotated input sets, one call behind the
release gate) with the output written (`out=`) at OFFSETS places in one pool, in rounds, each offset
in a new order per round, and the allocating call beside them. Writes the trimmed mean (us) per
offset and case; `--table` prints them, with each case's spread over the offsets. With RUN, a default
bench.blas run goes first in the same process (so the process has drawn its state as bench.blas's do).

    python docs/results/output_probe.py OUT.json [RUN.json.gz]
    python docs/results/output_probe.py --table OUT.json[.gz] ...
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead_probe import _trimmed_us  # noqa: E402

ROUNDS, BLOCK, SETS = 20, 10, 4
#: output offsets in the pool, in fp16 elements: 64 KiB steps over 2 MiB (one large page), then
#: further pages, then alignments inside a page that are not multiples of 64 KiB
OFFSETS = [k * 32768 for k in range(32)] + [k * (1 << 20) for k in range(1, 9)] + [128, 2048, 2048 + 128, 16384 + 64]


def main(out: str, run_path: str | None = None) -> None:
    rc = None
    if run_path:
        from gapbench.benchmarks.blas.command import main as blas_main

        rc = blas_main(["--no-progress", "--no-plots", "--out", run_path])
    import numpy as np
    import torch

    from gapbench.backends import registry
    from gapbench.core.names import Backend

    dev = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a dry run of the script
    ad = registry.make_adapter(Backend.torch_cuda if dev == "cuda" else Backend.torch_cpu)
    ad.setup_context()
    h = torch.float16 if dev == "cuda" else torch.float32
    A = [torch.randn(16384, 1024, device=dev, dtype=h) for _ in range(SETS)]
    x = [torch.randn(1024, device=dev, dtype=h) for _ in range(SETS)]
    W = [torch.randn(1024, 16384, device=dev, dtype=h) for _ in range(SETS)]  # VJP dx 1024x16384: W.T @ v
    v = [torch.randn(1024, device=dev, dtype=h) for _ in range(SETS)]
    pool = torch.empty(max(OFFSETS) + 16384, device=dev, dtype=h)
    turn = [0]
    views = []

    def nxt() -> int:
        turn[0] += 1
        return turn[0] % SETS

    def gemv(o):
        if o is None:
            return lambda: torch.mv(A[nxt()], x[turn[0] % SETS])
        y = pool[o:o + 16384]
        views.append((o, y))
        return lambda: torch.mv(A[nxt()], x[turn[0] % SETS], out=y)

    def vjp(o):
        if o is None:
            return lambda: torch.mv(W[nxt()].t(), v[turn[0] % SETS])
        y = pool[o:o + 16384]  # dx = W^T v: 16384 outputs
        views.append((o, y))
        return lambda: torch.mv(W[nxt()].t(), v[turn[0] % SETS], out=y)

    places = [None] + OFFSETS
    fns = {(case, o): make(o) for case, make in (("gemv", gemv), ("vjp_dx", vjp)) for o in places}
    for f in fns.values():  # every place once before timing; then a few places checked against float32
        f()
    ad.sync()
    for o, y in views:  # an out= of the wrong shape would have been resized into storage of its own
        if y.data_ptr() != pool.data_ptr() + o * pool.element_size():
            raise SystemExit(f"the output at offset {o} left the pool: its out= shape is wrong")
    ref_g = torch.mv(A[0].float(), x[0].float())
    for o in OFFSETS[:3] + OFFSETS[-3:]:
        pool[o:o + 16384].fill_(float("nan"))  # poisoned: a call that wrote nothing fails
        torch.mv(A[0], x[0], out=pool[o:o + 16384])
        err = (pool[o:o + 16384].float() - ref_g).abs().max().item()
        if not err <= 0.05 * ref_g.abs().max().item():
            raise SystemExit(f"GEMV output at offset {o} wrong by {err}")
    ad.sync()
    got = {k: [] for k in fns}
    rng = np.random.default_rng(0)
    keys = list(fns)
    for _ in range(ROUNDS):
        for i in rng.permutation(len(keys)):
            got[keys[i]] += ad.time_device_each(fns[keys[i]], BLOCK)
    res = {f"{case} {'alloc' if o is None else o}": _trimmed_us(s) for (case, o), s in got.items()}
    doc = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "pool_ptr": int(pool.data_ptr()),
           "after_run": bool(run_path), "rc": rc, "us": res}
    if run_path:
        from gapbench.benchmarks.blas.states import scores
        from gapbench.core.result import load_run

        doc["run_score"] = scores(load_run(run_path)).get("torch-cuda")
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)


def table(paths: list[str]) -> str:
    lines = ["Generated by `python docs/results/output_probe.py --table`; do not edit by hand. Trimmed mean (us) of "
             "one-call gated samples of torch's fp16 GEMV 16384x1024 and VJP dx 1024x16384, the output at each "
             "offset (fp16 elements) of one pool, or allocated by the call; after a default bench.blas run in the "
             "same process or not (its torch state score).\n",
             "| process | after a run (score) | case | allocating | offsets: min | median | max | offsets more than "
             "0.3 us above the min |", "|---|---|---|---|---|---|---|---|"]
    for p in paths:
        doc = json.loads(gzip.open(p, "rt").read() if p.endswith(".gz") else Path(p).read_text())
        d = doc["us"]
        after = f"yes ({doc['run_score']:+.1f})" if doc.get("after_run") and doc.get("run_score") is not None else (
            "yes" if doc.get("after_run") else "no")
        for case in ("gemv", "vjp_dx"):
            offs = {int(k.split()[1]): t for k, t in d.items() if k.startswith(case + " ") and not k.endswith("alloc")}
            ts = sorted(offs.values())
            lo = ts[0]
            slow = sorted(o for o, t in offs.items() if t > lo + 0.3)
            lines.append(f"| {Path(p).name.split('.')[0]} | {after} | {case} | {d[case + ' alloc']:.2f} | {lo:.2f} | {ts[len(ts) // 2]:.2f} | "
                         f"{ts[-1]:.2f} | {len(slow)}: {', '.join(str(o) for o in slow[:12])}"
                         f"{' ...' if len(slow) > 12 else ''} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--table"]:
        print(table(sys.argv[2:]))
    else:
        main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
