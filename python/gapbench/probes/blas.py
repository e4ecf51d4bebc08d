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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import registry as bk
from ..blasspec import OpSpec, native_dims, shape_text
from ..dtypes import DTYPES, ITEMSIZE, NATIVE_CODE, check, from_bytes, round_to, to_bytes
from ..result import ERROR, FAILED, NOT_APPLICABLE, OK, UNAVAILABLE, Record
from . import copy as copy_probe
from . import gemm as gemm_probe
from . import gemv as gemv_probe
from . import vjp as vjp_probe
from .blas_tables import (DATASHEET, build_tables, markdown_summary, plain_ratios, report_tables,  # noqa: F401
                          roofline)

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
# codes as in cuda/l2_scrub.cuh.
COLD_MODES = {
    "read": (1, "time_cold", "cold (L2 flushed clean: 2x-L2 read pass before each run)"),
    "write": (2, "time_cold_dirty", "cold (L2 scrubbed dirty: 2x-L2 memset before each run)"),
}


@dataclass
class Config:
    ops: list[str] = field(default_factory=lambda: list(OPS))
    dtypes: list[str] = field(default_factory=lambda: list(DTYPES))
    shapes: list[dict] | None = None  # None: each op's own list
    samples: int = 100
    warmup: int = 10
    budget_s: float = 3.0  # timed seconds allowed per variant; samples are cut to fit (min 5)
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


class _Timer:
    """Samples that fit the budget: one timed call first, then as many as the budget allows."""

    def __init__(self, cfg: Config):
        self.cfg = cfg

    def count(self, one_run_s: float) -> int:
        if one_run_s <= 0:
            return self.cfg.samples
        return int(max(5, min(self.cfg.samples, self.cfg.budget_s / one_run_s)))


def _record(spec: OpSpec, dtype: str, shape: dict, backend: str, variant: str, **kw) -> Record:
    params = {"shape": shape, "shape_text": shape_text(shape), "dtype": dtype, "op": spec.name}
    params.update(kw.pop("params", {}))
    return Record(probe=PROBE, backend=backend, variant=variant, metric=kw.pop("metric", "time"),
                  params=params, work=spec.work(shape, dtype), **kw)


def _native_cuda(spec: OpSpec, dtype: str, shape: dict, rounded: list[np.ndarray], ref: np.ndarray, cfg: Config,
                 info: bk.BackendInfo, cublas_path: str, cublas_why: str) -> list[Record]:
    from .. import _native

    recs: list[Record] = []
    try:
        case = _native.cuda.BlasCase(spec.native_op, NATIVE_CODE[dtype], *native_dims(shape), 0)
        for i, a in enumerate(rounded):
            case.set_input(i, to_bytes(a, dtype))
    except (RuntimeError, ValueError, MemoryError) as e:
        return [_record(spec, dtype, shape, "native-cuda", "-", status=ERROR, reason=str(e), device=info.device)]
    variants: list[tuple[int, str, str]] = [(0, "cublas", dtype)]
    if spec.name == "gemm" and dtype == "fp32":
        variants.append((100, "cublas-tf32", "tf32"))
    variants += [(v, f"v{v}", dtype) for v in spec.variants]
    timer = _Timer(cfg)
    todo = []
    for code, name, tol in variants:
        desc = "cuBLAS" if code in (0, 100) else spec.variants[code]
        if spec.name == "copy" and code == 0:
            desc, name = "cudaMemcpyAsync device-to-device", "memcpy"
        elif code in (0, 100) and not cublas_path:
            recs.append(_record(spec, dtype, shape, "native-cuda", name, status=UNAVAILABLE, reason=cublas_why,
                                device=info.device, op=desc))
            continue
        todo.append((code, name, desc, tol))

    def measure(code):
        n = timer.count(case.time(code, 1, 1, 0)[0])
        modes = [(0, "time", f"hot, {case.rotations} rotating sets")] + [COLD_MODES[c] for c in cfg.cold]
        for cache, metric, text in modes:
            yield metric, case.time(code, n, cfg.warmup, cache), {
                "cache": text,
                "library": cublas_path if code in (0, 100) and spec.name != "copy" else "",
                **({"precision": "tf32"} if code == 100 else {})}

    return recs + _verify_then_time(spec, dtype, shape, ref, cfg, info, "native-cuda", "device_events", todo,
                                    case.run_once, measure)


def _verify_then_time(spec: OpSpec, dtype: str, shape: dict, ref: np.ndarray, cfg: Config, info: bk.BackendInfo,
                      backend: str, clock: str, variants, run_once, measure) -> list[Record]:
    """Each native variant (code, name, description, tolerance dtype) of one case: run once on a
    poisoned output and check against float64; only then `measure(code)`, which yields (metric,
    samples, params). A variant the native side refuses ("no variant ...: why") is a not-applicable
    row with its reason; any failure is a row, and the other variants still run."""
    recs = []
    for code, name, desc, tol in variants:
        try:
            out = from_bytes(run_once(code), dtype)
            ok, detail = check(out, ref, tol)
            if not ok:
                recs.append(_record(spec, dtype, shape, backend, name, status=FAILED, op=desc,
                                    reason="verification failed, not timed: " + detail, verified=False,
                                    verify_detail=detail, device=info.device))
                continue
            for metric, samples, params in measure(code):
                recs.append(_record(spec, dtype, shape, backend, name, metric=metric, op=desc, clock=clock,
                                    samples_s=samples, warmup=cfg.warmup, verified=True, verify_detail=detail,
                                    device=info.device, params=params))
        except ValueError as e:
            if "no variant" in str(e):
                why = str(e).split(": ", 1)[1] if ": " in str(e) else f"does not exist for {dtype} on this device"
                recs.append(_record(spec, dtype, shape, backend, name, status=NOT_APPLICABLE, op=desc,
                                    reason=f"variant {code}: {why}", device=info.device))
            else:
                recs.append(_record(spec, dtype, shape, backend, name, status=ERROR, reason=str(e), op=desc,
                                    device=info.device))
        except (RuntimeError, MemoryError) as e:
            recs.append(_record(spec, dtype, shape, backend, name, status=ERROR, reason=str(e), op=desc,
                                device=info.device))
    return recs


METAL_FILE = {"copy": "copy", "gemv": "gemv", "vjp_dx": "vjp", "vjp_dw": "vjp", "gemm": "gemm"}


METAL_VARIANTS = {"gemm": {2: "simdgroup_float8x8 fragments, 32x32 threadgroup tiles"}}


def _native_metal(spec: OpSpec, dtype: str, shape: dict, rounded: list[np.ndarray], ref: np.ndarray, cfg: Config,
                  info: bk.BackendInfo) -> list[Record]:
    """The vendor path (variant 0: blit copy, MPS) and the kernels of metal/<op>.metal (compiled at
    run time): each verified, then timed with GPU timestamps. Not yet run on a Mac."""
    from .. import _native
    from ..metal_cpu import metal_dir, metal_source

    file = METAL_FILE[spec.name]
    variants = [(0, "blit" if spec.name == "copy" else "mps",
                 "blit encoder copy" if spec.name == "copy" else "Metal Performance Shaders"),
                (1, "v1", f"first kernel of metal/{file}.metal")]
    variants += [(v, f"v{v}", d) for v, d in METAL_VARIANTS.get(spec.name, {}).items()]
    try:
        source = metal_source(metal_dir() / f"{file}.metal")
        case = _native.metal.BlasCase(spec.native_op, NATIVE_CODE[dtype], *native_dims(shape), source)
        for i, a in enumerate(rounded):
            case.set_input(i, to_bytes(a, dtype))
    except (RuntimeError, ValueError, MemoryError) as e:
        return [_record(spec, dtype, shape, "native-metal", "-", status=ERROR, reason=str(e), device=info.device)]
    def measure(code):
        n = _Timer(cfg).count(case.time(code, 1, 1)[0])
        yield "time", case.time(code, n, cfg.warmup), {"library_compile_s": case.library_compile_seconds}

    return _verify_then_time(spec, dtype, shape, ref, cfg, info, "native-metal", "gpu_timestamps",
                             [(c, name, desc, dtype) for c, name, desc in variants], case.run_once, measure)


def _framework(spec: OpSpec, dtype: str, shape: dict, rounded: list[np.ndarray], ref: np.ndarray, cfg: Config,
               backend: str, ad, info: bk.BackendInfo) -> list[Record]:
    fam = ad.family  # the variant of its rows
    desc = spec.framework_text[fam]
    ok_dtype, why = ad.supports(dtype)
    if not ok_dtype:
        return [_record(spec, dtype, shape, backend, fam, status=UNAVAILABLE, reason=why, op=desc, device=info.device)]
    try:
        arrays = [ad.array(a, dtype) for a in rounded]
        op = spec.framework(ad, arrays)
        out = ad.numpy64(op())
        ok, detail = check(out, ref, dtype)
        variant, extra = fam, {}
        if not ok and dtype == "fp32":
            # Some frameworks compute fp32 matmul at TF32 precision by default. Say so and time
            # it as what it is, rather than as fp32.
            ok32, detail32 = check(out, ref, "tf32")
            if ok32:
                variant, extra = f"{fam}@tf32", {"precision": "tf32"}
                ok, detail = True, f"fails the fp32 bound ({detail}); within the TF32 bound: {detail32}"
        if not ok:
            return [_record(spec, dtype, shape, backend, fam, status=FAILED, op=desc, verified=False,
                            verify_detail=detail, reason="verification failed, not timed: " + detail,
                            device=info.device)]
        run = ad.evaluated(op)
        for _ in range(max(1, cfg.warmup // 2)):
            ad.time_device(run, 1)
        n = _Timer(cfg).count(ad.time_device(run, 1))
        samples = [ad.time_device(run, 1) for _ in range(cfg.warmup + n)][cfg.warmup:]
        return [_record(spec, dtype, shape, backend, variant, op=desc, clock=ad.device_clock, samples_s=samples,
                        warmup=cfg.warmup, verified=True, verify_detail=detail, device=info.device,
                        params={"cache": "hot (framework buffers)", **extra, **getattr(ad, "cpu_params", {})})]
    except Exception as e:  # one failing framework case must not lose the others
        msg = f"{type(e).__name__}: {e}"
        status = ERROR
        if "out of memory" in msg.lower() or isinstance(e, MemoryError):
            msg = "out of memory: " + msg
        return [_record(spec, dtype, shape, backend, fam, status=status, reason=msg[:500], op=desc, device=info.device)]


def shapes_for(spec: OpSpec, cfg: Config) -> list[dict]:
    """The shapes this op runs: --shapes entries of the op's own form, else the op's sweep."""
    form = set(spec.shapes(True)[0])
    return [s for s in (cfg.shapes or spec.shapes(cfg.quick)) if set(s) == form]


#: host bytes per element read or written: the fp32 inputs, their rounded copies, the float64
#: copies and reference, and the output read back as float64 for the check
HOST_BYTES_PER_ELEMENT = 32


def memory_check(spec: OpSpec, shape: dict, dtype: str, backends: list[str]) -> dict[str, str]:
    """Backends this case does not fit, each with the sentence saying so, asked before anything
    is allocated (gapbench.memfit): the host must hold the inputs and the float64 reference,
    each device one set of inputs and output (a CPU backend both)."""
    from ..memfit import device_available, host_available, shortfall

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
    from ..frameworks import free_cpu_cores

    free, total, busy = free_cpu_cores()
    for ad in cpu:
        n = ad.set_cpu_threads(free) if free < total and not os.environ.get("OMP_NUM_THREADS") else None
        ad.cpu_params = {"cpu_threads": {"threads": n or total, "cores": total, "busy_cores_other": round(busy, 2),
                                         "reduced": n is not None}}


def iterate(cfg: Config, backends: list[str], on_case=None):
    from ..frameworks import make_adapter

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
        from .. import _native

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
            for dtype in cfg.dtypes:
                too_big = memory_check(spec, shape, dtype, live)
                for b, why in too_big.items():
                    if on_case:
                        on_case(f"{spec.name} {dtype} {shape_text(shape)} {b}")
                    yield _record(spec, dtype, shape, b, "-", status=ERROR, reason=why, device=infos[b].device)
                if len(too_big) == len(live):
                    continue
                rng = np.random.default_rng(cfg.seed)
                rounded = [round_to(a, dtype) for a in spec.inputs(shape, rng)]
                ref = spec.reference([a.astype(np.float64) for a in rounded])
                for b in (b for b in live if b not in too_big):
                    if on_case:
                        on_case(f"{spec.name} {dtype} {shape_text(shape)} {b}")
                    if b == "native-cuda":
                        yield from _native_cuda(spec, dtype, shape, rounded, ref, cfg, infos[b], cublas_path,
                                                cublas_why)
                    elif b == "native-metal":
                        yield from _native_metal(spec, dtype, shape, rounded, ref, cfg, infos[b])
                    elif b in adapters:
                        yield from _framework(spec, dtype, shape, rounded, ref, cfg, b, adapters[b], infos[b])


def plain_binary() -> Path | None:
    from importlib import resources

    path = Path(str(resources.files("gapbench").joinpath("bin/gapbench_blas_plain")))
    return path if path.is_file() and os.access(path, os.X_OK) else None


def plain_check(records: list[Record], cfg: Config, rounds: int = 5) -> list[Record]:
    """cuBLAS from the plain C++ loop (cuda/plain/blas.cu) for the vendor GEMM and GEMV rows at
    their largest shapes: the harness must add nothing. Clocks drift over a long run (power and
    temperature), so the two are interleaved: `rounds` times a plain process, then the harness's
    own Case in this process, each with the same share of samples and the same queue-preloaded
    event timing. The plain row carries the interleaved harness samples for the ratio."""
    import json
    import subprocess

    from .. import _native
    from ..worker import run_command

    exe = plain_binary()
    vendor = [r for r in records if r.backend == "native-cuda" and r.variant == "cublas" and r.status == OK
              and r.metric == "time" and r.params.get("op") in ("gemm", "gemv")]
    if exe is None or not vendor:
        return []
    specs = {sp.name: sp for sps in OPS.values() for sp in sps}
    out = []
    for op in ("gemm", "gemv"):
        rows = [r for r in vendor if r.params["op"] == op]
        if not rows:
            continue
        biggest = max(r.work["flops"] for r in rows)
        for r in (r for r in rows if r.work["flops"] == biggest):
            sh, dtype, spec = r.params["shape"], r.params["dtype"], specs[op]
            per = max(1, len(r.samples_s) // rounds)
            args = [str(exe), r.params["library"], op, str(NATIVE_CODE[dtype]), str(sh.get("batch", 1)),
                    str(sh["m"]), str(sh.get("n", 1)), str(sh["k"]), str(per), str(cfg.warmup)]
            try:
                case = _native.cuda.BlasCase(spec.native_op, NATIVE_CODE[dtype], *native_dims(sh), 0)
                rng = np.random.default_rng(cfg.seed)
                for i, a in enumerate(spec.inputs(sh, rng)):
                    case.set_input(i, to_bytes(round_to(a, dtype), dtype))
                plain, harness = [], []
                for _ in range(rounds):
                    p = run_command(args, timeout=600)
                    if p.returncode != 0:
                        raise RuntimeError(p.stderr.strip()[-300:])
                    plain += json.loads(p.stdout)["samples"]
                    harness += case.time(0, per, cfg.warmup, 0)
                del case
                out.append(Record(probe=PROBE, backend="plain-cuda", variant="cublas", metric="time",
                                  op="cuBLAS from a plain C++ loop (no harness)", clock="device_events",
                                  samples_s=plain, warmup=cfg.warmup, work=r.work, device=r.device,
                                  params=dict(r.params, cache="hot, one set", rounds=rounds,
                                              harness_interleaved_s=harness)))
            except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as e:
                out.append(Record(probe=PROBE, backend="plain-cuda", variant="cublas", metric="time", status=ERROR,
                                  reason=f"plain loop failed: {e}", params=dict(r.params), device=r.device))
    return out


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
    from .blas_cli import BENCHMARK

    return BENCHMARK.main(argv, prog)
