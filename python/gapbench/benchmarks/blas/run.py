"""BLAS throughput (paper section 4.4, Figures 5-7): every declared op (gapbench.ops: copy, GEMV,
both VJP cotangents, batched GEMM, ...) in fp32/fp16/bf16, hand-written kernels next to the vendor
library (cuBLAS, loaded at run time) and every framework, with the ceilings measured on the same
machine: peak bandwidth from the copy probe, peak compute from the best GEMM at the largest size.

Every result is checked against a float64 reference (on the inputs as rounded to the dtype, the
output poisoned first for native kernels) before it is timed; a failed check is a `failed` row.
Native timing: CUDA events around each run, inputs rotated through enough buffer sets to defeat
L2 (hot), and with --cold also with L2 scrubbed before each run: `read` (default) reads 2x L2 so
the op starts with none of its data in L2 and no dirty lines, `write` memsets 2x L2 (nvbench's
flush) so the op also writes back the dirty lines the scrub leaves. Frameworks: device events
(torch, cupy) or host clock with a sync (mlx)."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np

from gapbench.backends import registry
from gapbench.backends.base import Adapter, BackendInfo
from gapbench.backends import memfit
from gapbench.benchmarks.blas import arms as rows
from gapbench.benchmarks.blas import framework_arms
from gapbench.benchmarks.blas.config import PROBE, Config, is_short
from gapbench.benchmarks.blas.measure import PARITY_RUNS, measure_case
from gapbench.benchmarks.blas.params import BlasParams
from gapbench.core.dtypes import Expected, round_to
from gapbench.core.names import Backend, DeviceClass, DType
from gapbench.core.result import ERROR, NOT_APPLICABLE, UNAVAILABLE, Record
from gapbench.ops.spec import OpSpec, Shape, Source, shape_text


def record(spec: OpSpec, dtype: DType, shape: Shape, backend: Backend, variant: str, params: BlasParams | None = None,
           **kw) -> Record:
    """A record of the case (spec, dtype, shape): the case's own params filled in."""
    p = (params or BlasParams()).replace(op=spec.name, dtype=dtype, shape=shape, shape_text=shape_text(shape))
    return Record(probe=PROBE, backend=backend.value, variant=variant, metric=kw.pop("metric", "time"),
                  params=p.to_dict(), work=spec.work(shape, dtype), **kw)


#: Phases part: this process's time on the short cases, which --processes runs first
SHORT_HERE = "short cases, this process"


class Phases(dict):
    """Wall seconds of a run by phase (name -> seconds), shown at the end of a run and kept in its
    file: where a long run's time went (host preparation, verification, timing, checks). `parts`
    splits a phase further (name -> seconds, inside the phases: not added to them; a part named
    with BESIDE ran on a host thread beside the phases, as iterate's overlap does)."""

    def __init__(self):
        super().__init__()
        self.parts: dict[str, float] = {}

    def __call__(self, name: str):
        return _timed(self, name)

    def part(self, name: str):
        return _timed(self.parts, name)

    def wall(self, total: float) -> dict:
        """The run file's wall_s: each phase, the rest of the run, the total and the parts."""
        out = {k: round(v, 2) for k, v in self.items() if v >= 0.005}
        out["setup and other"] = round(total - sum(self.values()), 2)
        out["total"] = round(total, 2)
        if self.parts:
            out["parts"] = {k: round(v, 2) for k, v in self.parts.items() if v >= 0.005}
        return out


@contextmanager
def _timed(store: dict, name: str):
    """Adds the wall time of what it holds to store[name]."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        store[name] = store.get(name, 0.0) + time.perf_counter() - t0


#: host bytes per element read or written: the fp32 inputs, their rounded copies, the float64
#: copies and reference, the output read back for the check and its kept per-output bound
HOST_BYTES_PER_ELEMENT = 40


def host_bytes(spec: OpSpec, shape: Shape) -> int:
    """Host bytes one case holds: its inputs, their copies and the float64 reference."""
    r, w = spec.elements(shape)
    return (r + w) * HOST_BYTES_PER_ELEMENT


def memory_check(spec: OpSpec, shape: Shape, dtype: DType, backends: list[Backend]) -> dict[Backend, str]:
    """Backends this case does not fit, each with the sentence saying so, asked before anything
    is allocated (gapbench.backends.memfit): the host must hold the inputs and the float64 reference,
    each device one set of inputs and output (a CPU backend both)."""
    r, w = spec.elements(shape)
    host = host_bytes(spec, shape)
    device = (r + w) * dtype.itemsize
    why = memfit.shortfall(host, memfit.host_available(), "host memory for the inputs and the float64 reference")
    if why:
        return {b: why for b in backends}
    out = {}
    for b in backends:
        on_host = b.device_class is DeviceClass.cpu
        why = memfit.shortfall(device + (host if on_host else 0), memfit.device_available(b),
                        "host memory" if on_host else f"{b} device memory for one set of inputs and output")
        if why:
            out[b] = why
    return out


class Session:
    """What a run sets up once: each backend's availability, the frameworks' adapters, cuBLAS."""

    def __init__(self, backends: list[Backend], parity_pads: bool = False):
        """`parity_pads` (--parity balanced): the CUDA frameworks' held samples padded to both launch
        parities of their stream (the native cases' are, as native_cuda makes their arms)."""
        self.infos: dict[Backend, BackendInfo] = {b: registry.info(b) for b in backends}
        self.live = [b for b in backends if self.infos[b].available and b is not Backend.native_cpu]
        self.adapters: dict[Backend, Adapter] = {}
        self.cublas_path, self.cublas_why = "", "cuBLAS not searched"
        self.records: list[Record] = []  # what the setup found, as backend-wide rows
        for b, i in self.infos.items():
            if not i.available:
                self.records.append(Record(probe=PROBE, backend=b.value, metric="all", status=UNAVAILABLE,
                                           reason=i.reason, device=i.device))
            elif b is Backend.native_cpu:
                self.records.append(Record(probe=PROBE, backend=b.value, metric="all", status=NOT_APPLICABLE,
                                           device=i.device, reason="no hand-written CPU BLAS kernels: CPU rows "
                                                                   "come from the frameworks"))
        if Backend.native_cuda in self.live:
            from gapbench.backends.native import cublas_candidates
            from gapbench.core.native import load

            cuda = load().cuda
            self.cublas_path = cuda.cublas_load(cublas_candidates())
            self.cublas_why = "" if self.cublas_path else cuda.cublas_error()
        for b in self.live:
            if b.is_native:
                continue
            try:
                ad = registry.make_adapter(b)
                ad.setup_context()
                if parity_pads and b.device_class is DeviceClass.cuda:
                    ad.set_parity_pads(True)
                self.adapters[b] = ad
            except Exception as e:
                self.records.append(Record(probe=PROBE, backend=b.value, metric="all", status=ERROR,
                                           reason=f"setup failed: {e}", device=self.infos[b].device))
        framework_arms.fit_cpu_threads(self.adapters)
        cuda = registry.info(Backend.native_cuda)  # the L2 every CUDA arm's input sets rotate past
        self.l2_bytes = int(cuda.device.get("l2_bytes") or 0) or None if cuda.available else None
        # The SM clock, read after every paired round on CUDA, and the cost of an empty event pair
        # (through torch, where torch-cuda is in the run: no framework is imported for it alone).
        self.watch, self.event_pair_s = None, None
        if any(b.device_class is DeviceClass.cuda for b in self.live):
            from gapbench.backends.monitor import clock_watch, event_pair_seconds

            self.watch, _ = clock_watch(0)
            if Backend.torch_cuda in self.adapters:
                self.event_pair_s = event_pair_seconds(self.adapters[Backend.torch_cuda])


class _Prepare:
    """The host side of each case, in the run's order: a shape's inputs drawn once (and their
    magnitude), rounded per dtype, and the float64 reference. Called in order, from one thread at a
    time; `parts` receives the wall time of each step."""

    def __init__(self, cfg: Config, seed: int):
        self.cfg, self.seed, self.key, self.inputs, self.scale = cfg, seed, None, None, None

    def __call__(self, spec: OpSpec, shape: Shape, dtype: DType, part) -> tuple[list[np.ndarray], Expected]:
        key = (spec.name, shape_text(shape))
        if key != self.key:
            self.key, self.inputs, self.scale = key, None, None  # the last shape's inputs go first
            with part("inputs drawn"):
                self.inputs = spec.inputs(shape, Source(self.cfg.data, np.random.default_rng(self.seed)))
            with part("magnitudes (one per shape)"):
                self.scale = spec.shared_scale(self.inputs, shape, self.cfg.dtypes)
        with part("inputs rounded"):
            rounded = [round_to(a, dtype) for a in self.inputs]
        with part("float64 references"):
            expected = spec.expected(rounded, shape, scale=self.scale.for_dtype(dtype) if self.scale else None)
        return rounded, expected


#: the parts of the next case's preparation done beside this case's device work say so
BESIDE = " (next case, beside device work)"


def overlaps_host(s: "Session") -> bool:
    """Whether the next case's host preparation may run beside this case's device work: only where
    every timed row is device-timed behind the release gate (native CUDA, and CUDA frameworks that
    hold their stream), so host threads busy beside the timing cannot reach a timed region. Rows
    timed by the host clock (CPU frameworks, MLX) would share their cores with it: not then."""
    return bool(s.live) and all(
        b is Backend.native_cuda or (b in s.adapters and b.device_class is DeviceClass.cuda and s.adapters[b].can_hold)
        for b in s.live)


def _fits_twice(spec: OpSpec, shape: Shape) -> bool:
    """Host memory for the next case's inputs and reference while this case still holds its own."""
    return not memfit.shortfall(2 * host_bytes(spec, shape), memfit.host_available(), "host memory")


def iterate(cfg: Config, backends: list[Backend], on_case: Callable[[str], None] | None = None,
            phases: Phases | None = None, overlap: bool | None = None) -> Iterator[Record]:
    """Every record of the run, case by case (each op, shape and dtype of `cfg`). `overlap` (None:
    where `overlaps_host` says it may): the next case's inputs and float64 reference are made on a
    host thread while this case's paired rounds run on the device (after its host checks, which
    would share the cores); the phase "inputs and float64 references" is then the time the run
    waited for them, and their parts carry BESIDE."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from gapbench.core.hostpar import background

    phases = Phases() if phases is None else phases
    seed = cfg.run_seed()
    s = Session(backends, parity_pads=cfg.balanced)
    yield from s.records
    overlap = (cfg.overlap and overlaps_host(s)) if overlap is None else overlap
    todo = cfg.cases()
    prepare = _Prepare(cfg, seed)

    def beside(spec, shape, dtype):
        with background():
            return prepare(spec, shape, dtype, lambda name: phases.part(name + BESIDE))

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gapbench-prepare") if overlap else None
    ahead: Future | None = None
    # with more processes the short cases come first: this process's time on them, for the run file
    t_short = time.perf_counter() if cfg.processes > 1 and not cfg.short_only else None
    try:
        for i, (spec, shape, dtype) in enumerate(todo):
            if t_short is not None and not is_short(spec, shape):
                phases.parts[SHORT_HERE] = time.perf_counter() - t_short
                t_short = None
            too_big = memory_check(spec, shape, dtype, s.live)
            for b, why in too_big.items():
                if on_case:
                    on_case(f"{spec.name} {dtype} {shape_text(shape)} {b}")
                yield record(spec, dtype, shape, b, "-", status=ERROR, reason=why, device=s.infos[b].device)
            if len(too_big) == len(s.live):
                if ahead is not None:  # made for nothing, but `prepare` is used by one thread at a time
                    ahead.result()
                    ahead = None
                continue
            if on_case:
                on_case(f"{spec.name} {dtype} {shape_text(shape)}")
            with phases("inputs and float64 references"):
                if ahead is not None:
                    rounded, expected = ahead.result()
                else:
                    rounded, expected = prepare(spec, shape, dtype, phases.part)
                ahead = None
            nxt = todo[i + 1] if pool is not None and i + 1 < len(todo) and _fits_twice(*todo[i + 1][:2]) else None

            def start_next():  # once this case's host checks are done: beside its paired rounds
                nonlocal ahead
                ahead = pool.submit(beside, *nxt)

            c = rows.Case(spec, dtype, shape, rounded, expected,
                          lambda b, v, p=None, _s=spec, _d=dtype, _sh=shape, **kw: record(_s, _d, _sh, b, v, p, **kw),
                          data=cfg.data, seed=seed, part=phases.part)
            yield from run_case(c, cfg, s, [b for b in s.live if b not in too_big], phases,
                                before_timing=start_next if nxt is not None else None)
        if t_short is not None:
            phases.parts[SHORT_HERE] = time.perf_counter() - t_short
    finally:
        if pool is not None:  # a case not yet started is cancelled, one under way finished
            pool.shutdown(wait=True, cancel_futures=True)


def run_case(c: rows.Case, cfg: Config, s: Session, live: list[Backend], phases: Phases | None = None,
             before_timing: Callable[[], None] | None = None) -> list[Record]:
    """Every live backend's rows of one case: verified arms first, then one paired timing per device
    class (measure.py), so every ratio comes from interleaved rounds. `before_timing()` is called
    between the two (iterate starts the next case's host work there)."""
    phases = Phases() if phases is None else phases
    recs, arms, cases = [], [], []
    with phases("inputs to devices, verified before timing"):
        for b in live:
            r, a = _backend_rows(b, c, cfg, s, cases)
            recs += r
            arms += a
    if cfg.launch_floor and is_short(c.spec, c.shape):
        framework_arms.framework_floors(arms, s.adapters)  # the native rows' floor is made with their arms
    if before_timing is not None:
        before_timing()
    with phases("paired timing, last runs verified"):
        recs += measure_case(c.record, arms, cfg.modes(), budget_s=cfg.budget_s, rel_hw=cfg.rel_hw,
                             max_rounds=cfg.samples, min_rounds=cfg.min_rounds, warmup=cfg.warmup, seed=cfg.seed or 0,
                             watch=s.watch, event_pair_s=s.event_pair_s, part=phases.part,
                             k_multiple=PARITY_RUNS if cfg.balanced else 1)
    del cases  # free the device buffers before the next case
    return recs


def _backend_rows(b: Backend, c: rows.Case, cfg: Config, s: Session, cases: list) -> tuple[list[Record], list]:
    """One backend's rows of a case: records for what cannot be timed, verified arms for the rest.
    A native case it makes is appended to `cases` (kept alive until the case is timed)."""
    from gapbench.core.native import load, staging

    try:
        if b is Backend.native_cuda:
            with c.part("native: inputs to the device, input sets made"):
                case = rows.native_case(load().cuda, c.spec, c.dtype, c.shape, c.rounded, 0, stage=staging())
            cases.append(case)
            c.readback = staging()  # outputs read back through the same page-locked buffer
            return rows.native_cuda(c, cfg, s.infos[b], case, s.cublas_path, s.cublas_why)
        if b is Backend.native_metal:
            from gapbench.core.metal_cpu import metal_dir, metal_source

            case = rows.native_case(load().metal, c.spec, c.dtype, c.shape, c.rounded,
                                    metal_source(metal_dir() / f"{c.spec.name}.metal"))
            cases.append(case)
            return rows.native_metal(c, cfg, s.infos[b], case)
        if b in s.adapters:
            on_cuda = b.device_class is DeviceClass.cuda
            return framework_arms.framework(c, s.infos[b], s.adapters[b], s.l2_bytes if on_cuda else None,
                                            memfit.device_available(b)[0] if on_cuda else None,
                                            cfg.inject_delay_us.get(b), graph=cfg.graph,
                                            streams=cfg.framework_streams() if on_cuda else 1)
    except (RuntimeError, ValueError, MemoryError) as e:
        return [c.record(b, "-", status=ERROR, reason=str(e), device=s.infos[b].device)], []
    return [], []
