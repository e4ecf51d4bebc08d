"""The BLAS suite: dtype handling, references, the run on CPU backends for real, the CLI's
errors, the measured roofline, and every native variant on a GPU where one exists."""
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import run_module
from gapbench import dtypes, registry
from gapbench.probes import blas
from gapbench.result import FAILED, NOT_APPLICABLE, OK, UNAVAILABLE, Record, load_run


def test_bf16_rounding_is_round_to_nearest_even():
    x = np.array([1.0, 1.00390625, 1.01171875, -3.14159, 65504.0, 1e-3], np.float32)
    r = dtypes.round_bf16(x)
    # bf16 keeps 8 mantissa bits: every result is representable and within half an ulp
    assert np.all((r.view(np.uint32) & 0xFFFF) == 0)
    assert np.all(np.abs(r - x) <= np.abs(x) * 2.0 ** -8)
    assert r[1] == 1.0  # exactly half-way: ties to even (1.0, even mantissa)
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(r, t)


@pytest.mark.parametrize("dt", dtypes.DTYPES)
def test_bytes_roundtrip(dt):
    x = dtypes.round_to(np.random.default_rng().uniform(-2, 2, 257).astype(np.float32), dt)
    back = dtypes.from_bytes(dtypes.to_bytes(x, dt).tobytes(), dt)
    np.testing.assert_array_equal(back, x.astype(np.float64))


def test_check_rejects_poison_and_error():
    ref = np.ones(100)
    exp = dtypes.Expected(ref, ref, 1)  # one product per output, |product| = 1
    assert dtypes.check(ref.copy(), exp, "fp32")[0]
    poisoned = ref.copy()
    poisoned[7] = np.nan
    assert not dtypes.check(poisoned, exp, "fp32")[0]
    assert not dtypes.check(ref * (1 + 1e-3), exp, "fp32")[0]
    assert dtypes.check(ref * (1 + 2.0 ** -12), exp, "fp16")[0]  # within fp16's 2^-11
    assert not dtypes.check(ref * (1 + 2.0 ** -10), exp, "fp16")[0]


@pytest.mark.parametrize("spec", [s for specs in blas.OPS.values() for s in specs], ids=lambda s: s.name)
def test_references_and_work(spec):
    rng = np.random.default_rng(3)
    shape = spec.shapes(True)[0]
    ins = [a.astype(np.float64) for a in spec.inputs(shape, rng)]
    ref = spec.reference(ins)
    if spec.name == "copy":
        expect = ins[0]
    elif spec.name == "gemv":
        expect = np.einsum("mk,k->m", *ins)
    elif spec.name == "vjp_dx":
        expect = np.einsum("mk,m->k", *ins)
    elif spec.name == "vjp_dw":
        expect = ins[0][:, None] * ins[1][None, :]
    else:
        expect = np.einsum("bmk,bkn->bmn", *ins)
    np.testing.assert_allclose(ref, expect, rtol=1e-12, atol=1e-12)
    # work by hand on a small shape of the op's form, fp16 (2 bytes): flops, elements read + written
    small, flops, elements = {
        "copy": ({"n": 10}, 0.0, 10 + 10),
        "gemv": ({"m": 3, "k": 5}, 30.0, 15 + 5 + 3),  # A, x read; y written
        "vjp_dx": ({"m": 3, "k": 5}, 30.0, 15 + 3 + 5),  # W, v read; dx written
        "vjp_dw": ({"m": 3, "k": 5}, 15.0, 3 + 5 + 15),  # v, x read; dW written
        "gemm": ({"batch": 2, "m": 3, "n": 4, "k": 5}, 240.0, 2 * (15 + 20) + 2 * 12),
    }[spec.name]
    assert spec.work(small, "fp16") == {"flops": flops, "bytes": 2.0 * elements}
    assert all(np.any(a != 0) for a in ins)  # never zeros


def test_parse_shapes_and_errors():
    assert blas.parse_shapes("1024, 64x128,8x16x32x64") == [
        {"n": 1024}, {"m": 64, "k": 128}, {"batch": 8, "m": 16, "n": 32, "k": 64}]
    for bad in ("12x", "0x4", "1x2x3"):
        with pytest.raises(ValueError):
            blas.parse_shapes(bad)


@pytest.fixture(scope="module")
def cpu_blas(tmp_path_factory):
    out = tmp_path_factory.mktemp("blas") / "cpu.json"
    p = run_module("bench.blas", "--quick", "--no-progress", "--backends", "native-cpu,native-cuda,torch-cpu,mlx-cpu",
                   "--out", str(out))
    assert p.returncode == 0, p.stderr + p.stdout
    return p, load_run(out)


def test_cpu_frameworks_verified_and_timed(cpu_blas):
    _, run = cpu_blas
    timed = [r for r in run.records if r.status == OK]
    for backend in ("torch-cpu", "mlx-cpu"):
        if not registry.info(backend).available:
            continue
        ops = {(r.params["op"], r.params["dtype"]) for r in timed if r.backend == backend}
        assert ops >= {(o, d) for o in ("copy", "gemv", "vjp_dx", "vjp_dw", "gemm") for d in dtypes.DTYPES}
    for r in timed:
        assert r.verified is True and "vs float64" in r.verify_detail
        assert len(r.samples_s) >= 5 and r.work["bytes"] > 0


def test_native_rows_say_why_not(cpu_blas):
    _, run = cpu_blas
    cpu = [r for r in run.records if r.backend == "native-cpu"][0]
    assert cpu.status == NOT_APPLICABLE and cpu.reason
    cuda = [r for r in run.records if r.backend == "native-cuda"]
    if not registry.info("native-cuda").available:
        assert cuda[0].status == UNAVAILABLE and cuda[0].reason == registry.info("native-cuda").reason


def test_roofline_from_the_run(cpu_blas):
    _, run = cpu_blas
    roof = run.run["roofline"]
    if registry.info("torch-cpu").available:
        best_copy = max(r.rates()["bytes_per_s"] for r in run.records
                        if r.status == OK and r.params.get("op") == "copy" and r.backend.endswith("cpu"))
        assert roof["cpu"]["bytes_per_s"]["value"] == pytest.approx(best_copy)
        assert roof["cpu"]["fp32"]["value"] > 0


def test_table_and_figures(cpu_blas):
    p, run = cpu_blas
    for word in ("copy", "gemv", "vjp_dx", "vjp_dw", "gemm", "% roof"):
        assert word in p.stdout
    if not any(r.status == OK for r in run.records):
        pytest.skip("no backend measured here")
    for op in ("copy", "gemv", "vjp_dx", "vjp_dw", "gemm"):
        png = run.path.parent / f"{run.path.stem}-{op}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


def test_roofline_keeps_tf32_apart():
    def rec(variant, dtype, flops_s, precision=None):
        params = {"op": "gemm", "dtype": dtype, "shape_text": "x"}
        if precision:
            params["precision"] = precision
        return Record(probe="blas", backend="torch-cpu", variant=variant, metric="time", clock="host_wall",
                      samples_s=[1.0], params=params, work={"flops": flops_s, "bytes": 1.0})

    roof = blas.roofline([rec("torch", "fp32", 10.0), rec("torch@tf32", "fp32", 50.0, "tf32")])
    assert roof["cpu"]["fp32"]["value"] == 10.0 and roof["cpu"]["tf32"]["value"] == 50.0


def test_ops_select_groups_and_single_specs():
    """--ops takes an op group (vjp = dx and dW) or one spec's own name, each spec once."""
    names = lambda ops: [spec.name for spec in blas.selected_specs(ops)]
    assert names(["vjp"]) == ["vjp_dx", "vjp_dw"]
    assert names(["vjp_dw"]) == ["vjp_dw"]
    assert names(["vjp_dw", "vjp", "gemv"]) == ["vjp_dw", "vjp_dx", "gemv"]
    assert set(blas.OP_NAMES) == {"copy", "gemv", "vjp", "vjp_dx", "vjp_dw", "gemm"}


def test_cli_runs_one_vjp_cotangent(tmp_path):
    if not registry.info("torch-cpu").available:
        pytest.skip("torch-cpu not available")
    out = tmp_path / "dw.json"
    p = run_module("bench.blas", "--quick", "--no-progress", "--no-plots", "--ops", "vjp_dw", "--dtypes", "fp32",
                   "--backends", "torch-cpu", "--out", str(out))
    assert p.returncode == 0, p.stderr + p.stdout
    ops = {r.params.get("op") for r in load_run(out).records if r.status == OK}
    assert ops == {"vjp_dw"}


@pytest.mark.parametrize("args,msg", [(["--ops", "conv"], "unknown op"), (["--dtypes", "fp8"], "unknown dtype"),
                                      (["--shapes", "3x"], "bad shape"), (["--backends", "tpu"], "unknown backend"),
                                      (["--cold", "flush"], "unknown --cold scrub")])
def test_cli_errors(tmp_path, args, msg):
    p = run_module("bench.blas", *args, "--out", str(tmp_path / "x.json"))
    assert p.returncode == 2 and msg in p.stdout


def test_failed_verification_is_not_timed(monkeypatch):
    """A framework returning a wrong result gets a failed row and no samples."""
    pytest.importorskip("torch")
    if not registry.info("torch-cpu").available:
        pytest.skip("torch-cpu not available")
    spec = blas.OPS["gemv"][0]
    wrong = blas.OPS["gemv"][0].__class__(**{**spec.__dict__, "framework": lambda ad, fam, arrays: (lambda: arrays[1] * 2)})
    shape = {"m": 8, "k": 8}
    rng = np.random.default_rng(0)
    rounded = [dtypes.round_to(a, "fp32") for a in wrong.inputs(shape, rng)]
    ref = dtypes.expected(wrong.reference, [a.astype(np.float64) for a in rounded], wrong.reduction(shape))
    from gapbench.frameworks import make_adapter

    ad = make_adapter("torch-cpu")
    ad.setup_context()
    recs = blas._framework(wrong, "fp32", shape, rounded, ref, blas.Config(samples=3, warmup=0), "torch-cpu", ad,
                           registry.info("torch-cpu"))
    assert recs[0].status == FAILED and not recs[0].samples_s and "not timed" in recs[0].reason


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_dx_sweep_tool_builds_and_rejects_bad_arguments(tmp_path):
    """cuda/tune/vjp_dx_sweep.cu is not part of the install; building it here keeps it from rotting
    against the library's kernels, and its argument errors come before cuBLAS or a GPU is needed."""
    root = Path(__file__).resolve().parents[1]
    exe = tmp_path / "dx_sweep"
    build = subprocess.run(["nvcc", "-O0", "-std=c++20", "-arch=sm_90", f"-I{root / 'cuda'}",
                            str(root / "cuda/tune/vjp_dx_sweep.cu"), str(root / "cuda/cublas_loader.cpp"), "-o", str(exe)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    for args, msg in [([], "usage"), (["lib", "0"], "bad samples"), (["lib", "5", "strip"], "bad family 'strip'"),
                      (["lib", "5", "none", "64x60"], "bad shape list"), (["lib", "5", "none", "64x64y"], "bad shape list"),
                      (["lib", "5", "none,strips", "64x64", "cold"], "bad scrub 'cold'")]:
        p = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and msg in p.stderr + p.stdout, (args, p.returncode, p.stderr)


@pytest.mark.cuda
@pytest.mark.skipif(not registry.info("native-cuda").available,
                    reason="needs an NVIDIA GPU and driver: " + registry.info("native-cuda").reason)
def test_every_cuda_variant_verifies_on_gpu(tmp_path):
    out = tmp_path / "gpu.json"
    p = run_module("bench.blas", "--quick", "--no-progress", "--backends", "native-cuda", "--cold", "read,write",
                   "--out", str(out))
    assert p.returncode == 0, p.stderr
    recs = [r for r in load_run(out).records if r.backend == "native-cuda"]
    hand = [r for r in recs if r.variant.startswith("v") and r.status != NOT_APPLICABLE]
    assert hand and all(r.status == OK and r.verified for r in hand), [(r.variant, r.reason) for r in hand if r.status != OK]
    # every timed variant (cuBLAS too) also has both cold modes, each with its own samples
    timed = {(r.params["op"], r.params["dtype"], r.params["shape_text"], r.variant) for r in recs
             if r.status == OK and r.metric == "time"}
    for metric, word in (("time_cold", "read pass"), ("time_cold_dirty", "memset")):
        cold = {(r.params["op"], r.params["dtype"], r.params["shape_text"], r.variant): r for r in recs
                if r.status == OK and r.metric == metric}
        assert set(cold) == timed, (metric, timed ^ set(cold))
        assert all(len(r.samples_s) >= 5 and min(r.samples_s) > 0 and word in r.params["cache"] for r in cold.values())
    tensor_core_fp32 = {("gemm", v, "fp32") for v in ("v4", "v6", "v7", "v8")}  # fp16/bf16-only variants
    na = [r for r in recs if r.status == NOT_APPLICABLE
          and (r.params["op"], r.variant, r.params["dtype"]) not in tensor_core_fp32]
    # the only other refusals allowed: the Hopper variants (wgmma GEMM v7/v8, PDL vjp_dx v6, TMA
    # vjp_dx v9) on a GPU older than sm_90, saying so
    hopper = {("gemm", "v7"), ("gemm", "v8"), ("vjp_dx", "v6"), ("vjp_dx", "v9")}
    assert all((r.params["op"], r.variant) in hopper and "sm_90" in r.reason for r in na), [(r.variant, r.reason) for r in na]
    assert json.loads(out.read_text())["run"]["roofline"]["cuda"]["bytes_per_s"]["value"] > 0


@pytest.mark.cuda
@pytest.mark.skipif(not registry.info("native-cuda").available,
                    reason="needs an NVIDIA GPU and driver: " + registry.info("native-cuda").reason)
def test_vjp_variants_verify_on_ragged_shapes_on_gpu(tmp_path):
    # Shapes no tile divides: odd row counts (last row tile / slice partly past m), a last column
    # block partly past k, a k that is not a multiple of 8 (16-byte-pack variants refuse it), and
    # fewer rows than one tile; 8193x4104 has more units than an H200 holds blocks, so variant 10's
    # blocks take several units each and cross column blocks mid-range. On a 132-SM GPU variant 11
    # runs one-slice and two-slice grids of both its block sizes across these (2050x8456: 133
    # strips of 64 fp16 columns, the last one 8 wide, two slices). Variant 12 runs its 128-byte
    # strips in fp16/bf16 here and its 256-byte ones in fp32 at 2050x8456 (133 strips, the last
    # 8 wide, more blocks than SMs). Variant 13 (under 4096 rows) takes 16-warp blocks at 2050x8456
    # fp16 and 8-warp ones in fp32, and at 1001x16904 8-warp (fp16) and 4-warp (fp32: 529 strips,
    # the last one 8 wide) blocks. Every variant that runs must match float64.
    out = tmp_path / "ragged.json"
    p = run_module("bench.blas", "--ops", "vjp", "--shapes", "1001x1336,77x4104,2049x1000,3x264,129x100,8193x4104,2050x8456,1001x16904",
                   "--samples", "3", "--warmup", "1", "--no-progress", "--no-plain", "--backends", "native-cuda",
                   "--out", str(out))
    assert p.returncode == 0, p.stderr
    recs = [r for r in load_run(out).records if r.backend == "native-cuda" and r.variant.startswith("v")]
    ran = [r for r in recs if r.status != NOT_APPLICABLE]
    assert {r.params["shape_text"] for r in ran} == {"1001x1336", "77x4104", "2049x1000", "3x264", "129x100",
                                                     "8193x4104", "2050x8456", "1001x16904"}
    assert all(r.status == OK and r.verified for r in ran), [(r.variant, r.params["shape_text"], r.reason)
                                                              for r in ran if r.status != OK]
    for v in ("v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14"):
        for shape in ("77x4104", "8193x4104", "2050x8456", "1001x16904"):
            assert any(r.variant == v and r.params["op"] == "vjp_dx" and r.params["shape_text"] == shape
                       and r.status == OK for r in recs), (v, shape)


@pytest.mark.cuda
@pytest.mark.skipif(not registry.info("native-cuda").available,
                    reason="needs an NVIDIA GPU and driver: " + registry.info("native-cuda").reason)
def test_gemv_variants_verify_on_ragged_shapes_on_gpu(tmp_path):
    # Variant 4 splits k into slices of (warps x 32 lanes x 4) packs and m into runs of rows: a k
    # that leaves the last slice 2 packs wide (16392 fp32 = 5 slices), an odd m and runs that end
    # mid-pair (777), fewer rows than one pair (3), a k whose packs keep only 2 warps busy (1336
    # fp16), and a k that is not a multiple of 8 (refused by the 16-byte-pack variants).
    out = tmp_path / "gemv.json"
    shapes = ["777x16392", "1001x1336", "3x264", "4097x4104", "129x100"]
    p = run_module("bench.blas", "--ops", "gemv", "--shapes", ",".join(shapes), "--samples", "3", "--warmup", "1",
                   "--no-progress", "--no-plain", "--backends", "native-cuda", "--out", str(out))
    assert p.returncode == 0, p.stderr
    recs = [r for r in load_run(out).records if r.backend == "native-cuda" and r.variant.startswith("v")]
    ran = [r for r in recs if r.status != NOT_APPLICABLE]
    assert all(r.status == OK and r.verified for r in ran), [(r.variant, r.params["shape_text"], r.reason)
                                                              for r in ran if r.status != OK]
    for shape in shapes[:-1]:
        for dt in ("fp32", "fp16", "bf16"):
            assert any(r.variant == "v4" and r.params["shape_text"] == shape and r.params["dtype"] == dt
                       and r.status == OK for r in recs), (shape, dt)


@pytest.mark.apple
@pytest.mark.skipif(not registry.info("native-metal").available,
                    reason="needs Apple Silicon with Metal (none reachable here): " + registry.info("native-metal").reason)
def test_every_metal_kernel_verifies_on_apple_gpu(tmp_path):
    out = tmp_path / "metal.json"
    p = run_module("bench.blas", "--quick", "--no-progress", "--backends", "native-metal", "--out", str(out))
    assert p.returncode == 0, p.stderr
    recs = [r for r in load_run(out).records if r.backend == "native-metal"]
    # every hand-written kernel (v1, gemm v2) and the vendor path (blit, MPS fp32/fp16) verified and timed
    must = [r for r in recs if r.variant in ("v1", "v2", "blit") or (r.variant == "mps" and r.params["dtype"] != "bf16")]
    assert {r.variant for r in must} == {"v1", "v2", "blit", "mps"}
    assert all(r.status == OK and r.verified and r.clock == "gpu_timestamps" for r in must)


def test_plain_rows_do_not_break_roofline_tables_or_figures(tmp_path):
    def rec(backend, variant, samples):
        return Record(probe="blas", backend=backend, variant=variant, metric="time", clock="device_events",
                      samples_s=samples, params={"op": "gemm", "dtype": "fp32", "shape_text": "1x2x2x2",
                                                      "shape": {"batch": 1, "m": 2, "n": 2, "k": 2}},
                      work={"flops": 16.0, "bytes": 48.0})

    recs = [rec("native-cuda", "cublas", [3e-3, 3e-3, 4e-3]), rec("plain-cuda", "cublas", [2e-3, 1e-3, 2e-3])]
    assert registry.device_class_of("plain-cuda") == "cuda"
    assert blas.roofline(recs)["cuda"]["fp32"]["from"].startswith("native-cuda")
    assert blas.plain_ratios(recs) == [("gemm", "fp32", "1x2x2x2", pytest.approx(1.5))]  # medians 3 ms / 2 ms
    assert blas.build_tables(recs) and "plain-cuda" not in blas.markdown_summary(recs)
    from gapbench.plots import blas_figures

    assert blas_figures(recs, tmp_path / "x", blas.roofline(recs))[0].is_file()


def test_plain_ratio_uses_the_interleaved_harness_samples():
    shape = {"batch": 1, "m": 2, "n": 2, "k": 2}
    params = {"op": "gemm", "dtype": "fp16", "shape_text": "1x2x2x2", "shape": shape}
    sweep = Record(probe="blas", backend="native-cuda", variant="cublas", metric="time", clock="device_events",
                   samples_s=[5e-3, 5e-3], params=params, work={"flops": 16.0, "bytes": 24.0})
    plain = Record(probe="blas", backend="plain-cuda", variant="cublas", metric="time", clock="device_events",
                   samples_s=[2e-3, 2e-3, 2e-3],
                   params=dict(params, harness_interleaved_s=[1e-3, 3e-3, 2.2e-3]), work=sweep.work)
    # The sweep's own row (5 ms, measured earlier) is ignored: only same-time samples are compared.
    [(op, dt, sh, ratio)] = blas.plain_ratios([sweep, plain])
    assert (op, dt, sh) == ("gemm", "fp16", "1x2x2x2") and abs(ratio - 1.1) < 1e-9
