"""The framework rows of one BLAS case (torch, CuPy, MLX, a user's ops), verified before they are
timed: each of the op's ways of running on a framework (its FrameworkImpls), run once on a poisoned
output and checked against float64, then an arm of the case's paired timing under the native rows'
conditions (the same host data, input sets rotated past the L2, held behind the release gate where
the framework's queue can be held), able to run once more after timing so its last timed output is
checked too; optionally captured into a CUDA graph beside it (`<row>@graph`). Also the frameworks'
launch-floor arms and their CPU threads. The native rows and the case itself: arms.py."""
from __future__ import annotations

from gapbench.backends.base import Adapter, BackendInfo
from gapbench.benchmarks.blas.arms import Case, rotation_plan
from gapbench.benchmarks.blas.measure import CaseArm, FloorArm
from gapbench.benchmarks.blas.params import BlasParams, CpuThreads
from gapbench.benchmarks.blas.streams import StreamRotation
from gapbench.core.conditions import Cache, Clock, Conditions
from gapbench.core.names import Backend, CacheMode, DeviceClass, DType, Precision
from gapbench.core.result import ERROR, FAILED, UNAVAILABLE, Record
from gapbench.ops.spec import FrameworkImpl


def framework_floors(arms: list[CaseArm], adapters: dict[Backend, Adapter]) -> None:
    """bench.blas --launch-floor for the CUDA frameworks' rows of a short case that time on one
    stream: one empty-kernel arm per stream they share (their adapters' stream_handle: torch's and
    CuPy's default streams are the one legacy stream), made by the first of them that has an empty
    kernel; each of those rows gets it as its floor."""
    groups: dict[int, list[CaseArm]] = {}
    for a in arms:
        ad = adapters.get(a.backend)
        if a.device_class is not DeviceClass.cuda or a.backend.is_native or a.on_round is not None or ad is None:
            continue
        h = ad.stream_handle()
        if h is not None:
            groups.setdefault(h, []).append(a)
    for h, group in groups.items():
        maker = next(((a.backend, adapters[a.backend], k) for a in group
                      if (k := adapters[a.backend].empty_kernel()) is not None), None)
        if maker is None:
            continue
        b, ad, empty = maker
        names = ", ".join(dict.fromkeys(a.backend.value for a in group))
        floor = FloorArm(f"launch-floor/{b.value}", lambda n, ad=ad, empty=empty: ad.time_device_each(empty, n),
                         f"an empty kernel ({b.value}) on the stream {names} time on (handle {h:#x})")
        for a in group:
            a.floor = floor


def framework(c: Case, info: BackendInfo, ad: Adapter, l2_bytes: int | None = None,
              free_bytes: int | None = None, inject_us: float | None = None,
              graph: bool = False, streams: int = 1) -> tuple[list[Record], list[CaseArm]]:
    """Each of the op's ways of running on this framework (its FrameworkImpls), verified, as arms.
    On a GPU they time under the native rows' conditions: the same host data, in as many input sets
    (outputs kept until their set comes round again, so they rotate too) as the native case rotates
    past the L2 (`l2_bytes`), each run held behind the release gate where the framework's queue can
    be held. `inject_us` (TEST ONLY): a device-side delay queued after every timed op. `graph`:
    each row also captured into a CUDA graph and timed as `<row>@graph` beside it. `streams`: the
    rows time on that many of the adapter's streams, one a paired round in turn, where it has them
    (Adapter.timing_streams; else on its current stream), each set run once on each first."""
    recs, arms = [], []
    rotate = StreamRotation(ad, streams)
    ok_dtype, why = ad.supports(c.dtype)
    for impl in c.spec.impls(ad.family):
        if impl.devices is not None and info.device_class not in impl.devices:
            recs.append(c.record(info.backend, impl.row, BlasParams(), status=UNAVAILABLE, op=impl.text,
                                 device=info.device, reason=f"runs on {', '.join(str(d) for d in impl.devices)} "
                                                            f"only, not {info.device_class}"))
            continue
        if not ok_dtype:
            recs.append(c.record(info.backend, impl.row, BlasParams(), status=UNAVAILABLE, reason=why, op=impl.text,
                                 device=info.device))
            continue
        r, a = _framework_impl(c, info, ad, impl, l2_bytes, free_bytes, inject_us, graph, rotate)
        recs += r
        arms += a
    return recs, arms


def _framework_sets(c: Case, info: BackendInfo, l2_bytes: int | None, free_bytes: int | None) -> tuple[int, str]:
    """(input sets, cache state) for a framework's hot mode: the native case's count where one ran,
    else the same rule; one set on the host (CPU caches are not rotated here)."""
    if info.device_class is DeviceClass.cpu:
        return 1, Cache.HOST
    if not l2_bytes:
        return 1, Cache.L2_RESIDENT
    n, resident = rotation_plan(c.set_bytes, l2_bytes, free_bytes)
    if c.rotations is not None:
        n = c.rotations
        resident = n * c.set_bytes < 2 * l2_bytes
    return n, Cache.L2_RESIDENT if resident else Cache.ROTATED


def _framework_impl(c: Case, info: BackendInfo, ad: Adapter, impl: FrameworkImpl, l2_bytes: int | None,
                    free_bytes: int | None, inject_us: float | None = None,
                    graph: bool = False, rotate: StreamRotation | None = None) -> tuple[list[Record], list[CaseArm]]:
    op_text = impl.text
    try:
        delay = None
        if inject_us:
            from gapbench.backends.monitor import NVML

            delay = ad.device_delay(inject_us, NVML(0).max_sm_clock_mhz())
            if delay is None:
                raise RuntimeError(f"--inject-delay-us: {info.backend.value} has no device-side delay kernel here")
            op_text = f"{impl.text} + {delay[1]} injected delay (test only)"
        with c.part("frameworks: inputs to the device, first runs read back"):
            arrays = [ad.array(a, c.dtype) for a in c.rounded]
            op = impl.build(ad, arrays)
            # The run that is checked writes over a poisoned output: an op that writes into a buffer
            # it keeps (a user's kernel with its own output) is seen to write every element; an op
            # that allocates its output gets memory the poisoned one may have freed.
            first = op()
            if first is not None and not isinstance(first, (tuple, list)) and all(first is not a for a in arrays):
                ad.poison(first)
            out = ad.host_view(op())
        precision: Precision | DType = c.dtype
        ok, detail = c.check(out, c.dtype)
        variant, params = impl.row, BlasParams()
        if not ok and c.dtype is DType.fp32 and c.spec.tf32_fallback:
            # Some frameworks compute fp32 matmul at TF32 precision by default. Say so and time
            # it as what it is, rather than as fp32.
            ok32, detail32 = c.check(out, Precision.tf32)
            if ok32:
                variant, precision = f"{impl.row}@tf32", Precision.tf32
                params = BlasParams(precision=Precision.tf32)
                ok, detail = True, f"fails the fp32 bound ({detail}); within the TF32 bound: {detail32}"
        if not ok:
            return [c.record(info.backend, impl.row, BlasParams(), status=FAILED, op=op_text, verified=False,
                             verify_detail=detail, reason="verification failed, not timed: " + detail,
                             device=info.device)], []
        n_sets, cache = _framework_sets(c, info, l2_bytes, free_bytes)
        # Set 0 is the verified one; the others hold copies of it (the same host data), made on the
        # device where the framework can.
        with c.part("frameworks: input sets made, each run once"):
            ops_ = [op] + [impl.build(ad, [ad.copy_array(x, a, c.dtype) for x, a in zip(arrays, c.rounded)])
                           for _ in range(n_sets - 1)]
            # every set runs once before timing: an implementation that compiles or loads something
            # on its first call (a JIT kernel per set) does it here, not inside a held, timed region
            warm = ad.evaluated(lambda: [f() for f in ops_[1:]])
            warm()
            ad.sync()
        arms = [_rotating_arm(c, info, ad, variant, op_text, ops_, precision, params, detail, cache, l2_bytes,
                              delay, vendor=impl.baseline, rotate=rotate)]
        recs: list[Record] = []
        if graph:  # the same op captured into a CUDA graph per input set, replayed as one launch
            try:
                r, a = _graph_arm(c, info, ad, variant, op_text, ops_, precision, params, cache, l2_bytes, rotate)
            except Exception as e:  # a capture that fails costs its graph row, never the eager one
                r, a = [c.record(info.backend, f"{variant}@graph", BlasParams(graph=True), status=ERROR,
                                 reason=f"graph capture failed: {type(e).__name__}: {e}"[:500], op=op_text,
                                 device=info.device)], []
            recs += r
            arms += a
        return recs, arms
    except Exception as e:  # one failing framework case must not lose the others
        msg = f"{type(e).__name__}: {e}"
        if "out of memory" in msg.lower() or isinstance(e, MemoryError):
            msg = "out of memory: " + msg
        return [c.record(info.backend, impl.row, BlasParams(), status=ERROR, reason=msg[:500], op=op_text,
                         device=info.device)], []


def _rotating_arm(c: Case, info: BackendInfo, ad: Adapter, variant: str, op_text: str, ops_: list, precision,
                  params: BlasParams, detail: str, cache: str, l2_bytes: int | None, delay=None,
                  vendor: bool = False, rotate: StreamRotation | None = None) -> CaseArm:
    """The arm of one verified framework row: its input sets (`ops_`, one callable per set) run in
    rotation, each output kept until its set comes round, held behind the gate where the stream
    can be, and its last timed output checked again."""
    n_sets = len(ops_)
    outs: list = [None] * n_sets
    turn = [0]

    def run_next():
        i = turn[0] % n_sets
        turn[0] += 1
        outs[i] = ops_[i]()  # kept until its set comes round: outputs rotate with the inputs
        if delay is not None:
            delay[0]()
        return outs[i]

    run = ad.evaluated(run_next)
    streams = rotate.n if rotate is not None else 1
    if streams > 1:
        rotate.warm(run)

    def sampler(scrub: CacheMode | None):
        return lambda n: ad.time_device_each(run, n, scrub=scrub)

    samplers = {CacheMode.hot: sampler(None)}
    # The cold modes too where the framework's stream can take the native gate's L2 scrub (the
    # scrub the native rows run), so its cold rows pair with theirs under the same L2 state.
    scrubbed = info.device_class is DeviceClass.cuda and ad.can_scrub
    if scrubbed:
        samplers.update({m: sampler(m) for m in (CacheMode.cold_clean, CacheMode.cold_dirty)})

    def verify_last(mode: CacheMode):
        last = outs[(turn[0] - 1) % n_sets]
        with c.part("frameworks: last outputs read back"):
            values = ad.host_view(last)
        ok_l, d = c.check(values, precision)
        return ok_l, "(the last timed run's own output) " + d

    hold = getattr(ad, "hold", None)
    cpu = getattr(ad, "cpu_threads", None)
    params = params.replace(cache=f"hot ({n_sets} input set(s) rotated)" if n_sets > 1 else "hot (one input set)",
                            cpu_threads=cpu, hold=hold.method if hold is not None else None)
    clock = Clock.GATED if ad.can_hold else Clock.HOST
    cond = c.conditions(cache, clock, ad.parity_pads, rotations=n_sets, set_bytes=c.set_bytes, l2_bytes=l2_bytes,
                        streams=streams if streams > 1 else None)
    cold = {CacheMode.cold_clean: Cache.FLUSHED_CLEAN, CacheMode.cold_dirty: Cache.FLUSHED_DIRTY}

    def conditions(mode: CacheMode) -> Conditions:
        return cond if mode is CacheMode.hot else cond.replace(cache=cold[mode])

    return CaseArm(info.backend, variant, info.device_class, ad.device_clock, samplers, verify_last, detail,
                   op=op_text, params=params, device=info.device, conditions=conditions, vendor=vendor,
                   invalid=lambda mode: getattr(getattr(ad, "hold", None), "invalid_samples", 0),
                   on_round=rotate.on_round if streams > 1 else None, streams=streams)


def _graph_arm(c: Case, info: BackendInfo, ad: Adapter, variant: str, op_text: str, ops_: list, precision,
               params: BlasParams, cache: str, l2_bytes: int | None,
               rotate: StreamRotation | None = None) -> tuple[list[Record], list[CaseArm]]:
    """`<row>@graph`: each input set's op captured into a CUDA graph and replayed as one launch,
    held behind the same gate and rotated as its eager row (so the two pair under the same
    conditions), its replay checked over a poisoned output before timing and after."""
    name, text = f"{variant}@graph", f"{op_text}, captured in a CUDA graph and replayed"
    why = ad.graph_reason
    if why:
        return [c.record(info.backend, name, BlasParams(graph=True), status=UNAVAILABLE, op=text, reason=why,
                         device=info.device)], []
    replays = [ad.capture(f) for f in ops_]
    out = replays[0]()
    if out is not None and not isinstance(out, (tuple, list)):
        ad.poison(out)
    ok, detail = c.check(ad.host_view(replays[0]()), precision)
    if not ok:
        return [c.record(info.backend, name, BlasParams(graph=True), status=FAILED, op=text, verified=False,
                         verify_detail=detail, reason="verification failed, not timed: " + detail,
                         device=info.device)], []
    return [], [_rotating_arm(c, info, ad, name, text, replays, precision, params.replace(graph=True), detail, cache,
                              l2_bytes, rotate=rotate)]


def fit_cpu_threads(adapters: dict[Backend, Adapter]) -> None:
    """CPU frameworks run on as many threads as there are free cores (backends.base.free_cpu_cores:
    a thread team larger than that waits a scheduler slice at every op), unless OMP_NUM_THREADS
    says otherwise. Each CPU row records its threads, the cores and how busy others kept them."""
    import os

    from gapbench.backends.base import free_cpu_cores
    cpu = [ad for b, ad in adapters.items() if b.device_class is DeviceClass.cpu]
    if not cpu:
        return
    free, total, busy = free_cpu_cores()
    for ad in cpu:
        n = ad.set_cpu_threads(free) if free < total and not os.environ.get("OMP_NUM_THREADS") else None
        ad.cpu_threads = CpuThreads(threads=n or total, cores=total, busy_cores_other=round(busy, 2),
                                    reduced=n is not None)
