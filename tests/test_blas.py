"""The BLAS suite: dtype handling, references, the run on CPU backends for real, the CLI's
errors, the measured roofline, and every native variant on a GPU where one exists."""
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import run_module
from gapbench.core.names import Backend, CacheMode, DeviceClass, DType, device_class_of
from gapbench.benchmarks.blas.config import HOT
from gapbench.core import dtypes
from gapbench.backends import registry
from gapbench import ops
from gapbench.benchmarks.blas.params import BlasParams, Paired
from gapbench.benchmarks.blas import tables as blas
from gapbench.benchmarks.blas.config import parse_shapes
from gapbench.core.result import ERROR, FAILED, NOT_APPLICABLE, OK, UNAVAILABLE, Record, load_run


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


@pytest.mark.parametrize("dt", list(DType))
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


def test_parse_shapes_and_errors():
    assert parse_shapes("1024, 64x128,8x16x32x64") == [
        {"n": 1024}, {"m": 64, "k": 128}, {"batch": 8, "m": 16, "n": 32, "k": 64}]
    for bad in ("12x", "0x4", "1x2x3"):
        with pytest.raises(ValueError):
            parse_shapes(bad)


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
        assert ops >= {(o, d) for o in ("copy", "gemv", "vjp_dx", "vjp_dw", "gemm") for d in list(DType)}
    for r in timed:
        assert r.verified is True and "vs float64" in r.verify_detail
        assert len(r.samples_s) >= 5 and r.work["bytes"] > 0


def test_native_rows_say_why_not(cpu_blas):
    _, run = cpu_blas
    cpu = [r for r in run.records if r.backend == "native-cpu"][0]
    assert cpu.status == NOT_APPLICABLE and cpu.reason
    cuda = [r for r in run.records if r.backend == "native-cuda"]
    if not registry.info(Backend.native_cuda).available:
        assert cuda[0].status == UNAVAILABLE and cuda[0].reason == registry.info(Backend.native_cuda).reason


def test_roofline_from_the_run(cpu_blas):
    _, run = cpu_blas
    roof = run.run["roofline"]
    if registry.info(Backend.torch_cpu).available:
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
    names = lambda text: [spec.name for spec in ops.op_list(text)]
    assert names("vjp") == ["vjp_dx", "vjp_dw"]
    assert names("vjp_dw") == ["vjp_dw"]
    assert names("vjp_dw, vjp,gemv") == ["vjp_dw", "vjp_dx", "gemv"]
    assert set(ops.choices()) >= {"copy", "gemv", "vjp", "vjp_dx", "vjp_dw", "gemm"}


def test_cli_runs_one_vjp_cotangent(tmp_path):
    if not registry.info(Backend.torch_cpu).available:
        pytest.skip("torch-cpu not available")
    out = tmp_path / "dw.json"
    p = run_module("bench.blas", "--quick", "--no-progress", "--no-plots", "--ops", "vjp_dw", "--dtypes", "fp32",
                   "--backends", "torch-cpu", "--out", str(out), env={"COLUMNS": "40"})
    assert p.returncode == 0, p.stderr + p.stdout
    run = load_run(out)
    ops = {r.params.get("op") for r in run.records if r.status == OK}
    assert ops == {"vjp_dw"}
    # the wall-time line is one line however narrow the console (.ci/gpu and logs grep it), every phase on it
    line, = [ln for ln in p.stdout.splitlines() if ln.startswith("wall time")]
    phases = [k for k in run.run["wall_s"] if k not in ("total", "parts")]
    assert len(phases) >= 2 and all(f"{k} " in line for k in phases), (line, phases)


@pytest.mark.parametrize("args,msg", [(["--ops", "conv"], "unknown op"), (["--dtypes", "fp8"], "unknown dtype"),
                                      (["--shapes", "3x"], "bad shape"), (["--backends", "tpu"], "unknown backend"),
                                      (["--cold", "flush"], "unknown --cold scrub"),
                                      (["--inject-delay-us", "torch-cpu=3"], "torch-cuda only"),
                                      (["--inject-delay-us", "torch-cuda=0"], "must be > 0 microseconds"),
                                      (["--inject-delay-us", "torch-cuda"], "give BACKEND=MICROSECONDS"),
                                      (["--processes", "0"], "--processes 0: give 1"),
                                      (["--streams", "8"], "unknown --streams plan"),
                                      (["--parity", "even"], "unknown --parity")])
def test_cli_errors(tmp_path, args, msg):
    p = run_module("bench.blas", *args, "--out", str(tmp_path / "x.json"))
    assert p.returncode == 2 and msg in p.stderr, p.stderr


def test_streams_plans_are_recorded_with_the_config_and_handed_to_more_processes():
    """--streams: native (default, not spelled out in the run file: the native rows on kTimingStreams,
    the frameworks on one), shared (every CUDA row on kTimingStreams) and one; a plan is in the run
    file's config and comes back from it, as --processes hands the config to its more processes."""
    from gapbench.benchmarks.blas.config import STREAMS, Config
    from gapbench.core.names import StreamPlan

    default = Config()
    assert (default.native_streams(), default.framework_streams()) == (STREAMS, 1) and "streams" not in default.to_dict()
    want = {StreamPlan.shared: (STREAMS, STREAMS), StreamPlan.one: (1, 1)}
    for plan, counts in want.items():
        back = Config.from_dict(Config(streams=plan).to_dict())
        assert back.streams is plan and (back.native_streams(), back.framework_streams()) == counts
    # the launch floor is on by default, recorded either way and handed to the more processes; a run
    # file from before it was recorded had none
    assert default.launch_floor is True and Config.from_dict(default.to_dict()).launch_floor is True
    assert Config.from_dict(Config(launch_floor=False).to_dict()).launch_floor is False
    old = default.to_dict()
    del old["launch_floor"]
    assert Config.from_dict(old).launch_floor is False


def test_parity_is_recorded_with_the_config_and_in_the_gated_rows_conditions():
    """--parity: as-drawn by default (not spelled out in the run file), balanced recorded in the config
    and handed back from it (--processes' more processes); a row's conditions say "balanced" only where
    its samples were gated and padded, and a ratio between a padded and an unpadded row is n/c."""
    from gapbench import ops
    from gapbench.benchmarks.blas import arms
    from gapbench.benchmarks.blas.command import BlasBenchmark
    from gapbench.benchmarks.blas.config import Config
    from gapbench.core.conditions import Cache, Clock, mismatch
    from gapbench.core.names import Parity

    default = Config()
    assert default.parity is Parity.as_drawn and not default.balanced and "parity" not in default.to_dict()
    back = Config.from_dict(Config(parity=Parity.balanced).to_dict())
    assert back.parity is Parity.balanced and back.balanced
    bench = BlasBenchmark()
    args = bench.parser("bench.blas").parse_args(["--parity", "balanced"])
    assert BlasBenchmark.config(args).parity is Parity.balanced
    c = arms.Case(ops.get("gemv"), DType.fp16, {"m": 8, "k": 8}, [], None, lambda *a, **k: None)
    padded = c.conditions(Cache.ROTATED, Clock.GATED, True)
    assert padded.parity == Parity.balanced.value
    assert c.conditions(Cache.ROTATED, Clock.GATED).parity is None
    assert c.conditions(Cache.HOST, Clock.HOST, True).parity is None  # nothing held: nothing padded
    assert mismatch(padded, c.conditions(Cache.ROTATED, Clock.GATED)).startswith("parity")


def test_parity_pads_are_refused_without_the_native_gate():
    """A framework whose samples are not held behind the native release gate (a CPU backend; the
    fixed-spin fallback) cannot pad them: set_parity_pads says so, and its rows are not recorded as
    balanced."""
    from gapbench.backends import registry
    from gapbench.backends.hold import StreamHold

    ad = registry.make_adapter(Backend.torch_cpu)
    assert ad.set_parity_pads(True) is False and ad.parity_pads is False
    hold = StreamHold.__new__(StreamHold)
    hold.gate = None
    assert hold.set_parity_pads(True) is False and hold.parity_pads is False


def test_the_launch_floor_is_on_by_default_and_off_with_quick_unless_asked():
    """bench.blas times the launch floor beside short cases by default (compare's floor classes were
    fitted on such runs); --quick leaves it out unless --launch-floor is given; --no-launch-floor
    leaves it out of a default run."""
    from gapbench.benchmarks.blas.command import BlasBenchmark

    bench = BlasBenchmark()
    got = {argv: BlasBenchmark.config(bench.parser("bench.blas").parse_args(list(argv))).launch_floor
           for argv in [(), ("--quick",), ("--quick", "--launch-floor"), ("--no-launch-floor",)]}
    assert got == {(): True, ("--quick",): False, ("--quick", "--launch-floor"): True, ("--no-launch-floor",): False}


def test_failed_verification_is_not_timed(monkeypatch):
    """A framework returning a wrong result gets a failed row and no samples."""
    pytest.importorskip("torch")
    if not registry.info(Backend.torch_cpu).available:
        pytest.skip("torch-cpu not available")
    import dataclasses

    from gapbench.benchmarks.blas import arms as rows, framework_arms
    from gapbench.benchmarks.blas.run import record
    from gapbench.core.names import Family
    from gapbench.ops.spec import FrameworkImpl

    spec = ops.get("gemv")
    wrong = dataclasses.replace(spec, frameworks=(FrameworkImpl(Family.torch, "wrong", lambda ad, a: lambda: a[1] * 2),))
    shape = {"m": 8, "k": 8}
    rng = np.random.default_rng(0)
    rounded = [dtypes.round_to(a, DType.fp32) for a in wrong.inputs(shape, rng)]
    case = rows.Case(wrong, DType.fp32, shape, rounded, wrong.expected(rounded, shape),
                     lambda b, v, p=None, **kw: record(wrong, DType.fp32, shape, b, v, p, **kw))
    ad = registry.make_adapter(Backend.torch_cpu)
    ad.setup_context()
    recs, arms = framework_arms.framework(case, registry.info(Backend.torch_cpu), ad)
    assert not arms  # nothing to time
    assert recs[0].status == FAILED and not recs[0].samples_s and "not timed" in recs[0].reason


def test_a_framework_on_a_gpu_rotates_the_sets_its_conditions_name(monkeypatch):
    """The cache state a framework row records is what it did: on a (stand-in) GPU with a 1 MiB L2,
    its timed runs cycle through as many distinct input sets as `conditions.rotations` says, and
    together they pass 2x the L2, so the row is labeled rotated (not l2-resident, not one buffer)."""
    pytest.importorskip("torch")
    if not registry.info(Backend.torch_cpu).available:
        pytest.skip("torch-cpu not available")
    import dataclasses

    from gapbench.backends.base import BackendInfo
    from gapbench.benchmarks.blas import arms as rows, framework_arms
    from gapbench.benchmarks.blas.run import record
    from gapbench.core.conditions import Cache
    from gapbench.core.names import Family
    from gapbench.ops.spec import FrameworkImpl

    gemv = ops.get("gemv")
    ran = []

    def build(ad, a):
        op = gemv.impls(Family.torch)[0].build(ad, a)

        def run():
            ran.append(id(a[0]))
            return op()
        return run

    spec = dataclasses.replace(gemv, frameworks=(FrameworkImpl(Family.torch, "torch.mv", build),))
    shape, dt, l2 = {"m": 64, "k": 64}, DType.fp32, 2**20
    rounded = [dtypes.round_to(a, dt) for a in spec.inputs(shape, np.random.default_rng(0))]
    case = rows.Case(spec, dt, shape, rounded, spec.expected(rounded, shape),
                     lambda b, v, p=None, **kw: record(spec, dt, shape, b, v, p, **kw))
    ad = registry.make_adapter(Backend.torch_cpu)
    ad.setup_context()
    gpu = BackendInfo(Backend.torch_cuda, True, "", registry.info(Backend.torch_cpu).device)
    recs, arms = framework_arms.framework(case, gpu, ad, l2_bytes=l2, free_bytes=2**30)
    assert not recs and len(arms) == 1
    ran.clear()
    cond = arms[0].conditions(CacheMode.hot)
    arms[0].samplers[CacheMode.hot](3 * cond.rotations)
    assert cond.cache == Cache.ROTATED and cond.rotations * case.set_bytes >= 2 * l2
    assert len(set(ran)) == cond.rotations > 1
    ok, detail = arms[0].verify_last(CacheMode.hot)
    assert ok, detail


def _fake_arm(variant, seconds, vendor=False, last_ok=True, cls=DeviceClass.cuda):
    from gapbench.benchmarks.blas.measure import CaseArm

    return CaseArm(Backend.native_cuda, variant, cls, "device_events", {CacheMode.hot: lambda n: [seconds] * n},
                   lambda mode: (last_ok, "last run checked" if last_ok else "3 of 64 outputs wrong"), "checked",
                   vendor=vendor)


def test_case_arms_are_timed_paired_against_the_vendor_and_checked_after():
    """measure_case: one paired run per device class; each row carries its speed ratio against the
    vendor arm with an interval and a verdict; a row whose last timed output is wrong is failed."""
    from gapbench.benchmarks.blas.measure import measure_case, ratio_text

    arms = [_fake_arm("gapbench", 1.0e-3), _fake_arm("cublas", 1.1e-3, vendor=True),
            _fake_arm("torch", 2.2e-3), _fake_arm("broken", 1.0e-3, last_ok=False)]
    recs = measure_case(lambda b, v, p, **kw: Record(probe="blas", backend=b, variant=v, params=p.to_dict(), **kw),
                        arms, [HOT], budget_s=2.0, rel_hw=0.01, max_rounds=50, min_rounds=10, warmup=0, seed=1)
    by = {r.variant: r for r in recs}
    assert set(by) == {"gapbench", "cublas", "torch", "broken"}
    g, t = by["gapbench"].params["paired"], by["torch"].params["paired"]
    assert g["vs"] == "native-cuda/cublas" and g["speed_ratio"] == pytest.approx(1.1) and g["verdict"] == "faster"
    assert t["speed_ratio"] == pytest.approx(0.5) and t["verdict"] == "slower"
    assert "paired" not in by["cublas"].params  # the reference arm has no ratio to itself
    assert by["broken"].status == FAILED and "last timed run" in by["broken"].reason
    assert by["gapbench"].status == OK and by["gapbench"].samples_s
    assert ratio_text(by["gapbench"]).startswith("1.1x") and ratio_text(by["cublas"]) == ""


def test_a_ratio_between_unequal_conditions_is_refused():
    """Two arms timed in the same rounds, one reading rotated inputs from memory and one a single
    buffer from L2: no ratio, and the row says which condition differs."""
    from gapbench.benchmarks.blas.measure import measure_case, ratio_text
    from gapbench.core.conditions import Cache, Clock, Conditions

    native = _fake_arm("cublas", 1.0e-3, vendor=True)
    native.conditions = lambda mode: Conditions(cache=Cache.ROTATED, data="randn", clock=Clock.GATED, process="paired")
    fw = _fake_arm("torch", 0.7e-3)
    fw.conditions = lambda mode: Conditions(cache=Cache.L2_RESIDENT, data="randn", clock=Clock.GATED, process="paired")
    same = _fake_arm("gapbench", 0.9e-3)
    same.conditions = native.conditions
    recs = measure_case(lambda b, v, p, **kw: Record(probe="blas", backend=b, variant=v, params=p.to_dict(), **kw),
                        [native, fw, same], [HOT], budget_s=1.0, rel_hw=0.01, max_rounds=20, min_rounds=10,
                        warmup=0, seed=0)
    by = {r.variant: r for r in recs}
    p = by["torch"].params["paired"]
    assert "speed_ratio" not in p and p["not_comparable"].startswith("cache: l2-resident vs rotated")
    assert ratio_text(by["torch"]) == "n/c (cache)"
    assert by["gapbench"].params["paired"]["speed_ratio"] == pytest.approx(1.0e-3 / 0.9e-3)
    assert by["torch"].conditions["cache"] == Cache.L2_RESIDENT and by["cublas"].conditions["cache"] == Cache.ROTATED


def test_an_arm_that_pairing_slows_is_marked_and_its_ratio_is_from_standalone_medians():
    """torch runs 1.5x slower right after another arm ran (as if the other arm evicted its caches):
    in the interleaved rounds it reads 1.5 ms, alone 1.0 ms. The row is marked perturbed, naming
    what moved, and its ratio is cuBLAS alone / torch alone (1.0), not the paired 0.67."""
    from gapbench.benchmarks.blas.measure import measure_case, ratio_text

    last = {"who": None}

    def sampler(who, base, sensitive):
        def sample(n):
            first = base * (1.5 if sensitive and last["who"] != who else 1.0)
            last["who"] = who
            return [first] + [base] * (n - 1)
        return sample

    torch = _fake_arm("torch", 1e-3)
    torch.samplers = {CacheMode.hot: sampler("torch", 1e-3, True)}
    ref = _fake_arm("cublas", 1e-3, vendor=True)
    ref.samplers = {CacheMode.hot: sampler("cublas", 1e-3, False)}
    recs = measure_case(lambda b, v, p, **kw: Record(probe="blas", backend=b, variant=v, params=p.to_dict(), **kw),
                        [ref, torch], [HOT], budget_s=1.0, rel_hw=0.01, max_rounds=30, min_rounds=10, warmup=0,
                        seed=0)
    p = BlasParams.of(next(r for r in recs if r.variant == "torch")).paired
    assert p.speed_ratio == pytest.approx(1 / 1.5) and "native-cuda/torch 1500 us paired vs 1000 us alone (+50.0%)" in p.perturbed
    assert p.speed_ratio_alone == pytest.approx(1.0)
    assert ratio_text(next(r for r in recs if r.variant == "torch")) == "1x alone (paired perturbed)"


def test_case_arms_of_different_device_classes_are_not_paired():
    from gapbench.benchmarks.blas.measure import measure_case

    arms = [_fake_arm("cublas", 1.0e-3, vendor=True), _fake_arm("torch", 5e-3, cls=DeviceClass.cpu)]
    recs = measure_case(lambda b, v, p, **kw: Record(probe="blas", backend=b, variant=v, params=p.to_dict(), **kw),
                        arms, [HOT], budget_s=1.0, rel_hw=0.01, max_rounds=20, min_rounds=10, warmup=0, seed=0)
    assert all("paired" not in r.params for r in recs) and len(recs) == 2


@pytest.mark.cuda
@pytest.mark.skipif(not registry.info(Backend.native_cuda).available,
                    reason="needs an NVIDIA GPU and driver: " + registry.info(Backend.native_cuda).reason)
def test_every_native_row_verifies_on_gpu(tmp_path):
    # Every library kernel on ragged shapes, directly: tests/test_native.py. Here the bench's rows.
    out = tmp_path / "gpu.json"
    p = run_module("bench.blas", "--quick", "--no-progress", "--backends", "native-cuda", "--cold", "read,write",
                   "--out", str(out))
    assert p.returncode == 0, p.stderr
    recs = [r for r in load_run(out).records if r.backend == "native-cuda"]
    ran = [r for r in recs if r.status != NOT_APPLICABLE]
    assert ran and all(r.status == OK and r.verified for r in ran), [(r.variant, r.reason) for r in ran if r.status != OK]
    assert {r.variant for r in ran} >= {"gapbench", "memcpy"}
    assert all(r.params["strategy"] and "last timed run" in r.verify_detail for r in ran)
    assert all(r.params["invalid_samples"] == 0 for r in ran)
    # every timed row also has both cold modes, each with its own samples
    timed = {(r.params["op"], r.params["dtype"], r.params["shape_text"], r.variant) for r in recs
             if r.status == OK and r.metric == "time"}
    for metric, word in (("time_cold", "read pass"), ("time_cold_dirty", "memset")):
        cold = {(r.params["op"], r.params["dtype"], r.params["shape_text"], r.variant): r for r in recs
                if r.status == OK and r.metric == metric}
        assert set(cold) == timed, (metric, timed ^ set(cold))
        assert all(len(r.samples_s) >= 5 and min(r.samples_s) > 0 and word in r.params["cache"] for r in cold.values())
    # n/a only where the declaration says there is no vendor (rmsnorm), with its declared reason
    from gapbench.core import opdecl

    na = [r for r in recs if r.status == NOT_APPLICABLE]
    assert all(r.variant == "vendor" and opdecl.get(r.params["op"]).vendor_reason in r.reason for r in na), \
        [(r.params.get("op"), r.variant, r.reason) for r in na]
    assert json.loads(out.read_text())["run"]["roofline"]["cuda"]["bytes_per_s"]["value"] > 0
    # the plain cuBLAS loop, one process in six paced rounds paired with the harness's
    plain = [r for r in load_run(out).records if r.backend == "plain-cuda"]
    assert plain and all(r.status == OK for r in plain), [r.reason for r in plain]
    assert all(r.params["rounds"] == len(r.params["round_medians_s"]) == 6 for r in plain)
    for _, _, _, ratio, lo, hi in blas.plain_ratios(plain):
        assert lo <= ratio <= hi and hi < float("inf")


@pytest.mark.apple
@pytest.mark.skipif(not registry.info(Backend.native_metal).available,
                    reason="needs Apple Silicon with Metal (none reachable here): " + registry.info(Backend.native_metal).reason)
def test_every_metal_kernel_verifies_on_apple_gpu(tmp_path):
    out = tmp_path / "metal.json"
    p = run_module("bench.blas", "--quick", "--no-progress", "--backends", "native-metal", "--out", str(out))
    assert p.returncode == 0, p.stderr
    recs = [r for r in load_run(out).records if r.backend == "native-metal"]
    # the dispatcher's kernels and the vendor path (blit, MPS fp32/fp16) verified and timed
    must = [r for r in recs if r.variant in ("gapbench", "blit") or (r.variant == "mps" and r.params["dtype"] != "bf16")]
    assert {r.variant for r in must} == {"gapbench", "blit", "mps"}
    assert all(r.status == OK and r.verified and r.clock == "gpu_timestamps" for r in must)


def test_plain_rows_do_not_break_roofline_tables_or_figures(tmp_path):
    def rec(backend, variant, samples):
        return Record(probe="blas", backend=backend, variant=variant, metric="time", clock="device_events",
                      samples_s=samples, params={"op": "gemm", "dtype": "fp32", "shape_text": "1x2x2x2",
                                                      "shape": {"batch": 1, "m": 2, "n": 2, "k": 2}},
                      work={"flops": 16.0, "bytes": 48.0})

    recs = [rec("native-cuda", "cublas", [3e-3, 3e-3, 4e-3]), rec("plain-cuda", "cublas", [2e-3, 1e-3, 2e-3])]
    assert device_class_of("plain-cuda") is DeviceClass.cuda
    assert blas.roofline(recs)["cuda"]["fp32"]["from"].startswith("native-cuda")
    [(op, dt, sh, ratio, lo, hi)] = blas.plain_ratios(recs)  # medians 3 ms / 2 ms, no rounds: no interval
    assert (op, dt, sh) == ("gemm", "fp32", "1x2x2x2") and ratio == pytest.approx(1.5) and lo != lo and hi != hi
    assert blas.build_tables(recs) and "plain-cuda" not in blas.markdown_summary(recs)
    from gapbench.benchmarks.blas.figures import blas_figures

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
    [(op, dt, sh, ratio, _, _)] = blas.plain_ratios([sweep, plain])
    assert (op, dt, sh) == ("gemm", "fp16", "1x2x2x2") and abs(ratio - 1.1) < 1e-9


def test_plain_ratio_is_the_median_of_per_round_ratios_with_an_interval():
    """With the rounds' medians recorded, the harness/plain ratio is the median of the per-round
    ratios (drift shared by a round cancels), and 10 rounds give a 95% interval around it."""
    shape = {"batch": 1, "m": 2, "n": 2, "k": 2}
    params = {"op": "gemm", "dtype": "fp16", "shape_text": "1x2x2x2", "shape": shape}
    # a clock drifting 2x over the rounds; the harness is 1.02x the plain loop in every round
    rounds = [[1.02e-3 * (1 + i / 10), 1e-3 * (1 + i / 10)] for i in range(10)]
    plain = Record(probe="blas", backend="plain-cuda", variant="cublas", metric="time", clock="device_events",
                   samples_s=[1e-3] * 10, params=dict(params, round_medians_s=rounds), work={"flops": 16.0})
    [(_, _, _, ratio, lo, hi)] = blas.plain_ratios([plain])
    assert ratio == pytest.approx(1.02) and lo == pytest.approx(1.02) and hi == pytest.approx(1.02)
    rounds[3][0] *= 1.5  # one disturbed round moves neither the median nor (much) the interval
    [(_, _, _, ratio, lo, hi)] = blas.plain_ratios([plain])
    assert ratio == pytest.approx(1.02) and lo <= 1.02 <= hi < 1.53


def test_default_run_leaves_cpu_backends_out_only_beside_a_gpu(monkeypatch):
    from gapbench.benchmarks.blas import command as blas_cli

    from gapbench.backends.base import BackendInfo

    avail = {"native-cpu", "torch-cpu", "mlx-cpu"}

    def fake_info(name):
        return BackendInfo(name, name in avail, "" if name in avail else "absent")

    monkeypatch.setattr(registry, "info", fake_info)
    names = Backend.selectable()
    assert blas_cli.default_backends(names) == (names, [])  # a CPU-only machine runs them all
    avail |= {"native-cuda", "torch-cuda"}
    run, left = blas_cli.default_backends(names)
    assert sorted(left) == ["mlx-cpu", "native-cpu", "torch-cpu"]
    assert "native-cuda" in run and "torch-cuda" in run and not set(left) & set(run)
    assert "cupy" in run  # unavailable GPU backends stay, as rows that say why


def test_a_row_faster_than_the_measured_ceiling_is_implausible_unless_l2_resident():
    """A synthetic run: the native copy sets the memory ceiling; a torch GEMV that moves 1.5x that
    many bytes per second while claiming to rotate its inputs past the L2 is implausible (and its
    ratio carries no verdict); the same row labeled l2-resident is not; a slower one is not."""
    from gapbench.benchmarks.blas import tables
    from gapbench.benchmarks.blas.params import BlasParams, Paired, Stop
    from gapbench.benchmarks.blas.run import record
    from gapbench.core.conditions import Cache, Conditions

    def row(op, shape, backend, variant, bytes_per_s, cache, dt=DType.fp16):
        spec = ops.get(op)
        t = spec.work(shape, dt)["bytes"] / bytes_per_s
        p = BlasParams(stop=Stop(converged=True, median_ci_s=[t * 0.99, t * 1.01]),
                       paired=Paired(vs="native-cuda/cublas", speed_ratio=1.5, lo=1.45, hi=1.55, verdict="faster",
                                     converged=True))
        return record(spec, dt, shape, backend, variant, p, status=OK, samples_s=[t] * 11,
                      conditions=Conditions(cache=cache).to_dict())

    copy = row("copy", {"n": 2**26}, Backend.native_cuda, "memcpy", 3.0e12, Cache.ROTATED)
    fast = row("gemv", {"m": 1024, "k": 16384}, Backend.torch_cuda, "torch", 4.5e12, Cache.ROTATED)
    labeled = row("gemv", {"m": 16384, "k": 1024}, Backend.torch_cuda, "torch", 4.5e12, Cache.L2_RESIDENT)
    slower = row("gemv", {"m": 4096, "k": 16384}, Backend.torch_cuda, "torch", 2.9e12, Cache.ROTATED)
    l2_copy = row("copy", {"n": 2**16}, Backend.native_cuda, "memcpy", 9.0e12, Cache.L2_RESIDENT)
    recs = [copy, fast, labeled, slower, l2_copy]
    roof = tables.roofline(recs)
    assert roof["cuda"][tables.BANDWIDTH]["value"] == pytest.approx(3.0e12)  # the L2-resident copy sets nothing
    assert "beats the ceiling" in tables.implausible(fast, roof)
    assert tables.implausible(labeled, roof) == "" and tables.implausible(slower, roof) == ""
    assert tables.mark_suspects(recs, roof) == 1 and BlasParams.of(fast).implausible
    import io

    from rich.console import Console

    c = Console(width=200, record=True, file=io.StringIO(), color_system=None)
    for t in tables.build_tables(recs, roof):
        c.print(t)
    line = next(ln for ln in c.export_text().splitlines() if "1024x16384" in ln)
    assert "implausible" in line and "faster" not in line


def test_a_row_level_with_the_measured_ceiling_ties_it_and_one_beyond_its_interval_is_implausible():
    """A framework calling the vendor's GEMM that set the run's fp16 ceiling lands a hair above it
    half the time: above the ceiling within the interval of the row that set it is a tie, labeled
    `>roof`; beyond that interval's fast end it is implausible. A ceiling set by an op under 50 us
    (--quick's 2x128^3 GEMM: the H200 quick run of 2026-11-29 called three framework rows 1% above
    cuBLAS's 9.6 us implausible) is bound by overhead: rows above it are labeled, not implausible.
    A file whose ceilings carry neither keeps the old rule."""
    from gapbench.benchmarks.blas import tables
    from gapbench.benchmarks.blas.params import BlasParams, Stop
    from gapbench.benchmarks.blas.run import record
    from gapbench.core.conditions import Cache, Conditions

    spec = ops.get("gemm")

    def row(backend, variant, rate, half_width, shape):
        t = spec.work(shape, DType.fp16)["flops"] / rate
        return record(spec, DType.fp16, shape, backend, variant,
                      BlasParams(stop=Stop(converged=True, median_ci_s=[t * (1 - half_width), t * (1 + half_width)])),
                      status=OK, samples_s=[t] * 11, conditions=Conditions(cache=Cache.ROTATED).to_dict())

    big = {"batch": 8, "m": 2000, "n": 2000, "k": 2000}  # 1.28e11 FLOP: 128 ms at 1e12 FLOP/s
    native = row(Backend.native_cuda, "cublas", 1.0e12, 0.02, big)  # its interval reaches 1/0.98 = 1.0204e12
    tie = row(Backend.torch_cuda, "torch", 1.01e12, 0.002, big)  # slow end 1.008e12: above 1e12, within 1.0204e12
    beyond = row(Backend.cupy, "cupy", 1.05e12, 0.002, big)  # slow end 1.048e12: past the native row's interval
    recs = [native, tie, beyond]
    roof = tables.roofline(recs)
    assert roof["cuda"]["fp16"]["value"] == pytest.approx(1.0e12)
    assert roof["cuda"]["fp16"]["high"] == pytest.approx(1.0e12 / 0.98)
    assert roof["cuda"]["fp16"]["time_s"] == pytest.approx(0.128)
    assert tables.implausible(tie, roof) == "" and "a tie with it" in tables.above_roof(tie, roof)
    assert "and the fast end" in tables.implausible(beyond, roof) and tables.above_roof(beyond, roof) == ""
    assert tables.above_roof(native, roof) == "" and tables.implausible(native, roof) == ""  # the ceiling's own row
    assert tables.mark_suspects(recs, roof) == 1
    assert BlasParams.of(tie).above_roof and not BlasParams.of(tie).implausible
    assert BlasParams.of(beyond).implausible and not BlasParams.of(beyond).above_roof
    import io

    from rich.console import Console

    c = Console(width=250, record=True, file=io.StringIO(), color_system=None)
    for t in tables.build_tables(recs, roof):
        c.print(t)
    text = c.export_text()
    assert ">roof" in next(ln for ln in text.splitlines() if " torch " in ln)
    assert "implausible" in next(ln for ln in text.splitlines() if " cupy " in ln)
    old = {"cuda": {"fp16": {k: v for k, v in roof["cuda"]["fp16"].items() if k in ("value", "from")}}}
    assert "beats the ceiling" in tables.implausible(tie, old) and tables.above_roof(tie, old) == ""

    assert "%" in next(ln for ln in text.splitlines() if " torch " in ln)  # % roof: of a ceiling

    small = {"batch": 2, "m": 128, "n": 128, "k": 128}  # 8.4 us at 1e12 FLOP/s
    quick = [row(Backend.native_cuda, "cublas", 1.0e12, 0.01, small), row(Backend.torch_cuda, "torch", 1.05e12, 0.0, small)]
    roof = tables.roofline(quick)
    assert tables.implausible(quick[1], roof) == "" and "bound by overhead" in tables.above_roof(quick[1], roof)
    assert tables.mark_suspects(quick, roof) == 0 and BlasParams.of(quick[1]).above_roof
    c = Console(width=250, record=True, file=io.StringIO(), color_system=None)
    for t in tables.build_tables(quick, roof):
        c.print(t)
    line = next(ln for ln in c.export_text().splitlines() if " torch " in ln)
    assert ">roof" in line and "%" not in line  # no % of an overhead-bound rate
    doubled = row(Backend.torch_cuda, "torch", 2e15, 0.0, small)  # past the datasheet still, whatever the ceiling
    assert "beats the datasheet" in tables.implausible(doubled, roof, tables.DATASHEET["H200"])


def test_every_row_is_held_against_a_bound_it_does_not_set():
    """The audit's circular check: the measured streaming ceiling is the fastest native row, so no
    native row could beat it. The datasheet judges every row, the ceiling's own included (fault
    injection: a native GEMV timed at half its time, past the H100's 3.35 TB/s); rows above the
    measured copy bandwidth but under both bounds are labeled, not passed silently."""
    from gapbench.benchmarks.blas import tables
    from gapbench.benchmarks.blas.params import BlasParams, Stop
    from gapbench.benchmarks.blas.run import record
    from gapbench.core.conditions import Cache, Conditions

    def row(op, shape, backend, variant, bytes_per_s):
        spec = ops.get(op)
        t = spec.work(shape, DType.fp16)["bytes"] / bytes_per_s
        return record(spec, DType.fp16, shape, backend, variant,
                      BlasParams(stop=Stop(converged=True, median_ci_s=[t * 0.995, t * 1.005])), status=OK,
                      samples_s=[t] * 11, conditions=Conditions(cache=Cache.ROTATED).to_dict(),
                      device={"name": "NVIDIA H100 80GB HBM3"})

    copy = row("copy", {"n": 2**26}, Backend.native_cuda, "memcpy", 3.0e12)
    stream = row("gemv", {"m": 4096, "k": 16384}, Backend.native_cuda, "gapbench", 3.1e12)
    framework = row("gemv", {"m": 8192, "k": 16384}, Backend.torch_cuda, "torch", 3.05e12)
    recs = [copy, stream, framework]
    roof = tables.roofline(recs)
    assert roof["cuda"][tables.STREAM]["value"] == pytest.approx(3.1e12)  # set by the native GEMV itself
    assert tables.mark_suspects(recs, roof) == 0
    assert "above the copy bandwidth" in BlasParams.of(stream).above_copy and BlasParams.of(framework).above_copy
    assert BlasParams.of(copy).above_copy is None
    doubled = row("gemv", {"m": 4096, "k": 16384}, Backend.native_cuda, "gapbench", 6.2e12)  # a dropped half
    recs = [copy, doubled, framework]
    roof = tables.roofline(recs)
    assert roof["cuda"][tables.STREAM]["value"] == pytest.approx(6.2e12)  # it sets the ceiling it would beat
    assert tables.mark_suspects(recs, roof) == 1 and "beats the datasheet" in BlasParams.of(doubled).implausible


def test_an_op_no_vendor_has_is_paired_against_the_dispatcher():
    """rmsnorm has no vendor row: its framework rows are paired against the library's dispatcher."""
    from gapbench.benchmarks.blas.measure import measure_case

    arms = [_fake_arm("gapbench", 1.0e-3), _fake_arm("torch", 2.0e-3)]
    recs = measure_case(lambda b, v, p, **kw: Record(probe="blas", backend=b, variant=v, params=p.to_dict(), **kw),
                        arms, [HOT], budget_s=1.0, rel_hw=0.01, max_rounds=20, min_rounds=10, warmup=0, seed=0)
    t = next(r for r in recs if r.variant == "torch").params["paired"]
    assert t["vs"] == "native-cuda/gapbench" and t["speed_ratio"] == pytest.approx(0.5)


def _small_gemv_case_on_a_stand_in_gpu():
    """A 32x32 fp32 GEMV case and a stand-in torch-cuda BackendInfo, for adapters over torch-cpu
    (skips where torch-cpu cannot run)."""
    pytest.importorskip("torch")
    if not registry.info(Backend.torch_cpu).available:
        pytest.skip("torch-cpu not available")
    from gapbench.backends.base import BackendInfo
    from gapbench.benchmarks.blas import arms as rows, framework_arms
    from gapbench.benchmarks.blas.run import record

    spec, shape, dt = ops.get("gemv"), {"m": 32, "k": 32}, DType.fp32
    rounded = [dtypes.round_to(a, dt) for a in spec.inputs(shape, np.random.default_rng(0))]
    case = rows.Case(spec, dt, shape, rounded, spec.expected(rounded, shape),
                     lambda b, v, p=None, **kw: record(spec, dt, shape, b, v, p, **kw))
    return case, BackendInfo(Backend.torch_cuda, True, "", {})


def test_a_framework_that_can_scrub_gets_the_cold_modes_under_flushed_conditions():
    """A framework whose stream takes the gate's L2 scrub (a stand-in adapter over torch-cpu on a
    stand-in GPU) gets a sampler per cold mode that asks for that scrub before each sample, and its
    cold rows record the flushed cache state the native cold rows record; one that cannot scrub
    gets the hot mode alone."""
    from gapbench.benchmarks.blas import arms as rows, framework_arms
    from gapbench.core.conditions import Cache

    case, gpu = _small_gemv_case_on_a_stand_in_gpu()

    class Scrubbing(type(registry.make_adapter(Backend.torch_cpu))):
        asked: list = []
        can_scrub = True

        def time_device(self, fn, inner, held=True, scrub=None):
            self.asked.append(scrub)
            fn()
            return 1e-6

    ad = Scrubbing(Backend.torch_cpu)
    ad.setup_context()
    _, (arm,) = framework_arms.framework(case, gpu, ad, l2_bytes=2**20, free_bytes=2**30)
    assert set(arm.samplers) == {CacheMode.hot, CacheMode.cold_clean, CacheMode.cold_dirty}
    arm.samplers[CacheMode.cold_dirty](3)
    arm.samplers[CacheMode.hot](2)
    assert Scrubbing.asked == [CacheMode.cold_dirty] * 3 + [None] * 2
    assert arm.conditions(CacheMode.cold_clean).cache == Cache.FLUSHED_CLEAN
    assert arm.conditions(CacheMode.cold_dirty).cache == Cache.FLUSHED_DIRTY
    plain = registry.make_adapter(Backend.torch_cpu)
    plain.setup_context()
    _, (hot_only,) = framework_arms.framework(case, gpu, plain, l2_bytes=2**20, free_bytes=2**30)
    assert set(hot_only.samplers) == {CacheMode.hot}


def test_framework_rows_take_the_adapters_streams_in_turn_and_warm_each_first():
    """A framework with timing streams (torch, CuPy on the native part's blocking streams) times
    every row of a case on them in turn, one a paired round, all its rows of a round on one stream
    (one shared hook), as the native rows do; every row ran on every stream before any timed
    sample (a first use on a stream sets up blocks and workspaces, never behind the gate); the
    records say how many streams. Without timing streams the rows stay on the current stream and
    record none."""
    import dataclasses

    from gapbench.benchmarks.blas import arms as rows, framework_arms
    from gapbench.benchmarks.blas.config import HOT
    from gapbench.benchmarks.blas.measure import measure_case
    from gapbench.core.names import Family
    from gapbench.ops.spec import FrameworkImpl

    case, gpu = _small_gemv_case_on_a_stand_in_gpu()
    mv = case.spec.impls(Family.torch)[0]
    case.spec = dataclasses.replace(case.spec, frameworks=(mv, FrameworkImpl(Family.torch, "W @ x", mv.build,
                                                                             variant="matmul")))

    class Streamed(type(registry.make_adapter(Backend.torch_cpu))):
        def __init__(self, backend, n):
            super().__init__(backend)
            self.n, self.on, self.ran, self.timed = n, 0, [], []

        def timing_streams(self, n):
            return min(n, self.n)

        def use_stream(self, i):
            assert 0 <= i < self.n
            self.on = i

        def evaluated(self, fn):
            def run():
                self.ran.append(self.on)
                return fn()
            return run

        def time_device_each(self, fn, n, scrub=None):
            self.timed.append((self.on, n))
            for _ in range(n):
                fn()
            return [1e-6] * n

    ad = Streamed(Backend.torch_cpu, 4)
    ad.setup_context()
    recs, arms = framework_arms.framework(case, gpu, ad, l2_bytes=2**20, free_bytes=2**30, streams=8)
    assert not recs and len(arms) == 2
    assert arms[0].on_round is arms[1].on_round is not None and {a.streams for a in arms} == {4}
    for s in range(1, 4):  # each arm twice on every stream, before anything was timed
        assert ad.ran.count(s) == 2 * 2
    assert ad.ran.count(0) > 4 and not ad.timed and ad.on == 0
    out = measure_case(case.record, arms, [HOT], budget_s=5.0, rel_hw=0.5, max_rounds=9, min_rounds=9, warmup=1,
                       seed=3)
    assert {r.status for r in out} == {"ok"} and all(r.conditions["streams"] == 4 for r in out)
    # the warm-up (on stream 0), 9 rounds of 2 arms, then each arm alone over the 4 streams in turn
    rounds, alone = [s for s, _ in ad.timed[-8 - 18:-8]], [s for s, _ in ad.timed[-8:]]
    assert rounds == [i // 2 % 4 for i in range(18)] and alone == [0, 1, 2, 3] * 2, ad.timed
    assert {s for s, _ in ad.timed[:-8 - 18]} == {0}

    plain = type(ad)(Backend.torch_cpu, 1)
    plain.setup_context()
    _, arms1 = framework_arms.framework(case, gpu, plain, l2_bytes=2**20, free_bytes=2**30, streams=8)
    assert all(a.on_round is None and a.streams == 1 for a in arms1)
    assert arms1[0].conditions(CacheMode.hot).streams is None and set(plain.ran) == {0}


@pytest.mark.cuda
@pytest.mark.skipif(not registry.info(Backend.torch_cuda).available or not registry.info(Backend.native_cuda).available,
                    reason="needs torch with CUDA and gapbench's CUDA part on an NVIDIA GPU")
def test_framework_cold_rows_verify_and_pair_with_the_native_cold_rows_on_gpu(tmp_path):
    """torch-cuda's cold rows on a GPU: scrubbed on its stream by the gate, verified after timing,
    recorded as flushed, and paired with cuBLAS's cold rows (same conditions: a ratio, no n/c); with
    --streams shared, every row of a round on one of the process's 8 streams."""
    out = tmp_path / "cold.json"
    p = run_module("bench.blas", "--quick", "--no-progress", "--no-plain", "--backends", "native-cuda,torch-cuda",
                   "--ops", "gemv", "--dtypes", "fp16", "--cold", "read,write", "--streams", "shared", "--out", str(out))
    assert p.returncode == 0, p.stderr
    native_rows = [r for r in load_run(out).records if r.backend == "native-cuda" and r.status == OK]
    assert native_rows and all(r.conditions["streams"] == 8 for r in native_rows)
    recs = [r for r in load_run(out).records if r.backend == "torch-cuda" and r.metric.startswith("time_cold")]
    assert recs and all(r.status == OK and r.verified for r in recs), [(r.metric, r.reason) for r in recs]
    for r in recs:
        want = "flushed-clean" if r.metric == "time_cold" else "flushed-dirty"
        assert r.conditions["cache"] == want and r.conditions["streams"] == 8  # --streams shared: the native rows' 8
        paired = r.params["paired"]
        assert paired["vs"].endswith("/cublas") and paired.get("speed_ratio") and not paired.get("not_comparable")


@pytest.mark.cuda
@pytest.mark.skipif(not registry.info(Backend.torch_cuda).available or not registry.info(Backend.native_cuda).available,
                    reason="needs torch with CUDA and gapbench's CUDA part on an NVIDIA GPU")
def test_parity_balanced_pads_every_gated_row_and_keeps_the_pairs_comparable(tmp_path):
    """bench.blas --parity balanced on a GPU: the native rows and torch's rows are all recorded as
    balanced (both padded), verified, their ratios taken (not n/c), and a round's runs a multiple of
    four; torch's adapter pads its held samples."""
    out = tmp_path / "parity.json"
    p = run_module("bench.blas", "--quick", "--no-progress", "--no-plain", "--backends", "native-cuda,torch-cuda",
                   "--ops", "gemv", "--dtypes", "fp16", "--parity", "balanced", "--out", str(out))
    assert p.returncode == 0, p.stderr
    run = load_run(out)
    assert run.run["config"]["parity"] == "balanced"
    rows_ = [r for r in run.records if r.status == OK and r.metric == "time"]
    assert {r.backend for r in rows_} == {"native-cuda", "torch-cuda"}
    assert all(r.verified and r.conditions["parity"] == "balanced" for r in rows_), [r.conditions for r in rows_]
    assert all(r.params["stop"]["runs_per_round"] % 4 == 0 for r in rows_)
    for r in rows_:
        paired = r.params.get("paired")
        if paired:
            assert paired.get("speed_ratio") and not paired.get("not_comparable"), paired
    ad = registry.make_adapter(Backend.torch_cuda)
    ad.setup_context()
    assert ad.set_parity_pads(True) is True and ad.parity_pads is True


@pytest.mark.cuda
@pytest.mark.skipif(not registry.info(Backend.torch_cuda).available or not registry.info(Backend.native_cuda).available,
                    reason="needs torch with CUDA and gapbench's CUDA part on an NVIDIA GPU")
def test_framework_timing_streams_are_the_native_count_and_hold_work_queued_on_the_default_stream():
    """torch and CuPy time on the process's timing streams, the ones a native case's rounds take
    too: as many as a native case has (kTimingStreams, bench.blas's default), each the framework's
    current stream once chosen. They
    are blocking streams, so an op that ignores the current stream and queues on the legacy default
    stream (a user's extension might) is still held and timed between the row's events; the control,
    a non-blocking stream, times nothing of it (what a non-blocking choice would have done)."""
    import torch

    from gapbench import _native
    from gapbench.benchmarks.blas.config import STREAMS
    from gapbench.core import native

    case = _native.cuda.BlasCase(_native.Op.copy, _native.DType.fp32, 1, 1, 1024, 1)
    assert _native.cuda.TIMING_STREAMS == STREAMS == case.streams
    ad = registry.make_adapter(Backend.torch_cuda)
    ad.setup_context()
    assert ad.timing_streams(STREAMS) == STREAMS
    handles = ad._stream_hold().timing_streams(STREAMS)
    assert handles == native.timing_streams(0, STREAMS)  # the process's: a round's native arms take them too
    case.use_stream_handle(handles[2])
    assert len(case.time(_native.Impl.dispatch, 3, 1, _native.Cache.hot)) == 3
    with pytest.raises(ValueError, match="null stream"):
        case.use_stream_handle(0)
    for i in (3, 0, 7):
        ad.use_stream(i)
        assert torch.cuda.current_stream().cuda_stream == handles[i]
    cycles = 2_000_000  # at least 0.67 ms at any SM clock up to 3 GHz

    def on_default_stream():
        with torch.cuda.stream(torch.cuda.default_stream()):
            torch.cuda._sleep(cycles)

    on_default_stream()
    torch.cuda.synchronize()
    held = ad.time_device_each(on_default_stream, 3)
    assert min(held) >= cycles / 3.0e9, held
    with torch.cuda.stream(torch.cuda.Stream()):  # non-blocking: the sleep runs beside the events
        unheld = ad.time_device_each(on_default_stream, 3)
    torch.cuda.synchronize()
    assert min(unheld) < cycles / 3.0e9 / 2, unheld
    if registry.info(Backend.cupy).available:
        import cupy

        cp = registry.make_adapter(Backend.cupy)
        cp.setup_context()
        assert cp.timing_streams(STREAMS) == STREAMS
        cp.use_stream(5)
        assert cupy.cuda.get_current_stream().ptr == cp._stream_hold().timing_streams(STREAMS)[5]
        cp.use_stream(0)


def test_an_injected_device_delay_follows_every_timed_op_and_the_row_says_so():
    """bench.blas --inject-delay-us (test only): the adapter's device-side delay is queued after
    every timed op of the framework, and the row's op names it; an adapter without a delay kernel
    gives an error row that says so, and nothing is timed."""
    from gapbench.benchmarks.blas import arms as rows, framework_arms

    case, gpu = _small_gemv_case_on_a_stand_in_gpu()
    queued = []

    class Delaying(type(registry.make_adapter(Backend.torch_cpu))):
        def device_delay(self, us, sm_mhz=None):
            return (lambda: queued.append(us)), f"spin({us:g} us)"

        def time_device(self, fn, inner, held=True, scrub=None):
            for _ in range(inner):
                fn()
            return 1e-6

    ad = Delaying(Backend.torch_cpu)
    ad.setup_context()
    recs, (arm,) = framework_arms.framework(case, gpu, ad, l2_bytes=2**20, free_bytes=2**30, inject_us=7.0)
    assert not recs and "spin(7 us) injected delay (test only)" in arm.op
    arm.samplers[CacheMode.hot](5)
    assert queued == [7.0] * 5
    plain = registry.make_adapter(Backend.torch_cpu)
    plain.setup_context()
    recs, arms = framework_arms.framework(case, gpu, plain, l2_bytes=2**20, free_bytes=2**30, inject_us=7.0)
    assert not arms and recs[0].status == ERROR and "no device-side delay kernel" in recs[0].reason


@pytest.mark.cuda
@pytest.mark.skipif(not registry.info(Backend.torch_cuda).available, reason="needs torch with CUDA on an NVIDIA GPU")
def test_an_injected_device_delay_on_gpu_is_found_slower_by_compare(tmp_path):
    """A real torch.cuda._sleep delay of 20 us after every op makes torch-cuda's GEMV rows slower
    in gapbench compare against a run without it, and the native rows of the same runs are not
    called slower (the injection touches one arm only)."""
    from gapbench.core import compare as cmp

    outs = [tmp_path / "a.json", tmp_path / "b.json"]
    for out, extra in zip(outs, ([], ["--inject-delay-us", "torch-cuda=20"])):
        p = run_module("bench.blas", "--quick", "--no-progress", "--no-plain", "--no-plots", "--backends",
                       "native-cuda,torch-cuda", "--ops", "gemv", "--dtypes", "fp16", *extra, "--out", str(out))
        assert p.returncode == 0, p.stderr[-2000:]
    rows = cmp.compare_runs(load_run(outs[0]), load_run(outs[1]))
    torch_rows = [c for c in rows if c.key[1] == "torch-cuda" and c.ratio is not None]
    assert torch_rows and all(c.verdict == cmp.SLOWER for c in torch_rows), [(c.key, c.verdict) for c in torch_rows]
    assert all("injected delay" in c.b.op for c in torch_rows)
    assert not [c for c in rows if c.key[1] == "native-cuda" and c.verdict == cmp.SLOWER and c.ratio > 1.2]


def test_framework_rows_are_labeled_l2_resident_when_their_sets_fit_twice_in_the_l2():
    """The audit's mutation (every framework row labeled 'rotated') must fail here: a case whose
    rotated sets add up to less than twice the L2 is L2-resident, on the native case's count or
    the same rule; a CPU row is 'host'."""
    from types import SimpleNamespace

    from gapbench.benchmarks.blas import framework_arms
    from gapbench.core.conditions import Cache
    from gapbench.core.names import DeviceClass

    gpu, cpu = SimpleNamespace(device_class=DeviceClass.cuda), SimpleNamespace(device_class=DeviceClass.cpu)
    l2 = 50 << 20
    small = SimpleNamespace(set_bytes=1 << 20, rotations=None)
    assert framework_arms._framework_sets(small, gpu, l2, None) == (100, Cache.ROTATED)  # 100 x 1 MiB = 2 x 50 MiB
    assert framework_arms._framework_sets(small, gpu, l2, 40 << 20) == (10, Cache.L2_RESIDENT)  # memory allows 10 sets
    native_count = SimpleNamespace(set_bytes=1 << 20, rotations=8)
    assert framework_arms._framework_sets(native_count, gpu, l2, None) == (8, Cache.L2_RESIDENT)
    big = SimpleNamespace(set_bytes=64 << 20, rotations=2)
    assert framework_arms._framework_sets(big, gpu, l2, None) == (2, Cache.ROTATED)
    assert framework_arms._framework_sets(small, gpu, None, None) == (1, Cache.L2_RESIDENT)
    assert framework_arms._framework_sets(small, cpu, l2, None) == (1, Cache.HOST)


def test_phases_keep_their_parts_apart_from_the_total(monkeypatch):
    """A run's wall_s: phases add up with the rest to the total; parts split a phase, not added."""
    from gapbench.benchmarks.blas import run as blas_run

    now = [0.0]
    monkeypatch.setattr(blas_run.time, "perf_counter", lambda: now[0])
    ph = blas_run.Phases()
    with ph("timing"):
        with ph.part("rounds"):
            now[0] += 2.0
        now[0] += 1.0
    with ph("timing"):
        now[0] += 1.0
    wall = ph.wall(10.0)
    assert wall == {"timing": 4.0, "setup and other": 6.0, "total": 10.0, "parts": {"rounds": 2.0}}


def test_next_case_made_beside_the_device_work_gives_the_same_cases(monkeypatch):
    """bench.blas makes the next case's inputs and float64 reference on a host thread while this
    case is verified and timed (run.iterate, overlap): every case must get exactly the inputs and
    reference it gets made in order on the main thread, the verdicts must be the same, and the
    wall parts say which steps ran beside. Forced on here with torch-cpu (a CPU row would share
    its cores with that thread: `overlaps_host` keeps it off for real runs); each case's inputs are
    captured as the Case receives them."""
    pytest.importorskip("torch")
    from gapbench.benchmarks.blas import run as blas_run
    from gapbench.benchmarks.blas.config import Config

    seen: list = []
    real_case = blas_run.rows.Case

    def spy(spec, dtype, shape, rounded, expected, *a, **kw):
        seen[-1].append((spec.name, dtype, blas_run.shape_text(shape), [x.copy() for x in rounded],
                         np.asarray(expected.values).copy()))
        return real_case(spec, dtype, shape, rounded, expected, *a, **kw)

    monkeypatch.setattr(blas_run.rows, "Case", spy)
    results = {}
    for overlap in (False, True):
        seen.append([])
        cfg = Config(ops=[ops.get("gemv"), ops.get("copy")], dtypes=[DType.fp32, DType.bf16],
                     shapes=parse_shapes("64x48,96x32,4096"), seed=7, samples=3, budget_s=0.05, min_rounds=2)
        ph = blas_run.Phases()
        recs = list(blas_run.iterate(cfg, [Backend.torch_cpu], phases=ph, overlap=overlap))
        results[overlap] = ([(r.params.get("op"), r.params.get("dtype"), r.params.get("shape_text"), r.status,
                              r.verified) for r in recs if r.metric == "time"], ph.parts)
    (plain, plain_parts), (beside, beside_parts) = results[False], results[True]
    assert len(seen[0]) == len(seen[1]) == 6  # gemv 2 shapes x 2 dtypes, copy 1 shape x 2 dtypes
    for a, b in zip(*seen):
        assert a[:3] == b[:3]
        assert all(np.array_equal(x, y) for x, y in zip(a[3], b[3])) and np.array_equal(a[4], b[4])
    assert plain == beside and all(st == OK and v for *_, st, v in plain)
    assert not any(k.endswith(blas_run.BESIDE) for k in plain_parts)
    assert "float64 references" in beside_parts  # the first case is made in order
    assert "float64 references" + blas_run.BESIDE in beside_parts  # the others beside


def test_a_case_too_big_for_every_backend_is_skipped_alike_made_beside_or_in_order(monkeypatch):
    """A case whose backends all lack the memory is an error row per backend and is not timed;
    made ahead beside the previous case's rounds, its inputs are dropped and the cases after it get
    the inputs they get in order."""
    pytest.importorskip("torch")
    from gapbench.benchmarks.blas import run as blas_run
    from gapbench.benchmarks.blas.config import Config

    real_check = blas_run.memory_check
    monkeypatch.setattr(blas_run, "memory_check", lambda spec, shape, dtype, live: (
        {b: "too big (injected)" for b in live} if blas_run.shape_text(shape) == "96x32" and dtype is DType.fp32
        else real_check(spec, shape, dtype, live)))
    got = {}
    for overlap in (False, True):
        cfg = Config(ops=[ops.get("gemv")], dtypes=[DType.fp32, DType.fp16], shapes=parse_shapes("64x48,96x32,32x32"),
                     seed=5, samples=3, budget_s=0.05, min_rounds=2)
        recs = [r for r in blas_run.iterate(cfg, [Backend.torch_cpu], overlap=overlap) if r.metric == "time"]
        got[overlap] = [(r.params.get("shape_text"), r.params.get("dtype"), r.status, r.reason[:18]) for r in recs
                        if r.status != OK] + [
            (r.params.get("shape_text"), r.params.get("dtype"), r.status, r.verify_detail) for r in recs if r.status == OK]
    assert got[False] == got[True]
    assert ("96x32", "fp32", ERROR, "too big (injected)") in got[True]
    assert sum(1 for g in got[True] if g[2] == OK) == 5  # 3 shapes x 2 dtypes, less the one skipped


def test_a_case_that_fails_to_be_made_beside_fails_as_it_does_in_order(monkeypatch):
    """An error while making a case's inputs or reference on the host thread reaches the run where
    that case comes, as it does made in order: the same records before it, the same error, and
    no thread left behind."""
    pytest.importorskip("torch")
    import threading

    from gapbench.benchmarks.blas import run as blas_run
    from gapbench.benchmarks.blas.config import Config

    spec = ops.get("gemv")
    real = type(spec).expected
    calls = []

    def expected(self, rounded, shape, **kw):
        calls.append(blas_run.shape_text(shape))
        if len(calls) == 3:
            raise MemoryError("host out of memory (injected)")
        return real(self, rounded, shape, **kw)

    monkeypatch.setattr(type(spec), "expected", expected)
    got = {}
    for overlap in (False, True):
        calls.clear()
        cfg = Config(ops=[spec], dtypes=[DType.fp32], shapes=parse_shapes("64x48,96x32,32x32,48x48"), seed=3,
                     samples=3, budget_s=0.05, min_rounds=2)
        recs = []
        with pytest.raises(MemoryError, match="injected"):
            for r in blas_run.iterate(cfg, [Backend.torch_cpu], overlap=overlap):
                recs.append(r)
        got[overlap] = [(r.params.get("shape_text"), r.status) for r in recs if r.metric == "time"]
    assert got[False] == got[True] == [("64x48", OK), ("96x32", OK)]
    assert not [t for t in threading.enumerate() if t.name.startswith("gapbench-prepare")]


def test_next_case_is_made_beside_only_where_every_row_is_gated_on_the_device():
    """Host threads busy beside the timing may share cores only with device-timed, gated rows."""
    from types import SimpleNamespace

    from gapbench.benchmarks.blas.run import overlaps_host

    held, unheld = SimpleNamespace(can_hold=True), SimpleNamespace(can_hold=False)
    s = lambda live, ads: SimpleNamespace(live=live, adapters=ads)  # noqa: E731
    assert overlaps_host(s([Backend.native_cuda, Backend.torch_cuda, Backend.cupy],
                           {Backend.torch_cuda: held, Backend.cupy: held}))
    assert not overlaps_host(s([Backend.native_cuda, Backend.torch_cuda], {Backend.torch_cuda: unheld}))
    assert not overlaps_host(s([Backend.native_cuda, Backend.torch_cpu], {Backend.torch_cpu: held}))
    assert not overlaps_host(s([Backend.native_cuda, Backend.mlx_gpu], {}))
    assert not overlaps_host(s([], {}))


@pytest.mark.skipif(not registry.info(Backend.native_cuda).reason.lower().count("driver"),
                    reason="the CUDA part built, on a machine where it cannot run (no driver)")
def test_plain_check_without_a_driver_gives_each_row_its_reason(tmp_path):
    """Every chosen row's plain loop starts at once (plain.plain_check); where none can run, each
    row is an error record saying why (the loop's own words or the harness case's), none is lost,
    and no loop is left running."""
    import psutil

    from gapbench.benchmarks.blas.config import Config
    from gapbench.benchmarks.blas.params import BlasParams
    from gapbench.benchmarks.blas.plain import plain_binary, plain_check
    from gapbench.benchmarks.blas.run import record
    from gapbench.core.names import DType

    if plain_binary() is None:
        pytest.skip("the plain cuBLAS loop was not built")
    cfg = Config(dtypes=[DType.fp32, DType.fp16], seed=1)
    vendor = [record(ops.get(op), dt, shape, Backend.native_cuda, "cublas",
                     BlasParams(strategy="cublas", library="libcublas.so.13"), samples_s=[1e-3] * 30,
                     clock="device_events")
              for op, shape in (("gemm", {"batch": 1, "m": 64, "n": 64, "k": 64}), ("gemv", {"m": 64, "k": 64}))
              for dt in (DType.fp32, DType.fp16)]
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    got = plain_check(vendor, cfg, every_dtype=True)
    assert [(r.backend, r.status) for r in got] == [("plain-cuda", ERROR)] * 4
    assert all(r.reason.startswith("plain loop failed: ") and len(r.reason) > 25 for r in got), [r.reason for r in got]
    assert {(r.params["op"], r.params["dtype"]) for r in got} == {(o, d) for o in ("gemm", "gemv") for d in ("fp32", "fp16")}
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_more_processes_run_the_short_cases_first_and_alone_on_the_same_data():
    """--processes K: short cases (by size) come first in the run's order, each op's shapes and
    dtypes in their own order; a more process runs them alone; the config it is handed is the run's
    (Config.from_dict of to_dict), seed and injection included."""
    from gapbench.benchmarks.blas.config import Config, is_short
    from gapbench.ops.spec import shape_text

    cfg = Config(ops=[ops.get("gemv"), ops.get("copy")], dtypes=[DType.fp32, DType.bf16],
                 shapes=parse_shapes("4096x4096,64x48,16777216,1024"), seed=7,
                 inject_delay_us={Backend.torch_cuda: 2.0})
    one = cfg.cases()
    assert cfg.to_dict()["processes"] == 1  # recorded even at 1: compare can say a run could have had more
    cfg.processes = 3
    many = cfg.cases()
    name = [(s.name, d, shape_text(sh)) for s, sh, d in many]
    short = [c for c in name if c[2] in ("64x48", "n=1024")]
    assert sorted(name) == sorted((s.name, d, shape_text(sh)) for s, sh, d in one)
    assert name[:len(short)] == short and all(is_short(s, sh) for s, sh, _ in many[:len(short)])
    assert not any(is_short(s, sh) for s, sh, _ in many[len(short):])
    assert [c for c in name if c not in short] == [(s.name, d, shape_text(sh)) for s, sh, d in one
                                                    if not is_short(s, sh)]
    child = Config.from_dict({**cfg.to_dict(), "short_only": True})
    assert [(s.name, d, shape_text(sh)) for s, sh, d in child.cases()] == short
    assert child.to_dict() == {**cfg.to_dict(), "short_only": True}


def _short_rows(n, seconds=5e-6, conditions=None):
    return [Record(probe="blas", backend="torch-cuda", variant="torch", metric="time", status=OK,
                   samples_s=[seconds * (1 + 0.001 * k) for k in range(20)], inner=1,
                   params={"op": "gemv", "dtype": "fp16", "shape": {"m": 256, "k": 256 + i},
                           "shape_text": f"256x{256 + i}", "cache": "rotated"},
                   conditions=conditions or {"cache": "rotated", "data": "randn", "clock": "device events, gated"})
            for i in range(n)]


def test_more_processes_add_their_medians_and_say_what_they_could_not():
    """more_processes: each more process's median joins this run's row (this process's first); a
    process that fails, and a row a process failed or timed under other conditions, are named in the
    row and in the run's entry, and the other processes' medians are kept."""
    from gapbench.benchmarks.blas.config import Config
    from gapbench.benchmarks.blas.processes import more_processes, spread_text
    from gapbench.core.worker import WorkerError

    cfg = Config(ops=[ops.get("gemv")], dtypes=[DType.fp16], shapes=parse_shapes("256x256"), seed=1, processes=4)
    mine = _short_rows(3)
    long_row = _short_rows(1)[0]
    long_row.params.update(shape={"m": 8192, "k": 8192}, shape_text="8192x8192")
    calls = []

    def fake_run(target, payload, timeout_s, on_progress=None, fast_exit=False):
        calls.append(payload)
        on_progress("gemv fp16 256x256")
        if len(calls) == 2:
            raise WorkerError("crash", "killed by signal 9")
        rows = _short_rows(3, seconds=5.1e-6)
        if len(calls) == 3:
            rows[1].status, rows[1].reason, rows[1].samples_s = FAILED, "rel. error 3e-1", []
            rows[2].conditions = {**rows[2].conditions, "cache": "l2-resident"}
        return {"records": [r.to_dict() for r in rows]}

    seen, done = [], []
    info = more_processes(cfg, [Backend.torch_cuda], mine + [long_row], seen.append, on_done=lambda: done.append(1),
                          run=fake_run)
    assert len(calls) == 3 and all(p["config"]["short_only"] and p["config"]["seed"] == 1 for p in calls)
    assert seen[0] == "process 2/4: gemv fp16 256x256" and len(done) == 3
    walls = [m.pop("wall_s") for m in info["more"] if "error" not in m]
    assert len(walls) == 2 and all(set(w) == {"process total"} and w["process total"] >= 0 for w in walls)
    assert info["short_rows"] == 3 and info["more"][0] == {"process": 2, "rows": 3}
    assert "crash" in info["more"][1]["error"] and info["more"][2] == {"process": 4, "rows": 1}
    meds = [r.params["process_medians_s"] for r in mine]
    assert [len(m) for m in meds] == [3, 2, 2]
    assert all(m[0] == pytest.approx(float(np.median(r.per_op()))) for m, r in zip(meds, mine))
    assert all(x == pytest.approx(5.1e-6 * 1.0095) for m in meds for x in m[1:])
    assert "process_medians_s" not in long_row.params
    fails = [r.params.get("process_failures") for r in mine]
    assert all(any("process 3: crash" in f for f in fs) for fs in fails)
    assert any("rel. error" in f for f in fails[1]) and any("cache" in f for f in fails[2])
    assert "3 rows" in spread_text(mine)


def test_cli_times_the_short_cases_in_more_processes(tmp_path):
    """bench.blas --processes 2 for real on torch-cpu: the short case's row carries two process
    medians, the long case's one process only, the run file says what ran, and gapbench compare
    judges the short row between processes."""
    if not registry.info(Backend.torch_cpu).available:
        pytest.skip("torch-cpu not available")
    out = tmp_path / "p.json"
    p = run_module("bench.blas", "--no-progress", "--no-plots", "--no-plain", "--ops", "gemv", "--dtypes", "fp32",
                   "--shapes", "64x64,2048x2048", "--samples", "5", "--budget", "0.05", "--backends", "torch-cpu",
                   "--processes", "2", "--out", str(out))
    assert p.returncode == 0, p.stderr + p.stdout
    run = load_run(out)
    timed = {r.params["shape_text"]: r for r in run.records if r.status == OK and r.samples_s}
    assert set(timed) == {"64x64", "2048x2048"}
    assert len(timed["64x64"].params["process_medians_s"]) == 2 and "process_failures" not in timed["64x64"].params
    assert "process_medians_s" not in timed["2048x2048"].params
    wall = run.run["processes"]["more"][0].pop("wall_s")
    assert run.run["processes"] == {"processes": 2, "short_rows": 1, "more": [{"process": 2, "rows": 1}]}
    assert wall["process total"] >= wall["total"] > 0 and "paired timing, last runs verified" in wall
    assert 0 < run.run["wall_s"]["parts"]["short cases, this process"] < run.run["wall_s"]["total"]
    assert run.run["config"]["processes"] == 2 and "short cases in 2 processes: 1 row, " in p.stdout
    from gapbench.core import compare as cmp

    covers = {c.key[4]: c.covers for c in cmp.compare_runs(run, run)}
    assert covers == {"gemv fp32 64x64": "between processes (2 + 2)", "gemv fp32 2048x2048": "within-run"}


def test_launch_floor_arms_run_in_the_rounds_and_each_row_records_its_own():
    """--launch-floor: an empty-kernel arm per stream group runs in the case's paired rounds (on the
    round's stream, by the rows' own hook), is no row, moves no ratio, and each row it serves records
    its median; a row without a floor records none, and cold modes take no floor."""
    from gapbench.benchmarks.blas.measure import FloorArm, measure_case

    ran, stream = [], [None]
    hook = lambda i: stream.__setitem__(0, i % 2)  # noqa: E731 - the native rows' round hook

    def floor_sample(label, base):
        def sample(n):
            ran.append((label, stream[0]))
            return [base] * n
        return sample

    native_floor = FloorArm("launch-floor/native-cuda", floor_sample("native", 3.0e-6), "empty, native streams", hook)
    fw_floor = FloorArm("launch-floor/torch-cuda", floor_sample("fw", 3.2e-6), "empty, torch's stream")
    cublas, mine = _fake_arm("cublas", 5.0e-6, vendor=True), _fake_arm("gapbench", 5.5e-6)
    torch, plain = _fake_arm("torch", 6.0e-6), _fake_arm("other", 7.0e-6)
    for a in (cublas, mine):
        a.floor, a.on_round, a.streams = native_floor, hook, 2
    torch.floor = fw_floor
    recs = measure_case(lambda b, v, p, **kw: Record(probe="blas", backend=b, variant=v, params=p.to_dict(), **kw),
                        [cublas, mine, torch, plain], [HOT], budget_s=1.0, rel_hw=0.01, max_rounds=20, min_rounds=10,
                        warmup=0, seed=0)
    by = {r.variant: BlasParams.of(r) for r in recs}
    assert set(by) == {"cublas", "gapbench", "torch", "other"}  # the floors are no rows
    assert by["gapbench"].launch_floor.median_s == pytest.approx(3.0e-6)
    assert by["cublas"].launch_floor.median_s == pytest.approx(3.0e-6)
    assert by["torch"].launch_floor.median_s == pytest.approx(3.2e-6) and by["torch"].launch_floor.what == "empty, torch's stream"
    assert by["other"].launch_floor is None
    assert by["gapbench"].launch_floor.rounds == by["gapbench"].stop.rounds >= 10
    assert by["gapbench"].paired.speed_ratio == pytest.approx(5.0 / 5.5)  # ratios as without floors
    # the native floor took the rounds' streams (its warm-up, like every arm's, runs before round 0's hook)
    assert {s for who, s in ran if who == "native" and s is not None} == {0, 1}


def test_framework_floors_group_rows_by_the_stream_their_framework_times_on():
    """torch and CuPy on one stream handle share one floor (made by the first with an empty kernel);
    a framework on another stream gets its own; native rows and rows that rotate streams get none here."""
    from gapbench.benchmarks.blas.framework_arms import framework_floors
    from gapbench.benchmarks.blas.measure import CaseArm

    class Ad:
        def __init__(self, handle, empty=True):
            self.handle, self.empty, self.calls = handle, empty, 0

        def stream_handle(self):
            return self.handle

        def empty_kernel(self):
            return (lambda: None) if self.empty else None

        def time_device_each(self, fn, n):
            self.calls += n
            return [2e-6] * n

    def arm(backend, on_round=None):
        return CaseArm(backend, backend.value, DeviceClass.cuda, "device_events", {CacheMode.hot: lambda n: [1e-6] * n},
                       lambda mode: (True, ""), "", on_round=on_round)

    ads = {Backend.torch_cuda: Ad(0, empty=False), Backend.cupy: Ad(0), Backend.mlx_gpu: Ad(7)}
    t, c, m, nat = arm(Backend.torch_cuda), arm(Backend.cupy), arm(Backend.mlx_gpu), arm(Backend.native_cuda)
    rot = arm(Backend.cupy, on_round=lambda i: None)
    framework_floors([t, c, m, nat, rot], ads)
    assert t.floor is c.floor and t.floor.key == "launch-floor/cupy"  # torch has no empty kernel here: CuPy's
    assert "torch-cuda, cupy" in t.floor.what and "0x0" in t.floor.what
    assert m.floor is not None and m.floor is not t.floor and m.floor.key == "launch-floor/mlx-gpu"
    assert nat.floor is None and rot.floor is None
    assert t.floor.sample(3) == [2e-6] * 3 and ads[Backend.cupy].calls == 3


def test_the_report_floors_rows_by_a_ceiling_never_by_an_overhead_bound_rate(tmp_path):
    """bench.report's BLAS table: a --quick run's copy "ceiling" (a 6 us op) is no roofline; its GEMV
    is floored by the copy bandwidth of the machine's default run, which it borrows."""
    from gapbench.benchmarks.blas import tables
    from gapbench.benchmarks.blas.params import BlasParams, Stop
    from gapbench.benchmarks.blas.run import record
    from gapbench.core.conditions import Cache, Conditions
    from gapbench.core.reportkit import is_ceiling
    from gapbench.core.result import RunWriter, load_run

    def run(name, started, op, shape, rate):
        spec = ops.get(op)
        t = spec.work(shape, DType.fp16)["bytes"] / rate
        rec = record(spec, DType.fp16, shape, Backend.native_cuda, "memcpy" if op == "copy" else "gapbench",
                     BlasParams(stop=Stop(converged=True, median_ci_s=[t * 0.99, t * 1.01])), status=OK,
                     samples_s=[t] * 11, conditions=Conditions(cache=Cache.ROTATED).to_dict())
        w = RunWriter(tmp_path / name, env={"nvidia_smi": [{"name": "NVIDIA H200", "driver_version": "580"}]},
                      run={"probe": "blas", "started": started}, overhead=None)
        w.extend([rec])
        w.finish(roofline=tables.roofline([rec]))
        return load_run(tmp_path / name)

    default = run("d.json", "2026-11-29T00:00:00", "copy", {"n": 2**26}, 4.0e12)  # 268 MB: 67 us
    quick = run("q.json", "2026-11-29T01:00:00", "copy", {"n": 2**20}, 1.0e12)  # 4 MB: 4 us, overhead-bound
    gemv = run("g.json", "2026-11-29T01:00:01", "gemv", {"m": 1024, "k": 1024}, 1.0e12)
    assert not is_ceiling(quick.run["roofline"]["cuda"]["bytes_per_s"])
    assert is_ceiling(default.run["roofline"]["cuda"]["bytes_per_s"])
    (table,) = tables.report_tables([default, quick, gemv])
    floors = {(r[1], r[3]): r[7] for r in table.rows}
    work = ops.get("gemv").work({"m": 1024, "k": 1024}, DType.fp16)["bytes"]
    assert floors[("gemv", "1024x1024")] == f"{work / 4.0e12 * 1e6:.4g}"  # the default run's copy, not quick's
    assert floors[("copy", "n=1048576")] != f"{4 * 2**20 / 1.0e12 * 1e6:.4g}"
