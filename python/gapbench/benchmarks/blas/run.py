"""BLAS throughput (paper section 4.4, Figures 5-7): copy, GEMV, both VJP cotangents and batched
GEMM in fp32/fp16/bf16, hand-written kernels next to the vendor library (cuBLAS, loaded at run
time) and every framework, with the roofline measured on the same machine: peak bandwidth from
the copy probe, peak compute from the best GEMM at the largest size.

Every result is checked against a float64 reference (on the inputs as rounded to the dtype, the
output poisoned first for native kernels) before it is timed; a failed check is a `failed` row.
Native timing: CUDA events around each run, inputs rotated through enough buffer sets to defeat
L2 (hot), and with --cold also with L2 scrubbed before each run: `read` (default) reads 2x L2 so
the op starts with none of its data in L2 and no dirty lines, `write` memsets 2x L2 (nvbench's
flush) so the op also writes back the dirty lines the scrub leaves. Frameworks: device events
(torch, cupy) or host clock with a sync (mlx)."""
from __future__ import annotations

import glob
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from gapbench.backends import registry as bk
from gapbench.ops.spec import OpSpec, native_dims, shape_text
from gapbench.core import native
from gapbench.core.dtypes import DTYPES, ITEMSIZE, expected, from_bytes, round_to, to_bytes
from gapbench.core.result import ERROR, FAILED, NOT_APPLICABLE, UNAVAILABLE, Record
from gapbench.ops import copy as copy_probe
from gapbench.ops import gemm as gemm_probe
from gapbench.ops import gemv as gemv_probe
from gapbench.ops import vjp as vjp_probe
from gapbench.benchmarks.blas.measure import CaseArm, measure_case
from gapbench.benchmarks.blas.tables import DATASHEET, build_tables, markdown_summary, plain_ratios, report_tables, roofline

PROBE = "blas"
OPS: dict[str, list[OpSpec]] = {
    "copy": [copy_probe.SPEC], "gemv": [gemv_probe.SPEC], "vjp": [vjp_probe.DX, vjp_probe.DW],
    "gemm": [gemm_probe.SPEC],
}


def selected_specs(names: list[str]) -> list[OpSpec]:
    """The specs the --ops names select, in order and each once: an op group (`vjp` = dx and dW)
    or one spec by its own name (`vjp_dx`, `vjp_dw`)."""
    out: list[OpSpec] = []
    for name in names:
        for spec in OPS.get(name) or [s for specs in OPS.values() for s in specs if s.name == name]:
            if all(spec is not seen for seen in out):
                out.append(spec)
    return out


OP_NAMES = list(OPS) + [spec.name for specs in OPS.values() for spec in specs if spec.name not in OPS]
# --cold scrub -> (gapbench._native.Cache member, metric, the `cache` param written with the samples)
COLD_MODES = {
    "read": ("cold_clean", "time_cold", "cold (L2 flushed clean: 2x-L2 read pass before each run)"),
    "write": ("cold_dirty", "time_cold_dirty", "cold (L2 scrubbed dirty: 2x-L2 memset before each run)"),
}


@dataclass
class Config:
    ops: list[str] = field(default_factory=lambda: list(OPS))
    dtypes: list[str] = field(default_factory=lambda: list(DTYPES))
    shapes: list[dict] | None = None  # None: each op's own list
    samples: int = 1000  # most paired rounds per case and cache mode
    warmup: int = 2  # untimed runs per arm before the rounds (plus 10 ms of its own run time)
    budget_s: float = 1.0  # wall seconds per case and cache mode for the paired rounds
    rel_hw: float = 0.01  # stop when every median's and ratio's 95% interval is within this
    min_rounds: int = 10
    cold: list[str] = field(default_factory=list)  # cold-cache scrubs to time native CUDA with: COLD_MODES keys
    quick: bool = False
    seed: int | None = None


def cublas_candidates() -> list[str]:
    """Where a libcublas may be: the nvidia-cublas wheel that torch brings, then CUDA_HOME."""
    paths = []
    try:
        import importlib.util

        spec = importlib.util.find_spec("nvidia")
        for root in (spec.submodule_search_locations or []) if spec else []:
            paths += sorted(glob.glob(os.path.join(root, "*", "lib", "libcublas.so*")), reverse=True)
    except (ImportError, ValueError):
        pass
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            paths += sorted(glob.glob(os.path.join(home, "lib64", "libcublas.so*")), reverse=True)
    return [p for p in dict.fromkeys(paths) if not p.endswith(".so")] + [p for p in paths if p.endswith(".so")]


def _record(spec: OpSpec, dtype: str, shape: dict, backend: str, variant: str, **kw) -> Record:
    params = {"shape": shape, "shape_text": shape_text(shape), "dtype": dtype, "op": spec.name}
    params.update(kw.pop("params", {}))
    return Record(probe=PROBE, backend=backend, variant=variant, metric=kw.pop("metric", "time"),
                  params=params, work=spec.work(shape, dtype), **kw)


#: The native rows of a case: (Impl member, row name). `gapbench` is the library's dispatcher (its
#: kernel's name goes in params["strategy"]); the reference kernel is verified before them and
#: never timed.
NATIVE_ROWS = (("dispatch", "gapbench"), ("vendor", "cublas"), ("vendor_tf32", "cublas-tf32"))


def _native_case(part, spec: OpSpec, dtype: str, shape: dict, rounded: list[np.ndarray], *extra):
    case = part.BlasCase(native.op(spec.native_op), native.dtype(dtype), *native_dims(shape), *extra)
    for i, a in enumerate(rounded):
        case.set_input(i, to_bytes(a, dtype))
    return case


#: The reference kernels are the simplest correct ones, and slow (gemm's reads operands straight
#: from memory, gemv's has a warp read 32 rows): the bench checks them only up to this much work.
#: Every one is checked on ragged shapes by tests/test_native.py.
REFERENCE_CHECK_MAX = {"bytes": 64 * 2**20, "flops": 5e10}


def _check_reference(case, spec, dtype, shape, ref, info, backend) -> tuple[list[Record], str]:
    """The library's reference kernel, run once on a poisoned output against float64: the rows of
    this case are trusted only if the simplest kernel agrees with numpy. Never timed."""
    work = spec.work(shape, dtype)
    if any(work[k] > REFERENCE_CHECK_MAX[k] for k in REFERENCE_CHECK_MAX):
        return [], "not run at this size (see REFERENCE_CHECK_MAX)"
    try:
        ok, detail = spec.check(from_bytes(case.run_once(native.impl("reference")), dtype), ref, dtype)
    except (RuntimeError, ValueError, MemoryError) as e:
        ok, detail = False, f"{type(e).__name__}: {e}"
    if ok:
        return [], detail
    return [_record(spec, dtype, shape, backend, "reference", status=FAILED, op=case.strategy(native.impl("reference")),
                    reason="reference kernel failed verification: " + detail, verified=False, verify_detail=detail,
                    device=info.device)], detail


def _native_cuda(spec: OpSpec, dtype: str, shape: dict, ref, cfg: Config, info: bk.BackendInfo, case,
                 cublas_path: str, cublas_why: str) -> tuple[list[Record], list[CaseArm]]:
    """The native CUDA rows of one case: records for what cannot be timed, arms for the rest."""
    recs, ref_detail = _check_reference(case, spec, dtype, shape, ref, info, "native-cuda")
    rows = []
    for impl, name in NATIVE_ROWS:
        tol = dtype
        if impl == "vendor_tf32":
            if not (spec.name == "gemm" and dtype == "fp32"):
                continue  # TF32 is an fp32-GEMM row only; elsewhere there is nothing to say
            tol = "tf32"
        if spec.name == "copy" and impl == "vendor":
            name = "memcpy"
        elif impl != "dispatch" and not cublas_path:
            recs.append(_record(spec, dtype, shape, "native-cuda", name, status=UNAVAILABLE, reason=cublas_why,
                                device=info.device, op="cuBLAS"))
            continue
        rows.append((impl, name, tol))
    modes = ["hot"] + [COLD_MODES[c][0] for c in cfg.cold]

    def extra(impl):
        hot = {"l2_resident": bool(case.l2_resident), "rotations": case.rotations}
        return {"reference_check": ref_detail,
                "library": cublas_path if impl in ("vendor", "vendor_tf32") and spec.name != "copy" else "",
                **({"precision": "tf32"} if impl == "vendor_tf32" else {}),
                "cache_params": {m: (hot if m == "hot" else {"l2_resident": False, "rotations": 1}) for m in modes}}

    invalid: dict = {}  # (impl, cache mode) -> gate timeouts dropped so far

    def samplers(impl):
        def sample(n, mode):
            out = case.time(impl, n, 0, native.cache(mode))
            invalid[impl, mode] = invalid.get((impl, mode), 0) + case.invalid_samples
            return out
        return {m: (lambda n, _m=m: sample(n, _m)) for m in modes}

    def verify_last(impl, tol):
        def check_last(mode):
            case.time(impl, 1, 0, native.cache(mode))
            return spec.check(from_bytes(case.last_output(), dtype), ref, tol)
        return check_last

    more, arms = _verified_arms(spec, dtype, shape, ref, info, "native-cuda", "cuda", "device_events", rows, case,
                                samplers, verify_last, extra)
    for a in arms:
        impl = native.impl(next(i for i, n, _ in rows if n == a.variant))
        a.invalid = lambda mode, _impl=impl: invalid.get((_impl, mode), 0)
    return recs + more, arms


def _verified_arms(spec, dtype, shape, ref, info, backend, cls, clock, rows, case, samplers, verify_last, extra):
    """Each native row (Impl member name, row name, tolerance dtype) of one case, run once on a
    poisoned output and checked against float64: a failure is a `failed` row (never timed), an Impl
    the native side refuses (NotApplicable) a not-applicable row with its reason; the rest become
    arms of the case's paired timing."""
    not_applicable = native.not_applicable()
    recs, arms = [], []
    for impl_name, name, tol in rows:
        impl = native.impl(impl_name)
        desc = ""
        try:
            desc = case.strategy(impl)
            ok, detail = spec.check(from_bytes(case.run_once(impl), dtype), ref, tol)
            if not ok:
                recs.append(_record(spec, dtype, shape, backend, name, status=FAILED, op=desc,
                                    reason="verification failed, not timed: " + detail, verified=False,
                                    verify_detail=detail, device=info.device, params={"strategy": desc}))
                continue
            arms.append(CaseArm(backend, name, cls, clock, samplers(impl), verify_last(impl, tol), detail, op=desc,
                                params={"strategy": desc, **extra(impl_name)}, device=info.device,
                                vendor=impl_name == "vendor"))
        except not_applicable as e:
            recs.append(_record(spec, dtype, shape, backend, name, status=NOT_APPLICABLE, op=desc, reason=str(e),
                                device=info.device))
        except (RuntimeError, ValueError, MemoryError) as e:
            recs.append(_record(spec, dtype, shape, backend, name, status=ERROR, reason=str(e), op=desc,
                                device=info.device))
    return recs, arms


METAL_FILE = {"copy": "copy", "gemv": "gemv", "vjp_dx": "vjp", "vjp_dw": "vjp", "gemm": "gemm"}


def _native_metal(spec: OpSpec, dtype: str, shape: dict, ref, cfg: Config, info: bk.BackendInfo,
                  case) -> tuple[list[Record], list[CaseArm]]:
    """The library's dispatcher (row `gapbench`) and the vendor path (`blit` for copy, `mps`) on
    Metal, kernels of metal/<op>.metal compiled at run time: the reference kernel verified first,
    each row verified, then timed with GPU timestamps, the last timed run verified too. Never run
    on a Mac (none reachable)."""
    recs, ref_detail = _check_reference(case, spec, dtype, shape, ref, info, "native-metal")

    def extra(impl):
        return {"library_compile_s": case.library_compile_seconds, "reference_check": ref_detail}

    def verify_last(impl, tol):
        def check_last(mode):
            case.time(impl, 1, 0)
            return spec.check(from_bytes(case.last_output(), dtype), ref, tol)
        return check_last

    rows = [("dispatch", "gapbench", dtype), ("vendor", "blit" if spec.name == "copy" else "mps", dtype)]
    more, arms = _verified_arms(spec, dtype, shape, ref, info, "native-metal", "metal", "gpu_timestamps", rows, case,
                                lambda impl: {"hot": lambda n: case.time(impl, n, 0)}, verify_last, extra)
    return recs + more, arms


def _framework(spec: OpSpec, dtype: str, shape: dict, rounded: list[np.ndarray], ref, backend: str, ad,
               info: bk.BackendInfo) -> tuple[list[Record], list[CaseArm]]:
    fam = ad.family  # the variant of its rows
    desc = spec.framework_text[fam]
    ok_dtype, why = ad.supports(dtype)
    if not ok_dtype:
        return [_record(spec, dtype, shape, backend, fam, status=UNAVAILABLE, reason=why, op=desc,
                        device=info.device)], []
    try:
        arrays = [ad.array(a, dtype) for a in rounded]
        op = spec.framework(ad, arrays)
        out = ad.host_values(op())
        tol = dtype
        ok, detail = spec.check(out, ref, dtype)
        variant, extra = fam, {}
        if not ok and dtype == "fp32":
            # Some frameworks compute fp32 matmul at TF32 precision by default. Say so and time
            # it as what it is, rather than as fp32.
            ok32, detail32 = spec.check(out, ref, "tf32")
            if ok32:
                variant, extra, tol = f"{fam}@tf32", {"precision": "tf32"}, "tf32"
                ok, detail = True, f"fails the fp32 bound ({detail}); within the TF32 bound: {detail32}"
        if not ok:
            return [_record(spec, dtype, shape, backend, fam, status=FAILED, op=desc, verified=False,
                            verify_detail=detail, reason="verification failed, not timed: " + detail,
                            device=info.device)], []
        run = ad.evaluated(op)

        def sample(n):
            return [ad.time_device(run, 1) for _ in range(n)]

        def verify_last(mode):
            ok_l, d = spec.check(ad.host_values(op()), ref, tol)
            return ok_l, "(re-run after timing: framework ops return a new output each call) " + d

        cls = info.device_class
        hold = getattr(ad, "hold", None)
        return [], [CaseArm(backend, variant, cls, ad.device_clock, {"hot": sample}, verify_last, detail, op=desc,
                            params={"cache": "hot (framework buffers)", **extra, **getattr(ad, "cpu_params", {}),
                                    **({"hold": hold.method} if hold is not None else {})},
                            device=info.device,
                            invalid=lambda mode: getattr(getattr(ad, "hold", None), "invalid_samples", 0))]
    except Exception as e:  # one failing framework case must not lose the others
        msg = f"{type(e).__name__}: {e}"
        if "out of memory" in msg.lower() or isinstance(e, MemoryError):
            msg = "out of memory: " + msg
        return [_record(spec, dtype, shape, backend, fam, status=ERROR, reason=msg[:500], op=desc,
                        device=info.device)], []


def shapes_for(spec: OpSpec, cfg: Config) -> list[dict]:
    """The shapes this op runs: --shapes entries of the op's own form, else the op's sweep."""
    form = set(spec.shapes(True)[0])
    return [s for s in (cfg.shapes or spec.shapes(cfg.quick)) if set(s) == form]


#: host bytes per element read or written: the fp32 inputs, their rounded copies, the float64
#: copies and reference, the output read back for the check and its kept per-output bound
HOST_BYTES_PER_ELEMENT = 40


def memory_check(spec: OpSpec, shape: dict, dtype: str, backends: list[str]) -> dict[str, str]:
    """Backends this case does not fit, each with the sentence saying so, asked before anything
    is allocated (gapbench.backends.memfit): the host must hold the inputs and the float64 reference,
    each device one set of inputs and output (a CPU backend both)."""
    from gapbench.backends.memfit import device_available, host_available, shortfall

    r, w = spec.elements(shape)
    host = (r + w) * HOST_BYTES_PER_ELEMENT
    device = (r + w) * ITEMSIZE[dtype]
    why = shortfall(host, host_available(), "host memory for the inputs and the float64 reference")
    if why:
        return {b: why for b in backends}
    out = {}
    for b in backends:
        on_host = bk.device_class_of(b) == "cpu"
        why = shortfall(device + (host if on_host else 0), device_available(b),
                        "host memory" if on_host else f"{b} device memory for one set of inputs and output")
        if why:
            out[b] = why
    return out


def fit_cpu_threads(adapters: dict) -> None:
    """CPU frameworks run on as many threads as there are free cores (frameworks.free_cpu_cores:
    a thread team larger than that waits a scheduler slice at every op), unless OMP_NUM_THREADS
    says otherwise. Each CPU row records its threads, the cores and how busy others kept them."""
    cpu = [ad for b, ad in adapters.items() if bk.device_class_of(b) == "cpu"]
    if not cpu:
        return
    from gapbench.backends.frameworks import free_cpu_cores

    free, total, busy = free_cpu_cores()
    for ad in cpu:
        n = ad.set_cpu_threads(free) if free < total and not os.environ.get("OMP_NUM_THREADS") else None
        ad.cpu_params = {"cpu_threads": {"threads": n or total, "cores": total, "busy_cores_other": round(busy, 2),
                                         "reduced": n is not None}}


class Phases(dict):
    """Wall seconds of a run by phase (name -> seconds), shown at the end of a run and kept in its
    file: where a long run's time went (host preparation, verification, timing, checks)."""

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self[name] = self.get(name, 0.0) + time.perf_counter() - t0


def iterate(cfg: Config, backends: list[str], on_case=None, phases: Phases | None = None):
    from gapbench.backends.frameworks import make_adapter

    phases = Phases() if phases is None else phases
    infos = {b: bk.info(b) for b in backends}
    for b, i in infos.items():
        if not i.available:
            yield Record(probe=PROBE, backend=b, metric="all", status=UNAVAILABLE, reason=i.reason, device=i.device)
        elif b == "native-cpu":
            yield Record(probe=PROBE, backend=b, metric="all", status=NOT_APPLICABLE, device=i.device,
                         reason="no hand-written CPU BLAS kernels: CPU rows come from the frameworks")
    live = [b for b in backends if infos[b].available and b != "native-cpu"]
    cublas_path, cublas_why = "", "cuBLAS not searched"
    if "native-cuda" in live:
        from gapbench import _native

        cublas_path = _native.cuda.cublas_load(cublas_candidates())
        cublas_why = "" if cublas_path else _native.cuda.cublas_error()
    adapters = {}
    for b in live:
        if bk.parse(b).is_native:
            continue
        try:
            adapters[b] = make_adapter(b)
            adapters[b].setup_context()
        except Exception as e:
            yield Record(probe=PROBE, backend=b, metric="all", status=ERROR, reason=f"setup failed: {e}",
                         device=infos[b].device)
    fit_cpu_threads(adapters)
    for spec in selected_specs(cfg.ops):
        for shape in shapes_for(spec, cfg):
            inputs = None  # drawn once per shape, rounded per dtype
            for dtype in cfg.dtypes:
                too_big = memory_check(spec, shape, dtype, live)
                for b, why in too_big.items():
                    if on_case:
                        on_case(f"{spec.name} {dtype} {shape_text(shape)} {b}")
                    yield _record(spec, dtype, shape, b, "-", status=ERROR, reason=why, device=infos[b].device)
                if len(too_big) == len(live):
                    continue
                if on_case:
                    on_case(f"{spec.name} {dtype} {shape_text(shape)}")
                with phases("inputs and float64 references"):
                    if inputs is None:
                        inputs = spec.inputs(shape, np.random.default_rng(cfg.seed))
                    rounded = [round_to(a, dtype) for a in inputs]
                    ref = expected(spec.reference, rounded, spec.reduction(shape))
                yield from _run_case(spec, dtype, shape, rounded, ref, cfg, [b for b in live if b not in too_big],
                                     infos, adapters, cublas_path, cublas_why, phases)


def _run_case(spec, dtype, shape, rounded, ref, cfg, live, infos, adapters, cublas_path, cublas_why, phases=None):
    """Every live backend's rows of one case: verified arms first, then one paired timing per device
    class (blas_measure), so every ratio comes from interleaved rounds."""
    phases = Phases() if phases is None else phases
    recs, arms, cases = [], [], []
    with phases("inputs to devices, verified before timing"):
        for b in live:
            r, a = _case_rows(b, spec, dtype, shape, rounded, ref, cfg, infos, adapters, cublas_path, cublas_why,
                              cases)
            recs += r
            arms += a
    modes = [("hot", "time", "hot")] + [COLD_MODES[c] for c in cfg.cold]
    with phases("paired timing, last runs verified"):
        recs += measure_case(lambda backend, variant, **kw: _record(spec, dtype, shape, backend, variant, **kw),
                             arms, modes, budget_s=cfg.budget_s, rel_hw=cfg.rel_hw, max_rounds=cfg.samples,
                             min_rounds=cfg.min_rounds, warmup=cfg.warmup, seed=cfg.seed or 0)
    del cases  # free the device buffers before the next case
    return recs


def _case_rows(b, spec, dtype, shape, rounded, ref, cfg, infos, adapters, cublas_path, cublas_why, cases):
    """One backend's rows of a case: records for what cannot be timed, verified arms for the rest.
    A native case it makes is appended to `cases` (kept alive until the case is timed)."""
    from gapbench import _native

    try:
        if b == "native-cuda":
            case = _native_case(_native.cuda, spec, dtype, shape, rounded, 0)
            cases.append(case)
            r, a = _native_cuda(spec, dtype, shape, ref, cfg, infos[b], case, cublas_path, cublas_why)
        elif b == "native-metal":
            from gapbench.core.metal_cpu import metal_dir, metal_source

            source = metal_source(metal_dir() / f"{METAL_FILE[spec.name]}.metal")
            case = _native_case(_native.metal, spec, dtype, shape, rounded, source)
            cases.append(case)
            r, a = _native_metal(spec, dtype, shape, ref, cfg, infos[b], case)
        elif b in adapters:
            r, a = _framework(spec, dtype, shape, rounded, ref, b, adapters[b], infos[b])
        else:
            return [], []
    except (RuntimeError, ValueError, MemoryError) as e:
        return [_record(spec, dtype, shape, b, "-", status=ERROR, reason=str(e), device=infos[b].device)], []
    return r, a


def parse_shapes(text: str) -> list[dict]:
    """"4096x4096" (m x k: gemv, vjp), "8x2000x2000x2000" (batch x m x n x k: gemm), "1048576"
    (elements: copy). Each op takes the shapes of its own form."""
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            dims = [int(x) for x in part.lower().split("x")]
        except ValueError:
            raise ValueError(f"bad shape {part!r}: use N, MxK or BxMxNxK with integers") from None
        if any(d < 1 for d in dims):
            raise ValueError(f"bad shape {part!r}: every dimension must be >= 1")
        if len(dims) == 1:
            out.append({"n": dims[0]})
        elif len(dims) == 2:
            out.append({"m": dims[0], "k": dims[1]})
        elif len(dims) == 4:
            out.append({"batch": dims[0], "m": dims[1], "n": dims[2], "k": dims[3]})
        else:
            raise ValueError(f"bad shape {part!r}: use N (copy), MxK (gemv, vjp) or BxMxNxK (gemm)")
    return out


def main(argv: list[str] | None = None, prog: str = "python -m bench.blas") -> int:
    from gapbench.benchmarks.blas.command import BENCHMARK

    return BENCHMARK.main(argv, prog)
