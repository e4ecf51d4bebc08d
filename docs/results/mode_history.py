"""What in one process sets the mode of the 16 Mi-element framework GEMV and VJP dx? (issue 35;
findings/between-runs.md, "One of two cases, chosen per process": torch's and CuPy's fp16 GEMV
16384x1024 and VJP dx 1024x16384 take one of two medians about 5% apart, the two frameworks in step,
the two cases mostly not slow together; mode_kernels.py: the same kernel in both modes, and new buffers
in the same process can flip it.)

In one fresh process, one thing changed at a time:

1. a default bench.blas's cases (run.iterate, default config, native-cuda, torch-cuda and CuPy): the
   process's modes after a full run, as a default run has them;
2. then cases again as bench.blas times them (run.iterate on a list of cases, new buffers from each
   framework's pool, the same seed and data), step by step (STEPS, or the plan named on the command
   line, PLANS):
   - `again`: the two fp16 cases, nothing changed;
   - `swapped`: VJP dx first;
   - `emptied`: torch's and CuPy's pools handed back to the driver first (new driver allocations);
   - `pad`: a 96 MiB block kept in each pool first (the cases take other cached blocks);
   - `dtypes`: each shape's three dtypes in the full run's order (fp32, fp16, bf16), as the full run
     has them before and after each fp16 case;
   - `dtypes, alone`: the same with nothing made beside the rounds (--no-overlap: the next case's
     inputs and float64 reference on the host thread);
   - `from gemv`, `from vjp_dx`: that op's cases of the default run, from its first up to the mode
     case's three dtypes; `from 16384x16384`, `from 1024x16384`: each op's cases from that shape on
     (plan `bisect`: how much of what ran before brings the mode back?);
   - `full`: the default run's cases once more;
3. `direct` (torch only, last): BUFFERS new 32 MiB allocations after the pool is emptied, each timed
   as GEMV 16384x1024 (torch.mv(A, x)) and, read as a 1024x16384 matrix, as VJP dx (torch.mv(W.t(), v),
   the path torch.func.vjp takes), each call behind gapbench's gate after the native L2 scrub
   (TorchAdapter.time_device_each, cold_clean): does one buffer set the mode, and is a buffer slow
   for one op fast for the other?

Every array of 1 KiB or more that bench.blas's torch and CuPy adapters make is logged with the step
(its size and device address), so a mode can be set beside where its buffers lie. Each fp16 row keeps
its 10th, 50th and 90th percentiles: a whole row shifted, or some samples slow?

    python docs/results/mode_history.py OUT.json [PLAN]
    python docs/results/mode_history.py --table RUN.json[.gz] ...   # Markdown of several such files
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass

ROWS = (("gemv", "16384x1024"), ("vjp_dx", "1024x16384"))
STEPS = ("again", "again", "swapped", "swapped", "emptied", "emptied", "pad", "pad")
PLANS = {"steps": STEPS, "context": ("again", "dtypes", "dtypes", "dtypes, alone", "dtypes, alone", "full"),
         "bisect": ("from gemv", "from vjp_dx", "from 16384x16384", "from 1024x16384", "dtypes", "full"),
         "profile": ("from 16384x16384", "probe", "dtypes", "probe", "from 16384x16384", "probe")}
BUFFERS, SAMPLES = 16, 120
MiB = 1 << 20


def gated_and_profiled(ad, fns: list, samples: int, profiled: int, sync) -> tuple[list[float], list[dict]]:
    """`fns` (one call per input set) in rotation, as bench.blas's framework rows run them: two passes
    to warm up, `samples` calls each behind gapbench's gate (`ad.time_device_each`: their 10th, 50th
    and 90th percentiles, us), then `profiled` calls under torch's profiler (CUPTI sees every kernel of
    the process, CuPy's too): each GPU activity (kernel, memset, memcpy) with its device time (us)
    and launch configuration. `sync` waits for the device."""
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    turn = [0]

    def run_next():
        f = fns[turn[0] % len(fns)]
        turn[0] += 1
        return f()

    for _ in range(2 * len(fns)):
        run_next()
    sync()
    t = sorted(ad.time_device_each(run_next, samples))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(profiled):
            run_next()
        sync()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    acts = [{"cat": e.get("cat"), "name": e.get("name"), "us": e.get("dur"),
             **{k: (e.get("args") or {}).get(k) for k in ("grid", "block", "registers per thread", "shared memory",
                                                          "blocks per SM", "warps per SM")}}
            for e in trace.get("traceEvents", []) if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    return [1e6 * t[len(t) // 10], 1e6 * t[len(t) // 2], 1e6 * t[9 * len(t) // 10]], acts


def medians(records, spread: dict | None = None) -> dict[str, float]:
    """The fp16 mode rows' medians (s); their 10th/50th/90th percentiles into `spread`."""
    import numpy as np

    out = {}
    for r in records:
        p = r.params or {}
        if (r.status == "ok" and r.samples_s and r.metric == "time" and p.get("dtype") == "fp16"
                and (p.get("op"), p.get("shape_text")) in ROWS):
            k = f"{p['op']} {p['shape_text']} {r.backend}/{r.variant}"
            out[k] = r.median()
            if spread is not None:
                spread[k] = [float(q) for q in np.percentile(r.per_op(), [10, 50, 90])]
    return out


def main(path: str, plan: str = "steps") -> None:
    from gapbench import ops
    from gapbench.backends import cupy as cupy_backend
    from gapbench.backends import torch as torch_backend
    from gapbench.backends import registry
    from gapbench.benchmarks.blas.config import Config, parse_shapes
    from gapbench.benchmarks.blas.run import iterate
    from gapbench.core.names import Backend, CacheMode, DType
    from gapbench.ops.spec import shape_text

    doc: dict = {"rows": [" ".join(r) for r in ROWS], "steps": []}
    log: list = []  # [step index, backend, bytes, address] of every big array the adapters make
    step = [-1]

    def logged(cls, name, tag):
        fn = getattr(cls, name)

        def wrapper(self, *a, **kw):
            out = fn(self, *a, **kw)
            n = int(getattr(out, "nbytes", 0))
            if n >= 1024:
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
    doc["plan"] = plan
    doc["full_spread"] = {}
    if plan != "profile":  # plan profile starts from a fresh process's first cases
        doc["full"] = medians(iterate(cfg, backends), doc["full_spread"])
    save()

    def case(i, dtype=DType.fp16):
        o, sh = ROWS[i]
        return ops.get(o), parse_shapes(sh)[0], dtype

    every = [DType.fp32, DType.fp16, DType.bf16]

    @dataclass
    class These(Config):
        todo: tuple = ()

        def cases(self):
            return list(self.todo) if self.todo else super().cases()

    import cupy
    import torch

    pads = []
    ad = registry.make_adapter(Backend.torch_cuda)
    ad.setup_context()

    def probe() -> dict:
        """Right after a step, outside bench.blas: torch's two calls on 4 rotated sets of new buffers,
        each call behind the gate (medians, us), then 8 calls of each under torch's profiler: each
        kernel's device time and launch configuration (grid, block, registers, shared memory)."""
        sets = [torch.randn(16384 * 1024, device="cuda", dtype=torch.float16) for _ in range(4)]
        x = torch.randn(1024, device="cuda", dtype=torch.float16)
        v = torch.randn(1024, device="cuda", dtype=torch.float16)
        calls = {"gemv": [lambda B=B: torch.mv(B.view(16384, 1024), x) for B in sets],
                 "vjp_dx": [lambda B=B: torch.mv(B.view(1024, 16384).t(), v) for B in sets]}
        out: dict = {"gated_us": {}, "kernels": {}}
        for op, fns in calls.items():
            out["gated_us"][op], out["kernels"][op] = gated_and_profiled(ad, fns, 400, 8, torch.cuda.synchronize)
        return out

    for i, name in enumerate(PLANS[plan]):
        step[0] = i
        if name == "emptied":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            cupy.get_default_memory_pool().free_all_blocks()
        if name == "pad":
            pads += [torch.empty(96 * MiB, dtype=torch.uint8, device="cuda"), cupy.empty(96 * MiB, dtype=cupy.uint8)]
        if name == "probe":
            doc["steps"].append({"step": name, **probe()})
            save()
            continue
        if name.startswith("dtypes"):
            todo = tuple(case(j, d) for j in (0, 1) for d in every)
        elif name == "full":
            todo = ()
        elif name.startswith("from "):
            # the default run's cases of the two mode cases' ops, from the first case named to each
            # mode case's last dtype: how much of what runs before brings the mode back?
            what = name[5:]
            default = Config().cases()
            todo = []
            for j in (0, 1):
                op, shape = ROWS[j]
                mine = [c for c in default if c[0].name == op]
                end = max(k for k, c in enumerate(mine) if shape_text(c[1]) == shape) + 1
                if what in ("gemv", "vjp_dx"):
                    if what != op:
                        continue
                    start = 0
                else:
                    start = min(k for k, c in enumerate(mine) if shape_text(c[1]) == what)
                todo += mine[start:end]
            todo = tuple(todo)
        else:
            todo = tuple(case(j) for j in ((1, 0) if name == "swapped" else (0, 1)))
        spread: dict = {}
        got = medians(iterate(These(seed=seed, todo=todo, overlap=not name.endswith("alone")), backends), spread)
        doc["steps"].append({"step": name, "cases": [f"{c[0].name} {c[2].value}" for c in todo] or "default",
                             "medians": got, "spread": spread})
        save()

    if plan == "profile":
        return
    # direct: one buffer, both ops, torch only (the probes' adapter; these arrays are torch's own, not logged)
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


def mode_buffers(d: dict) -> dict:
    """{step index: the addresses of the step's 32 MiB arrays made beside a 2 KiB one (the fp16
    mode cases' matrices next to their 1024-element vector)}, for files that logged arrays of 1 KiB
    and up (empty for older files, which logged only arrays of 16 MiB or more)."""
    logged = d.get("buffers") or []
    if not any(n < 16 * MiB for _, _, n, _ in logged):
        return {}
    out: dict = {}
    for st in sorted({b[0] for b in logged}):
        seq = [b for b in logged if b[0] == st]
        mats = set()
        for a, c in zip(seq, seq[1:]):
            if a[1] == c[1] and {a[2], c[2]} == {32 * MiB, 2048}:
                mats.add((a[1], a[3] if a[2] == 32 * MiB else c[3]))
        if mats:
            out[st] = tuple(sorted(mats))
    return out


def table(paths: list[str]) -> str:
    """Per process: the full run's medians and each step's (us), then the direct buffers' spread."""
    import numpy as np

    import gzip

    docs = [json.load(gzip.open(p) if p.endswith(".gz") else open(p)) for p in paths]
    out = ["Generated by `python docs/results/mode_history.py --table` from the files named in INDEX.md; do not "
           "edit by hand. Medians in us of the fp16 rows, in one process: after a default run's cases (full), then "
           "the two cases again step by step (mode_history.py says what each step changes).\n"]
    for i, d in enumerate(docs):
        steps = d.get("steps") or []
        out.append(f"**Process {i + 1}** ({d['device'].get('name', '?')}, plan {d.get('plan', 'steps')}, "
                   f"seed {d.get('seed')}; {paths[i].rsplit('/', 1)[-1]})\n")
        timed = [s for s in steps if "medians" in s]
        out.append("| row | full | " + " | ".join(s["step"] for s in timed) + " |")
        out.append("|---|---|" + "---|" * len(timed))
        keys = sorted({k for s in [{"medians": d.get("full") or {}}] + timed for k in s["medians"]})
        for k in keys:
            if "gapbench" in k:
                continue
            cells = [(d.get("full") or {}).get(k)] + [s["medians"].get(k) for s in timed]
            out.append(f"| {k} | " + " | ".join(f"{1e6 * v:.2f}" if v else "-" for v in cells) + " |")
        where = mode_buffers(d)
        if where:
            names = {-1: "full (first)", **{j: f"{s['step']} ({j + 1})" for j, s in enumerate(steps)}}
            groups: dict = {}
            for st, addrs in where.items():
                groups.setdefault(addrs, []).append(names.get(st, str(st)))
            out.append("\nThe mode cases' framework matrices (torch's and CuPy's 32 MiB arrays made beside a 2 KiB "
                       "vector), by the steps that had them at the same device addresses: "
                       + "; ".join(f"{', '.join(g)}" for g in groups.values()) + ".")
        probes = [(j, s) for j, s in enumerate(steps) if "gated_us" in s]
        if probes:
            out.append("\nProbes (torch, new buffers, 4 sets rotated, outside bench.blas), after the step before each: "
                       "gated median (us), and the profiled kernels (device us; grid, block, registers):\n")
            out.append("| after the step (its number) | op | gated 10/50/90th pct | kernels |")
            out.append("|---|---|---|---|")
            for j, s in probes:
                before = steps[j - 1]["step"] if j else "start"  # (j): that step's number, as in the buffers line
                for op, q in s["gated_us"].items():
                    ks = s["kernels"].get(op, [])
                    names = sorted({(e["name"], str(e.get("grid")), str(e.get("block")), e.get("registers per thread"))
                                    for e in ks})
                    durs = sorted(e["us"] for e in ks if e.get("us") is not None)
                    kt = "; ".join(f"`{n[:48]}` grid {g} block {b} regs {r}" for n, g, b, r in names)
                    mid = f" (median {durs[len(durs) // 2]:.2f} us)" if durs else ""
                    out.append(f"| {before} ({j}) | {op} | {q[0]:.2f} / {q[1]:.2f} / {q[2]:.2f} | {kt}{mid} |")
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
        main(*sys.argv[1:3])
