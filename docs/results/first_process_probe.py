"""What a machine's first GPU process pays, framework by framework, and which cache takes it away
(issue 38; findings/run-cost.md, "A fresh machine's first process": the frameworks' first runs took
8.8-14.0 s in a machine's first bench.blas process against 4.5-4.8 s in the next; CuPy's NVRTC
kernels were about 2 s of it, and the driver's JIT cache filled with 30 entries).

Each process of the plan runs one framework's steps in order, each step synchronised and timed on
the host: the import, the context, a GEMM in fp32, fp16 and bf16, a GEMV in fp16, and the
elementwise kernels bench.blas's CuPy arms compile (copy and cast, fill, multiply, add, divide,
sqrt). Beside each step: the entries the driver's JIT cache (CUDA_CACHE_PATH) and CuPy's kernel
cache (CUPY_CACHE_DIR) gained during it. A plan entry is FRAMEWORK:CACHES, CACHES one of
  cold     both caches new and empty
  warm     both caches as the framework's previous process left them
  ptx      CuPy's kernel cache new and empty, the driver's as the previous process left it
  nocache  CuPy's kernel cache new and empty, the driver's cache off (CUDA_CACHE_DISABLE=1)
  nojit    as nocache, and the driver's PTX JIT off (CUDA_DISABLE_PTX_JIT=1): a step whose code
           carries no SASS for this GPU fails, and its error is the row

    python docs/results/first_process_probe.py OUT.json [PLAN ...]   # default plan: PLAN below
    python docs/results/first_process_probe.py --table RUN.json      # Markdown
    python docs/results/first_process_probe.py --child FRAMEWORK     # one process (the plan's)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAN = ("torch:cold", "torch:cold", "torch:warm", "cupy:cold", "cupy:cold", "cupy:ptx", "cupy:nocache",
        "cupy:nojit", "cupy:warm")
CACHES = ("cold", "warm", "ptx", "nocache", "nojit")
STEPS = ("import", "context", "gemm fp32", "gemm fp16", "gemm bf16", "gemv fp16", "elementwise")
N = 1024


def _count(path: str | None) -> int:
    if not path or not os.path.isdir(path):
        return 0
    return sum(len(files) for _, _, files in os.walk(path))


def child(framework: str) -> dict:
    """Time the steps in this process; returns {step: {s, jit, cupy}} or {step: {error}} (the rest
    are skipped after an error)."""
    caches = (os.environ.get("CUDA_CACHE_PATH"), os.environ.get("CUPY_CACHE_DIR"))
    out: dict = {}
    state: dict = {}

    def step(name, fn):
        before = [_count(c) for c in caches]
        t0 = time.perf_counter()
        try:
            fn()
            state["sync"]()
        except Exception as e:  # the row says what failed; nothing after it runs
            out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
            return False
        out[name] = {"s": time.perf_counter() - t0,
                     "jit": _count(caches[0]) - before[0], "cupy": _count(caches[1]) - before[1]}
        return True

    state["sync"] = lambda: None
    if not step("import", lambda: state.update(xp=__import__(framework))):
        return out
    xp = state["xp"]
    state["sync"] = xp.cuda.synchronize if framework == "torch" else xp.cuda.runtime.deviceSynchronize
    if framework == "torch":
        xp.backends.cuda.matmul.allow_tf32 = False
        dev = {"device": "cuda"}
        mk = {d: (lambda d=d: xp.randn(N, N, **dev).to(getattr(xp, d))) for d in ("float32", "float16", "bfloat16")}
    else:
        dev = {}
        mk = {"float32": lambda: xp.ones((N, N), dtype=xp.float32), "float16": lambda: xp.ones((N, N), dtype=xp.float16)}
    steps = [("context", lambda: xp.zeros(1, **dev))]
    for label, d in (("gemm fp32", "float32"), ("gemm fp16", "float16"), ("gemm bf16", "bfloat16")):
        if d in mk:
            steps.append((label, lambda d=d: mk[d]() @ mk[d]()))
    steps.append(("gemv fp16", lambda: mk["float16"]() @ mk["float16"]()[:, 0].copy()
                  if framework == "cupy" else mk["float16"]() @ mk["float16"]()[:, 0]))

    def elementwise():
        a = xp.ones((N, N), dtype=xp.float32, **dev)
        h = a.astype(xp.float16) if framework == "cupy" else a.to(xp.float16)
        b = (h.astype(xp.float32) if framework == "cupy" else h.to(xp.float32)) * 2.0
        c = xp.sqrt(b / (a + 1.0))
        c.fill(0.5) if framework == "cupy" else c.fill_(0.5)
        return c
    steps.append(("elementwise", elementwise))
    for name, fn in steps:
        if not step(name, fn):
            break
    return out


def run_plan(plan: tuple[str, ...], root: str) -> list[dict]:
    """Run the plan's processes in order; each entry: framework, caches, env, wall, steps."""
    rows, last = [], {}
    for i, entry in enumerate(plan):
        framework, caches = entry.split(":")
        if framework not in ("torch", "cupy") or caches not in CACHES:
            raise SystemExit(f"bad plan entry {entry!r}: FRAMEWORK (torch, cupy):CACHES ({', '.join(CACHES)})")
        fresh = {k: os.path.join(root, f"{i}-{k}") for k in ("jit", "cupy")}
        prev = last.get(framework, fresh)
        env = dict(os.environ)
        for k in ("CUDA_CACHE_DISABLE", "CUDA_DISABLE_PTX_JIT", "CUDA_CACHE_PATH"):
            env.pop(k, None)
        jit = {"cold": fresh["jit"], "warm": prev["jit"], "ptx": prev["jit"]}.get(caches)
        cupy = prev["cupy"] if caches == "warm" else fresh["cupy"]
        if jit is None:
            env["CUDA_CACHE_DISABLE"] = "1"
            if caches == "nojit":
                env["CUDA_DISABLE_PTX_JIT"] = "1"
        else:
            env["CUDA_CACHE_PATH"] = jit
        env["CUPY_CACHE_DIR"] = cupy
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, __file__, "--child", framework], env=env, capture_output=True,
                           text=True, timeout=300)
        wall = time.perf_counter() - t0
        try:
            steps = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            steps = {"process": {"error": f"exit {p.returncode}: {p.stderr.strip()[-300:]}"}}
        rows.append({"framework": framework, "caches": caches, "wall": wall, "steps": steps,
                     "env": {k: env[k] for k in ("CUDA_CACHE_DISABLE", "CUDA_DISABLE_PTX_JIT") if k in env}})
        last[framework] = {"jit": jit or prev["jit"], "cupy": cupy}
        print(f"{entry}: {wall:.1f} s", file=sys.stderr)
    return rows


def table(run: dict) -> str:
    """Markdown: one row per process, a column per step (seconds; +N: JIT cache entries written, +Nk:
    CuPy kernels written)."""
    lines = [f"Run {run.get('started', '')} on {run.get('device', '?')} (driver {run.get('driver', '?')}); "
             "each cell: the step's seconds, then `+N jit` (driver JIT cache entries written) and `+N cupy` "
             "(CuPy kernel cache entries written) where it wrote any.", "",
             "| # | process | caches | wall s | " + " | ".join(STEPS) + " |",
             "|---|---|---|---|" + "---|" * len(STEPS)]
    for i, r in enumerate(run["rows"], 1):
        cells = []
        for s in STEPS:
            v = r["steps"].get(s, r["steps"].get("process") if s == STEPS[0] else None)
            if v is None:
                cells.append("")
                continue
            if "error" in v:
                cells.append("failed: " + v["error"].replace("|", "/").replace("\n", " "))
                continue
            extra = "".join(f" +{v[k]} {k}" for k in ("jit", "cupy") if v.get(k))
            cells.append(f"{v['s']:.2f}{extra}")
        lines.append(f"| {i} | {r['framework']} | {r['caches']} | {r['wall']:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(args: list[str]) -> None:
    if args[:1] == ["--child"]:
        print(json.dumps(child(args[1])))
        return
    if args[:1] == ["--table"]:
        print(table(json.loads(Path(args[1]).read_text())), end="")
        return
    if not args:
        raise SystemExit(__doc__)
    out, plan = Path(args[0]), tuple(args[1:]) or PLAN
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.split("\n")[0].split(", ")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="gapbench-first-") as root:
        rows = run_plan(plan, root)
    run = {"started": started, "device": smi[0], "driver": smi[-1], "plan": list(plan), "rows": rows}
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(run, indent=1))
    os.replace(tmp, out)
    print(table(run), end="")


if __name__ == "__main__":
    main(sys.argv[1:])
