"""Launch benchmark, the worker side: what one fresh process measures for one backend (run by
gapbench.worker, target `gapbench.probes.launch_worker:entry`). Every framework is reached
through its adapter (gapbench.frameworks); native backends through gapbench._native."""
from __future__ import annotations

import time
from dataclasses import asdict
from importlib import resources

import numpy as np

from .. import registry as bk
from ..measure import Arm, adaptive
from ..result import FAILED, NOT_APPLICABLE, OK, Record
from .launch_config import PROBE, WARM_METRICS, Config, add_work, check_add, random_inputs

perf_ns = time.perf_counter_ns


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


def _sampled(cfg: Config, sample) -> tuple[list[float], dict]:
    """Samples of one metric under the stopping rule (gapbench.measure.adaptive): `sample(n)`
    returns n per-sample seconds; sampling stops once the median's 95% interval is within
    cfg.rel_hw, at cfg.samples samples, or at cfg.budget_s of wall time. The stop goes in params."""
    m = adaptive(Arm("metric", sample), rel_hw=cfg.rel_hw, min_samples=min(10, cfg.samples),
                 max_samples=cfg.samples, budget_s=cfg.budget_s, warmup=cfg.warmup)
    return m.samples, {"stop": m.to_dict(samples=False)}


def _each(one):
    """sample(n) from a function returning one sample."""
    return lambda n: [one() for _ in range(n)]


def _timed_loop(fn, inner: int):
    def one():
        t0 = perf_ns()
        for _ in range(inner):
            fn()
        return (perf_ns() - t0) * 1e-9
    return one


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
        samples, stop = _sampled(cfg, _each(_timed_loop(fn, cfg.inner)))
        out.record(variant, "roundtrip", samples, inner=cfg.inner, warmup=cfg.warmup, clock="host_wall", op=what,
                   params={"synchronous": True, **stop})
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
            a, b = random_inputs(cfg, n)
            res = np.asarray(p.run_add(a.tolist(), b.tolist()), dtype=np.float32)
            out.verify[variant] = check_add(res, a, b)
            out.ops[variant] = f"fp32 add of {n} element(s), out = a + b ({kind})"
    if not warm:
        return
    dev_clock = "device_events" if kind == "cuda" else "gpu_timestamps"
    for variant, (p, n) in probes.items():
        op = out.ops[variant]
        work = add_work(n) if variant == "add1" else {"flops": 0.0, "bytes": 0.0}
        if out.verify[variant][0] is False:
            for m in WARM_METRICS:
                out.record(variant, m, None, inner=1, warmup=0, clock=None, op=op, status=FAILED,
                           reason="verification failed, not timed: " + out.verify[variant][1])
            continue
        i, w = cfg.inner, cfg.warmup
        for metric, clock, inner, sample in (
                ("submit", "host_wall", i, lambda n: p.submit(n, i, 0)),
                ("roundtrip", "host_wall", 1, lambda n: p.roundtrip(n, 0)),
                ("stream_b2b", dev_clock, i, lambda n: p.stream_b2b(n, i, 0))):
            samples, stop = _sampled(cfg, sample)
            out.record(variant, metric, samples, inner=inner, warmup=w, clock=clock, op=op, work=work, params=stop)
        samples, stop = _sampled(cfg, lambda n: p.device_kernel(n, i, 0))
        out.record(variant, "device_kernel", samples, inner=i, warmup=w, clock=dev_clock, op=op, work=work,
                   params={"method": "launches held behind the release gate until all are queued" if kind == "cuda"
                           else "inner dispatches in one compute encoder", **stop,
                           **({"invalid_samples": p.invalid_samples} if kind == "cuda" else {})})
        if kind == "cuda":
            samples, stop = _sampled(cfg, lambda n: p.graph_replay(n, i, 0))
            out.record(variant, "graph_node", samples, inner=i, warmup=w, clock=dev_clock, op=op, work=work,
                       params=stop)
        else:
            out.na(variant, "graph_node", op, "not implemented for Metal (indirect command buffers)")


class _FrameworkAdd:
    """The framework's smallest real op, out = a + b in fp32, on arrays made from numpy."""

    def __init__(self, ad, a_np: np.ndarray, b_np: np.ndarray):
        self.ad = ad
        self.a, self.b = ad.from_numpy(a_np), ad.from_numpy(b_np)
        self.c = ad.empty_like(self.a)
        self.text = ad.describe("add", n=a_np.size)

    def submit(self) -> None:
        self.c = self.ad.add_into(self.a, self.b, self.c)

    def run_sync(self) -> None:
        self.submit()
        self.ad.sync()

    def poison(self) -> None:
        self.c = self.ad.poison(self.c)

    def result(self) -> np.ndarray:
        return self.ad.to_numpy(self.c)


def _worker_framework(cfg: Config, warm: bool, out: _Out) -> None:
    backend = bk.parse(out.backend)
    t0 = perf_ns()
    __import__(backend.module)
    out.phase("add", "import", (perf_ns() - t0) * 1e-9)
    from ..frameworks import make_adapter

    ad = make_adapter(backend.name)
    t0 = perf_ns()
    ad.setup_context()
    out.phase("add", "context", (perf_ns() - t0) * 1e-9)
    synchronous = backend.synchronous
    a_np, b_np = random_inputs(cfg)
    op = _FrameworkAdd(ad, a_np, b_np)
    submit_op, op_sync, op_text = op.submit, op.run_sync, op.text
    out.ops["add"] = op_text
    t0 = perf_ns(); op_sync(); out.phase("add", "cold", (perf_ns() - t0) * 1e-9)
    t0 = perf_ns(); op_sync(); out.phase("add", "first_warm", (perf_ns() - t0) * 1e-9)
    # The same op on fresh random inputs (and a poisoned output) against float64.
    va, vb = random_inputs(Config(n=max(cfg.n, 1000)))
    check = _FrameworkAdd(ad, va, vb)
    check.poison()
    check.run_sync()
    out.verify["add"] = check_add(check.result(), va, vb)
    if not warm:
        return
    work = add_work(cfg.n)
    if out.verify["add"][0] is False:
        for m in WARM_METRICS:
            out.record("add", m, None, inner=1, warmup=0, clock=None, op=op_text, status=FAILED,
                       reason="verification failed, not timed: " + out.verify["add"][1])
        return
    i, w = cfg.inner, cfg.warmup
    if synchronous:
        out.na("add", "submit", op_text, "synchronous CPU op: completion is the return (see roundtrip)")
        samples, stop = _sampled(cfg, _each(_timed_loop(submit_op, i)))
        out.record("add", "roundtrip", samples, inner=i, warmup=w, clock="host_wall", op=op_text, work=work,
                   params={"synchronous": True, **stop})
        for m in ("stream_b2b", "device_kernel", "graph_node"):
            out.na("add", m, op_text, "synchronous CPU op: no device queue")
        return
    loop = _timed_loop(submit_op, i)

    def submitted():  # host cost of issuing i ops, the queue drained before and after
        ad.sync()
        dt = loop()
        ad.sync()
        return dt

    samples, stop = _sampled(cfg, _each(submitted))
    out.record("add", "submit", samples, inner=i, warmup=w, clock="host_wall", op=op_text, work=work, params=stop)
    samples, stop = _sampled(cfg, _each(_timed_loop(op_sync, 1)))
    out.record("add", "roundtrip", samples, inner=1, warmup=w, clock="host_wall", op=op_text, work=work, params=stop)
    samples, stop = _sampled(cfg, _each(lambda: ad.time_device(submit_op, i)))
    out.record("add", "stream_b2b", samples, inner=i, warmup=w, clock=ad.device_clock, op=op_text, work=work,
               params=stop)
    out.na("add", "device_kernel", op_text, "frameworks cannot preload the queue; see stream_b2b")
    replay = ad.graph(submit_op, i)
    if replay is None:
        out.na("add", "graph_node", op_text, ad.graph_reason)
    else:
        samples, stop = _sampled(cfg, _each(replay))
        out.record("add", "graph_node", samples, inner=i, warmup=w, clock="device_events", op=op_text, work=work,
                   params=stop)


def worker_main(backend: str, cfg: Config, warm: bool) -> dict:
    out = _Out(backend)
    b = bk.parse(backend)
    if not b.is_native:
        _worker_framework(cfg, warm, out)
    elif b.device == "cpu":
        _worker_native_cpu(cfg, warm, out)
    else:  # cuda, metal: the same probe interface in gapbench._native.<device>
        _worker_native_gpu(cfg, warm, out, b.device)
    return {"phases": out.phases, "records": out.records, "ops": out.ops,
            "verify": {k: list(v) for k, v in out.verify.items()}}


def entry(payload: dict) -> dict:
    """gapbench.worker target: payload {"backend", "config", "warm"}."""
    return worker_main(payload["backend"], Config(**payload["config"]), bool(payload["warm"]))
