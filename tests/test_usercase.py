"""Your own op through gapbench's method (gapbench.api, `gapbench bench FILE`): each implementation
kind the CPU has (a torch callable, a torch kernel writing into a kept buffer, an MLX callable),
the refusal of a wrong result (a dropped row, caught by the poisoned output), pairing against the
baseline, declaration errors, and the examples as a user runs them. GPU parts are marked cuda."""
import json
import textwrap

import numpy as np
import pytest

from conftest import run_module
from gapbench.core.result import FAILED, OK, UNAVAILABLE, load_run

torch = pytest.importorskip("torch")
gb = pytest.importorskip("gapbench.api")


def _rowsum_case(name="rowsum", **kw):
    decl = dict(axes={"m": [64], "k": [96]},
                inputs=lambda s, rng: [rng.standard_normal((s["m"], s["k"]), dtype=np.float32)],
                reference=lambda x: x.sum(axis=-1), reduction=lambda s: s["k"],
                elements=lambda s: (s["m"] * s["k"], s["m"]), flops=lambda s: float(s["m"] * s["k"]))
    return gb.Case(name, **(decl | kw))


def _by_variant(res):
    return {r.variant: r for r in res.records if r.metric == "time" and r.backend == "torch-cpu"}


def test_a_case_is_verified_paired_against_its_baseline_and_recorded_as_blas_rows(tmp_path):
    case = _rowsum_case()

    @case.impl("torch", baseline=True)
    def torch_sum(x):
        return x.sum(dim=-1)

    @case.impl("torch", setup=True)
    def into_buffer(x):  # a kernel with its own output buffer: poisoned before the checked run
        out = torch.empty(x.shape[0], dtype=x.dtype)
        return lambda: torch.sum(x, dim=-1, out=out)

    res = case.run(quick=True, backends="torch-cpu", out=tmp_path / "r.json", seed=3)
    rows = _by_variant(res)
    assert set(rows) == {"torch_sum", "into_buffer"}
    for r in rows.values():
        assert r.status == OK and r.verified and "within its bound (k=96" in r.verify_detail
        assert r.conditions["cache"] == "host" and r.conditions["seed"] == 3
    paired = rows["into_buffer"].params["paired"]
    assert paired["vs"] == "torch-cpu/torch_sum" and paired["lo"] <= paired["speed_ratio"] <= paired["hi"]
    assert "paired" not in rows["torch_sum"].params or not rows["torch_sum"].params["paired"].get("vs")
    run = load_run(res.path)
    assert run.run["probe"] == "blas" and {r.params["op"] for r in run.records if r.params.get("op")} == {"rowsum"}
    assert "speed vs baseline" in str(res) and "into_buffer" in str(res)


def test_a_wrong_result_is_a_failed_row_never_timed_and_the_others_still_run(tmp_path):
    """Fault injection: one output row left unwritten is caught. The kernel writes every row on its
    first call (stale but right values stay in its buffer) and skips the last row after that: only
    the poisoned output shows it. A result off by one part in 1e3 in one element is caught too."""
    case = _rowsum_case()

    @case.impl("torch", baseline=True)
    def good(x):
        return x.sum(dim=-1)

    @case.impl("torch", setup=True)
    def skips_last_row(x):
        out = torch.empty(x.shape[0], dtype=x.dtype)
        calls = [0]

        def run():
            calls[0] += 1
            n = x.shape[0] if calls[0] == 1 else x.shape[0] - 1
            torch.sum(x[:n], dim=-1, out=out[:n])
            return out
        return run

    @case.impl("torch")
    def one_off(x):
        y = x.sum(dim=-1)
        y[5] *= 1.001
        return y

    rows = _by_variant(case.run(quick=True, backends="torch-cpu"))
    assert rows["good"].status == OK
    for bad, why in (("skips_last_row", "not finite"), ("one_off", "1 of 64 outputs outside their bound")):
        assert rows[bad].status == FAILED and not rows[bad].samples_s, rows[bad].reason
        assert why in rows[bad].reason and "not timed" in rows[bad].reason


def test_a_stated_tolerance_judges_every_output(tmp_path):
    case = gb.Case("halve", axes={"n": [1000]}, inputs=lambda s, rng: [rng.standard_normal(s["n"], dtype=np.float32)],
                   reference=lambda x: x / 2, tolerance={"fp32": (0.0, 1e-3)}, elements=lambda s: (s["n"], s["n"]))
    case.impl("torch", baseline=True)(lambda x: x / 2)
    case.impl("torch", "biased")(lambda x: x / 2 + 2e-3)
    rows = _by_variant(case.run(quick=True, backends="torch-cpu"))
    assert rows["<lambda>"].status == OK and "stated tolerance" in rows["<lambda>"].verify_detail
    assert rows["biased"].status == FAILED and "1000 of 1000 outputs outside" in rows["biased"].reason


def test_mlx_implementations_run_too_and_a_device_restricted_one_says_why():
    pytest.importorskip("mlx.core")
    case = _rowsum_case()
    case.impl("mlx", "mx_sum", baseline=True)(lambda x: x.sum(axis=-1))
    case.impl("torch", "gpu_only", devices=["cuda"])(lambda x: x.sum(dim=-1))
    res = case.run(quick=True, backends="mlx-cpu,torch-cpu")
    mx = next(r for r in res.records if r.backend == "mlx-cpu" and r.metric == "time")
    assert mx.status == OK and mx.verified
    gpu = next(r for r in res.records if r.variant == "gpu_only")
    assert gpu.status == UNAVAILABLE and "runs on cuda only" in gpu.reason


@pytest.mark.parametrize("kw, msg", [
    ({"reduction": None}, "exactly one error model"),
    ({"tolerance": {"fp32": (1e-3, 0)}}, "exactly one error model"),
    ({"dtypes": ("fp8",)}, "unknown dtype"),
    ({"axes": {"m": []}}, "at least one value"),
])
def test_a_wrong_declaration_is_one_clear_error(kw, msg):
    with pytest.raises(gb.CaseError, match=msg):
        _rowsum_case(**kw)


def test_implementations_are_checked_when_declared():
    case = _rowsum_case()
    with pytest.raises(gb.CaseError, match="use one of torch, cupy, mlx"):
        case.impl("jax")(lambda x: x)
    with pytest.raises(gb.CaseError, match="baseline=True"):
        case.impl("torch")(lambda x: x.sum(-1)) and case.spec()
    case.impl("torch", "b", baseline=True)(lambda x: x.sum(-1))
    with pytest.raises(gb.CaseError, match="one baseline per case"):
        case.impl("torch", "c", baseline=True)(lambda x: x)
    with pytest.raises(gb.CaseError, match="built-in op"):
        _rowsum_case(name="gemv")


def test_gapbench_bench_runs_the_torch_example_and_refuses_a_file_without_cases(tmp_path):
    out = tmp_path / "sm.json"
    p = run_module("gapbench", "bench", "examples/softmax_torch.py", "--quick", "--no-progress", "--backends",
                   "torch-cpu", "--out", str(out), timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    recs = [r for r in load_run(out).records if r.metric == "time"]
    assert {r.variant for r in recs} == {"fused", "composite"} and all(r.status == OK and r.verified for r in recs)
    assert {r.params["dtype"] for r in recs} == {"fp32", "bf16"}
    empty = tmp_path / "none.py"
    empty.write_text("x = 1\n")
    p = run_module("gapbench", "bench", str(empty), timeout=60)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "declares no gapbench Case" in p.stderr
    # the GPU examples on a machine without them: rows saying why, not a traceback
    p = run_module("gapbench", "bench", "examples/triton_softmax.py", "--quick", "--no-progress", "--backends",
                   "torch-cpu", "--out", str(tmp_path / "t.json"), timeout=300)
    assert p.returncode == 0 and "runs on cuda only" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]


def test_gapbench_bench_takes_parity_as_bench_blas_does(tmp_path):
    """--parity balanced reaches the user's case as bench.blas's config (recorded in the run file);
    host-timed rows are not held, so nothing of theirs is padded; a bad value is one line, exit 2."""
    out = tmp_path / "p.json"
    p = run_module("gapbench", "bench", "examples/softmax_torch.py", "--quick", "--no-progress", "--backends",
                   "torch-cpu", "--parity", "balanced", "--out", str(out), timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    run = load_run(out)
    assert run.run["config"]["parity"] == "balanced"
    recs = [r for r in run.records if r.metric == "time" and r.status == OK]
    assert recs and all(r.conditions.get("parity") is None for r in recs)
    p = run_module("gapbench", "bench", "examples/softmax_torch.py", "--parity", "odd", timeout=60)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "unknown --parity" in p.stderr


def test_compare_reads_a_cases_files_unchanged(tmp_path):
    src = tmp_path / "case.py"
    src.write_text(textwrap.dedent("""
        import numpy as np
        import gapbench.api as gb
        c = gb.Case("scale2", axes={"n": [4096]}, inputs=lambda s, rng: [rng.standard_normal(s["n"], dtype=np.float32)],
                    reference=lambda x: 2 * x, reduction=lambda s: 1, elements=lambda s: (s["n"], s["n"]))
        c.impl("torch", "mul", baseline=True)(lambda x: x * 2)
    """))
    for side in ("a", "b"):
        p = run_module("gapbench", "bench", str(src), "--quick", "--no-progress", "--backends", "torch-cpu",
                       "--out", str(tmp_path / f"{side}.json"), timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
    p = run_module("gapbench", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json",
                   str(tmp_path / "c.json"), timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads((tmp_path / "c.json").read_text())
    rows = [row for c in doc["comparisons"] for row in c["rows"]]
    assert rows and all("scale2" in json.dumps(row) for row in rows), doc["comparisons"]


def test_a_capture_that_fails_costs_its_graph_row_only(monkeypatch):
    from gapbench.backends.torch import TorchAdapter

    def broken(self, fn):
        raise RuntimeError("operation not permitted when stream is capturing")

    init = TorchAdapter.__init__

    def capturing(self, *a, **kw):  # as if this CPU adapter could capture
        init(self, *a, **kw)
        self.graph_reason = ""

    monkeypatch.setattr(TorchAdapter, "__init__", capturing)
    monkeypatch.setattr(TorchAdapter, "capture", broken)
    case = _rowsum_case()
    case.impl("torch", "s", baseline=True)(lambda x: x.sum(-1))
    res = case.run(quick=True, backends="torch-cpu", graph=True)
    rows = {r.variant: r for r in res.records if r.metric == "time"}
    assert rows["s"].status == OK and rows["s@graph"].status == "error"
    assert "graph capture failed: RuntimeError: operation not permitted" in rows["s@graph"].reason


def test_graph_rows_say_why_where_there_is_no_graph_capture():
    case = _rowsum_case()
    case.impl("torch", "s", baseline=True)(lambda x: x.sum(-1))
    res = case.run(quick=True, backends="torch-cpu", graph=True)
    g = next(r for r in res.records if r.variant == "s@graph")
    assert g.status == UNAVAILABLE and "no graph capture" in g.reason
    assert _by_variant(res)["s"].status == OK


@pytest.mark.cuda
def test_gpu_graph_rows_verify_and_pair_with_their_eager_rows(tmp_path):
    """--graph: each CUDA implementation captured into a CUDA graph, replayed as one launch, its
    replay checked over a poisoned output, timed under the eager rows' conditions and paired with
    the baseline. A graph that replays a wrong kernel is refused like an eager one."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    case = _rowsum_case()
    case.impl("torch", "s", baseline=True)(lambda x: x.sum(-1))

    @case.impl("torch", setup=True)
    def skips_last(x):
        out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)

        def run():
            torch.sum(x[:-1], dim=-1, out=out[:-1])  # the last row never written
            return out
        return run

    res = case.run(quick=True, backends="torch-cuda", graph=True)
    rows = {r.variant: r for r in res.records if r.metric == "time" and r.backend == "torch-cuda"}
    g = rows["s@graph"]
    assert g.status == OK and g.verified and g.params["graph"] is True, g.reason
    assert g.conditions == rows["s"].conditions and g.params["paired"]["vs"] == "torch-cuda/s"
    assert rows["skips_last"].status == FAILED and "not finite" in rows["skips_last"].reason
    assert "skips_last@graph" not in rows or rows["skips_last@graph"].status != OK


@pytest.mark.cuda
def test_gpu_examples_verify_and_pair_on_cuda(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    for ex, want in (("softmax_torch", {"fused", "composite"}), ("triton_softmax", {"torch_softmax", "triton_rows"}),
                     ("cuda_gemv_cupy", {"cublas", "warp_per_row"})):
        out = tmp_path / f"{ex}.json"
        p = run_module("gapbench", "bench", f"examples/{ex}.py", "--quick", "--no-progress", "--out", str(out),
                       timeout=300)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        recs = [r for r in load_run(out).records if r.metric == "time" and r.backend in ("torch-cuda", "cupy")]
        assert {r.variant for r in recs if r.status == OK and r.verified} == want, [(r.variant, r.reason) for r in recs]
        assert all(r.conditions["clock"] == "device events, gated" for r in recs if r.status == OK)
