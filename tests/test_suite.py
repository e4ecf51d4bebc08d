"""bench.suite: every seed workload on a tiny configuration on the CPU, the seeds' flags, the
seed-layout CSVs, out-of-memory and machine-limit rows."""
from __future__ import annotations

import errno
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from gapbench.benchmarks.suite import command as su_command  # noqa: E402
from gapbench.benchmarks.suite import run as su  # noqa: E402
from gapbench.core.result import ERROR, FAILED, OK, UNAVAILABLE  # noqa: E402

Q = dict(steps=3, warmup=1)


@pytest.mark.parametrize("ex, model, mode, seq", [
    ("bert", "tiny-bert", "training", 32),
    ("bert", "tiny-bert", "inference", 32),
    ("distilbert-imdb", "tiny-distilbert", "training", 32),
])
def test_text_workloads_run_and_are_checked(ex, model, mode, seq):
    import time

    t0 = time.perf_counter()
    (r,) = su.run_case(su.Case(ex, "torch-cpu", 2, mode, seq, model, **Q))
    wall = time.perf_counter() - t0
    assert r.status == OK, r.reason
    assert len(r.samples_s) == 3 and r.verified and r.work["items"] == 2
    # 2 items per step: the rate lies between 2 / slowest and 2 / fastest step, and the timed
    # steps fit in the case's own wall time (a wrong unit or item count fails one of these)
    assert 2 / max(r.samples_s) <= r.rates()["items_per_s"] <= 2 / min(r.samples_s) and sum(r.samples_s) < wall
    if mode == "training":
        assert "ln(classes)" in r.verify_detail and all(np.isfinite(r.params["losses"]))


def test_distilbert_trains_only_the_top_block_and_the_classifier():
    m, how, _, _ = su.build_model(su.Case("distilbert-imdb", "torch-cpu", 2, model="tiny-distilbert"))
    trainable = {n.split(".")[0] + "." + n.split(".")[1] if n.startswith("distilbert") else n.split(".")[0]
                 for n, p in m.named_parameters() if p.requires_grad}
    assert trainable == {"distilbert.transformer", "pre_classifier", "classifier"}
    top = [n for n, p in m.named_parameters() if p.requires_grad and n.startswith("distilbert")]
    assert top and all(n.startswith("distilbert.transformer.layer.1.") for n in top)  # the last of 2 blocks


def test_resnet50_has_the_datasets_classes_and_runs():
    m, how, _, classes = su.build_model(su.Case("resnet50-cifar100", "torch-cpu", 2))
    assert classes == 100 and 23e6 < sum(p.numel() for p in m.parameters()) < 24e6  # ResNet-50 with a 100-way head
    (r,) = su.run_case(su.Case("resnet50-food101", "torch-cpu", 2, image_size=32, **Q))
    assert r.status == OK, r.reason
    assert "101 classes" in r.params["data"]


def test_llm_generation_counts_real_tokens_and_splits_prompt_from_generation():
    recs = su.run_case(su.Case("llm-generate", "torch-cpu", 1, "inference", model="tiny-llama", prompt_tokens=12,
                               new_tokens=5, repeats=2, **Q))
    m = {r.metric: r for r in recs}
    assert m["prefill"].status == OK and m["generate"].status == OK
    assert m["generate"].params["case"]["new_tokens"] == 5
    assert m["prefill"].params["generated_tokens"] == [5, 5]
    assert m["prefill"].work["items"] == 12 and m["generate"].work["items"] == 4
    (r,) = su.run_case(su.Case("llm-generate", "torch-cpu", 1, "inference", model="tiny-llama", new_tokens=1, **Q))
    assert r.status == ERROR and "--new-tokens" in r.reason


def test_epochs_mode_times_whole_epochs(monkeypatch):
    monkeypatch.setitem(su.DATASETS, "imdb", dict(classes=2, train=6))
    (r,) = su.run_case(su.Case("distilbert-imdb", "torch-cpu", 2, "training", 16, "tiny-distilbert", epochs=2, warmup=0))
    assert r.status == OK and len(r.samples_s) == 6 and r.params["steps_per_epoch"] == 3 and len(r.params["epoch_s"]) == 2


def test_local_datasets_for_images_and_text(tmp_path):
    datasets = pytest.importorskip("datasets")
    rng = np.random.default_rng(0)
    img = tmp_path / "cifar"
    datasets.Dataset.from_dict({"img": [rng.integers(0, 255, (32, 32, 3)).astype(np.uint8) for _ in range(4)],
                                "fine_label": [1, 5, 99, 3]}).save_to_disk(str(img))
    (r,) = su.run_case(su.Case("resnet50-cifar100", "torch-cpu", 2, data=str(img), **Q))
    assert r.status == OK, r.reason
    assert "dataset" in r.params["data"]
    txt = tmp_path / "imdb"
    datasets.Dataset.from_dict({"text": ["a fine film", "dull"] * 3, "label": [1, 0] * 3}).save_to_disk(str(txt))
    (r,) = su.run_case(su.Case("distilbert-imdb", "torch-cpu", 2, "training", 16, "tiny-distilbert", data=str(txt), **Q))
    assert r.status == OK and "UTF-8" in r.params["data"]
    bad = tmp_path / "bad"
    datasets.Dataset.from_dict({"text": ["x"]}).save_to_disk(str(bad))
    (r,) = su.run_case(su.Case("distilbert-imdb", "torch-cpu", 2, "training", 16, "tiny-distilbert", data=str(bad), **Q))
    assert r.status == ERROR and "label column" in r.reason


def test_oom_and_open_file_limits_are_rows_that_say_what_to_do(monkeypatch):
    def oom(case):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")

    monkeypatch.setattr(su, "build_model", oom)
    (r,) = su.run_case(su.Case("bert", "torch-cpu", 256, model="tiny-bert"))
    assert r.status == ERROR and r.reason.startswith("out of memory") and r.params["oom"]

    def emfile(case):
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(su, "build_model", emfile)
    (r,) = su.run_case(su.Case("bert", "torch-cpu", 2, model="tiny-bert"))
    assert r.status == ERROR and "ulimit -n" in r.reason


def test_a_nan_model_fails_its_check_and_is_not_timed(monkeypatch):
    orig = su.build_model

    def broken(case):
        m, how, v, c = orig(case)
        with torch.no_grad():
            m.classifier.weight.fill_(float("nan"))
        return m, how, v, c

    monkeypatch.setattr(su, "build_model", broken)
    (r,) = su.run_case(su.Case("bert", "torch-cpu", 2, "inference", 16, "tiny-bert", **Q))
    assert r.status == FAILED and not r.samples_s


def test_unknown_model_and_unavailable_backend_rows():
    (r,) = su.run_case(su.Case("bert", "torch-cpu", 2, model="bert-huge"))
    assert r.status == ERROR and "bert-base-cased" in r.reason
    if not torch.cuda.is_available():
        (r,) = su.run_case(su.Case("bert", "torch-cuda", 2, model="tiny-bert"))
        assert r.status == UNAVAILABLE and r.reason


def test_seed_flags_csv_layout_and_figures(tmp_path):
    out = tmp_path / "s.json"
    rc = su_command.main(["--device", "cpu", "--pre_trained_name", "tiny-bert", "--batch_size", "1, 2", "--mode", "both",
                  "--sequence_length", "16", "--steps", "2", "--warmup", "0", "--in-process", "--out", str(out),
                  "--results-root", str(tmp_path / "results")])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert len([r for r in doc["records"] if r["status"] == OK]) == 4
    (csv,) = list((tmp_path / "results" / "pytorch-apple-silicon-benchmarks").glob("*_synthetic-glue_tiny-bert_torch-cpu.csv"))
    lines = csv.read_text().splitlines()
    assert lines[0].startswith("batch_size,sequence_length,mode") and len(lines) == 5
    assert (tmp_path / "s-bert-s16.png").stat().st_size > 1000
    # one line per machine: the figure from two result files
    assert su_command.main(["--plot", str(out), str(out), "--out", str(tmp_path / "two")]) == 0
    assert (tmp_path / "two-bert-s16.png").exists()


def test_subprocess_cases(tmp_path):
    c = su.Case("bert", "torch-cpu", 2, "inference", 16, "tiny-bert", **Q)
    (r,) = su.run_in_subprocess(c, 300)
    assert r.status == OK
    (r,) = su.run_in_subprocess(c, 0.001)
    assert r.status == ERROR and "process" in r.reason and r.params["worker_error"] == "timeout"


@pytest.mark.parametrize("argv, words", [
    (["--suite", "geekbench"], "unknown suite"),
    (["--device", "tpu"], "unknown device"),
    (["--batch_sizes", "16, x"], "bad batch size"),
    (["--mode", "eval"], "unknown mode"),
    (["--plot", "/nonexistent.json"], "no such file"),
    (["--data", "/nonexistent"], "--data /nonexistent: no such file"),
    (["--model", "/nonexistent-model"], "--model /nonexistent-model: no such local checkpoint"),
    (["--suite", "llamacpp", "--gguf", "/nope.gguf"], "--gguf /nope.gguf: no such file"),
    (["--batch-size", ""], "empty batch size list"),
])
def test_bad_input_is_a_clear_error(argv, words, capsys):
    assert su_command.main(argv + ["--in-process"]) == 2
    assert words in capsys.readouterr().err  # errors go to stderr, exit 2


def test_duration_text_as_the_seed_tables():
    assert su._dur(43) == "43s" and su._dur(149) == "2m 29s" and su._dur(4862) == "1h 21m 2s" and su._dur(0.0154) == "0.0154s"


def test_llamacpp_generation_on_a_tiny_gguf_written_here(tmp_path):
    pytest.importorskip("gguf")
    pytest.importorskip("llama_cpp")
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from gguf_tiny import write_tiny_llama_gguf

    path = tmp_path / "tiny.gguf"
    write_tiny_llama_gguf(path)
    recs = su.run_case(su.Case("llamacpp-generate", "llama.cpp-cpu", 1, "inference", model="tiny.gguf", prompt_tokens=16,
                               new_tokens=6, repeats=2, gguf=str(path)))
    m = {r.metric: r for r in recs}
    assert m["prefill"].status == OK and m["generate"].status == OK, [r.reason for r in recs]
    assert m["prefill"].params["generated_tokens"] == [6, 6] and m["generate"].work["items"] == 5
    (r,) = su.run_case(su.Case("llamacpp-generate", "llama.cpp-cpu", 1, gguf=str(tmp_path / "missing.gguf")))
    assert r.status == ERROR and "no such file" in r.reason


def test_llamacpp_without_a_model_file_says_what_to_pass():
    (r,) = su.run_case(su.Case("llamacpp-generate", "llama.cpp-cpu", 1))
    assert r.status in (ERROR, UNAVAILABLE) and ("--gguf" in r.reason or "llama-cpp-python" in r.reason)


# ------------------------------------------------------------------ the TensorFlow versions
def test_keras_distilbert_has_distilberts_parameters():
    pytest.importorskip("tensorflow")
    import transformers

    from gapbench.models import keras_models as km

    cfg = su.DISTILBERT["tiny-distilbert"]
    k = km.distilbert(cfg["vocab_size"], cfg["dim"], cfg["n_layers"], cfg["n_heads"], cfg["hidden_dim"], 512, 2)
    t = transformers.DistilBertForSequenceClassification(transformers.DistilBertConfig(**cfg, num_labels=2))
    assert k.count_params() == sum(p.numel() for p in t.parameters())
    # trainable as the seed: the top block and the two head layers
    top = {"layer_1", "pre_classifier", "classifier"}
    assert {layer.name for layer in k.layers if layer.trainable and layer.weights} == top


@pytest.mark.parametrize("ex, kw", [
    ("tf-resnet50-cifar100", dict(image_size=32)),
    ("tf-distilbert-imdb", dict(seq_len=16, model="tiny-distilbert")),
])
def test_tensorflow_workloads_run_on_the_cpu(ex, kw):
    pytest.importorskip("tensorflow")
    (r,) = su.run_case(su.Case(ex, "tf-cpu", 2, "training", **dict(dict(seq_len=0, model="resnet50"), **kw), **Q))
    assert r.status == OK, r.reason
    assert len(r.samples_s) == 3 and r.verified and "tensorflow" in r.device


def test_tensorflow_rows_say_why_when_they_cannot_run():
    tf = pytest.importorskip("tensorflow")
    if not tf.config.list_physical_devices("GPU"):
        (r,) = su.run_case(su.Case("tf-resnet50-cifar100", "tf-gpu", 2, image_size=32, **Q))
        assert r.status == UNAVAILABLE and "GPU" in r.reason
    (r,) = su.run_case(su.Case("tf-resnet50-cifar100", "torch-cpu", 2, image_size=32, **Q))
    assert r.status == ERROR and "tf-cpu" in r.reason
