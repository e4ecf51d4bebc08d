"""Launch benchmark, the worker side: what one fresh process measures for one backend (run by
gapbench.core.worker, target `gapbench.benchmarks.launch.worker:entry`). Every framework is reached
through its adapter (gapbench.backends.frameworks); native backends through gapbench._native."""
from __future__ import annotations

import time
from dataclasses import asdict
from importlib import resources

import numpy as np

from gapbench.benchmarks.launch.params import LaunchParams, Pairing
from gapbench.core.conditions import Conditions, Process, clock_of
from gapbench.core.names import Backend
from gapbench.core import native
from gapbench.core.measure import Arm, adaptive
from gapbench.core.result import FAILED, NOT_APPLICABLE, OK, Record
from gapbench.benchmarks.launch.config import INPUT_DATA, PROBE, WARM_METRICS, Config, add_work, check_add, random_inputs
from gapbench.benchmarks.launch.pairing import Floor, new_seed, pair_with_floor, plain_samples_per_round

perf_ns = time.perf_counter_ns


class _Out:
    """What a worker sends back: per-process phases and the warm records."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self.phases: dict[str, dict[str, float]] = {}  # variant -> phase -> seconds
        self.records: list[dict] = []
        self.ops: dict[str, str] = {}
        self.verify: dict[str, tuple[bool | None, str]] = {}
        self.device: dict | None = None  # the device as bk.info saw it in this process (frameworks)
        self.unavailable: str | None = None  # bk.info's reason when the framework cannot run here
        self.plain_round: dict | None = None  # one harness round of the plain check (plain-round processes)
        self.seed: int | None = None
        self.cpu = "not bound"

    def phase(self, variant: str, name: str, seconds: float) -> None:
        self.phases.setdefault(variant, {})[name] = float(seconds)

    def record(self, variant: str, metric: str, samples: list[float] | None, *, inner: int, warmup: int,
               clock: str | None, op: str, work: dict | None = None, status: str = OK, reason: str = "",
               params: LaunchParams | None = None) -> None:
        v_ok, v_detail = self.verify.get(variant, (None, ""))
        # Each metric is timed alone in its process (process: standalone); its pairing with the
        # floor, where there is one, carries its own rounds and standalone check.
        held = metric == "device_kernel"  # the queue held behind the release gate
        cond = Conditions(clock=clock_of(clock, gated=held, graph=metric == "graph_node"), process=Process.STANDALONE,
                          data=INPUT_DATA, cpu=self.cpu,
                          seed=self.seed).to_dict() if status == OK else {}
        rec = Record(probe=PROBE, backend=self.backend, variant=variant, metric=metric, status=status, conditions=cond,
                     reason=reason, op=op, clock=clock if status == OK else None,
                     samples_s=list(samples or []), inner=inner if status == OK else 1,
                     warmup=warmup, work=work or {}, params=(params or LaunchParams()).to_dict(), verified=v_ok,
                     verify_detail=v_detail)
        self.records.append(asdict(rec))

    def set_pairing(self, variant: str, metric: str, pairing: Pairing) -> bool:
        """The floor pairing on the OK record (variant, metric) sent so far; False if there is none."""
        for r in self.records:
            if (r["variant"], r["metric"], r["status"]) == (variant, metric, OK):
                r["params"] = LaunchParams.from_dict(r["params"]).replace(paired=pairing).to_dict()
                return True
        return False

    def na(self, variant: str, metric: str, op: str, reason: str) -> None:
        self.record(variant, metric, None, inner=1, warmup=0, clock=None, op=op, status=NOT_APPLICABLE, reason=reason)


def _sampled(cfg: Config, sample) -> tuple[list[float], LaunchParams]:
    """Samples of one metric under the stopping rule (gapbench.core.measure.adaptive): `sample(n)`
    returns n per-sample seconds; sampling stops once the median's 95% interval is within
    cfg.rel_hw, at cfg.samples samples, or at cfg.budget_s of wall time. The stop goes in params."""
    m = adaptive(Arm("metric", sample), rel_hw=cfg.rel_hw, min_samples=min(10, cfg.samples),
                 max_samples=cfg.samples, budget_s=cfg.budget_s, warmup=cfg.warmup)
    return m.samples, LaunchParams(stop=m.to_dict(samples=False))


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
    from gapbench import _native as nat  # noqa: the import itself is the measured phase
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
                   params=stop.replace(synchronous=True))
        for m in ("submit", "stream_b2b", "device_kernel", "graph_node"):
            out.na(variant, m, what, "synchronous CPU call: completion is the return (see roundtrip)")


def _native_gpu_variants(cfg: Config) -> list[tuple[str, str, int]]:
    """(row variant, gapbench._native.LaunchKernel member, elements)."""
    return [("null", "null", 1), ("add1", "add1", cfg.n)]


def _worker_native_gpu(cfg: Config, warm: bool, out: _Out, plain_round: bool = False) -> None:
    kind = out.backend.device  # the part of gapbench._native: cuda or metal
    cuda = out.backend is Backend.native_cuda
    t0 = perf_ns()
    from gapbench import _native as nat
    part = getattr(nat, kind)
    import_s = (perf_ns() - t0) * 1e-9
    st = dict(part.status(0) if cuda else part.status())
    if not st.get("available"):
        raise RuntimeError(st.get("reason", f"{kind} unavailable"))
    source = None
    if not cuda:
        source = resources.files("gapbench").joinpath("metal/launch.metal").read_text()
    ctx_s = part.context_create_seconds() if cuda else None
    probes = {}
    for variant, kernel, n in _native_gpu_variants(cfg):
        out.phase(variant, "import", import_s)
        kernel = native.launch_kernel(kernel)
        if cuda:
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
    if plain_round:
        out.plain_round = _harness_round(cfg, probes["null"][0], out.verify["null"])
    if not warm:
        return
    dev_clock = "device_events" if cuda else "gpu_timestamps"
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
                   params=stop.replace(method="launches held behind the release gate until all are queued" if cuda
                                       else "inner dispatches in one compute encoder",
                                       invalid_samples=p.invalid_samples if cuda else None))
        if cuda:
            samples, stop = _sampled(cfg, lambda n: p.graph_replay(n, i, 0))
            out.record(variant, "graph_node", samples, inner=i, warmup=w, clock=dev_clock, op=op, work=work,
                       params=stop)
        else:
            out.na(variant, "graph_node", op, "not implemented for Metal (indirect command buffers)")


def _harness_round(cfg: Config, p, verified: tuple) -> dict:
    """One harness round of the plain check (launch_pairing.plain_check): the null kernel's
    {metric: per-sample seconds}, with the plain loop's samples, inner and warm-up. This process
    is fresh, and the plain loop it is paired with is another fresh process."""
    if verified[0] is False:
        raise RuntimeError("the harness's null kernel failed its check; not paired: " + verified[1])
    per, i, w = plain_samples_per_round(cfg), cfg.inner, cfg.warmup
    return {"submit": p.submit(per, i, w), "roundtrip": p.roundtrip(per, w), "stream_b2b": p.stream_b2b(per, i, w),
            "device_kernel": p.device_kernel(per, i, w), "graph_node": p.graph_replay(per, i, w)}


class _FrameworkAdd:
    """The framework's smallest real op, out = a + b in fp32, on arrays made from numpy."""

    def __init__(self, ad, a_np: np.ndarray, b_np: np.ndarray, delay_s: float = 0.0):
        self.ad = ad
        self.a, self.b = ad.from_numpy(a_np), ad.from_numpy(b_np)
        self.c = ad.empty_like(self.a)
        self.text = ad.describe("add", n=a_np.size)
        self.delay_s = delay_s  # test only (--inject-delay-us): a host busy-wait added to every op
        if delay_s:
            self.text += f" + {delay_s * 1e6:g} us injected delay (test only)"

    def submit(self) -> None:
        if self.delay_s:
            end = time.perf_counter() + self.delay_s
            while time.perf_counter() < end:
                pass
        self.c = self.ad.add_into(self.a, self.b, self.c)

    def run_sync(self) -> None:
        self.submit()
        self.ad.sync()

    def poison(self) -> None:
        self.c = self.ad.poison(self.c)

    def result(self) -> np.ndarray:
        return self.ad.to_numpy(self.c)


def _unavailable_here(out: _Out) -> bool:
    """After the framework's import or setup raised: if bk.info says why it cannot run here, that
    is the answer (an unavailable row in the parent), not a crash; False if bk.info sees it fine."""
    from gapbench.backends import registry

    info = registry.info(out.backend, refresh=True)
    if info.available:
        return False
    out.unavailable, out.device = info.reason, dict(info.device)
    return True


def _worker_framework(cfg: Config, warm: bool, out: _Out) -> None:
    # the adapters' registry is imported here, before the framework's import is timed, so native
    # processes (native-cuda's seven a run) do not load it
    from gapbench.backends import registry

    backend = out.backend
    t0 = perf_ns()
    try:
        __import__(registry.module(backend).MODULE)
    except Exception:  # not installed or broken: the reason comes from registry.info
        if _unavailable_here(out):
            return
        raise
    out.phase("add", "import", (perf_ns() - t0) * 1e-9)
    try:
        ad = registry.make_adapter(backend)
        t0 = perf_ns()
        ad.setup_context()
        ctx_s = (perf_ns() - t0) * 1e-9
    except Exception:
        if _unavailable_here(out):
            out.phases.clear()
            return
        raise
    # Availability and the device, asked only now: the import and context above stay cold.
    info = registry.info(backend)
    out.device = dict(info.device)
    if not info.available:
        out.unavailable = info.reason
        out.phases.clear()
        return
    out.phase("add", "context", ctx_s)
    a_np, b_np = random_inputs(cfg)
    op = _FrameworkAdd(ad, a_np, b_np, cfg.inject_delay_us.get(backend.value, 0.0) * 1e-6)
    out.ops["add"] = op.text
    t0 = perf_ns(); op.run_sync(); out.phase("add", "cold", (perf_ns() - t0) * 1e-9)
    t0 = perf_ns(); op.run_sync(); out.phase("add", "first_warm", (perf_ns() - t0) * 1e-9)
    # The same op on fresh random inputs (and a poisoned output) against float64.
    va, vb = random_inputs(Config(n=max(cfg.n, 1000)))
    check = _FrameworkAdd(ad, va, vb)
    check.poison()
    check.run_sync()
    out.verify["add"] = check_add(check.result(), va, vb)
    if not warm:
        return
    if out.verify["add"][0] is False:
        for m in WARM_METRICS:
            out.record("add", m, None, inner=1, warmup=0, clock=None, op=op.text, status=FAILED,
                       reason="verification failed, not timed: " + out.verify["add"][1])
        return
    arms = _framework_metrics(cfg, ad, op, out, backend.synchronous)
    _pair_with_floor(cfg, info.floor, arms, out)


def _framework_metrics(cfg: Config, ad, op: "_FrameworkAdd", out: _Out, synchronous: bool) -> dict:
    """The framework's own warm metrics; returns {metric: (sample(n) in seconds per run, ops per
    run)} for the metrics that are paired with the floor afterwards."""
    submit_op, op_text, work = op.submit, op.text, add_work(cfg.n)
    i, w = cfg.inner, cfg.warmup
    if synchronous:
        out.na("add", "submit", op_text, "synchronous CPU op: completion is the return (see roundtrip)")
        loop = _timed_loop(submit_op, i)
        samples, stop = _sampled(cfg, _each(loop))
        out.record("add", "roundtrip", samples, inner=i, warmup=w, clock="host_wall", op=op_text, work=work,
                   params=stop.replace(synchronous=True))
        for m in ("stream_b2b", "device_kernel", "graph_node"):
            out.na("add", m, op_text, "synchronous CPU op: no device queue")
        return {"roundtrip": (_each(loop), i)}
    loop = _timed_loop(submit_op, i)

    def submitted():  # host cost of issuing i ops, the queue drained before and after
        ad.sync()
        dt = loop()
        ad.sync()
        return dt

    samples, stop = _sampled(cfg, _each(submitted))
    out.record("add", "submit", samples, inner=i, warmup=w, clock="host_wall", op=op_text, work=work, params=stop)
    one_sync = _timed_loop(op.run_sync, 1)
    samples, stop = _sampled(cfg, _each(one_sync))
    out.record("add", "roundtrip", samples, inner=1, warmup=w, clock="host_wall", op=op_text, work=work, params=stop)
    issued = _each(lambda: ad.time_device(submit_op, i, held=False))
    samples, stop = _sampled(cfg, issued)
    out.record("add", "stream_b2b", samples, inner=i, warmup=w, clock=ad.device_clock, op=op_text, work=work,
               params=stop.replace(method="events around the ops as the host issues them"))
    held = None
    if ad.can_hold:  # the queue preloaded behind the release gate, as the native device_kernel
        held = _each(lambda: ad.time_device(submit_op, i, held=True))
        samples, stop = _sampled(cfg, held)
        out.record("add", "device_kernel", samples, inner=i, warmup=w, clock=ad.device_clock, op=op_text, work=work,
                   params=stop.replace(method="ops held behind the release gate until all are queued",
                                       invalid_samples=getattr(getattr(ad, "hold", None), "invalid_samples", 0)))
    else:
        out.na("add", "device_kernel", op_text, "no release gate for this framework's queue; see stream_b2b")
    replay = ad.graph(submit_op, i)
    if replay is None:
        out.na("add", "graph_node", op_text, ad.graph_reason)
    else:
        samples, stop = _sampled(cfg, _each(replay))
        out.record("add", "graph_node", samples, inner=i, warmup=w, clock="device_events", op=op_text, work=work,
                   params=stop)
    arms = {"roundtrip": (_each(one_sync), 1), "stream_b2b": (issued, i)}
    if held is not None:
        arms["device_kernel"] = (held, i)
    return arms


def _pair_with_floor(cfg: Config, floor_backend: Backend, arms: dict, out: _Out) -> None:
    """xfloor, paired: the native floor set up in this process, timed in rounds interleaved with
    the framework (launch_pairing). A metric the floor lacks (the CPU floor has no queue) gets no
    pairing; a floor that cannot run here leaves the reason on each paired metric's record."""
    floor = Floor(floor_backend, cfg)
    for salt, (metric, (fw_sample, ops)) in enumerate(arms.items()):
        if floor.reason:
            doc = Pairing(vs=floor.vs, reason=floor.reason)
        elif metric not in floor.sample:
            continue
        else:
            floor_sample, floor_ops = floor.sample[metric]
            doc = pair_with_floor(fw_sample, floor_sample, floor.vs, cfg, new_seed(cfg, salt),
                                  ops_per_run={"framework": ops, "floor": floor_ops})
        out.set_pairing("add", metric, doc)


def worker_main(backend: Backend, cfg: Config, warm: bool, plain_round: bool = False) -> dict:
    """What one fresh process measures. `plain_round` (native-cuda): also one harness round of the
    plain check, returned as doc["plain_round"]. A framework that cannot run here answers
    {"unavailable": reason, "device": ...} instead of measurements."""
    out = _Out(backend)
    out.seed = cfg.seed
    if cfg.cpu is not None:
        out.cpu = f"bound to CPU {cfg.cpu}"
    if not backend.is_native:
        _worker_framework(cfg, warm, out)
    elif backend is Backend.native_cpu:
        _worker_native_cpu(cfg, warm, out)
    else:  # cuda, metal: the same probe interface in gapbench._native.<device>
        _worker_native_gpu(cfg, warm, out, plain_round and backend is Backend.native_cuda)
    doc = {"phases": out.phases, "records": out.records, "ops": out.ops,
           "verify": {k: list(v) for k, v in out.verify.items()}}
    if out.device is not None:
        doc["device"] = out.device
    if out.plain_round is not None:
        doc["plain_round"] = out.plain_round
    if out.unavailable is not None:
        doc = {"unavailable": out.unavailable, "device": out.device or {}}
    return doc


def entry(payload: dict) -> dict:
    """gapbench.core.worker target: payload {"backend", "config", "warm"} and, for a round of the plain
    check, "plain_round": true."""
    return worker_main(Backend(payload["backend"]), Config(**payload["config"]), bool(payload["warm"]),
                       bool(payload.get("plain_round", False)))
