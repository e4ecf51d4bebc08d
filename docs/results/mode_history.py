"""What in one process sets the mode of the 16 Mi-element framework GEMV and VJP dx? (issue 35;
findings/between-runs.md, "One of two cases, chosen per process": torch's and CuPy's fp16 GEMV
16384x1024 and VJP dx 1024x16384 take one of two medians about 5% apart, the two frameworks in step,
the two cases mostly not slow together; mode_kernels.py: the same kernel in both modes, and new buffers
in the same process can flip it.)

In one fresh process, one thing changed at a time:

1. a default bench.blas's cases (run.iterate, default config, native-cuda, torch-cuda and CuPy): the
   process's modes after a full run, as a default run has them;
2. the two cases again, as bench.blas times them (iterate on those two cases only, new buffers from
   each framework's pool, the same data), STEPS in order: `again` twice (nothing changed), `swapped`
   twice (VJP dx first), `emptied` twice (torch's and CuPy's pools handed back to the driver first, so
   the cases' buffers are new driver allocations), `pad` twice (a 96 MiB block kept in each pool first,
   so the cases take other cached blocks);
3. `direct` (torch only, last): BUFFERS new 32 MiB allocations after the pool is emptied, each timed
   as GEMV 16384x1024 (torch.mv(A, x)) and, read as a 1024x16384 matrix, as VJP dx (torch.mv(W.t(), v),
   the path torch.func.vjp takes), each call behind gapbench's gate after the native L2 scrub
   (TorchAdapter.time_device_each, cold_clean): does one buffer set the mode, and is a buffer slow
   for one op fast for the other?

Every array of 16 MiB or more that bench.blas's torch and CuPy adapters make is logged with the step
(its device address), so a mode can be set beside where its buffers lie.

    python docs/results/mode_history.py OUT.json
    python docs/results/mode_history.py --table RUN.json ...   # Markdown of several such files
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass

ROWS = (("gemv", "16384x1024"), ("vjp_dx", "1024x16384"))
STEPS = ("again", "again", "swapped", "swapped", "emptied", "emptied", "pad", "pad")
BUFFERS, SAMPLES = 16, 120
MiB = 1 << 20


def medians(records) -> dict[str, float]:
    out = {}
    for r in records:
        p = r.params or {}
        if (r.status == "ok" and r.samples_s and r.metric == "time" and p.get("dtype") == "fp16"
                and (p.get("op"), p.get("shape_text")) in ROWS):
            out[f"{p['op']} {p['shape_text']} {r.backend}/{r.variant}"] = r.median()
    return out


def main(path: str) -> None:
    from gapbench import ops
    from gapbench.backends import cupy as cupy_backend
    from gapbench.backends import torch as torch_backend
    from gapbench.backends import registry
    from gapbench.benchmarks.blas.config import Config, parse_shapes
    from gapbench.benchmarks.blas.run import iterate
    from gapbench.core.names import Backend, CacheMode, DType

    doc: dict = {"rows": [" ".join(r) for r in ROWS], "steps": []}
    log: list = []  # [step index, backend, bytes, address] of every big array the adapters make
    step = [-1]

    def logged(cls, name, tag):
        fn = getattr(cls, name)

        def wrapper(self, *a, **kw):
            out = fn(self, *a, **kw)
            n = int(getattr(out, "nbytes", 0))
            if n >= 16 * MiB:
                ptr = out.data_ptr() if hasattr(out, "data_ptr") else int(out.data.ptr)
                log.append([step[0], tag, n, int(ptr)])
            return out
        setattr(cls, name, wrapper)

    for name in ("array", "copy_array"):
        logged(torch_backend.TorchAdapter, name, "torch")
        logged(cupy_backend.CupyAdapter, name, "cupy")

    def save():
        doc["buffers"] = log
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)

    cfg = Config()
    seed = cfg.run_seed()
    doc["seed"] = seed
    backends = [Backend.native_cuda, Backend.torch_cuda, Backend.cupy]
    doc["device"] = registry.info(Backend.native_cuda).device
    doc["full"] = medians(iterate(cfg, backends))
    save()

    two = [(ops.get(o), parse_shapes(s)[0], DType.fp16) for o, s in ROWS]

    @dataclass
    class Two(Config):
        order: tuple = (0, 1)

        def cases(self):
            return [two[i] for i in self.order]

    import cupy
    import torch

    pads = []
    for i, name in enumerate(STEPS):
        step[0] = i
        if name == "emptied":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            cupy.get_default_memory_pool().free_all_blocks()
        if name == "pad":
            pads += [torch.empty(96 * MiB, dtype=torch.uint8, device="cuda"), cupy.empty(96 * MiB, dtype=cupy.uint8)]
        order = (1, 0) if name == "swapped" else (0, 1)
        got = medians(iterate(Two(seed=seed, order=order), backends))
        doc["steps"].append({"step": name, "order": [ROWS[j][0] for j in order], "medians": got})
        save()

    # direct: one buffer, both ops, torch only
    step[0] = len(STEPS)
    ad = registry.make_adapter(Backend.torch_cuda)
    ad.setup_context()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    x = torch.randn(1024, device="cuda", dtype=torch.float16)
    v = torch.randn(1024, device="cuda", dtype=torch.float16)
    bufs, direct = [], []
    scrub = CacheMode.cold_clean if ad.can_scrub else None
    for _ in range(BUFFERS):
        B = torch.randn(16384 * 1024, device="cuda", dtype=torch.float16)
        bufs.append(B)
        A, W = B.view(16384, 1024), B.view(1024, 16384)
        entry = {"address": B.data_ptr(), "scrub": scrub.value if scrub else None}
        for op, fn in (("gemv", lambda A=A: torch.mv(A, x)), ("vjp_dx", lambda W=W: torch.mv(W.t(), v))):
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            samples = sorted(ad.time_device_each(fn, SAMPLES, scrub=scrub))
            entry[op] = samples[len(samples) // 2] * 1e6
        direct.append(entry)
    doc["direct"] = direct
    save()


def table(paths: list[str]) -> str:
    """Per process: the full run's medians and each step's (us), then the direct buffers' spread."""
    import numpy as np

    docs = [json.load(open(p)) for p in paths]
    out = ["Generated by `python docs/results/mode_history.py --table` from the files named in INDEX.md; do not "
           "edit by hand. Medians in us of the fp16 rows, in one process: after a default run's cases (full), then "
           "the two cases again step by step (mode_history.py says what each step changes).\n"]
    for i, d in enumerate(docs):
        steps = d.get("steps") or []
        out.append(f"**Process {i + 1}** ({d['device'].get('name', '?')}, seed {d.get('seed')})\n")
        out.append("| row | full | " + " | ".join(s["step"] for s in steps) + " |")
        out.append("|---|---|" + "---|" * len(steps))
        for k in sorted(d.get("full") or {}):
            if "gapbench" in k:
                continue
            cells = [d["full"].get(k)] + [s["medians"].get(k) for s in steps]
            out.append(f"| {k} | " + " | ".join(f"{1e6 * v:.2f}" if v else "-" for v in cells) + " |")
        direct = d.get("direct") or []
        if direct:
            g = np.array([e["gemv"] for e in direct])
            vj = np.array([e["vjp_dx"] for e in direct])
            r = float(np.corrcoef(g, vj)[0, 1]) if len(direct) > 2 and g.std() > 0 and vj.std() > 0 else float("nan")
            out.append(f"\ndirect ({len(direct)} buffers, torch, one call behind the gate after an L2 scrub): GEMV "
                       f"{g.min():.2f}-{g.max():.2f} us (median {np.median(g):.2f}), VJP dx {vj.min():.2f}-{vj.max():.2f} "
                       f"us (median {np.median(vj):.2f}); correlation over buffers {r:.2f}\n")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        sys.stdout.write(table(sys.argv[2:]))
    else:
        main(sys.argv[1])
