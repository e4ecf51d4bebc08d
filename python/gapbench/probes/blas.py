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

import argparse
import glob
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .. import registry as bk
from ..blasspec import OpSpec, native_dims, shape_text
from ..dtypes import DTYPES, NATIVE_CODE, check, expected, from_bytes, round_to, to_bytes
from ..result import ERROR, FAILED, NOT_APPLICABLE, OK, UNAVAILABLE, Record
from . import copy as copy_probe
from . import gemm as gemm_probe
from . import gemv as gemv_probe
from . import vjp as vjp_probe

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

#: Dense datasheet peaks (NVIDIA SXM datasheets): HBM bytes/s and FLOP/s per dtype. Shown beside
#: the measured roofline, never in place of it.
DATASHEET = {
    "H200": {"bytes_per_s": 4.8e12, "fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12},
    "H100 80GB HBM3": {"bytes_per_s": 3.35e12, "fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12},
}


# --cold scrub -> (native cache code, metric, the `cache` param written with the samples);
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
    fam = backend.split("-")[0]
    desc = spec.framework_text[fam]
    ok_dtype, why = ad.supports(dtype)
    if not ok_dtype:
        return [_record(spec, dtype, shape, backend, fam, status=UNAVAILABLE, reason=why, op=desc, device=info.device)]
    try:
        arrays = [ad.array(a, dtype) for a in rounded]
        op = spec.framework(ad, fam, arrays)
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
                        params={"cache": "hot (framework buffers)", **extra})]
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
        if b.startswith("native"):
            continue
        try:
            adapters[b] = make_adapter(b)
            adapters[b].setup_context()
        except Exception as e:
            yield Record(probe=PROBE, backend=b, metric="all", status=ERROR, reason=f"setup failed: {e}",
                         device=infos[b].device)
    for spec in selected_specs(cfg.ops):
        for shape in shapes_for(spec, cfg):
            for dtype in cfg.dtypes:
                rng = np.random.default_rng(cfg.seed)
                rounded = [round_to(a, dtype) for a in spec.inputs(shape, rng)]
                ref = expected(spec.reference, [a.astype(np.float64) for a in rounded], spec.reduction(shape))
                for b in live:
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
                    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
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


def plain_ratios(records: list[Record]) -> list[tuple[str, str, str, float]]:
    """(op, dtype, shape, harness median / plain median) for each plain-checked vendor row: from
    the interleaved harness samples the plain row carries, else from the sweep's own row."""
    idx = {(r.backend, r.params.get("op"), r.params.get("dtype"), r.params.get("shape_text")): r
           for r in records if r.status == OK and r.variant == "cublas" and r.metric == "time"}
    out = []
    for (b, op, dt, sh), p in idx.items():
        if b != "plain-cuda":
            continue
        if p.params.get("harness_interleaved_s"):
            out.append((op, dt, sh, float(np.median(p.params["harness_interleaved_s"])) / p.summary().median))
        elif (h := idx.get(("native-cuda", op, dt, sh))):
            out.append((op, dt, sh, h.summary().median / p.summary().median))
    return out


# ============================================================== roofline and table
def roofline(records: list[Record]) -> dict:
    """Per device class: peak bandwidth (the best copy of the run, in bytes read + written per
    second) and peak compute per dtype (the best GEMM of the run), both measured here. The best
    rates come from the largest sizes; the record each came from is named."""
    out: dict = {}
    for r in records:
        if r.status != OK or r.metric != "time" or r.params.get("op") not in ("copy", "gemm"):
            continue
        if r.backend.startswith("plain-"):  # a check of the harness, not another implementation
            continue
        if r.params["op"] == "copy":
            key, rate = "bytes_per_s", r.rates().get("bytes_per_s", 0.0)
        else:
            key = r.params.get("precision", r.params["dtype"])
            rate = r.rates().get("flops_per_s", 0.0)
        cls = bk.device_class_of(r.backend)
        cur = out.setdefault(cls, {}).get(key)
        if cur is None or rate > cur["value"]:
            out[cls][key] = {"value": rate, "from": f"{r.backend}/{r.variant} {r.params['dtype']} {r.params['shape_text']}"}
    return out


def _datasheet(records: list[Record]) -> dict:
    for r in records:
        name = str(r.device.get("name", ""))
        for key, sheet in DATASHEET.items():
            if key in name:
                return sheet
    return {}


def _rate_text(r: Record) -> tuple[str, float]:
    rates = r.rates()
    if r.params.get("op") == "gemm":
        v = rates.get("flops_per_s", 0.0)
        return f"{v / 1e12:.3g} TFLOP/s", v
    v = rates.get("bytes_per_s", 0.0)
    return f"{v / 1e9:.4g} GB/s", v


def build_tables(records: list[Record], roof: dict | None = None):
    from rich.markup import escape
    from rich.table import Table

    roof = roofline(records) if roof is None else roof
    sheet = _datasheet(records)
    tables = []
    ops = list(dict.fromkeys(r.params.get("op") for r in records if r.params.get("op")))
    for op in ops:
        t = Table(title=f"{op}: median per run, rate, % of the roofline measured here (and of the datasheet)")
        for c in ("shape", "dtype", "backend", "variant", "median us", "p10-p90 us", "rate", "% roof", "% sheet",
                  "check"):
            t.add_column(c, overflow="fold")
        for r in (r for r in records if r.params.get("op") == op):
            base = [r.params["shape_text"], r.params["dtype"], r.backend, r.variant]
            if r.status != OK:
                t.add_row(*base, f"[yellow]{r.status}: {escape(r.reason[:120])}[/yellow]", "", "", "", "", "")
                continue
            s = r.summary()
            txt, val = _rate_text(r)
            cls = bk.device_class_of(r.backend)
            if op == "gemm":
                key = r.params.get("precision", r.params["dtype"])
            else:
                key = "bytes_per_s"
            peak = roof.get(cls, {}).get(key, {}).get("value")
            pr = f"{100 * val / peak:.0f}%" if peak else ""
            ps = f"{100 * val / sheet[key]:.0f}%" if sheet.get(key) and cls == "cuda" else ""
            noisy = "~" if s.noisy else ""
            t.add_row(*base, f"{s.median * 1e6:.4g}{noisy}", f"{s.p10 * 1e6:.4g}-{s.p90 * 1e6:.4g}", txt, pr, ps,
                      "ok" if r.verified else "")
        tables.append(t)
    return tables


def markdown_summary(records: list[Record], shapes: list[str] | None = None) -> str:
    """One Markdown row per op x dtype x shape: the best hand-written variant, the vendor library
    and each framework, as % of the measured bandwidth roofline (copy, gemv, vjp) or TFLOP/s
    (gemm), generated from result records (for READMEs and issues)."""
    roof = roofline(records)
    cols = ["hand-written (best)", "vendor", "torch", "cupy", "mlx"]
    lines = ["| op | dtype | shape | unit | " + " | ".join(cols) + " |", "|" + "---|" * (4 + len(cols))]
    groups: dict = {}
    for r in records:
        if r.status != OK or r.metric != "time" or not r.params.get("op"):
            continue
        if shapes and r.params["shape_text"] not in shapes:
            continue
        groups.setdefault((r.params["op"], r.params["dtype"], r.params["shape_text"]), []).append(r)
    for (op, dtype, shape), rs in groups.items():
        def value(r):
            if op == "gemm":
                return r.rates().get("flops_per_s", 0.0) / 1e12
            peak = roof.get(bk.device_class_of(r.backend), {}).get("bytes_per_s", {}).get("value")
            return 100 * r.rates().get("bytes_per_s", 0.0) / peak if peak else 0.0

        def fmt(r):
            return f"{value(r):.0f}" if op != "gemm" else f"{value(r):.3g}"

        cells = []
        hand = [r for r in rs if r.backend.startswith("native") and r.variant.startswith("v")]
        best = max(hand, key=value, default=None)
        cells.append(f"{fmt(best)} ({best.variant})" if best else "")
        vendor = [r for r in rs if r.backend.startswith("native") and not r.variant.startswith("v")]
        cells.append(", ".join(f"{fmt(r)} ({r.variant})" for r in vendor))
        for fam in ("torch", "cupy", "mlx"):
            fr = [r for r in rs if r.backend.split("-")[0] == fam]
            cells.append(", ".join(f"{fmt(r)}" + (" (tf32)" if r.params.get("precision") == "tf32" else "")
                                   for r in fr))
        unit = "TFLOP/s" if op == "gemm" else "% of copy BW"
        lines.append(f"| {op} | {dtype} | {shape} | {unit} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ============================================================== CLI
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


def _split(text: str | None, allowed, what: str) -> list[str] | None:
    if text is None:
        return None
    items = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in items if s not in allowed]
    if bad:
        raise ValueError(f"unknown {what} {', '.join(bad)}; choose from {', '.join(allowed)}")
    return items


def main(argv: list[str] | None = None, prog: str = "python -m bench.blas") -> int:
    from rich.console import Console

    from ..cli import open_run, progress_bar, write_figures

    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", help=f"comma list of {', '.join(OP_NAMES)} (default: all; vjp = vjp_dx and vjp_dw)")
    ap.add_argument("--dtypes", help=f"comma list of {', '.join(DTYPES)} (default: all)")
    ap.add_argument("--shapes", help="comma list: N (copy), MxK (gemv, vjp), BxMxNxK (gemm); default: each op's sweep")
    ap.add_argument("--backends", help=f"comma list (default: all). Known: {', '.join(bk.ALL)}")
    ap.add_argument("--quick", action="store_true", help="small shapes and few samples (CI)")
    ap.add_argument("--samples", type=int, default=None, help="timed runs per variant (default 100; quick 10)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed runs first (default 10; quick 2)")
    ap.add_argument("--budget", type=float, default=None, help="timed seconds per variant; samples are cut to fit (default 3)")
    ap.add_argument("--cold", nargs="?", const="read", default=None, metavar="SCRUBS",
                    help="also time native CUDA kernels with L2 scrubbed before each run: read (default: a read "
                         "pass, L2 left clean), write (a memset, L2 left dirty), or read,write for both")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: fresh data every run)")
    ap.add_argument("--out", help="result JSON (default results/blas-<time>.json); CSV written beside it")
    ap.add_argument("--no-plots", action="store_true", help="skip the PNG figures (written next to the JSON)")
    ap.add_argument("--no-plain", action="store_true", help="skip the plain C++ cuBLAS loop check")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    console = Console() if Console().is_terminal else Console(width=200)
    try:
        cfg = Config(quick=args.quick, cold=_split(args.cold, list(COLD_MODES), "--cold scrub") or [], seed=args.seed)
        if args.quick:
            cfg.samples, cfg.warmup, cfg.budget_s = 10, 2, 0.5
        cfg.ops = _split(args.ops, OP_NAMES, "op") or cfg.ops
        cfg.dtypes = _split(args.dtypes, list(DTYPES), "dtype") or cfg.dtypes
        if args.shapes:
            cfg.shapes = parse_shapes(args.shapes)
        for name in ("samples", "warmup"):
            if getattr(args, name) is not None:
                setattr(cfg, name, getattr(args, name))
        if args.budget is not None:
            cfg.budget_s = args.budget
        if cfg.samples < 1 or cfg.warmup < 0 or cfg.budget_s <= 0:
            raise ValueError("--samples must be >= 1, --warmup >= 0, --budget > 0")
        names = bk.resolve(args.backends)
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    writer = open_run(PROBE, args.out, prog, argv, asdict(cfg), names)
    n_cases = (sum(len(shapes_for(spec, cfg)) for spec in selected_specs(cfg.ops)) * len(cfg.dtypes)
               * max(1, len([n for n in names if bk.info(n).available])))
    with progress_bar(console, n_cases, disable=args.no_progress) as bar:
        def on_case(text):
            bar.describe(f"blas: {text}")
            bar.advance()

        for rec in iterate(cfg, names, on_case):
            writer.add(rec)
    if not args.no_plain:
        writer.extend(plain_check(writer.records, cfg))
    writer.finish(roofline=roofline(writer.records))
    for t in build_tables(writer.records, writer.run["roofline"]):
        console.print(t)
    missing = [r for r in writer.records if r.metric == "all"]
    ratios = plain_ratios(writer.records)
    if ratios:
        console.print("cuBLAS from the harness vs from a plain C++ loop (median ratio, same session): " + ", ".join(
            f"{op} {dt} {sh} {x:.3f}" for op, dt, sh, x in ratios))
    from rich.markup import escape

    for r in missing:
        console.print(f"[yellow]{r.backend}[/yellow]: {r.status}: {escape(r.reason)}", highlight=False)
    if not args.no_plots:
        write_figures(console, "blas_figures", writer, writer.run.get("roofline"))
    console.print(f"results: {writer.path} and {writer.csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
