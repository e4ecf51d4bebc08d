"""Launch latency (paper Table 6, section 4.3), raw probe and every framework side by side.

For each backend, in fresh processes:
  import / context     import of the library, and device-context creation, timed apart
  cold                 the first launch of a never-launched kernel after the context exists
                       (one sample per fresh process; median/min/max over processes)
  first_warm           the second launch of that process
and, in the first of those processes, warm:
  submit        host cost of issuing one op (no wait inside the timed region)
  roundtrip     issue one op and wait for it (CPU-synchronous backends: the call itself)
  stream_b2b    per op, device timers around `inner` ops as the host issues them
  device_kernel per kernel on the device alone (native only: queue preloaded / one encoder)
  graph_node    per node of a CUDA graph replay
Native variants: 1 `null` (empty kernel: the floor) and 2 `add1` (1-element add); frameworks
run the same 1-element fp32 add (torch.add(out=), cupy.add(out=), mx.add + eval).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from .. import registry as bk
from ..result import ERROR, FAILED, NOT_APPLICABLE, OK, UNAVAILABLE, Record

PROBE = "launch"
RESULT_MARK = "GAPBENCH-RESULT:"
perf_ns = time.perf_counter_ns

# Phases measured once per fresh process; aggregated over processes by the parent.
PHASES = ("import", "context", "library_compile", "pipeline_create", "cold", "first_warm")
WARM_METRICS = ("submit", "roundtrip", "stream_b2b", "device_kernel", "graph_node")


@dataclass
class Config:
    samples: int = 200
    inner: int = 100
    warmup: int = 20
    cold_samples: int = 5
    warm_processes: int = 3  # fresh processes whose warm samples are pooled
    n: int = 1  # elements of the add op
    seed: int | None = None
    timeout: float = 600.0

    @classmethod
    def quick(cls) -> "Config":
        return cls(samples=30, inner=20, warmup=5, cold_samples=2, warm_processes=1)

    def validate(self) -> None:
        for name in ("samples", "inner", "cold_samples", "warm_processes", "n"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.warmup < 0:
            raise ValueError("--warmup must be >= 0")


def _add_work(n: int) -> dict:
    return {"flops": float(n), "bytes": float(12 * n)}  # two fp32 reads and one write per element


def _rng(cfg: Config) -> np.random.Generator:
    return np.random.default_rng(cfg.seed)


def _check_add(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[bool, str]:
    """Compare an fp32 add against the float64 reference; NaN (poison left behind) fails."""
    ref = a.astype(np.float64) + b.astype(np.float64)
    out = np.asarray(out, dtype=np.float64).reshape(ref.shape)
    if not np.all(np.isfinite(out)):
        return False, f"{int(np.sum(~np.isfinite(out)))} of {out.size} outputs not written (NaN poison left)"
    err = float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))
    ok = err <= 1e-6  # one fp32 rounding of a sum
    return ok, f"rel. error {err:.2e} vs float64 (bound 1e-6), n={out.size}"


def _random_inputs(cfg: Config, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    r = _rng(cfg)
    n = n or cfg.n
    # Away from zero: a result on zeros proves nothing.
    a = r.uniform(0.5, 2.0, n).astype(np.float32)
    b = r.uniform(0.5, 2.0, n).astype(np.float32)
    return a, b


# ============================================================== worker (fresh process)
class _Out:
    """What a worker sends back: per-process phases and the warm records."""

    def __init__(self, backend: str):
        self.backend = backend
        self.phases: dict[str, dict[str, float]] = {}  # variant -> phase -> seconds
        self.records: list[dict] = []
        self.ops: dict[str, str] = {}
        self.verify: dict[str, tuple[bool | None, str]] = {}

    def phase(self, variant: str, name: str, seconds: float) -> None:
        self.phases.setdefault(variant, {})[name] = float(seconds)

    def record(self, variant: str, metric: str, samples: list[float] | None, *, inner: int, warmup: int,
               clock: str | None, op: str, work: dict | None = None, status: str = OK, reason: str = "",
               params: dict | None = None) -> None:
        v_ok, v_detail = self.verify.get(variant, (None, ""))
        rec = Record(probe=PROBE, backend=self.backend, variant=variant, metric=metric, status=status,
                     reason=reason, op=op, clock=clock if status == OK else None,
                     samples_s=list(samples or []), inner=inner if status == OK else 1,
                     warmup=warmup, work=work or {}, params=params or {}, verified=v_ok,
                     verify_detail=v_detail)
        self.records.append(asdict(rec))

    def na(self, variant: str, metric: str, op: str, reason: str) -> None:
        self.record(variant, metric, None, inner=1, warmup=0, clock=None, op=op, status=NOT_APPLICABLE, reason=reason)


def _worker_native_cpu(cfg: Config, warm: bool, out: _Out) -> None:
    t0 = perf_ns()
    from .. import _native as nat  # noqa: the import itself is the measured phase
    out.phase("noop", "import", (perf_ns() - t0) * 1e-9)
    f = nat.cpu.noop
    t0 = perf_ns(); f(); out.phase("noop", "cold", (perf_ns() - t0) * 1e-9)
    t0 = perf_ns(); f(); out.phase("noop", "first_warm", (perf_ns() - t0) * 1e-9)
    op = "empty pybind11 call from a Python loop (the binding floor)"
    out.ops["noop"] = op
    out.verify["noop"] = (None, "empty call: it has no output to check")
    if not warm:
        return

    def pyfn():
        return None

    for variant, fn, what in (("noop", f, op), ("py-noop", pyfn, "empty Python function call (reference below the binding)")):
        samples = []
        for i in range(cfg.warmup + cfg.samples):
            t0 = perf_ns()
            for _ in range(cfg.inner):
                fn()
            dt = (perf_ns() - t0) * 1e-9
            if i >= cfg.warmup:
                samples.append(dt)
        out.record(variant, "roundtrip", samples, inner=cfg.inner, warmup=cfg.warmup, clock="host_wall", op=what,
                   params={"synchronous": True})
        for m in ("submit", "stream_b2b", "device_kernel", "graph_node"):
            out.na(variant, m, what, "synchronous CPU call: completion is the return (see roundtrip)")


def _native_gpu_variants(cfg: Config) -> list[tuple[str, str, int]]:
    """(row variant, gapbench._native.LaunchKernel member, elements)."""
    return [("null", "null", 1), ("add1", "add1", cfg.n)]


def _worker_native_gpu(cfg: Config, warm: bool, out: _Out, kind: str) -> None:
    t0 = perf_ns()
    from .. import _native as nat
    part = getattr(nat, kind)
    import_s = (perf_ns() - t0) * 1e-9
    st = dict(part.status(0) if kind == "cuda" else part.status())
    if not st.get("available"):
        raise RuntimeError(st.get("reason", f"{kind} unavailable"))
    source = None
    if kind == "metal":
        source = resources.files("gapbench").joinpath("metal/launch.metal").read_text()
    ctx_s = part.context_create_seconds() if kind == "cuda" else None
    probes = {}
    for variant, kernel, n in _native_gpu_variants(cfg):
        out.phase(variant, "import", import_s)
        kernel = getattr(nat.LaunchKernel, kernel)
        if kind == "cuda":
            out.phase(variant, "context", ctx_s)
            p = part.LaunchProbe(kernel, n, 0)
        else:
            p = part.LaunchProbe(kernel, n, source)
            out.phase(variant, "context", part.context_create_seconds())
            out.phase(variant, "library_compile", p.library_compile_seconds)
            out.phase(variant, "pipeline_create", p.pipeline_create_seconds)
        out.phase(variant, "cold", p.timed_launch_sync())
        out.phase(variant, "first_warm", p.timed_launch_sync())
        probes[variant] = (p, n)
    for variant, (p, n) in probes.items():
        if variant == "null":
            k = 1000
            got = p.count_launches(k)
            out.verify[variant] = (got == k, f"{got} of {k} launches executed (device-side counter)")
            out.ops[variant] = f"empty kernel, 1 thread ({kind})"
        else:
            a, b = _random_inputs(cfg, n)
            res = np.asarray(p.run_add(a.tolist(), b.tolist()), dtype=np.float32)
            out.verify[variant] = _check_add(res, a, b)
            out.ops[variant] = f"fp32 add of {n} element(s), out = a + b ({kind})"
    if not warm:
        return
    dev_clock = "device_events" if kind == "cuda" else "gpu_timestamps"
    for variant, (p, n) in probes.items():
        op = out.ops[variant]
        work = _add_work(n) if variant == "add1" else {"flops": 0.0, "bytes": 0.0}
        if out.verify[variant][0] is False:
            for m in WARM_METRICS:
                out.record(variant, m, None, inner=1, warmup=0, clock=None, op=op, status=FAILED,
                           reason="verification failed, not timed: " + out.verify[variant][1])
            continue
        s, i, w = cfg.samples, cfg.inner, cfg.warmup
        out.record(variant, "submit", p.submit(s, i, w), inner=i, warmup=w, clock="host_wall", op=op, work=work)
        out.record(variant, "roundtrip", p.roundtrip(s, w), inner=1, warmup=w, clock="host_wall", op=op, work=work)
        out.record(variant, "stream_b2b", p.stream_b2b(s, i, w), inner=i, warmup=w, clock=dev_clock, op=op, work=work)
        dk = p.device_kernel(s, i, w)
        out.record(variant, "device_kernel", dk, inner=i, warmup=w, clock=dev_clock, op=op, work=work,
                   params={"method": "launches held behind the release gate until all are queued" if kind == "cuda"
                           else "inner dispatches in one compute encoder",
                           **({"invalid_samples": p.invalid_samples} if kind == "cuda" else {})})
        if kind == "cuda":
            out.record(variant, "graph_node", p.graph_replay(s, i, w), inner=i, warmup=w, clock=dev_clock, op=op, work=work)
        else:
            out.na(variant, "graph_node", op, "not implemented for Metal (indirect command buffers)")


class _FrameworkAdd:
    """The framework's smallest real op, out = a + b in fp32, on arrays made from numpy."""

    def __init__(self, ad, fam: str, a_np: np.ndarray, b_np: np.ndarray):
        self.ad, self.fam = ad, fam
        self.a, self.b = ad.from_numpy(a_np), ad.from_numpy(b_np)
        n = a_np.size
        if fam == "torch":
            self.c = ad.torch.empty_like(self.a)
            self.text = f"torch.add(a, b, out=c), {n} fp32 element(s) on {ad.device}"
        elif fam == "cupy":
            self.c = ad.cp.empty_like(self.a)
            self.text = f"cupy.add(a, b, out=c), {n} fp32 element(s)"
        else:
            self.c = None  # MLX returns a fresh array per op
            self.text = f"mx.add(a, b) evaluated, {n} fp32 element(s) on {ad.device}"

    def submit(self) -> None:
        if self.fam == "torch":
            self.ad.torch.add(self.a, self.b, out=self.c)
        elif self.fam == "cupy":
            self.ad.cp.add(self.a, self.b, out=self.c)
        else:
            self.c = self.ad.mx.add(self.a, self.b)
            self.ad.mx.async_eval(self.c)

    def run_sync(self) -> None:
        self.submit()
        self.ad.sync()

    def poison(self) -> None:
        if self.fam == "torch":
            self.c.fill_(float("nan"))
        elif self.fam == "cupy":
            self.c.fill(np.nan)
        else:
            self.c = None  # nothing stale can be read back: result() needs a new op

    def result(self) -> np.ndarray:
        return self.ad.to_numpy(self.c)


def _worker_framework(cfg: Config, warm: bool, out: _Out) -> None:
    backend = out.backend
    module = {"torch": "torch", "mlx": "mlx.core", "cupy": "cupy"}[backend.split("-")[0]]
    t0 = perf_ns()
    __import__(module)
    out.phase("add", "import", (perf_ns() - t0) * 1e-9)
    from ..frameworks import make_adapter

    ad = make_adapter(backend)
    t0 = perf_ns()
    ad.setup_context()
    out.phase("add", "context", (perf_ns() - t0) * 1e-9)
    fam = backend.split("-")[0]
    synchronous = backend == "torch-cpu"
    a_np, b_np = _random_inputs(cfg)
    op = _FrameworkAdd(ad, fam, a_np, b_np)
    submit_op, op_sync, op_text = op.submit, op.run_sync, op.text
    out.ops["add"] = op_text
    t0 = perf_ns(); op_sync(); out.phase("add", "cold", (perf_ns() - t0) * 1e-9)
    t0 = perf_ns(); op_sync(); out.phase("add", "first_warm", (perf_ns() - t0) * 1e-9)
    # The same op on fresh random inputs (and a poisoned output) against float64.
    va, vb = _random_inputs(Config(n=max(cfg.n, 1000)))
    check = _FrameworkAdd(ad, fam, va, vb)
    check.poison()
    check.run_sync()
    out.verify["add"] = _check_add(check.result(), va, vb)
    if not warm:
        return
    work = _add_work(cfg.n)
    if out.verify["add"][0] is False:
        for m in WARM_METRICS:
            out.record("add", m, None, inner=1, warmup=0, clock=None, op=op_text, status=FAILED,
                       reason="verification failed, not timed: " + out.verify["add"][1])
        return
    s, i, w = cfg.samples, cfg.inner, cfg.warmup
    if synchronous:
        out.na("add", "submit", op_text, "synchronous CPU op: completion is the return (see roundtrip)")
        samples = []
        for k in range(w + s):
            t0 = perf_ns()
            for _ in range(i):
                submit_op()
            dt = (perf_ns() - t0) * 1e-9
            if k >= w:
                samples.append(dt)
        out.record("add", "roundtrip", samples, inner=i, warmup=w, clock="host_wall", op=op_text, work=work,
                   params={"synchronous": True})
        for m in ("stream_b2b", "device_kernel", "graph_node"):
            out.na("add", m, op_text, "synchronous CPU op: no device queue")
        return
    samples = []
    for k in range(w + s):
        ad.sync()
        t0 = perf_ns()
        for _ in range(i):
            submit_op()
        dt = (perf_ns() - t0) * 1e-9
        ad.sync()
        if k >= w:
            samples.append(dt)
    out.record("add", "submit", samples, inner=i, warmup=w, clock="host_wall", op=op_text, work=work)
    samples = []
    for k in range(w + s):
        t0 = perf_ns()
        op_sync()
        dt = (perf_ns() - t0) * 1e-9
        if k >= w:
            samples.append(dt)
    out.record("add", "roundtrip", samples, inner=1, warmup=w, clock="host_wall", op=op_text, work=work)
    samples = []
    for k in range(w + s):
        dt = ad.time_device(submit_op, i)
        if k >= w:
            samples.append(dt)
    out.record("add", "stream_b2b", samples, inner=i, warmup=w, clock=ad.device_clock, op=op_text, work=work)
    out.na("add", "device_kernel", op_text, "frameworks cannot preload the queue; see stream_b2b")
    replay = ad.graph(submit_op, i)
    if replay is None:
        out.na("add", "graph_node", op_text, ad.graph_reason)
    else:
        samples = [replay() for _ in range(w + s)][w:]
        out.record("add", "graph_node", samples, inner=i, warmup=w, clock="device_events", op=op_text, work=work)


def worker_main(backend: str, cfg: Config, warm: bool) -> dict:
    out = _Out(backend)
    if backend == "native-cpu":
        _worker_native_cpu(cfg, warm, out)
    elif backend == "native-cuda":
        _worker_native_gpu(cfg, warm, out, "cuda")
    elif backend == "native-metal":
        _worker_native_gpu(cfg, warm, out, "metal")
    else:
        _worker_framework(cfg, warm, out)
    return {"phases": out.phases, "records": out.records, "ops": out.ops,
            "verify": {k: list(v) for k, v in out.verify.items()}}


# ============================================================== parent (orchestration)
class WorkerError(RuntimeError):
    pass


def spawn_worker(backend: str, cfg: Config, warm: bool) -> dict:
    """Run one fresh process for `backend`; a crash or timeout there is an exception here."""
    cmd = [sys.executable, "-m", "gapbench.probes.launch", "--worker", backend,
           "--worker-config", json.dumps(asdict(cfg))] + (["--worker-warm"] if warm else [])
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=cfg.timeout, env=env)
    except subprocess.TimeoutExpired:
        raise WorkerError(f"timed out after {cfg.timeout:.0f} s (raise --timeout)") from None
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            doc = json.loads(line[len(RESULT_MARK):])
            if "error" in doc:
                raise WorkerError(doc["error"])
            return doc
    tail = (p.stderr or p.stdout).strip().splitlines()[-6:]
    raise WorkerError(f"worker exited with code {p.returncode} and no result: " + " | ".join(tail))


def plain_binary() -> Path | None:
    p = resources.files("gapbench").joinpath("bin/gapbench_launch_plain")
    path = Path(str(p))
    return path if path.is_file() and os.access(path, os.X_OK) else None


def run_plain(cfg: Config) -> list[Record]:
    """The plain standalone C++ loop (cuda/plain/launch.cu), same launches, same session."""
    exe = plain_binary()
    if exe is None:
        return [Record(probe=PROBE, backend="plain-cuda", variant="null", metric="roundtrip",
                       status=UNAVAILABLE, reason="plain loop not built (no CUDA toolkit at install)")]
    try:
        p = subprocess.run([str(exe), str(cfg.samples), str(cfg.inner), str(cfg.warmup), "1"],
                           capture_output=True, text=True, timeout=cfg.timeout)
    except subprocess.TimeoutExpired:
        return [Record(probe=PROBE, backend="plain-cuda", variant="null", metric="roundtrip", status=ERROR,
                       reason="plain loop timed out")]
    if p.returncode != 0:
        return [Record(probe=PROBE, backend="plain-cuda", variant="null", metric="roundtrip", status=ERROR,
                       reason=f"plain loop failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")]
    doc = json.loads(p.stdout)
    op = "empty kernel, 1 thread (plain C++ loop, no harness)"
    recs = []
    for metric, key, inner, clock in (("submit", "submit", cfg.inner, "host_wall"),
                                      ("roundtrip", "roundtrip", 1, "host_wall"),
                                      ("stream_b2b", "stream_b2b", cfg.inner, "device_events"),
                                      ("device_kernel", "device_kernel", cfg.inner, "device_events"),
                                      ("graph_node", "graph_replay", cfg.inner, "device_events")):
        recs.append(Record(probe=PROBE, backend="plain-cuda", variant="null", metric=metric, op=op, clock=clock,
                           samples_s=doc[key], inner=inner, warmup=cfg.warmup,
                           params={"binary": exe.name}, work={"flops": 0.0, "bytes": 0.0}))
    return recs


def pool(runs: list[list[Record]]) -> list[Record]:
    """Pool the records of several fresh processes (or plain-loop runs) into one per key: the
    samples of every successful run together, so a one-off process (its placement, its clocks)
    weighs no more than its share. A failure in any run wins: it is never hidden by the others."""
    out: dict[tuple, Record] = {}
    counts: dict[tuple, int] = {}
    for recs in runs:
        for r in recs:
            k = (r.backend, r.variant, r.metric)
            if k not in out:
                out[k] = Record.from_dict(asdict(r))
                counts[k] = 1
            elif out[k].status == OK and r.status == OK:
                out[k].samples_s = out[k].samples_s + list(r.samples_s)
                counts[k] += 1
            elif out[k].status == OK and r.status in (FAILED, ERROR):
                out[k] = Record.from_dict(asdict(r))
    for k, r in out.items():
        if r.status == OK and len(runs) > 1:
            r.params = dict(r.params, processes=counts[k])
    return list(out.values())


def _phase_records(backend: str, info: bk.BackendInfo, per_process: list[dict], ops: dict,
                   verify: dict) -> list[Record]:
    recs = []
    variants = list(dict.fromkeys(v for doc in per_process for v in doc))
    for variant in variants:
        for phase in PHASES:
            vals = [doc[variant][phase] for doc in per_process if phase in doc.get(variant, {})]
            if not vals:
                continue
            v_ok, v_detail = verify.get(variant, (None, ""))
            recs.append(Record(probe=PROBE, backend=backend, variant=variant, metric=phase, op=ops.get(variant, ""),
                               clock="host_wall", samples_s=vals, inner=1, warmup=0, device=info.device,
                               params={"fresh_processes": len(vals)}, verified=v_ok, verify_detail=v_detail))
    return recs


def measure_backend(backend: str, cfg: Config, on_step=None, before_warm=None) -> list[Record]:
    """Every record of one backend. Never raises: failures become error rows.
    `before_warm(k)` runs before the k-th warm process (used to interleave the plain loop)."""
    info = bk.info(backend)
    if not info.available:
        return [Record(probe=PROBE, backend=backend, metric="all", status=UNAVAILABLE, reason=info.reason,
                       device=info.device)]
    per_process: list[dict] = []
    warm_runs: list[list[Record]] = []
    ops: dict = {}
    verify: dict = {}
    errors: list[str] = []
    n_proc = max(cfg.cold_samples, cfg.warm_processes)
    for k in range(n_proc):
        warm = k < cfg.warm_processes
        if warm and before_warm is not None:
            before_warm(k)
        try:
            doc = spawn_worker(backend, cfg, warm)
        except (WorkerError, json.JSONDecodeError) as e:
            errors.append(f"process {k + 1}: {e}")
            if on_step:
                on_step()
            if warm:  # the warm measurements were lost with this process: say so, go on
                warm_runs.append([Record(probe=PROBE, backend=backend, metric="warm", status=ERROR,
                                         reason=str(e), device=info.device)])
            continue
        per_process.append(doc["phases"])
        ops.update(doc.get("ops", {}))
        verify.update({k2: tuple(v) for k2, v in doc.get("verify", {}).items()})
        if warm:
            run = [Record.from_dict(r) for r in doc["records"]]
            for rec in run:
                rec.device = info.device
            warm_runs.append(run)
        if on_step:
            on_step()
    warm_records = pool(warm_runs)
    recs = _phase_records(backend, info, per_process, ops, verify) + warm_records
    if errors and not per_process:
        recs.append(Record(probe=PROBE, backend=backend, metric="cold", status=ERROR, reason="; ".join(errors),
                           device=info.device))
    elif errors:
        recs.append(Record(probe=PROBE, backend=backend, metric="cold", variant="(errors)", status=ERROR,
                           reason=f"{len(errors)} of {n_proc} fresh processes failed: " + "; ".join(errors),
                           device=info.device))
    return recs


# ============================================================== table
def _us(x: float) -> str:
    us = x * 1e6
    return f"{us:.3g}" if us < 100 else f"{us:.0f}"


def _cell(rec: Record | None, with_range: bool = False) -> str:
    if rec is None:
        return ""
    if rec.status != OK:
        return "n/a" if rec.status == NOT_APPLICABLE else rec.status
    s = rec.summary()
    txt = _us(s.median)
    if with_range and s.n > 1:
        txt += f" [{_us(s.min)}-{_us(s.max)}]"
    if s.noisy:
        txt += "~"
    return txt


def floor_record(records: list[Record], backend: str, metric: str) -> Record | None:
    """The raw floor a framework row is compared with: the native backend of its device class,
    on the same op (add1) where it exists, the binding floor (noop) on the CPU."""
    try:
        floor = bk.info(backend).floor if backend not in bk.NATIVE else None
    except bk.UnknownBackendError:
        return None
    if floor is None:
        return None
    idx = {(r.backend, r.variant, r.metric): r for r in records if r.status == OK}
    for variant in ("add1", "noop"):
        r = idx.get((floor, variant, metric))
        if r is not None:
            return r
    return None


def overhead(records: list[Record], backend: str, metric: str, rec: Record | None) -> str:
    if rec is None or rec.status != OK:
        return ""
    f = floor_record(records, backend, metric)
    if f is None:
        return ""
    return f"{rec.summary().median / f.summary().median:.1f}x"


def build_table(records: list[Record], title: str = "Launch latency (us): median, cold as median [min-max]"):
    from rich.table import Table

    from rich.markup import escape

    t = Table(title=escape(title), caption="~ noisy (IQR > 10% of median). xfloor: framework / native of the same device "
                                    "(add1; CPU: binding floor). Full samples and spread in the JSON.")
    cols = ["backend", "variant", "context", "cold", "1st warm", "submit/op", "launch+sync", "b2b/op",
            "kernel/op", "graph/node", "xfloor sync", "xfloor b2b"]
    for c in cols:
        t.add_column(c, overflow="fold")
    by_key = {(r.backend, r.variant, r.metric): r for r in records}
    rows = list(dict.fromkeys((r.backend, r.variant) for r in records))
    for backend, variant in rows:
        got = {m: by_key.get((backend, variant, m)) for m in PHASES + WARM_METRICS + ("all", "warm")}
        if got["all"] is not None:
            continue  # listed by unavailable_table
        if variant == "(errors)" or (got["cold"] and got["cold"].status == ERROR):
            r = got["cold"]
            t.add_row(backend, variant or "-", f"[red]error: {escape(r.reason)}[/red]", *[""] * 9)
            continue
        if all(v is None for v in got.values()):
            continue
        t.add_row(
            backend, variant, _cell(got["context"]) if got["context"] else ("import " + _cell(got["import"]) if got["import"] else ""),
            _cell(got["cold"], with_range=True), _cell(got["first_warm"]), _cell(got["submit"]),
            _cell(got["roundtrip"]), _cell(got["stream_b2b"]), _cell(got["device_kernel"]), _cell(got["graph_node"]),
            overhead(records, backend, "roundtrip", got["roundtrip"]),
            overhead(records, backend, "stream_b2b", got["stream_b2b"]),
        )
        if got["warm"] is not None and got["warm"].status == ERROR:
            t.add_row(backend, variant, f"[red]warm measurements lost: {escape(got['warm'].reason)}[/red]", *[""] * 9)
    return t


def markdown_table(records: list[Record]) -> str:
    """The terminal table as Markdown (for READMEs and issues), generated from result records."""
    head = ["backend", "variant", "context", "cold [min-max]", "1st warm", "submit/op", "launch+sync", "b2b/op",
            "kernel/op", "graph/node", "xfloor sync", "xfloor b2b"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by_key = {(r.backend, r.variant, r.metric): r for r in records}
    for backend, variant in dict.fromkeys((r.backend, r.variant) for r in records):
        got = {m: by_key.get((backend, variant, m)) for m in PHASES + WARM_METRICS}
        if all(v is None or v.status == ERROR for v in got.values()):
            continue
        ctx = _cell(got["context"]) if got["context"] else ("import " + _cell(got["import"]) if got["import"] else "")
        cells = [backend, variant, ctx, _cell(got["cold"], True), _cell(got["first_warm"]), _cell(got["submit"]),
                 _cell(got["roundtrip"]), _cell(got["stream_b2b"]), _cell(got["device_kernel"]),
                 _cell(got["graph_node"]), overhead(records, backend, "roundtrip", got["roundtrip"]),
                 overhead(records, backend, "stream_b2b", got["stream_b2b"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def unavailable_table(records: list[Record]):
    from rich.markup import escape
    from rich.table import Table

    rows = [r for r in records if r.metric == "all" and r.status == UNAVAILABLE]
    if not rows:
        return None
    t = Table(title="Not measured on this machine")
    t.add_column("backend")
    t.add_column("why")
    for r in rows:
        t.add_row(r.backend, escape(r.reason))
    return t


def plain_comparison(records: list[Record]) -> list[tuple[str, float, float, float]]:
    """(metric, harness median, plain median, harness/plain) for the native-cuda null kernel."""
    idx = {(r.backend, r.variant, r.metric): r for r in records if r.status == OK}
    rows = []
    for m in WARM_METRICS:
        h, p = idx.get(("native-cuda", "null", m)), idx.get(("plain-cuda", "null", m))
        if h and p:
            hm, pm = h.summary().median, p.summary().median
            rows.append((m, hm, pm, hm / pm))
    return rows


# ============================================================== CLI
def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--backends", default=None,
                    help=f"comma list of backends (default: all). Known: {', '.join(bk.ALL)}")
    ap.add_argument("--quick", action="store_true", help="few samples: a fast smoke run (CI)")
    ap.add_argument("--out", default=None, help="result JSON path (default: results/launch-<time>.json); "
                    "a CSV is written next to it")
    ap.add_argument("--samples", type=int, default=None, help="timed samples per measurement (default 200; quick 30)")
    ap.add_argument("--inner", type=int, default=None, help="ops per sample for batched metrics (default 100; quick 20)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed warm-up samples (default 20; quick 5)")
    ap.add_argument("--cold-samples", type=int, default=None,
                    help="fresh processes per backend for cold launch (default 5; quick 2)")
    ap.add_argument("--warm-processes", type=int, default=None,
                    help="fresh processes whose warm samples are pooled (default 3; quick 1)")
    ap.add_argument("--n", type=int, default=1, help="elements of the add op (default 1)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per fresh process")
    ap.add_argument("--no-plain", action="store_true", help="skip the plain C++ loop check (native-cuda)")
    ap.add_argument("--no-progress", action="store_true", help="no progress display")
    ap.add_argument("--list", action="store_true", help="list backends with availability and exit")


def config_from_args(args) -> Config:
    cfg = Config.quick() if args.quick else Config()
    for name in ("samples", "inner", "warmup", "cold_samples", "warm_processes"):
        v = getattr(args, name)
        if v is not None:
            setattr(cfg, name, v)
    cfg.n = args.n
    cfg.timeout = args.timeout
    cfg.validate()
    return cfg


def main(argv: list[str] | None = None, prog: str = "python -m bench.launch") -> int:
    from rich.console import Console

    from ..cli import list_backends, open_run, progress_bar

    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    console = Console() if Console().is_terminal else Console(width=200)
    if args.list:
        list_backends(console)
        return 0
    try:
        cfg = config_from_args(args)
        names = bk.resolve(args.backends)
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    writer = open_run(PROBE, args.out, prog, argv, asdict(cfg), names)
    available = [n for n in names if bk.info(n).available]
    n_proc = max(cfg.cold_samples, cfg.warm_processes)
    with_plain = "native-cuda" in available and not args.no_plain
    steps = n_proc * len(available) + (cfg.warm_processes + 1 if with_plain else 0)
    with progress_bar(console, steps, disable=args.no_progress) as prog_bar:
        plain_runs: list[list[Record]] = []

        def plain_run(_k=None):
            # The plain loop runs before each harness process and once after the last: drift
            # in clocks or host load then falls on both sides alike.
            prog_bar.describe("launch: plain C++ loop")
            plain_runs.append(run_plain(cfg))
            prog_bar.advance()

        for name in names:
            interleave = name == "native-cuda" and with_plain
            prog_bar.describe(f"launch: {name}")
            writer.extend(measure_backend(name, cfg, on_step=prog_bar.advance,
                                          before_warm=plain_run if interleave else None))
            if interleave:
                plain_run()
                writer.extend(pool(plain_runs))
    writer.finish()
    console.print(build_table(writer.records))
    missing = unavailable_table(writer.records)
    if missing is not None:
        console.print(missing)
    cmp_rows = plain_comparison(writer.records)
    if cmp_rows:
        console.print("harness vs plain C++ loop (native-cuda null kernel, same session): " + ", ".join(
            f"{m} {_us(h)}/{_us(p)} us = {r:.3f}" for m, h, p, r in cmp_rows))
    console.print(f"results: {writer.path} and {writer.csv_path}")
    return 0


def _worker_entry(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--worker-config", required=True)
    ap.add_argument("--worker-warm", action="store_true")
    a = ap.parse_args(argv)
    cfg = Config(**json.loads(a.worker_config))
    try:
        doc = worker_main(a.worker, cfg, a.worker_warm)
    except Exception as e:  # reported to the parent as this backend's error row
        doc = {"error": f"{type(e).__name__}: {e}"}
    sys.stdout.write(RESULT_MARK + json.dumps(doc) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        sys.exit(_worker_entry(sys.argv[1:]))
    sys.exit(main())
