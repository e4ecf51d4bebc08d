"""The extension itself: which parts were built, how each reports (un)availability, the typed
contract (enums, NotApplicable, the .pyi stubs), and on a GPU every library kernel, the gate and
the last-run check."""
import ast
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gapbench.core.names import Backend, DType
import gapbench
from gapbench import _native
from gapbench.core import dtypes
from gapbench.core import native, opdecl
from conftest import ROOT
from gapbench.backends import registry
from gapbench.ops.spec import native_dims
from gapbench import ops

CUDA = registry.info(Backend.native_cuda).available
needs_gpu = pytest.mark.skipif(not CUDA, reason="needs an NVIDIA GPU and driver: " + registry.info(Backend.native_cuda).reason)
#: the extension was built with the lab's kernels (GAPBENCH_LAB=ON: csrc/lab.def runs by name)
LAB_BUILT = "lab" in _native.build_info["parts"].split(",")


def test_cpu_part_always_built():
    assert "cpu" in _native.build_info["parts"].split(",")
    assert _native.cpu.noop() is None
    t0 = _native.cpu.now_ns()
    t1 = _native.cpu.now_ns()
    assert 0 <= t1 - t0 < 10**9


def test_build_info_carries_provenance():
    info = _native.build_info
    assert len(info["source_hash"]) == 64 and int(info["source_hash"], 16) >= 0
    assert isinstance(info["dirty"], bool)
    assert info["source_commit"] == "unknown" or len(info["source_commit"]) == 40


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("readelf") is None,
                    reason="reads the ELF dynamic symbol table with readelf (Linux, binutils)")
def test_module_exports_only_its_init_function():
    """cmake/native.exports keeps every other symbol local. Without it, a toolchain that links
    libstdc++ statically (the lent GPU machines' does) exported its GNU_UNIQUE locale ids, the
    system libstdc++ bound to them, and `import torch` after gapbench._native crashed (SIGSEGV)."""
    out = subprocess.run(["readelf", "-W", "--dyn-syms", _native.__file__], capture_output=True, text=True,
                         check=True).stdout
    defined = [f.split() for f in out.splitlines() if f.strip()[:1].isdigit()]
    exported = sorted(f[7] for f in defined if len(f) >= 8 and f[6] != "UND" and f[4] != "LOCAL")
    assert exported == ["PyInit__native"], exported[:20]


@pytest.mark.parametrize("first", ["gapbench", "torch"])
@pytest.mark.parametrize("gpu", [False, pytest.param(True, marks=[pytest.mark.cuda, needs_gpu])])
def test_importable_beside_torch_in_either_order(first, gpu):
    """Each import order in a fresh process, touching both (the crash described in
    test_module_exports_only_its_init_function happened at `import torch`)."""
    pytest.importorskip("torch")
    mods = ["import gapbench._native as g", "import torch"]
    use = "g.cpu.noop(); x = torch.ones(4" + (", device='cuda'" if gpu else "") + ").sum().item(); assert x == 4"
    code = "; ".join((mods if first == "gapbench" else mods[::-1]) + [use, "print('ok')"])
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", (p.returncode, p.stderr[-2000:])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine: the CUDA part is not built")
def test_cuda_part_built_where_nvcc_exists():
    assert _native.cuda.built
    assert "cuda" in _native.build_info["parts"].split(",")
    assert _native.build_info["cuda_archs"]


def test_cuda_status_explains_itself():
    st = _native.cuda.status(0)
    if st["available"]:
        assert st["name"] and st["driver_version"] > 0
    else:
        assert st["reason"]
        b = registry.info(Backend.native_cuda)
        assert not b.available and b.reason == st["reason"]


@pytest.mark.skipif(CUDA or not _native.cuda.built,
                    reason="checks the no-driver path: needs the CUDA part built and no usable GPU")
def test_cuda_calls_without_driver_raise_with_the_runtime_error():
    assert "driver" in _native.cuda.status(0)["reason"].lower()
    with pytest.raises(RuntimeError, match="cudaError"):
        _native.cuda.LaunchProbe(_native.LaunchKernel.null, 1, 0)
    with pytest.raises(RuntimeError, match="cudaErrorInsufficientDriver"):
        _native.cuda.BlasCase(_native.Op.gemv, _native.DType.fp32, 1, 8, 1, 8)
    with pytest.raises(RuntimeError, match="cudaErrorInsufficientDriver"):
        _native.cuda.Gate(0, 1.0)
    with pytest.raises(RuntimeError, match="cudaErrorInsufficientDriver"):
        _native.cuda.Streams(0, _native.cuda.TIMING_STREAMS)
    with pytest.raises(ValueError, match=r"\[1, 64\]"):  # a bad count is refused before any CUDA call
        _native.cuda.Streams(0, 0)


@pytest.mark.skipif(not _native.cuda.built, reason="CUDA part not built")
def test_every_plain_loop_is_installed_and_found_where_cuda_is_built():
    """Each plain C++ loop is installed in gapbench/bin and its benchmark finds it there (bench.dist
    once looked one folder too deep and reported the NCCL loop as not built on a GPU machine)."""
    from gapbench.benchmarks.blas.plain import plain_binary as blas_plain
    from gapbench.benchmarks.collectives.plain import plain_bin
    from gapbench.benchmarks.launch.command import plain_binary as launch_plain
    from gapbench.core.native import tool

    found = {n: tool(n) for n in ("gapbench_launch_plain", "gapbench_blas_plain", "gapbench_nccl_plain")}
    assert all(found.values()), found
    assert (launch_plain(), blas_plain(), plain_bin()) == tuple(found.values())


@pytest.mark.skipif(not _native.cuda.built, reason="CUDA part not built")
def test_plain_loop_binary_installed_and_fails_cleanly_without_gpu():
    from gapbench.benchmarks.launch.command import plain_binary

    exe = plain_binary()
    assert exe is not None
    if not CUDA:
        p = subprocess.run([str(exe), "2", "2", "0"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and "failed" in p.stderr


@pytest.mark.skipif(not _native.cuda.built, reason="CUDA part not built")
def test_paced_blas_loop_answers_each_round_or_fails_with_its_reason():
    """The plain cuBLAS loop in paced rounds (gapbench.core.worker.PacedCommand): one JSON line per
    round, each only once asked; without a GPU the loop's own error comes back as the reason."""
    from gapbench.backends.native import cublas_candidates
    from gapbench.benchmarks.blas.plain import plain_binary
    from gapbench.core.worker import PacedCommand

    exe = plain_binary()
    assert exe is not None
    lib = _native.cuda.cublas_load(cublas_candidates()) if CUDA else "libcublas.so"
    with PacedCommand([str(exe), lib or "libcublas.so", "gemv", "fp32", "1", "256", "1", "256", "7", "1", "3"],
                      timeout=120) as loop:
        if not (CUDA and lib):
            with pytest.raises(RuntimeError, match="(?i)cublas|cuda"):
                loop.round()
            return
        docs = [loop.round() for _ in range(3)]
    assert [d["round"] for d in docs] == [0, 1, 2]
    assert all(len(d["samples"]) == 7 and min(d["samples"]) > 0 and d["invalid_samples"] == 0 for d in docs)


def test_metal_part_reports_why_not_here():
    st = _native.metal.status()
    if not _native.metal.built:
        assert not st["available"] and st["reason"]


# ------------------------------------------------------------------ the typed contract
CONTRACT = {
    "Op": [d.name for d in opdecl.load(ROOT / "csrc" / "ops.def")],
    "DType": ["fp32", "fp16", "bf16"],
    "Cache": ["hot", "cold_clean", "cold_dirty"],
    "Impl": ["reference", "dispatch", "vendor", "vendor_tf32"],
    "LaunchKernel": ["null", "add1"],
    "Kernel": [k for d in opdecl.load(ROOT / "csrc" / "ops.def") for k in d.kernels]
              + [k for ks in opdecl.lab_kernels(ROOT / "csrc" / "lab.def").values() for k in ks],
}


@pytest.mark.parametrize("enum_name", list(CONTRACT))
def test_enums_round_trip_by_name(enum_name):
    enum = getattr(_native, enum_name)
    members = [getattr(enum, name) for name in CONTRACT[enum_name]]
    assert [m.name for m in members] == CONTRACT[enum_name]
    assert len({m.value for m in members}) == len(members)  # distinct values
    helper = {"Op": native.op, "DType": native.dtype, "Cache": native.cache, "Impl": native.impl,
              "LaunchKernel": native.launch_kernel, "Kernel": native.kernel}[enum_name]
    for m in members:
        assert helper(m.name) is m
    with pytest.raises(ValueError, match=r"(?i)unknown .*'nope'"):
        helper("nope")


def test_python_names_map_to_the_enums():
    """The specs and dtypes name the enum members: no integer codes on the Python side."""
    assert [native.op(s.name).name for s in ops.all_specs()] == CONTRACT["Op"]
    assert [native.dtype(d).name for d in list(DType)] == CONTRACT["DType"]
    assert not hasattr(dtypes, "NATIVE_CODE")


def test_not_applicable_is_a_value_error():
    assert issubclass(_native.NotApplicable, ValueError)
    assert native.not_applicable() is _native.NotApplicable


def _stub_names() -> dict[str, set[str]]:
    """Public names the .pyi declares: top level, and inside each submodule / class namespace."""
    # beside the package's Python files: with the extension in an installed wheel that is where the
    # .so is too; an editable install keeps the .so in site-packages and the stub in python/gapbench
    tree = ast.parse((Path(gapbench.__file__).parent / "_native.pyi").read_text())
    out: dict[str, set[str]] = {"": set()}

    def walk(body, prefix):
        for node in body:
            if isinstance(node, ast.ClassDef):
                out[prefix].add(node.name)
                key = f"{prefix}.{node.name}".lstrip(".")
                out[key] = set()
                walk(node.body, key)
            elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                out[prefix].add(node.name)
            elif isinstance(node, ast.AnnAssign):
                out[prefix].add(node.target.id)
            elif isinstance(node, ast.Assign):
                out[prefix].update(t.id for t in node.targets)

    walk(tree.body, "")
    return out


def _public(obj) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def test_stubs_match_the_built_module():
    stub = _stub_names()
    assert stub[""] == _public(_native) - {"annotations"}
    assert stub["cpu"] == _public(_native.cpu)
    for enum_name, names in CONTRACT.items():
        assert stub[enum_name] == set(names)
    for part in ("cuda", "metal", "dist"):
        mod = getattr(_native, part)
        built = _public(mod)
        assert built <= stub[part], f"{part}: in the module, not the stub: {built - stub[part]}"
        if mod.built:  # a built part has everything the stub promises, classes member for member
            assert built == stub[part], f"{part}: in the stub, not the module: {stub[part] - built}"
            for cls in (n for n in built if isinstance(getattr(mod, n), type)):
                members = getattr(getattr(mod, cls), "__members__", None)
                if members is not None:  # an enum: its members, not its machinery
                    assert set(members) == stub[f"{part}.{cls}"], f"{part}.{cls}"
                else:
                    assert _public(getattr(mod, cls)) == stub[f"{part}.{cls}"], f"{part}.{cls}"


# ------------------------------------------------------------------ GPU: every Impl, gate, last run
SPECS = {s.name: s for s in ops.all_specs()}
DECLS = {d.name: d for d in opdecl.load(ROOT / "csrc" / "ops.def")}
# Ragged shapes: dimensions that are not multiples of any tile, pack or warp, k not a multiple of 8
# (the 16-byte kernels step aside), fewer rows than a tile, and shapes that drive each branch of
# the dispatcher's rule (tall and short W, wide and narrow strips, one-wave block sizes, W over
# and under L2/4, split-k and warp rows, wgmma's 128- and 256-wide tiles).
RAGGED = {
    "copy": [{"n": 1}, {"n": 1001}, {"n": (1 << 20) + 3}],
    # (x-stationary: 16392 fp32 leaves the last k-slice 2 packs wide; 777 ends row runs mid-pair;
    # 1336 fp16 keeps only 2 warps busy)
    "gemv": [{"m": 1, "k": 1}, {"m": 37, "k": 1000}, {"m": 1000, "k": 1003}, {"m": 1001, "k": 16904},
             {"m": 4099, "k": 1032}, {"m": 16384, "k": 1024}, {"m": 777, "k": 16392}, {"m": 1001, "k": 1336},
             {"m": 3, "k": 264}, {"m": 4097, "k": 4104}, {"m": 129, "k": 100}],
    # (strips: 2050x8456 is 133 strips of 64 fp16 columns, the last 8 wide; 1001x16904 fp32 529;
    # 8193x4104 and 4100x1032 take the tall rule with a second slice of rows)
    "vjp_dx": [{"m": 1, "k": 8}, {"m": 37, "k": 1003}, {"m": 1001, "k": 16904}, {"m": 2050, "k": 8456},
               {"m": 4100, "k": 1032}, {"m": 4100, "k": 16392}, {"m": 8193, "k": 4104}, {"m": 300, "k": 24},
               {"m": 1001, "k": 1336}, {"m": 77, "k": 4104}, {"m": 2049, "k": 1000}, {"m": 3, "k": 264},
               {"m": 129, "k": 100}],
    "vjp_dw": [{"m": 1, "k": 1}, {"m": 37, "k": 1003}, {"m": 1001, "k": 4104}],
    "gemm": [{"batch": 1, "m": 1, "n": 8, "k": 8}, {"batch": 3, "m": 200, "n": 136, "k": 72},
             {"batch": 2, "m": 130, "n": 264, "k": 520}, {"batch": 2, "m": 67, "n": 33, "k": 45}],
}
# (an op listed above is checked on those shapes; any other on its spec's ragged test shapes)
CASES = [(op, dt, sh) for op in SPECS for dt in list(DType) for sh in RAGGED.get(op, SPECS[op].test_shapes)]


def _case(op, dt, shape, rng):
    spec = SPECS[op]
    rounded = [dtypes.round_to(a, dt) for a in spec.inputs(shape, rng)]
    case = _native.cuda.BlasCase(native.op(op), native.dtype(dt), *native_dims(shape), 0)
    for i, a in enumerate(rounded):
        case.set_input(i, dtypes.to_bytes(a, dt))
    return case, spec.expected([a.astype(np.float64) for a in rounded], shape)


@pytest.fixture(scope="module")
def cublas():
    from gapbench.backends.native import cublas_candidates

    return _native.cuda.cublas_load(cublas_candidates()) if CUDA else ""


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("op,dt,shape", CASES, ids=[f"{o}-{d}-{'x'.join(map(str, s.values()))}" for o, d, s in CASES])
def test_every_impl_verifies_on_ragged_shapes(op, dt, shape, cublas):
    case, ref = _case(op, dt, shape, np.random.default_rng(7))
    decl = DECLS[op]
    vendor = decl.vendor is not None and (cublas or decl.vendor[0] != "cublas")
    impls = ["reference", "dispatch"] + (["vendor"] if vendor else [])
    if decl.tf32 and dt == "fp32" and cublas:
        impls.append("vendor_tf32")
    for name in impls:
        impl = native.impl(name)
        tol = "tf32" if name == "vendor_tf32" else dt
        for _ in range(2):  # twice: kernels that count in the workspace must have reset it
            ok, detail = dtypes.check(dtypes.from_bytes(case.run_once(impl), dt), ref, tol)
            assert ok, f"{name} ({case.strategy(impl)}): {detail}"
    if not (decl.tf32 and dt == "fp32"):
        with pytest.raises(_native.NotApplicable):
            case.run_once(native.impl("vendor_tf32"))
    if decl.vendor is None:
        with pytest.raises(_native.NotApplicable, match=decl.vendor_reason):
            case.run_once(native.impl("vendor"))


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("op,dt,shape", CASES, ids=[f"{o}-{d}-{'x'.join(map(str, s.values()))}" for o, d, s in CASES])
def test_every_kernel_runs_by_name_and_verifies_or_says_why_not(op, dt, shape):
    """The one path for every kernel of the library (bench.blas --variants all): each kernel of
    the op, run by name (_native.Kernel) on a poisoned output, matches float64 twice or refuses
    with NotApplicable; time() runs it and its last timed output verifies; a kernel of another op
    is refused."""
    case, ref = _case(op, dt, shape, np.random.default_rng(7))
    ran = 0
    lab = set(native.kernels_of(op, lab=True)) - set(DECLS[op].kernels)  # csrc/lab.def
    for name in native.kernels_of(op, lab=True):
        k = native.kernel(name)
        assert case.strategy(k) == name
        try:
            for _ in range(2):  # twice: kernels that count in the workspace must have reset it
                ok, detail = dtypes.check(dtypes.from_bytes(case.run_once(k), dt), ref, dt)
                assert ok, f"{name}: {detail}"
        except _native.NotApplicable as e:
            if name in lab and not LAB_BUILT:
                assert "GAPBENCH_LAB=ON" in str(e)
            continue
        ran += 1
        assert len(case.time(k, 3, 1, native.cache("hot"))) == 3
        ok, detail = dtypes.check(dtypes.from_bytes(case.last_output(), dt), ref, dt)
        assert ok, f"{name}, last timed run: {detail}"
    assert ran >= 2  # the reference and at least one shipped kernel
    other = next(k for d in DECLS.values() if d.name != op for k in d.kernels)
    with pytest.raises(ValueError, match="is not a kernel of"):
        case.run_once(native.kernel(other))


@pytest.mark.cuda
@needs_gpu
def test_every_stream_of_a_case_runs_it_right(cublas):
    """A case can time on kTimingStreams streams (cuda/blas.h: a stream's place among the hardware
    queues moves a small kernel's time, so bench.blas puts each paired round on the next one): on
    every one, the dispatcher's and cuBLAS's runs (its handle follows the stream) write the right
    output, set_input and run_once are ordered on it, and a stream out of range is refused."""
    shape = {"m": 512, "k": 1024}
    case, ref = _case("gemv", "fp16", shape, np.random.default_rng(3))
    assert case.streams == 8
    for i in list(range(8)) + [3, 0]:
        case.use_stream(i)
        for name in ("dispatch", "vendor"):
            assert len(case.time(native.impl(name), 3, 1, native.cache("hot"))) == 3
            ok, detail = dtypes.check(dtypes.from_bytes(case.last_output(), "fp16"), ref, "fp16")
            assert ok, f"{name} on stream {i}: {detail}"
    case.use_stream(5)
    spec = SPECS["gemv"]
    new = [dtypes.round_to(a, "fp16") for a in spec.inputs(shape, np.random.default_rng(4))]
    for i, a in enumerate(new):
        case.set_input(i, dtypes.to_bytes(a, "fp16"))
    want = spec.expected([a.astype(np.float64) for a in new], shape)
    assert dtypes.check(dtypes.from_bytes(case.run_once(native.impl("dispatch")), "fp16"), want, "fp16")[0]
    with pytest.raises(ValueError, match="out of range"):
        case.use_stream(8)


@pytest.mark.cuda
@needs_gpu
def test_time_empty_times_an_empty_kernel_and_leaves_the_rows_as_they_were(cublas):
    """bench.blas --launch-floor: time_empty gives one positive sample each, on every stream, each
    shorter than the case's own run beside it, and leaves last_output what the last timed run of
    the case wrote (the empty kernel writes nothing and takes no input set)."""
    case, ref = _case("gemv", "fp16", {"m": 4096, "k": 4096}, np.random.default_rng(5))
    for i in (0, 5):
        case.use_stream(i)
        op = case.time(native.impl("dispatch"), 20, 2, native.cache("hot"))
        before = bytes(case.last_output())
        empty = case.time_empty(20, 2)
        assert len(empty) == 20 and min(empty) > 0
        assert float(np.median(empty)) < float(np.median(op))
        assert bytes(case.last_output()) == before
        ok, detail = dtypes.check(dtypes.from_bytes(case.last_output(), "fp16"), ref, "fp16")
        assert ok, detail
    with pytest.raises(ValueError, match="samples"):
        case.time_empty(0, 0)


#: the lab's kernels at one regular shape per op (whole 16-byte packs, every SM busy)
LAB_SHAPES = {"vjp_dx": {"m": 2048, "k": 4096}, "vjp_dw": {"m": 64, "k": 1024},
              "gemm": {"batch": 2, "m": 256, "n": 128, "k": 192}}


@pytest.mark.cuda
@needs_gpu
@pytest.mark.skipif(not LAB_BUILT, reason="the extension was built without the lab (-Ccmake.define.GAPBENCH_LAB=ON)")
@pytest.mark.parametrize("op", sorted(opdecl.lab_kernels(ROOT / "csrc" / "lab.def")))
def test_every_lab_kernel_runs_on_hopper(op):
    """With the lab built in, each of the lab's kernels (csrc/lab.def) runs by name on a regular
    shape and verifies, first and last timed run, wherever it applies: on an sm_90 GPU every one of
    them applies to some dtype (the tensor-core ones to fp16/bf16 only)."""
    gpu_cc = _native.cuda.status(0)["compute_capability"]
    ran: dict[str, list[str]] = {}
    for dt in DType:
        case, ref = _case(op, dt.value, LAB_SHAPES[op], np.random.default_rng(11))
        for name in opdecl.lab_kernels(ROOT / "csrc" / "lab.def")[op]:
            k = native.kernel(name)
            try:  # (run_once poisons the output first)
                ok, detail = dtypes.check(dtypes.from_bytes(case.run_once(k), dt.value), ref, dt.value)
            except _native.NotApplicable:
                continue
            assert ok, f"{name} {dt.value}: {detail}"
            case.time(k, 3, 1, native.cache("cold_clean"))
            ok, detail = dtypes.check(dtypes.from_bytes(case.last_output(), dt.value), ref, dt.value)
            assert ok, f"{name} {dt.value}, last timed run: {detail}"
            ran.setdefault(name, []).append(dt.value)
    if gpu_cc == "9.0":
        assert set(ran) == set(opdecl.lab_kernels(ROOT / "csrc" / "lab.def")[op]), ran


@pytest.mark.cuda
@needs_gpu
def test_outputs_read_into_a_reused_pinned_buffer(cublas):
    """run_once / last_output(out=...) write into the given buffer (the run's page-locked
    read-back buffer, core.native.Staging) exactly what a new array gets, and refuse a buffer they
    cannot fill."""
    from gapbench.core.native import Staging

    case, ref = _case("gemv", "fp16", {"m": 1000, "k": 1032}, np.random.default_rng(5))
    stage = Staging(_native.cuda.pinned_bytes)
    buf = stage.out(case.output_bytes)
    assert buf.nbytes >= case.output_bytes and stage.out(16) is buf  # kept, not made again
    impl = native.impl("dispatch")
    fresh = case.run_once(impl)
    buf[:] = 0xAB
    got = case.run_once(impl, out=buf)
    assert got.nbytes == case.output_bytes and np.shares_memory(got, buf) and np.array_equal(got, fresh)
    assert dtypes.check(dtypes.from_bytes(got, "fp16"), ref, "fp16")[0]
    case.time(impl, 3, 1, native.cache("hot"))
    assert np.array_equal(case.last_output(out=buf), case.last_output())
    for bad in (np.zeros(case.output_bytes - 1, np.uint8), np.zeros(case.output_bytes, np.float32)[::2],
                np.frombuffer(bytes(case.output_bytes), np.uint8)):
        with pytest.raises(ValueError, match="out must be"):
            case.run_once(impl, out=bad)


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("cache", ["hot", "cold_clean", "cold_dirty"])
def test_last_timed_output_verified_and_l2_rotation(cache, cublas):
    for op, dt, shape in [("vjp_dx", "bf16", {"m": 1001, "k": 16904}), ("gemv", "fp32", {"m": 1000, "k": 1032}),
                          ("gemm", "fp16", {"batch": 2, "m": 130, "n": 264, "k": 520}),
                          ("vjp_dx", "fp16", {"m": 256, "k": 256})]:
        case, ref = _case(op, dt, shape, np.random.default_rng(3))
        with pytest.raises(RuntimeError, match="before any timed run"):
            case.last_output()
        samples = case.time(native.impl("dispatch"), 7, 2, native.cache(cache))
        assert len(samples) == 7 and all(s > 0 for s in samples) and case.invalid_samples == 0
        ok, detail = dtypes.check(dtypes.from_bytes(case.last_output(), dt), ref, dt)
        assert ok, f"{op} {dt} last timed run ({case.strategy(native.impl('dispatch'))}): {detail}"
        l2 = _native.cuda.status(0)["l2_bytes"]
        set_bytes = sum(-(-b // 256) * 256 for b in [case.input_bytes(i) for i in range(case.n_inputs)]
                        + [case.output_bytes])
        assert case.l2_resident or case.rotations * set_bytes >= 2 * l2


@pytest.mark.cuda
@needs_gpu
def test_dispatcher_follows_its_rule():
    """The strategy names the rules in cuda/ops/<op>.cuh promise, on an sm_90 GPU (H100/H200)."""
    if _native.cuda.status(0)["compute_capability"] != "9.0":
        pytest.skip("the table's gemm rows are for sm_90")
    want = {
        ("gemv", "fp32", (1024, 16384)): "gemv_x_stationary", ("gemv", "fp16", (1024, 16384)): "gemv_split_k",
        ("gemv", "bf16", (4096, 16384)): "gemv_warp_rows", ("gemv", "fp32", (1000, 1003)): "gemv_warp_rows",
        ("vjp_dx", "fp16", (16384, 16384)): "vjp_dx_strips256", ("vjp_dx", "fp16", (1024, 1024)): "vjp_dx_strips128_wave",
        ("vjp_dx", "fp32", (2048, 16384)): "vjp_dx_strips128_wave_ef", ("vjp_dx", "fp32", (37, 1003)): "vjp_dx_row_slices",
        ("vjp_dw", "bf16", (4096, 16384)): "vjp_dw_2d_stream", ("copy", "fp16", (1 << 20,)): "copy_vec16",
        ("gemm", "fp32", (8, 256, 256, 256)): "gemm_simt_tiles", ("gemm", "fp16", (8, 256, 256, 256)): "gemm_wgmma_tma256",
        ("gemm", "bf16", (2, 256, 128, 256)): "gemm_wgmma_tma128", ("gemm", "fp16", (2, 64, 60, 64)): "gemm_simt_tiles",
    }
    keys = {1: ("n",), 2: ("m", "k"), 4: ("batch", "m", "n", "k")}
    for (op, dt, dims), name in want.items():
        case = _native.cuda.BlasCase(native.op(op), native.dtype(dt), *native_dims(dict(zip(keys[len(dims)], dims))), 0)
        assert case.strategy(native.impl("dispatch")) == name, (op, dt, dims)
        assert case.strategy(native.impl("reference")) == f"{op}_reference"


@pytest.mark.cuda
@needs_gpu
def test_gate_releases_and_times_out():
    import torch

    gate = _native.cuda.Gate(0, 0.5)
    stream = torch.cuda.Stream()
    x = torch.ones(1024, device="cuda")
    # What runs behind a hold must have run once before: a first launch loads its module (lazy
    # loading), which waits for the held device, so the hold would end by its timeout.
    (x * 2, x * 3)
    torch.cuda.synchronize()
    # Released: the queued work runs after release, and the hold did not time out.
    gate.hold(stream.cuda_stream)
    with torch.cuda.stream(stream):
        y = x * 2
    time.sleep(0.05)
    assert not stream.query()  # held: the work behind the gate has not run
    gate.release()
    stream.synchronize()
    assert not gate.timed_out() and float(y.sum()) == 2048.0
    # Never released: the kernel gives up after its timeout, says so, and the stream goes on.
    t0 = time.perf_counter()
    gate.hold(stream.cuda_stream)
    with torch.cuda.stream(stream):
        z = x * 3
    stream.synchronize()
    waited = time.perf_counter() - t0
    assert 0.45 < waited < 5.0, waited  # 0.5 s counted at 3 GHz: longer on a slower SM clock
    gate.release()
    assert gate.timed_out() and float(z.sum()) == 3072.0
    with pytest.raises(ValueError, match="timeout_s"):
        _native.cuda.Gate(0, 0.0)


def test_the_parity_pad_schedule_gives_every_four_samples_both_parities():
    """cuda/gate.h's schedule, followed launch by launch: whatever the op launches (k kernels), however
    many kernels the stream ran before, and with a kernel of its own before each hold (a cold scrub),
    one then two pads after each gate in turn leave each op at each launch parity twice in every four
    consecutive samples; the native case's last-run poison (one kernel, one pad fewer) keeps it so.
    Without pads an op whose sample launches an even count (a one-kernel op timed hot: the gate and
    it) sits at one parity throughout, the one the stream's history gave.
    (The GPU test below counts the pads cuda/gate.cu really launches.)"""
    def parities(k, before, prefix, pads=True, n=16):
        count, turn, out = before, 0, []
        for i in range(n):
            last = i == n - 1
            count += prefix + (1 if last and pads else 0) + 1  # scrub, the poison, the gate kernel
            if pads:
                count += 1 + (turn & 1) - (1 if last else 0)
                turn += 1
            out.append(count % 2)  # the op's parity: the kernels launched on the stream before it
            count += k
        return out

    for k in (1, 2, 3, 4):
        for before in (0, 1):
            for prefix in (0, 1):
                got = parities(k, before, prefix)
                assert all(sum(got[j:j + 4]) == 2 for j in range(len(got) - 3)), (k, before, prefix, got)
                if (prefix + 1 + k) % 2 == 0:  # e.g. one kernel, hot: unpadded, the history's parity throughout
                    assert set(parities(k, before, prefix, pads=False)) == {(before + prefix + 1) % 2}


def _kernel_counts(run, *names) -> tuple[int, ...]:
    """How many kernels with each of `names` in their name `run()` launched, by torch's profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return tuple(sum(n in k for k in kernels) for n in names)


@pytest.mark.cuda
@needs_gpu
def test_parity_pads_launch_one_then_two_empty_kernels_after_each_hold(cublas):
    """bench.blas --parity balanced (cuda/gate.h): with pads on, each hold launches one, then two, then
    one... empty kernels after the gate kernel (four holds: six pads, whatever runs behind them); a
    native case's timed runs take them too, its last run's poison is then one kernel in place of one
    pad, and the last timed output is still the one checked (dispatcher and cuBLAS, hot and cold)."""
    import torch

    gate = _native.cuda.Gate(0, 1.0)
    assert gate.parity_pads is False
    stream = torch.cuda.Stream()

    def holds(n):
        for _ in range(n):
            gate.hold(stream.cuda_stream)
            gate.release()
            assert not gate.timed_out()

    holds(2)  # warm
    assert _kernel_counts(lambda: holds(4), "pad_kernel") == (0,)
    gate.parity_pads = True
    assert gate.parity_pads is True and _kernel_counts(lambda: holds(4), "pad_kernel") == (6,)
    gate.parity_pads = False
    assert _kernel_counts(lambda: holds(4), "pad_kernel") == (0,)

    case, ref = _case("gemv", "fp16", {"m": 1000, "k": 1003}, np.random.default_rng(11))
    case.parity_pads = True
    for name in ("dispatch", "vendor"):
        for cache in ("hot", "cold_clean"):
            case.time(native.impl(name), 4, 0, native.cache(cache))  # modules loaded, outside the count
            case.parity_pads = True  # the turn starts at one pad: 8 runs, 12 pads, one of them the poison
            got = _kernel_counts(lambda: case.time(native.impl(name), 8, 0, native.cache(cache)),
                                 "pad_kernel", "poison_kernel")
            assert got == (11, 1), (name, cache, got)
            ok, detail = dtypes.check(dtypes.from_bytes(case.last_output(), "fp16"), ref, "fp16")
            assert ok, f"{name} {cache}, parity pads: {detail}"
    case.parity_pads = False
    assert _kernel_counts(lambda: case.time(native.impl("dispatch"), 8, 0, native.cache("hot")),
                          "pad_kernel", "poison_kernel") == (0, 0)


@pytest.mark.cuda
@needs_gpu
def test_launch_probe_device_kernel_is_gated():
    p = _native.cuda.LaunchProbe(_native.LaunchKernel.null, 1, 0)
    assert p.kernel == _native.LaunchKernel.null
    samples = p.device_kernel(20, 50, 2)
    assert len(samples) == 20 and all(s > 0 for s in samples) and p.invalid_samples == 0


@pytest.mark.skipif(CUDA, reason="checks the spin fallback, used only where the native gate is absent")
def test_spin_fallback_drops_samples_queued_past_the_spin(monkeypatch):
    """Without the native gate a fixed spin holds the stream; a sample whose host queuing outlasted
    the shortest the spin can last is dropped and taken again, and never returned as valid."""
    from gapbench.backends import hold

    now = [0.0]
    monkeypatch.setattr(hold.time, "perf_counter", lambda: now[0])
    spins = []
    h = hold.StreamHold(0, spins.append)
    assert h.gate is None and "fixed spin" in h.method
    shortest = hold.SPIN_CYCLES / hold.MAX_CLOCK_HZ
    queue_times = iter([2 * shortest, 0.5 * shortest])
    results = iter([9.0, 1.5e-6])  # the first sample's events would include host time

    def enqueue():
        now[0] += next(queue_times)

    assert h.sample(0, enqueue, lambda: next(results)) == 1.5e-6
    assert h.invalid_samples == 1 and spins == [hold.SPIN_CYCLES] * 2

    def slow():
        now[0] += 1.01 * shortest

    with pytest.raises(hold.GateTimeout, match="could not queue"):
        h.sample(0, slow, lambda: 1.0)
    assert h.invalid_samples == 1 + hold.MAX_RETRIES


@pytest.mark.skipif(CUDA, reason="checks the spin fallback, used only where the native gate is absent")
def test_samples_each_held_on_their_own(monkeypatch):
    """time_events_each(n) takes n samples as n calls of time_events(..., 1) would: each one held
    (one spin each here), its events recorded around one call of fn, and each read after its stop."""
    from gapbench.backends import hold

    monkeypatch.setattr(hold.time, "perf_counter", lambda: 0.0)
    spins, log = [], []
    h = hold.StreamHold(0, spins.append)

    class Event:
        def __init__(self, name):
            self.name = name

        def record(self, stream):
            log.append((self.name, stream))

        def synchronize(self):
            log.append(("wait", self.name))

    start, stop = Event("start"), Event("stop")
    ms = iter([1.0, 2.0, 3.0])
    got = h.time_events_each(7, "s", start, stop, lambda: log.append("op"), 3, lambda a, b: next(ms))
    assert got == pytest.approx([1e-3, 2e-3, 3e-3])
    assert spins == [hold.SPIN_CYCLES] * 3
    assert log == [("start", "s"), "op", ("stop", "s"), ("wait", "stop")] * 3


def fake_kernel_case(good: bytes, strategies: dict, op: str, run_once=None, ran: list | None = None,
                     streams_seen: bool = False):
    """A stand-in CUDA BlasCase for run_case: every Impl and Kernel writes `good` unless
    `run_once(impl, bytearray)` changes the bytes or raises; strategy() names an Impl by
    `strategies` (else "<op>_<impl>") and a Kernel by itself; time() records the impl in `ran`
    (with `streams_seen`, (impl, the stream in use))."""

    class FakeCase:
        rotations, l2_resident, invalid_samples, output_bytes, streams, stream = 3, False, 0, len(good), 8, 0

        def __init__(self, *a):
            pass

        def set_input(self, i, data):
            pass

        def strategy(self, impl):
            if isinstance(impl, _native.Kernel):
                return impl.name
            return strategies.get(impl.name, f"{op}_{impl.name}")

        def run_once(self, impl, out=None):
            data = bytearray(good)
            if run_once is not None:
                data = run_once(impl, data)
            return np.frombuffer(bytes(data), np.uint8).copy()

        def use_stream(self, i):
            assert 0 <= i < self.streams
            self.stream = i

        def time(self, impl, n, warmup, cache):
            if ran is not None:
                ran.append((impl, self.stream) if streams_seen else impl)
            return [1e-6] * n

        def time_empty(self, n, warmup):  # the launch floor beside a short case (on by default)
            return [5e-7] * n

        def last_output(self, out=None):
            return np.frombuffer(good, np.uint8).copy()

    return FakeCase


def _fake_native_session(monkeypatch, case_cls, cublas_path="libcublas.so", pinned=False):
    """The CUDA part replaced by `case_cls` (a stand-in BlasCase), a fresh staging buffer, and a
    bench.blas Session holding native-cuda only: what run_case needs to drive a fake native case."""
    from gapbench.backends.base import BackendInfo
    from gapbench.core import native as native_mod

    part = {"BlasCase": case_cls}
    if pinned:
        part["pinned_bytes"] = staticmethod(lambda n: np.zeros(n, np.uint8))
    monkeypatch.setattr(_native, "cuda", type("FakePart", (), part))
    monkeypatch.setattr(native_mod, "_staging", None)  # a fresh read-back buffer, from the fake part
    return type("Session", (), {"infos": {Backend.native_cuda: BackendInfo(Backend.native_cuda, True)},
                                "adapters": {}, "cublas_path": cublas_path, "cublas_why": "",
                                "watch": None, "event_pair_s": None, "l2_bytes": None})()


def test_bench_rows_fail_when_the_last_timed_run_is_wrong(monkeypatch):
    """probes/blas.py's native path: a row whose last timed run left a wrong output is failed, not
    timed-and-ok; the dispatcher's row names its strategy; a NotApplicable impl is an n/a row."""
    from gapbench.benchmarks.blas import arms, run as blas
    from gapbench.benchmarks.blas.config import Config
    from gapbench.core.result import FAILED, NOT_APPLICABLE, OK

    spec, fp16 = ops.get("gemv"), DType.fp16
    shape = {"m": 64, "k": 48}
    rounded = [dtypes.round_to(a, fp16) for a in spec.inputs(shape, np.random.default_rng(1))]
    ref = spec.expected(rounded, shape)
    good = dtypes.to_bytes(np.asarray(ref.values, dtype=np.float32), "fp16").tobytes()
    broken = {"last": False}

    class FakeCase:
        rotations, l2_resident, invalid_samples, output_bytes, streams = 9, False, 0, len(good), 8

        def use_stream(self, i):
            pass

        def __init__(self, op, dt, *dims):
            assert op is _native.Op.gemv and dt is _native.DType.fp16

        def set_input(self, i, data):
            pass

        def strategy(self, impl):
            if impl is _native.Impl.vendor:
                raise _native.NotApplicable("no vendor here")
            return f"gemv_{impl.name}"

        def run_once(self, impl, out=None):
            return _into(out, good)

        def time(self, impl, n, warmup, cache):
            return [1e-6] * n

        def time_empty(self, n, warmup):  # the launch floor beside a short case (on by default)
            return [5e-7] * n

        def last_output(self, out=None):
            got = bytearray(good)
            if broken["last"]:
                got[0:2] = b"\xff\xff"  # one output the last timed run never wrote
            return _into(out, bytes(got))

    def _into(out, data):  # as the binding: into the reused buffer when given one, else new
        if out is None:
            return np.frombuffer(data, np.uint8).copy()
        out[:len(data)] = np.frombuffer(data, np.uint8)
        return out[:len(data)]

    session = _fake_native_session(monkeypatch, FakeCase, pinned=True)
    cfg = Config(samples=5, warmup=1)
    case = arms.Case(spec, fp16, shape, rounded, ref, lambda b, v, p=None, **kw: blas.record(spec, fp16, shape, b, v, p, **kw))
    for last_bad in (False, True):
        broken["last"] = last_bad
        recs = blas.run_case(case, cfg, session, [Backend.native_cuda])
        rows = {r.variant: r for r in recs}
        assert rows["vendor"].status == NOT_APPLICABLE and "no vendor" in rows["vendor"].reason
        g = rows["gapbench"]
        assert g.params["strategy"] == "gemv_dispatch" and g.conditions["rotations"] == 9 and g.conditions["cache"] == "rotated"
        if last_bad:
            assert g.status == FAILED and "last timed run" in g.reason and not g.samples_s
        else:
            assert g.status == OK and g.verified and "last timed run" in g.verify_detail


def test_variants_all_times_every_library_kernel_by_the_one_path(monkeypatch):
    """bench.blas --variants all (Config.kernels): every kernel of the op's library (csrc/ops.def)
    but the reference (checked, never timed) and the dispatched one (the `gapbench` row) is a row of
    its own, named by strategy, verified on a poisoned output and timed in the same paired rounds
    as the rest (the CUDA BlasCase runs a _native.Kernel as it runs an Impl). A kernel that cannot
    run here is an n/a row; one whose output is wrong fails and is not timed."""
    from gapbench.benchmarks.blas import arms, run as blas
    from gapbench.benchmarks.blas.config import Config
    from gapbench.core.result import FAILED, NOT_APPLICABLE, OK

    spec, fp32 = ops.get("gemv"), DType.fp32
    shape = {"m": 64, "k": 48}
    rounded = [dtypes.round_to(a, fp32) for a in spec.inputs(shape, np.random.default_rng(1))]
    ref = spec.expected(rounded, shape)
    good = dtypes.to_bytes(np.asarray(ref.values, dtype=np.float32), "fp32").tobytes()
    K = _native.Kernel
    ran: list = []

    def run_once(impl, data):
        if impl is K.gemv_x_stationary:
            raise _native.NotApplicable("needs k a multiple of 8")
        if impl is K.gemv_split_k:
            data[-4:] = b"\xff\xff\xff\xff"  # the last row never written
        return data

    FakeCase = fake_kernel_case(good, {"dispatch": "gemv_warp_rows", "vendor": "cublas"}, "gemv", run_once, ran)
    session = _fake_native_session(monkeypatch, FakeCase)
    case = arms.Case(spec, fp32, shape, rounded, ref, lambda b, v, p=None, **kw: blas.record(spec, fp32, shape, b, v, p, **kw))
    rows = {r.variant: r for r in blas.run_case(case, Config(samples=5, warmup=1, kernels=True), session,
                                                   [Backend.native_cuda]) if r.metric == "time"}
    # reference and the dispatched kernel (gemv_warp_rows, the `gapbench` row) get no row of their own
    assert set(rows) == {"gapbench", "cublas", "gemv_split_k", "gemv_x_stationary"}, sorted(rows)
    assert rows["gemv_x_stationary"].status == NOT_APPLICABLE and "multiple of 8" in rows["gemv_x_stationary"].reason
    assert rows["gemv_split_k"].status == FAILED and not rows["gemv_split_k"].samples_s
    assert rows["gapbench"].status == OK and rows["gapbench"].params["strategy"] == "gemv_warp_rows"
    assert rows["gapbench"].conditions["streams"] == 8  # recorded: the case's timing streams
    assert K.gemv_split_k not in ran and K.gemv_x_stationary not in ran
    without = {r.variant for r in blas.run_case(case, Config(samples=5, warmup=1), session, [Backend.native_cuda])}
    assert without == {"gapbench", "cublas"}


def _fake_copy_case(monkeypatch, dispatched: str, timed: list, streams_seen: bool = False):
    """(bench.blas case, session) of fp32 copy of 4096 elements on a stand-in native case whose
    dispatcher runs `dispatched` (no cuBLAS: the vendor is cudaMemcpyAsync); time() calls go to `timed`."""
    from gapbench.benchmarks.blas import arms, run as blas

    spec, fp32 = ops.get("copy"), DType.fp32
    shape = {"n": 4096}
    rounded = [dtypes.round_to(a, fp32) for a in spec.inputs(shape, np.random.default_rng(2))]
    ref = spec.expected(rounded, shape)
    good = dtypes.to_bytes(np.asarray(ref.values, dtype=np.float32), "fp32").tobytes()
    FakeCase = fake_kernel_case(good, {"dispatch": dispatched, "vendor": "cudaMemcpyAsync"}, "copy", ran=timed,
                                streams_seen=streams_seen)
    session = _fake_native_session(monkeypatch, FakeCase, cublas_path="")
    case = arms.Case(spec, fp32, shape, rounded, ref, lambda b, v, p=None, **kw: blas.record(spec, fp32, shape, b, v, p, **kw))
    return case, session


def test_a_kernel_row_that_verifies_is_timed_and_named_by_strategy(monkeypatch):
    """The same with a kernel whose output is right: it is timed (its own samples, paired with the
    dispatcher's) and its record names its strategy and says it is a library kernel."""
    from gapbench.benchmarks.blas import run as blas
    from gapbench.benchmarks.blas.config import Config
    from gapbench.core.result import OK

    timed: list = []
    case, session = _fake_copy_case(monkeypatch, "copy_reference", timed)
    rows = {r.variant: r for r in blas.run_case(case, Config(samples=5, warmup=1, kernels=True), session,
                                                   [Backend.native_cuda]) if r.metric == "time"}
    k = rows["copy_vec16"]
    assert k.status == OK and k.samples_s and k.params["strategy"] == "copy_vec16" and k.params["source"] == "kernel"
    assert _native.Kernel.copy_vec16 in timed and k.params["paired"]


def test_a_native_cases_rounds_take_its_streams_in_turn(monkeypatch):
    """Each paired round puts every native arm of the case on one stream (use_stream(round mod
    streams)): a stream's place among the hardware queues moves a small kernel's time, so the arms
    of a round share one and the rounds pool all of them (cuda/blas.h kTimingStreams). The alone
    check takes the streams in equal shares, as the rounds did."""
    from gapbench.benchmarks.blas import run as blas
    from gapbench.benchmarks.blas.config import Config

    timed: list = []
    case, session = _fake_copy_case(monkeypatch, "copy_vec16", timed, streams_seen=True)
    rows = [r for r in blas.run_case(case, Config(samples=12, warmup=1, min_rounds=12), session, [Backend.native_cuda])
            if r.metric == "time" and r.status == "ok"]
    assert len(rows) == 2 and all(r.conditions["streams"] == 8 for r in rows)
    import itertools

    impls = {impl for impl, _ in timed}
    # runs of calls on one stream: the warm-up and round 0 on stream 0, then a round a stream,
    # every arm once in each; then each arm alone over the 8 streams
    groups = [(s, [i for i, _ in g]) for s, g in itertools.groupby(timed, key=lambda x: x[1])]
    alone = 8 * len(impls)
    rounds, tail = groups[1:-alone], groups[-alone:]
    assert len(rounds) >= 11 and [s for s, _ in rounds] == [(i + 1) % 8 for i in range(len(rounds))]
    assert all(sorted(map(str, calls)) == sorted(map(str, impls)) for _, calls in rounds)
    assert [s for s, _ in tail] == list(range(8)) * len(impls)


def test_streams_one_keeps_a_native_case_on_one_stream(monkeypatch):
    """bench.blas --streams one: every round of a native case on its stream 0, the alone check too,
    and the rows record one stream (compare then tells it from the default's eight)."""
    from gapbench.benchmarks.blas import run as blas
    from gapbench.benchmarks.blas.config import Config
    from gapbench.core.names import StreamPlan

    timed: list = []
    case, session = _fake_copy_case(monkeypatch, "copy_vec16", timed, streams_seen=True)
    cfg = Config(samples=12, warmup=1, min_rounds=12, streams=StreamPlan.one)
    rows = [r for r in blas.run_case(case, cfg, session, [Backend.native_cuda]) if r.metric == "time" and r.status == "ok"]
    assert len(rows) == 2 and all(r.conditions["streams"] == 1 for r in rows)
    assert len(timed) > 24 and {s for _, s in timed} == {0}
