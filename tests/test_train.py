"""bench.train: the workloads, the step measurement, the memory plan, energy and the sweep's
error handling, on tiny configurations on the CPU (seconds each)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from gapbench.benchmarks.train import memplan  # noqa: E402
from gapbench.models.gpt2_spec import SIZES  # noqa: E402
from gapbench.backends.monitor import Energy, Sampler  # noqa: E402
from gapbench.benchmarks.train import command as tr_command  # noqa: E402
from gapbench.benchmarks.train import run as tr  # noqa: E402
from gapbench.core.names import DeviceClass
from gapbench.core.result import ERROR, FAILED, OK, UNAVAILABLE  # noqa: E402

TINY = dict(batch_size=2, seq_len=32, steps=4, warmup=1, warmup_s=0.0, rounds=2)


def _by_metric(records):
    return {r.metric: r for r in records}


# ------------------------------------------------------------------ the minimal GPT-2
def test_minimal_gpt2_torch_and_mlx_agree_on_the_same_weights():
    mx = pytest.importorskip("mlx.core")
    import mlx.nn as nn

    from gapbench.models import gpt2_mlx
    from gapbench.models import gpt2_torch

    s = SIZES["tiny"]
    torch.manual_seed(1)
    tm = gpt2_torch.GPT2(s)
    mm = gpt2_mlx.GPT2(s, seed=5)  # different init, then overwritten with the torch weights
    gpt2_mlx.load_torch_state(mm, tm.state_dict())
    assert gpt2_mlx.n_params(mm) == sum(p.numel() for p in tm.parameters()) == s.params()
    rng = np.random.default_rng(0)
    idx = rng.integers(0, s.vocab, (3, 24))
    x, y = idx[:, :-1], idx[:, 1:]
    lt = tm.loss(torch.tensor(x), torch.tensor(y))
    lt.backward()
    lm, gm = nn.value_and_grad(mm, lambda a, b: mm.loss(a, b))(mx.array(x), mx.array(y))
    assert abs(lt.item() - lm.item()) < 1e-4 * abs(lt.item())
    logits_t = tm(torch.tensor(x)).detach().numpy()
    logits_m = np.array(mm(mx.array(x)))
    assert np.max(np.abs(logits_t - logits_m)) < 1e-4 * np.max(np.abs(logits_t))
    # the backward passes agree too: every gradient, by name
    flat = dict(gpt2_mlx._flatten(gm))
    for name, p in tm.named_parameters():
        g_t, g_m = p.grad.numpy(), np.array(flat[name])
        assert np.max(np.abs(g_t - g_m)) <= 1e-3 * np.max(np.abs(g_t)) + 1e-7, name


@pytest.mark.parametrize("name", ["gpt2", "gpt2-large", "gpt2-xl"])
def test_minimal_gpt2_has_the_parameter_count_of_transformers_gpt2(name):
    fam, kw = tr.HF_MODELS[name]
    with torch.device("meta"):
        hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**kw))
    assert sum(p.numel() for p in hf.parameters()) == SIZES[name].params()


def test_analytic_flops_equal_torchs_flop_counter():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from gapbench.models.gpt2_torch import GPT2

    s = SIZES["tiny"]
    m = GPT2(s)
    idx = torch.randint(0, s.vocab, (3, 20))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:  # math SDPA: counted as matmuls
        m.loss(idx, idx).backward()
    assert fc.get_total_flops() == s.train_flops(3, 20)


# ------------------------------------------------------------------ memory plan (paper Table 2)
def test_memory_plan_matches_the_papers_table2_convention():
    # GPT2-large: 774M parameters -> the paper's 12.094 "GiB" (= 774 * 16 / 1024)
    p = memplan.plan(SIZES["gpt2-large"].params(), SIZES["gpt2-large"].params(), "torch-cpu", capacity=80 * 2**30)
    assert p.paper_table2_gib == pytest.approx(12.094, abs=1e-3)
    assert p.theoretical_bytes == 16 * SIZES["gpt2-large"].params()
    assert p.to_dict()["theoretical_gib"] == pytest.approx(11.53, abs=0.01)  # true GiB: 4.9% below the paper's
    assert p.scenario == memplan.FITS


def test_memory_plan_scenarios_and_lora():
    n = 1_000_000_000
    assert memplan.classify(16 * n, 100 * n)[1] == memplan.FITS
    assert memplan.classify(16 * n, 18 * n)[1] == memplan.NEAR
    assert memplan.classify(16 * n, 15 * n)[1] == memplan.DOES_NOT_FIT
    assert memplan.classify(16 * n, None)[0] is None
    # LoRA: frozen weights cost 4 bytes, trainable ones 16
    assert memplan.theoretical_bytes(n, 1000) == 4 * (n - 1000) + 16 * 1000


# ------------------------------------------------------------------ energy and sampler
def test_energy_is_unavailable_not_zero_without_a_counter():
    e = Energy(DeviceClass.cpu)
    e.start()
    e.stop()
    r = e.result(10)
    assert r["status"] == "unavailable" and "CPU" in r["reason"] and "joules_per_step" not in r


class _FakeNVML:
    ok, reason = True, ""

    def __init__(self):
        self.mj = 1_000_000

    def energy_mj(self):
        self.mj += 250_000  # +250 J per read
        return self.mj


def test_energy_per_step_from_the_counter_and_window_guard():
    e = Energy(DeviceClass.cuda, nvml=_FakeNVML())
    assert e.kind == "nvml"
    e.start()
    e._t0 -= 2.0  # a 2 s window
    e.stop()
    r = e.result(5)
    assert r["status"] == "ok" and r["joules"] == pytest.approx(250.0) and r["joules_per_step"] == pytest.approx(50.0)
    e.start()
    e.stop()  # far below the 1 s minimum: the counter may not have moved
    assert e.result(5)["status"] == "unavailable"


def test_sampler_records_memory_faults_and_pauses():
    s = Sampler("torch-cpu", interval_s=0.01)
    with s:
        junk = np.ones(50_000_000 // 8)  # touch ~50 MB: RSS and minor faults must move
        junk += 1
        import time

        time.sleep(0.05)
        s.pause()
        n = len(s.samples)
        time.sleep(0.05)
        assert len(s.samples) <= n + 1
        s.resume()
        time.sleep(0.03)
    tl = s.timeline()
    cols = tl["columns"]
    assert {"t", "rss_bytes", "minor_faults", "major_faults"} <= set(cols)
    assert max(cols["rss_bytes"]) > 40_000_000
    assert cols["minor_faults"][-1] > cols["minor_faults"][0]
    assert any(m[1] == "sampler paused" for m in tl["marks"])
    del junk


# ------------------------------------------------------------------ whole cases
def test_tiny_gpt2_case_on_torch_cpu_records_every_phase():
    import time

    t0 = time.perf_counter()
    recs = tr.run_case(tr.Case("tiny-gpt2", "torch-cpu", **TINY))
    wall = time.perf_counter() - t0
    m = _by_metric(recs)
    for k in ("step", "forward", "backward", "optimizer", "step_warmup", "step_nosampler", "plain_step"):
        assert m[k].status == OK, (k, m[k].reason)
    st = m["step"]
    assert len(st.samples_s) == 4 and len(m["plain_step"].samples_s) == 4 and len(m["step_warmup"].samples_s) == 1
    # one phase sample per timed step, and every step timed (warm-up, harness, plain) fits in the
    # case's own wall time: a wrong unit or a step counted twice fails
    assert len(m["forward"].samples_s) == len(m["backward"].samples_s) == len(m["optimizer"].samples_s) == len(st.samples_s)
    assert sum(sum(m[k].samples_s) for k in ("step", "step_warmup", "step_nosampler", "plain_step")) < wall
    assert st.verified is True and "ln(vocab)" in st.verify_detail
    assert all(math.isfinite(x) for x in st.params["losses"])
    assert st.work["items"] == 2 * 32 and st.work["flops"] > 0
    assert st.rates()["items_per_s"] == pytest.approx(64 / st.summary().median)
    assert st.params["energy"]["status"] == "unavailable"
    assert st.params["memory_plan"]["scenario"] == memplan.FITS
    assert st.params["timeline"]["columns"]["rss_bytes"]
    json.dumps(st.to_dict())  # the record is serialisable as it stands


def test_tiny_gpt2_minimal_torch_and_mlx_cases():
    pytest.importorskip("mlx.core")
    t = _by_metric(tr.run_case(tr.Case("tiny-gpt2", "torch-cpu", impl="minimal", **TINY)))
    m = _by_metric(tr.run_case(tr.Case("tiny-gpt2", "mlx-cpu", **TINY)))
    assert t["step"].status == OK and m["step"].status == OK, (t["step"].reason, m["step"].reason)
    assert m["step"].variant == "minimal" and m["backward"].params["derived"] is True
    assert len(m["step"].samples_s) == len(m["optimizer"].samples_s) == len(m["backward"].samples_s) == 4
    assert len(m["step"].params["mlx_split_step_s"]) == 4 and "one mx.eval" in m["step"].op
    assert t["step"].work["flops"] == m["step"].work["flops"] == SIZES["tiny"].train_flops(2, 31)
    assert "mlx_active_bytes" in m["step"].params["timeline"]["columns"]
    assert not any("tf32" in n for n in m["step"].params["notes"])  # MLX's CPU matmul is true fp32


def test_mlx_matmul_precision_check_tells_tf32_from_fp32():
    mx = pytest.importorskip("mlx.core")
    assert tr.mlx_fp32_matmul_precision(mx) == "fp32"  # the CPU backend

    class Rounding:  # an fp32 matmul that rounds its inputs to TF32's 10 mantissa bits
        array = staticmethod(lambda a: a)

        @staticmethod
        def matmul(a, b):
            def tf32(x):
                return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
            return tf32(a) @ tf32(b)

    assert tr.mlx_fp32_matmul_precision(Rounding) == "tf32"


def test_warm_up_lasts_at_least_warmup_s():
    recs = _by_metric(tr.run_case(tr.Case("tiny-gpt2", "torch-cpu", **dict(TINY, warmup=1, warmup_s=0.3))))
    w = recs["step_warmup"]
    # warm-up runs until warmup_s = 0.3 s has passed (its steps fill nearly all of it) and not a step
    # longer (the steps before the last took less than 0.3 s), on a machine of any speed
    assert sum(w.samples_s) >= 0.15 and sum(w.samples_s[:-1]) < 0.3 and recs["step"].warmup == len(w.samples_s)


def test_tiny_whisper_lora_and_amp_bf16():
    recs = tr.run_case(tr.Case("tiny-whisper", "torch-cpu", mode="lora", precision="amp-bf16", **TINY))
    st = _by_metric(recs)["step"]
    assert st.status == OK, st.reason
    assert st.params["trainable"] < st.params["params"] / 5
    assert st.params["item_unit"] == "samples" and st.work["items"] == 2
    assert any("LoRA" in n for n in st.params["notes"])


def test_cpu_offload_through_fsdp2_runs():
    st = _by_metric(tr.run_case(tr.Case("tiny-gpt2", "torch-cpu", offload="cpu", **TINY)))["step"]
    assert st.status == OK, st.reason
    assert any("FSDP2" in n for n in st.params["notes"])


def test_auto_offload_follows_the_memory_plan():
    st = _by_metric(tr.run_case(tr.Case("tiny-gpt2", "torch-cpu", offload="auto", capacity_bytes=10_000, **TINY)))["step"]
    # does not fit in 10 kB, but offload is only for torch-cuda: the plan says so and the case runs as is
    assert st.params["memory_plan"]["scenario"] == memplan.DOES_NOT_FIT
    assert st.params["case"]["offload"] == "auto -> none"


@pytest.mark.parametrize("kw, status, words", [
    (dict(model="tiny-gpt2", backend="mlx-cpu", precision="amp-bf16"), UNAVAILABLE, "mixed precision"),
    (dict(model="tiny-whisper", backend="mlx-cpu"), UNAVAILABLE, "minimal GPT-2"),
    (dict(model="tiny-whisper", backend="torch-cpu", impl="minimal"), UNAVAILABLE, "GPT-2 only"),
    (dict(model="tiny-gpt2", backend="torch-cpu", seq_len=4096), ERROR, "exceeds"),
    (dict(model="tiny-gpt2", backend="torch-cpu", data="/nonexistent/dir"), ERROR, "no such file"),
    (dict(model="tiny-gpt2", backend="torch-cuda"), UNAVAILABLE, ""),
])
def test_cases_that_cannot_run_are_rows_that_say_why(kw, status, words):
    base = dict(TINY)
    base.update(kw)
    model, backend = base.pop("model"), base.pop("backend")
    if backend == "torch-cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    recs = tr.run_case(tr.Case(model, backend, **base))
    assert len(recs) == 1 and recs[0].status == status and words in recs[0].reason and recs[0].reason


def test_out_of_memory_is_a_row(monkeypatch):
    def boom(self):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(tr.TorchWorkload, "prepare", boom)
    (r,) = tr.run_case(tr.Case("tiny-gpt2", "torch-cpu", **TINY))
    assert r.status == ERROR and r.reason.startswith("out of memory") and r.params["oom"] is True


def test_a_broken_model_is_failed_not_timed(monkeypatch):
    orig = tr.TorchWorkload.forward

    def nan_forward(self, i):
        orig(self, i)
        self.loss = self.loss * float("nan")

    monkeypatch.setattr(tr.TorchWorkload, "forward", nan_forward)
    (r,) = tr.run_case(tr.Case("tiny-gpt2", "torch-cpu", **TINY))
    assert r.status == FAILED and "nan" in r.reason and not r.samples_s


# ------------------------------------------------------------------ real data from local files
def test_local_text_and_audio_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    text = tmp_path / "ptb"
    datasets.Dataset.from_dict({"text": ["the quick brown fox jumps over the lazy dog " * 5] * 8}).save_to_disk(str(text))
    st = _by_metric(tr.run_case(tr.Case("tiny-gpt2", "torch-cpu", data=str(text), **TINY)))["step"]
    assert st.status == OK and "dataset" in st.params["data"] and "UTF-8 bytes" in st.params["data"]
    rng = np.random.default_rng(0)
    audio = tmp_path / "cv"
    datasets.Dataset.from_dict({
        "audio": [{"array": rng.standard_normal(8000).astype(np.float32).tolist(), "sampling_rate": 16000} for _ in range(3)],
        "sentence": ["hello there", "a second clip", "three"],
    }).save_to_disk(str(audio))
    st = _by_metric(tr.run_case(tr.Case("tiny-whisper", "torch-cpu", data=str(audio), **TINY)))["step"]
    assert st.status == OK, st.reason
    assert "log-mel" in st.params["data"]
    txt = tmp_path / "corpus.txt"
    txt.write_text("some words to train on. " * 50)
    st = _by_metric(tr.run_case(tr.Case("tiny-gpt2", "torch-cpu", data=str(txt), **TINY)))["step"]
    assert st.status == OK and "text file" in st.params["data"]
    bad = tmp_path / "bad"
    datasets.Dataset.from_dict({"label": [1, 2]}).save_to_disk(str(bad))
    (r,) = tr.run_case(tr.Case("tiny-gpt2", "torch-cpu", data=str(bad), **TINY))
    assert r.status == ERROR and "'text'" in r.reason


def test_batches_from_real_tokens_are_windows_of_the_corpus(monkeypatch):
    from gapbench.benchmarks.train import data as train_data

    case = tr.Case("tiny-gpt2", "torch-cpu", batch_size=3, seq_len=5)
    rng = np.random.default_rng(0)
    toks = np.arange(100)
    real = {"tokens": toks}
    monkeypatch.setattr(train_data, "load_local", lambda *a, **k: (real, "test corpus"))
    out, desc = tr.make_batches(tr.Case("tiny-gpt2", "torch-cpu", batch_size=3, seq_len=5, data="x"), "gpt2", 512, 0, 0, rng)
    assert desc == "test corpus"
    for row in out[0]["input_ids"]:
        assert np.all(np.diff(row) == 1)  # a contiguous window of the corpus
    assert case.seq_len == 5


# ------------------------------------------------------------------ the sweep and the CLI
def test_subprocess_case_and_timeout_rows():
    recs = tr.run_in_subprocess(tr.Case("tiny-gpt2", "torch-cpu", **TINY), timeout_s=300)
    assert _by_metric(recs)["step"].status == OK
    (r,) = tr.run_in_subprocess(tr.Case("tiny-gpt2", "torch-cpu", **TINY), timeout_s=0.001)
    assert r.status == ERROR and "process" in r.reason


def test_cli_quick_writes_results_and_figures(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert tr_command.main(["--quick", "--in-process", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    steps = [r for r in doc["records"] if r["metric"] == "step"]
    assert steps and steps[0]["status"] == OK and steps[0]["derived"]["rates"]["items_per_s"] > 0
    assert (tmp_path / "t-steps.png").stat().st_size > 1000 and (tmp_path / "t-memory-0.png").exists()
    assert out.with_suffix(".csv").read_text().count("\n") == len(doc["records"]) + 1
    by = {r["metric"]: r for r in doc["records"]}
    # every record names the choices that change a step's time; the library-defaults plain loop
    # differs from the harness's own plain loop in its optimizer only
    assert all(r["conditions"].get("optimizer") and r["conditions"].get("attention") for r in doc["records"]
               if r["status"] == OK)
    assert by["plain_defaults_step"]["conditions"]["optimizer"] == "default"
    assert by["plain_step"]["conditions"]["optimizer"] == by["step"]["conditions"]["optimizer"]


@pytest.mark.parametrize("argv, words", [
    (["--model", "gpt5"], "unknown model"),
    (["--backend", "tpu"], "unknown backend"),
    (["--precision", "fp8"], "unknown precision"),
    (["--batch-size", "0"], "must be >= 1"),
    (["--steps", "2", "--rounds", "3"], "--rounds"),
    (["--warmup-s", "-1"], "--warmup-s"),
    (["--roofline", "/nonexistent.json"], "no such file"),
    (["--checkpoint", "/nonexistent-ckpt"], "--checkpoint /nonexistent-ckpt: no such file"),
    (["--data", "/nonexistent.txt"], "--data /nonexistent.txt: no such file"),
    (["--tokenizer", "/nonexistent-tok"], "--tokenizer /nonexistent-tok: no such file"),
])
def test_cli_bad_input_is_a_clear_error(argv, words, capsys):
    assert tr_command.main(argv + ["--in-process"]) == 2
    assert words in capsys.readouterr().err  # errors go to stderr, exit 2


def test_roofline_from_a_blas_result_file(tmp_path):
    from gapbench.core.result import RunWriter

    p = tmp_path / "blas.json"
    w = RunWriter(p, env={}, run={"probe": "blas"})
    w.finish(roofline={"cuda": {"bytes_per_s": {"value": 4e12, "from": "copy"},
                                "bf16": {"value": 7e14, "from": "cublas bf16 8x4096^3"}}})
    roof = tr.load_roofline(str(p))
    assert roof["bf16"]["flops_per_s"] == 7e14 and "bytes_per_s" not in roof
    st = _by_metric(tr.run_case(tr.Case("tiny-gpt2", "torch-cpu", roofline=roof, precision="amp-bf16", **TINY)))["step"]
    assert st.params["roofline"]["flops_per_s"] == 7e14
    q = tmp_path / "quick.json"  # a --quick run's GEMM "peak", set by a 5 us op, is no peak: refused, and why
    w = RunWriter(q, env={}, run={"probe": "blas"})
    w.finish(roofline={"cuda": {"bf16": {"value": 1.7e12, "from": "cublas bf16 2x128^3", "time_s": 5e-6}}})
    with pytest.raises(ValueError, match="bound by overhead: a --quick run"):
        tr.load_roofline(str(q))


def test_memory_plot_breaks_lines_where_the_sampler_paused():
    from gapbench.benchmarks.train.figures import broken_at_gaps

    tl = {"interval_s": 0.1, "columns": {"t": [0.0, 0.1, 0.2, 5.0, 5.1], "rss_bytes": [1, 2, 3, 4, 5]}}
    cols = broken_at_gaps(tl)
    assert cols["rss_bytes"] == [1, 2, 3, None, 4, 5] and len(cols["t"]) == 6 and 0.2 < cols["t"][3] < 5.0


def test_fsdp2_prediction_uses_its_collectives_measured_at_their_sizes():
    """Issue 36 item 6: FSDP2's prediction from its own per-block all-gathers and reduce-scatters,
    timed on the ranks, where the run measured them; else the all-reduce bus bandwidth."""
    from gapbench.benchmarks.train.dp import predict

    fsdp = {"step_s": 0.02, "blocks": 12}
    p = predict(0.1, 4e8, 4, 3e11, "fsdp2", fsdp)
    assert p["predicted_comm_s"] == 0.02 and abs(p["predicted_efficiency"] - 0.1 / 0.12) < 1e-12
    assert "12 blocks" in p["prediction_formula"]
    q = predict(0.1, 4e8, 4, 3e11, "fsdp2")
    assert abs(q["predicted_comm_s"] - 3 * 4e8 * 0.75 / 3e11) < 1e-12 and "busbw" in q["prediction_formula"]
    assert predict(0.1, 4e8, 4, None, "ddp") == {} and predict(0.1, 4e8, 1, 3e11, "fsdp2", fsdp) == {}
