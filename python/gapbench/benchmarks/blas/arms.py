"""The rows of one BLAS case on each backend, verified before they are timed: the native library
(its reference kernel checked first, then its dispatcher and the vendor library) on CUDA and
Metal; each framework's ways of running the op (the op's FrameworkImpls): framework_arms.py.

Every row is run once on a poisoned output and checked against float64 (gapbench.core.dtypes):
a failure is a `failed` row, never timed; an impl the native side refuses (NotApplicable) is a
not-applicable row with its reason; the rest become arms of the case's paired timing (measure.py),
each able to run once more after timing so its last timed output is checked too."""
from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, ContextManager

import numpy as np

from gapbench.backends.base import BackendInfo
from gapbench.benchmarks.blas.config import Config, is_short
from gapbench.benchmarks.blas.measure import CaseArm, FloorArm
from gapbench.benchmarks.blas.streams import native_rounds
from gapbench.benchmarks.blas.params import BlasParams
from gapbench.core import dtypes, native
from gapbench.core.conditions import Cache, Clock, Conditions, Process
from gapbench.core.dtypes import Expected, from_bytes
from gapbench.core.names import CacheMode, Data, DType, Parity, Precision
from gapbench.core.result import ERROR, FAILED, NOT_APPLICABLE, UNAVAILABLE, Record
from gapbench.ops.spec import OpSpec, Shape, native_dims

#: make_record(backend, variant, params, **record fields): a record of this case
MakeRecord = Callable[..., Record]

#: the vendor call a native case names (BlasCase.strategy) -> the row's name
VENDOR_ROWS = {"cublas": "cublas", "cudaMemcpyAsync": "memcpy", "cublas_tf32": "cublas-tf32", "mps": "mps",
               "blit": "blit"}
#: The reference kernels are the simplest correct ones, and slow (gemm's reads operands straight
#: from memory, gemv's has a warp read 32 rows): the bench checks them only up to this much work.
#: Every one is checked on ragged shapes by tests/test_native.py.
REFERENCE_CHECK_MAX = {"bytes": 64 * 2**20, "flops": 5e10}


class Case:
    """One (op, dtype, shape): its rounded inputs, its float64 reference, the data they were drawn
    from, how its records are made, and (once a native CUDA case of it exists) the number of input
    sets its hot mode rotates, which every framework on the same device rotates too."""

    def __init__(self, spec: OpSpec, dtype: DType, shape: Shape, rounded: list[np.ndarray], expected: Expected,
                 make_record: MakeRecord, data: Data = Data.randn, seed: int | None = None,
                 part: Callable[[str], ContextManager] | None = None):
        self.spec, self.dtype, self.shape, self.rounded, self.expected = spec, dtype, shape, rounded, expected
        self.record = make_record
        self.data, self.seed = data, seed
        self.rotations: int | None = None  # set by the native CUDA case
        #: part(name): a context that adds its wall time to the run's part `name` (run.Phases.part)
        self.part = part or (lambda name: nullcontext())
        #: where native outputs are read back: None (a new array each read) or a core.native.Staging
        self.readback = None

    def staging(self, case) -> np.ndarray | None:
        """The buffer a native case's output is read into (see `readback`), checked at once."""
        return self.readback.out(case.output_bytes) if self.readback is not None else None

    @property
    def set_bytes(self) -> int:
        """Bytes of one set of inputs and output."""
        r, w = self.spec.elements(self.shape)
        return (r + w) * self.dtype.itemsize

    def conditions(self, cache: str, clock: str, padded: bool = False, **kw) -> Conditions:
        """The conditions of this case's rows; `padded`: gated samples padded to both launch parities
        of their stream (bench.blas --parity balanced)."""
        parity = Parity.balanced.value if padded and clock == Clock.GATED else None
        return Conditions(cache=cache, data=self.data.value, clock=clock, process=Process.PAIRED, seed=self.seed,
                          parity=parity, **kw)

    def check(self, out, precision: Precision | DType) -> tuple[bool, str]:
        with self.part("checks against float64 (host)"):
            return self.spec.check(out, self.expected, precision)


def rotation_plan(set_bytes: int, l2_bytes: int, free_bytes: int | None) -> tuple[int, bool]:
    """(input sets, L2-resident) as the native case plans them (cuda/blas.cu): enough sets that one
    pass over them is at least 2x the L2, as far as a quarter of the free memory and MAX_SETS allow;
    fewer than that is L2-resident."""
    want = max(1, -(-2 * l2_bytes // max(set_bytes, 1)))
    fit = MAX_SETS if free_bytes is None else min(max(free_bytes // 4 // max(set_bytes, 1), 1), MAX_SETS)
    n = max(1, min(want, fit))
    return n, n * set_bytes < 2 * l2_bytes


#: the most input sets a hot mode rotates (cuda/blas.cu kMaxSets)
MAX_SETS = 4096


def native_case(part, spec: OpSpec, dtype: DType, shape: Shape, rounded: list[np.ndarray], *extra, stage=None):
    """A gapbench._native BlasCase (cuda or metal part) holding the inputs, rounded to the dtype,
    each staged through `stage` (a core.native.Staging) where one is given."""
    case = part.BlasCase(native.op(spec.name), native.dtype(dtype), *native_dims(shape), *extra)
    for i, a in enumerate(rounded):
        buf = stage.out(a.size * dtype.itemsize) if stage is not None else None
        case.set_input(i, dtypes.to_bytes(a, dtype, buf))
    return case


def _check_reference(case, c: Case, info: BackendInfo) -> tuple[list[Record], str]:
    """The library's reference kernel, run once on a poisoned output against float64: the rows of
    this case are trusted only if the simplest kernel agrees with numpy. Never timed."""
    work = c.spec.work(c.shape, c.dtype)
    if any(work[k] > REFERENCE_CHECK_MAX[k] for k in REFERENCE_CHECK_MAX):
        return [], "not run at this size (see REFERENCE_CHECK_MAX)"
    ref = native.impl("reference")
    try:
        with c.part("native: reference kernel run"):
            out = from_bytes(case.run_once(ref, out=c.staging(case)), c.dtype)
        ok, detail = c.check(out, c.dtype)
    except (RuntimeError, ValueError, MemoryError) as e:
        ok, detail = False, f"{type(e).__name__}: {e}"
    if ok:
        return [], detail
    return [c.record(info.backend, "reference", BlasParams(strategy=case.strategy(ref)), status=FAILED,
                     op=case.strategy(ref), reason="reference kernel failed verification: " + detail, verified=False,
                     verify_detail=detail, device=info.device)], detail


def _verified_arms(c: Case, info: BackendInfo, clock: str, rows, case, samplers, verify_last, extra
                   ) -> tuple[list[Record], list[CaseArm]]:
    """Each native row (Impl member name, row name or None for the vendor's own, precision) run once
    on a poisoned output and checked against float64; the rest become arms."""
    not_applicable = native.not_applicable()
    recs, arms = [], []
    for impl_name, name, precision in rows:
        # an Impl by its member name, or one kernel of the op by strategy (a _native.Kernel)
        impl = native.impl(impl_name) if isinstance(impl_name, str) else impl_name
        desc = ""
        try:
            desc = case.strategy(impl)
            name = name or VENDOR_ROWS.get(desc, desc)
            with c.part("native: rows run once, read back"):
                out = from_bytes(case.run_once(impl, out=c.staging(case)), c.dtype)
            ok, detail = c.check(out, precision)
            if not ok:
                recs.append(c.record(info.backend, name, BlasParams(strategy=desc), status=FAILED, op=desc,
                                     reason="verification failed, not timed: " + detail, verified=False,
                                     verify_detail=detail, device=info.device))
                continue
            arms.append(CaseArm(info.backend, name, info.device_class, clock, samplers(impl),
                                verify_last(impl, precision), detail, op=desc,
                                params=BlasParams(strategy=desc, **extra(impl_name, desc)), device=info.device,
                                vendor=impl_name == "vendor", impl=impl))
        except not_applicable as e:
            recs.append(c.record(info.backend, name or "vendor", BlasParams(strategy=desc or None), status=NOT_APPLICABLE,
                                 op=desc, reason=str(e), device=info.device))
        except (RuntimeError, ValueError, MemoryError) as e:
            recs.append(c.record(info.backend, name or "vendor", BlasParams(strategy=desc or None), status=ERROR,
                                 reason=str(e), op=desc, device=info.device))
    return recs, arms


def native_cuda(c: Case, cfg: Config, info: BackendInfo, case, cublas_path: str, cublas_why: str
                ) -> tuple[list[Record], list[CaseArm]]:
    """The native CUDA rows of one case: the dispatcher (`gapbench`), the vendor (cuBLAS, or
    cudaMemcpyAsync for a copy) and, where the op has it, cuBLAS with TF32 tensor cores."""
    recs, ref_detail = _check_reference(case, c, info)
    rows = [("dispatch", "gapbench", c.dtype), ("vendor", None, c.dtype)]
    if c.spec.tf32_row and c.dtype is DType.fp32:
        rows.append(("vendor_tf32", None, Precision.tf32))
    if cfg.kernels:  # every other kernel of the op's library, by strategy, timed beside the rest
        rows += [(k, k.name, c.dtype) for k in kernel_rows(case, c.spec.name)]
    if not cublas_path:  # vendor rows that need cuBLAS say why it is missing (a copy needs none)
        keep = []
        for impl, name, prec in rows:
            try:
                if isinstance(impl, str) and impl != "dispatch":  # the library's own kernels need no cuBLAS
                    case.strategy(native.impl(impl))
                keep.append((impl, name, prec))
            except native.not_applicable():
                recs.append(c.record(info.backend, "cublas" if impl == "vendor" else "cublas-tf32", BlasParams(),
                                     status=UNAVAILABLE, reason=cublas_why, device=info.device, op="cuBLAS"))
        rows = keep

    def extra(impl, desc: str) -> dict:
        return {"reference_check": ref_detail,
                "library": cublas_path if desc.startswith("cublas") else None,
                "precision": Precision.tf32 if impl == "vendor_tf32" else None,
                "source": None if isinstance(impl, str) else "kernel"}

    invalid: dict = {}  # (impl, cache mode) -> gate timeouts dropped so far

    def samplers(impl):
        def sample(n, mode):
            out = case.time(impl, n, 0, native.cache(mode))
            invalid[impl, mode] = invalid.get((impl, mode), 0) + case.invalid_samples
            return out
        return {m: (lambda n, _m=m: sample(n, _m)) for m in [mo.cache for mo in cfg.modes()]}

    def verify_last(impl, precision):
        def check_last(mode: CacheMode):
            with c.part("native: last outputs read back"):
                case.time(impl, 1, 0, native.cache(mode))
                out = from_bytes(case.last_output(out=c.staging(case)), c.dtype)
            return c.check(out, precision)
        return check_last

    c.rotations = case.rotations
    l2 = int(info.device.get("l2_bytes") or 0) or None

    n_streams = min(cfg.native_streams(), case.streams)
    case.parity_pads = cfg.balanced

    def conditions(mode: CacheMode) -> Conditions:
        if mode is CacheMode.hot:
            cache = Cache.L2_RESIDENT if case.l2_resident else Cache.ROTATED
            return c.conditions(cache, Clock.GATED, cfg.balanced, rotations=case.rotations, set_bytes=c.set_bytes,
                                l2_bytes=l2, streams=n_streams)
        cache = Cache.FLUSHED_CLEAN if mode is CacheMode.cold_clean else Cache.FLUSHED_DIRTY
        return c.conditions(cache, Clock.GATED, cfg.balanced, rotations=1, set_bytes=c.set_bytes, l2_bytes=l2,
                            streams=n_streams)

    more, arms = _verified_arms(c, info, "device_events", rows, case, samplers, verify_last, extra)

    on_round = native_rounds(case, n_streams, shared=cfg.framework_streams() > 1)
    floor = None
    if cfg.launch_floor and is_short(c.spec, c.shape) and arms:
        floor = FloorArm("launch-floor/native-cuda", lambda n: case.time_empty(n, 0),
                         f"an empty kernel on the native rows' stream of each round ({n_streams} streams)", on_round)
    for a in arms:
        a.invalid = lambda mode, _impl=a.impl: invalid.get((_impl, mode), 0)
        a.conditions = conditions
        a.on_round, a.streams = on_round, n_streams
        a.floor = floor
    return recs + more, arms


def kernel_rows(case, op: str) -> list:
    """The kernels of `op` that bench.blas --variants all times as rows of their own beside the
    dispatcher's: the library's (csrc/ops.def) but the reference (checked first, never timed) and
    the one the dispatcher picks for this case (its row is `gapbench`), then the lab's that never
    shipped (csrc/lab.def; n/a rows saying so where the extension was built without the lab)."""
    ks = native.kernels_of(op, lab=True)
    shipped = case.strategy(native.impl("dispatch"))
    return [native.kernel(k) for k in ks[1:] if k != shipped]


def native_metal(c: Case, cfg: Config, info: BackendInfo, case) -> tuple[list[Record], list[CaseArm]]:
    """The library's dispatcher (row `gapbench`) and the vendor path (`blit` for copy, `mps`) on
    Metal, kernels of metal/<op>.metal compiled at run time: the reference kernel verified first,
    each row verified, then timed with GPU timestamps, the last timed run verified too. Never run
    on a Mac (none reachable)."""
    recs, ref_detail = _check_reference(case, c, info)

    def extra(impl: str, desc: str) -> dict:
        return {"reference_check": ref_detail}

    def verify_last(impl, precision):
        def check_last(mode: CacheMode):
            case.time(impl, 1, 0)
            return c.check(from_bytes(case.last_output(), c.dtype), precision)
        return check_last

    rows = [("dispatch", "gapbench", c.dtype), ("vendor", None, c.dtype)]
    more, arms = _verified_arms(c, info, "gpu_timestamps", rows, case,
                                lambda impl: {CacheMode.hot: lambda n: case.time(impl, n, 0)}, verify_last, extra)
    for a in arms:  # one set of buffers: what the system cache holds between runs is not controlled here
        a.conditions = lambda mode: c.conditions(Cache.L2_RESIDENT, Clock.GPU_TIMESTAMPS, rotations=1,
                                                 set_bytes=c.set_bytes)
    return recs + more, arms
