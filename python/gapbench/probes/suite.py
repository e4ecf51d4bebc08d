"""python -m bench.suite: the community seed suites, measured the gapbench way.

pytorch-apple-silicon-benchmarks: BERT sequence classification (bert-base-cased / bert-large-cased
configurations), training and inference over batch sizes and sequence lengths, N steps, with "-"
where a run went out of memory. mac-ml-speed-test: ResNet50 on CIFAR100 (32x32, 100 classes) and
Food101 (224x224, 101 classes), DistilBERT on IMDB (sequence 512; only the top transformer block
and the two classification layers train), and LLM text generation speed, with prompt processing
and generation apart and tokens counted from real token ids (the original divided characters by
4). Models are built from their configurations with random weights (or `--pre_trained_name` a
local checkpoint); data is synthetic tensors of the right shapes unless `--data` names a local
`datasets` directory; the record says which.

Every case: build, check (loss finite and, for a fresh classifier, near ln(classes); inference
logits finite and of the right shape; generation produced exactly the tokens asked), warm up,
then time each step from a synchronised start to a synchronised end. Each case runs in its own
process (an out-of-memory is a "-" row, the sweep goes on). Besides the usual JSON/CSV, one CSV per
experiment in the seeds' layout: results/<suite>/<device>_<dataset>_<model>_<backend>.csv.
Run: python -m bench.suite --suite bert --device cuda --mode training
"""
from __future__ import annotations

import argparse
import errno
import math
import re
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .. import registry as bk
from ..result import ERROR, FAILED, OK, UNAVAILABLE, Record, atomic_write_text
from .train import CaseError  # a case that cannot run as asked: a row with its reason

PROBE = "suite"
DEVICES = {"cpu": "torch-cpu", "cuda": "torch-cuda", "mps": "torch-mps"}

#: experiment -> (suite, dataset, model, what the sweep varies)
EXPERIMENTS = {
    "bert": ("pytorch-apple-silicon-benchmarks", "synthetic-glue", "bert"),
    "resnet50-cifar100": ("mac-ml-speed-test", "cifar100", "resnet50"),
    "resnet50-food101": ("mac-ml-speed-test", "food101", "resnet50"),
    "distilbert-imdb": ("mac-ml-speed-test", "imdb", "distilbert"),
    "llm-generate": ("mac-ml-speed-test", "prompts", "llama"),
    "llamacpp-generate": ("mac-ml-speed-test", "prompts", "gguf"),
    "tf-resnet50-cifar100": ("mac-ml-speed-test", "cifar100", "resnet50"),
    "tf-resnet50-food101": ("mac-ml-speed-test", "food101", "resnet50"),
    "tf-distilbert-imdb": ("mac-ml-speed-test", "imdb", "distilbert"),
}
SUITES = {"bert": ["bert"], "cv": ["resnet50-cifar100", "resnet50-food101"], "nlp": ["distilbert-imdb"],
          "llm": ["llm-generate"], "llamacpp": ["llamacpp-generate"],
          "tensorflow": ["tf-resnet50-cifar100", "tf-resnet50-food101", "tf-distilbert-imdb"],
          "mac-ml-speed-test": ["resnet50-cifar100", "resnet50-food101", "distilbert-imdb", "llm-generate"]}

BERT_CONFIGS = {
    "bert-base-cased": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, vocab_size=28996),
    "bert-large-cased": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096, vocab_size=28996),
    "tiny-bert": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=512, max_position_embeddings=512),
}
DISTILBERT = {"distilbert-base-uncased": dict(dim=768, n_layers=6, n_heads=12, hidden_dim=3072, vocab_size=30522),
              "tiny-distilbert": dict(dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=512)}
LLAMA = {"llama-small": dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=16, num_attention_heads=16,
                             num_key_value_heads=16, vocab_size=32000, max_position_embeddings=2048),
         "tiny-llama": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                            num_key_value_heads=2, vocab_size=512, max_position_embeddings=256)}
DATASETS = {"cifar100": dict(size=32, classes=100, train=50_000), "food101": dict(size=224, classes=101, train=75_750),
            "imdb": dict(classes=2, train=25_000), "synthetic-glue": dict(classes=2)}


@dataclass
class Case:
    experiment: str
    backend: str
    batch_size: int
    mode: str = "training"  # training | inference (BERT); training for the others
    seq_len: int = 128
    model: str = ""  # bert-base-cased | bert-large-cased | a local checkpoint path | tiny-*
    steps: int = 100
    epochs: int = 0  # > 0: whole epochs of the dataset instead of --steps
    warmup: int = 3
    data: str | None = None
    prompt_tokens: int = 128  # llm
    new_tokens: int = 64  # llm
    repeats: int = 5  # llm
    image_size: int = 0  # 0: the dataset's (tests shrink it)
    seed: int = 0
    gguf: str | None = None  # llama.cpp: the model file

    def label(self) -> str:
        if self.experiment in ("llm-generate", "llamacpp-generate"):
            return f"{self.experiment} {self.model} {self.backend} prompt {self.prompt_tokens} + {self.new_tokens} new"
        return f"{self.experiment} {self.model} {self.backend} {self.mode} b{self.batch_size}" + (
            f"x{self.seq_len}" if self.experiment in ("bert", "distilbert-imdb", "tf-distilbert-imdb") else "")


# ============================================================== models and data
def _torch_device(backend: str) -> str:
    return {"torch-cpu": "cpu", "torch-cuda": "cuda", "torch-mps": "mps"}[backend]


def _local_or_config(name: str, table: dict, cfg_cls, model_cls, **extra):
    """A model from a named configuration (random weights) or from a local checkpoint path."""
    if name in table:
        return model_cls(cfg_cls(**table[name], **extra)), f"{name} configuration, random weights"
    if Path(name).exists():
        try:
            return model_cls.from_pretrained(name, local_files_only=True, **extra), f"local checkpoint {name}"
        except Exception as e:
            raise CaseError(ERROR, f"{name}: cannot load a local {model_cls.__name__} ({e})") from None
    raise CaseError(ERROR, f"unknown model {name!r}: use one of {', '.join(table)} or a local checkpoint directory")


def build_model(case: Case):
    try:
        import transformers as tf
    except ImportError:
        raise CaseError(UNAVAILABLE, "transformers is not installed (pip install 'gapbench[train]')") from None
    ex = case.experiment
    if ex == "bert":
        m, how = _local_or_config(case.model, BERT_CONFIGS, tf.BertConfig, tf.BertForSequenceClassification, num_labels=2)
        return m, how, m.config.vocab_size, 2
    if ex == "distilbert-imdb":
        m, how = _local_or_config(case.model, DISTILBERT, tf.DistilBertConfig, tf.DistilBertForSequenceClassification, num_labels=2)
        # as the seed: only the top transformer block and the two classification layers train
        for p in m.parameters():
            p.requires_grad = False
        for mod in (m.distilbert.transformer.layer[-1], m.pre_classifier, m.classifier):
            for p in mod.parameters():
                p.requires_grad = True
        return m, how + "; trainable: top transformer block + pre_classifier + classifier", m.config.vocab_size, 2
    if ex.startswith("resnet50"):
        classes = DATASETS[EXPERIMENTS[ex][1]]["classes"]
        try:
            import torchvision

            return torchvision.models.resnet50(num_classes=classes), "torchvision resnet50, random weights", 0, classes
        except ImportError:
            cfg = tf.ResNetConfig(num_labels=classes)  # the default configuration is ResNet-50
            return tf.ResNetForImageClassification(cfg), "transformers ResNetConfig (ResNet-50), random weights", 0, classes
    if ex == "llm-generate":
        m, how = _local_or_config(case.model, LLAMA, tf.LlamaConfig, tf.LlamaForCausalLM)
        return m, how, m.config.vocab_size, 0
    raise CaseError(ERROR, f"unknown experiment {ex!r}")


def make_batches(case: Case, vocab: int, classes: int, rng: np.random.Generator, n: int = 4):
    """`n` host batches (numpy): synthetic of the experiment's shapes, or from --data."""
    B = case.batch_size
    ex = case.experiment
    if case.data:
        return _real_batches(case, vocab, classes, rng, n)
    if ex.startswith("resnet50"):
        size = case.image_size or DATASETS[EXPERIMENTS[ex][1]]["size"]
        return [(rng.standard_normal((B, 3, size, size), dtype=np.float32), rng.integers(0, classes, B)) for _ in range(n)], \
            f"synthetic {size}x{size}x3 images, {classes} classes"
    T = case.seq_len
    return [({"input_ids": rng.integers(0, vocab, (B, T)), "attention_mask": np.ones((B, T), np.int64)},
             rng.integers(0, classes, B)) for _ in range(n)], f"synthetic token ids, {B}x{T}, {classes} classes"


def _real_batches(case, vocab, classes, rng, n):
    try:
        import datasets
    except ImportError:
        raise CaseError(UNAVAILABLE, "--data needs `datasets` (pip install datasets)") from None
    p = Path(case.data)
    if not p.exists():
        raise CaseError(ERROR, f"--data {case.data}: no such directory")
    try:
        ds = datasets.load_from_disk(str(p))
    except Exception as e:
        raise CaseError(ERROR, f"--data {case.data}: not a dataset saved with save_to_disk ({e})") from None
    if isinstance(ds, datasets.DatasetDict):
        ds = ds["train"] if "train" in ds else ds[next(iter(ds))]
    cols = ds.column_names
    lcol = next((c for c in ("fine_label", "label", "labels") if c in cols), None)
    if lcol is None:
        raise CaseError(ERROR, f"--data {case.data}: needs a label column (fine_label or label); has {cols}")
    B = case.batch_size
    idx = [[(i * B + j) % len(ds) for j in range(B)] for i in range(n)]
    if case.experiment.startswith("resnet50"):
        icol = next((c for c in ("img", "image") if c in cols), None)
        if icol is None:
            raise CaseError(ERROR, f"--data {case.data}: needs an 'img' or 'image' column; has {cols}")
        size = case.image_size or DATASETS[EXPERIMENTS[case.experiment][1]]["size"]

        def img(x):
            from PIL import Image

            im = x if isinstance(x, Image.Image) else Image.fromarray(np.asarray(x, dtype=np.uint8))
            a = np.asarray(im.convert("RGB").resize((size, size)), dtype=np.float32) / 255.0
            return ((a - 0.5) / 0.25).transpose(2, 0, 1)

        out = [(np.stack([img(ds[j][icol]) for j in ix]), np.asarray([int(ds[j][lcol]) % classes for j in ix])) for ix in idx]
        return out, f"dataset {p} [{icol}, {lcol}] resized to {size}x{size}"
    tcol = next((c for c in ("text", "sentence") if c in cols), None)
    if tcol is None:
        raise CaseError(ERROR, f"--data {case.data}: needs a 'text' column; has {cols}")
    T = case.seq_len

    def ids(text):  # UTF-8 bytes as token ids, truncated / padded to T
        t = np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.int64)[:T] % vocab
        return np.pad(t, (0, T - len(t))), np.pad(np.ones(len(t), np.int64), (0, T - len(t)))

    out = []
    for ix in idx:
        pairs = [ids(ds[j][tcol]) for j in ix]
        out.append(({"input_ids": np.stack([a for a, _ in pairs]), "attention_mask": np.stack([m for _, m in pairs])},
                    np.asarray([int(ds[j][lcol]) % classes for j in ix])))
    return out, f"dataset {p} [{tcol}, {lcol}], UTF-8 bytes as token ids"


# ============================================================== one case
def _sync(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


def _is_oom(e: BaseException) -> bool:
    t = f"{type(e).__name__}: {e}".lower()
    return "out of memory" in t or "outofmemory" in t


def run_case(case: Case, progress=None) -> list[Record]:
    base = dict(probe=PROBE, backend=case.backend, variant=case.experiment)
    params = {"case": asdict(case), "label": case.label(), "suite": EXPERIMENTS.get(case.experiment, ("?",))[0]}
    if case.experiment == "llamacpp-generate" or case.experiment.startswith("tf-"):
        info = None  # not a torch backend: the runner checks its own library and device
    else:
        info = bk.info(case.backend)
        if not info.available:
            return [Record(**base, metric="step", status=UNAVAILABLE, reason=info.reason, params=params)]
    say = progress or (lambda s: None)
    device = dict(info.device) if info else {}
    try:
        if case.experiment.startswith("tf-"):
            return _run_tf(case, base, params, say)
        if info is None:
            return _run_llamacpp(case, base, params, say)
        return _run(case, base, params, say, device)
    except CaseError as e:
        return [Record(**base, metric="step", status=e.status, reason=e.reason, params=params, device=device)]
    except OSError as e:
        if e.errno == errno.EMFILE:
            import resource

            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            reason = (f"too many open files (limit {soft}, hard {hard}): raise it, e.g. `ulimit -n {min(hard, 65536)}`, "
                      "or lower the data loader's workers")
        else:
            reason = f"OSError: {e}"
        return [Record(**base, metric="step", status=ERROR, reason=reason, params=params, device=device)]
    except Exception as e:
        oom = _is_oom(e)
        params.update(oom=oom, traceback=traceback.format_exc()[-3000:])
        reason = ("out of memory: " if oom else f"{type(e).__name__}: ") + str(e).strip().splitlines()[0][:300]
        return [Record(**base, metric="step", status=ERROR, reason=reason, params=params, device=device)]


def _run(case: Case, base: dict, params: dict, say, device: dict) -> list[Record]:
    import torch

    torch.manual_seed(case.seed)
    rng = np.random.default_rng(case.seed)
    dev = _torch_device(case.backend)
    model, how, vocab, classes = build_model(case)
    params.update(model_source=how, params=sum(p.numel() for p in model.parameters()),
                  trainable=sum(p.numel() for p in model.parameters() if p.requires_grad))
    model = model.to(dev)
    if case.experiment == "llm-generate":
        return _run_llm(case, model, vocab, base, params, say, device, torch, dev, rng)
    host, data_desc = make_batches(case, vocab, classes, rng)
    params["data"] = data_desc
    to_dev = (lambda b: ({k: torch.from_numpy(v).to(dev) for k, v in b[0].items()}, torch.from_numpy(b[1]).to(dev))) \
        if isinstance(host[0][0], dict) else (lambda b: (torch.from_numpy(b[0]).to(dev), torch.from_numpy(b[1]).to(dev)))
    batches = [to_dev(b) for b in host]
    loss_fn = torch.nn.CrossEntropyLoss()
    training = case.mode == "training"
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4) if training else None
    model.train(training)
    losses: list[float] = []

    def logits_of(x):
        out = model(**x) if isinstance(x, dict) else model(x)
        return out.logits if hasattr(out, "logits") else out

    def step(i):
        x, y = batches[i % len(batches)]
        if training:
            loss = loss_fn(logits_of(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss
        with torch.inference_mode():
            return logits_of(x)

    # ---- check before timing
    out = step(0)
    _sync(torch, dev)
    if training:
        v = float(out.detach())
        expect = math.log(classes)
        ok = math.isfinite(v) and (case.data or case.experiment.startswith("resnet50") or abs(v - expect) < 0.5 * expect)
        detail = f"first loss {v:.3f} (ln(classes) = {expect:.3f}); every timed step's loss finite"
    else:
        ok = bool(torch.isfinite(out).all()) and tuple(out.shape) == (case.batch_size, classes)
        detail = f"logits finite and of shape {(case.batch_size, classes)}"
    if not ok:
        return _failed_check(base, detail, params, device)
    for i in range(case.warmup):
        say(f"warm-up {i + 1}/{case.warmup}")
        step(i)
    _sync(torch, dev)
    n_steps = case.steps
    per_epoch = None
    if case.epochs:
        n_train = DATASETS[EXPERIMENTS[case.experiment][1]].get("train")
        if not n_train:
            raise CaseError(ERROR, f"--epochs needs a dataset size; {case.experiment} has none (use --steps)")
        per_epoch = math.ceil(n_train / case.batch_size)
        n_steps = per_epoch * case.epochs
    samples = []
    t_all = time.perf_counter()
    for i in range(n_steps):
        t0 = time.perf_counter()
        out = step(i)
        _sync(torch, dev)
        samples.append(time.perf_counter() - t0)
        if training:
            losses.append(float(out.detach()))
            if not math.isfinite(losses[-1]):
                raise CaseError(FAILED, f"loss became {losses[-1]} at step {i}")
        if i % 10 == 0 or i == n_steps - 1:
            say(f"step {i + 1}/{n_steps}")
    total = time.perf_counter() - t_all
    if per_epoch:
        params["epoch_s"] = [sum(samples[e * per_epoch:(e + 1) * per_epoch]) for e in range(case.epochs)]
    params.update(total_s=total, steps=n_steps, losses=losses[:10] + losses[-10:], steps_per_epoch=per_epoch)
    if dev == "cuda":
        params["torch_cuda_max_reserved_bytes"] = torch.cuda.max_memory_reserved()
    return [Record(**base, metric="step", clock="host_wall", samples_s=samples, warmup=case.warmup,
                   op=f"{case.mode} step, synchronised start to synchronised end",
                   work={"items": case.batch_size}, params=params, verified=True, verify_detail=detail, device=device)]


def _failed_check(base: dict, detail: str, params: dict, device: dict) -> list[Record]:
    """The row of a case whose check before timing failed: recorded as failed, never timed."""
    return [Record(**base, metric="step", status=FAILED, verified=False, verify_detail=detail, params=params,
                   reason="the check before timing failed: " + detail, device=device)]


def _run_llm(case, model, vocab, base, params, say, device, torch, dev, rng):
    """Prompt processing and generation apart: generate() with 1 new token (prefill + the first
    token) and with N new tokens; decode rate = (N - 1) generated ids / the time difference.
    Greedy, no early stop; tokens are counted from the returned ids."""
    P, N = case.prompt_tokens, case.new_tokens
    if N < 2:
        raise CaseError(ERROR, "--new-tokens must be >= 2 (prefill and generation are told apart by the difference)")
    model.eval()
    prompts = [torch.from_numpy(rng.integers(3, vocab, (1, P))).to(dev) for _ in range(case.repeats)]
    params["data"] = f"random prompts of {P} token ids"

    def gen(ids, n):
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                                 do_sample=False, pad_token_id=0, eos_token_id=None)
        _sync(torch, dev)
        return out

    out = gen(prompts[0], N)  # check + warm-up
    made = out.shape[1] - P
    if made != N:
        return [Record(**base, metric="generate", status=FAILED, reason=f"asked {N} new tokens, got {made}", params=params,
                       device=device)]
    gen(prompts[0], 1)
    pre, dec, counted = [], [], []
    for r, ids in enumerate(prompts):
        say(f"repetition {r + 1}/{case.repeats}")
        t0 = time.perf_counter()
        gen(ids, 1)
        t1 = time.perf_counter()
        o = gen(ids, N)
        t2 = time.perf_counter()
        pre.append(t1 - t0)
        dec.append(max((t2 - t1) - (t1 - t0), 1e-9))
        counted.append(int(o.shape[1] - P))
    return _generation_records(base, params, device, "generate()", P, N, pre, dec, counted, warmup=2)


def _generation_records(base, params, device, who, P, N, first, rest, counted, warmup) -> list[Record]:
    """The prefill and generate records of a generation case, after checking that every
    repetition produced exactly N token ids (counted from the ids, not from text)."""
    if any(n != N for n in counted):
        return [Record(**base, metric="generate", status=FAILED, reason=f"asked {N} tokens, got {counted}", params=params,
                       device=device)]
    params.update(generated_tokens=counted)
    common = dict(base, clock="host_wall", device=device, verified=True,
                  verify_detail=f"{who} returned exactly {N} new token ids each time", warmup=warmup)
    return [Record(**common, metric="prefill", samples_s=first, op=f"prompt processing of {P} tokens + the first new token",
                   work={"items": P}, params=params),
            Record(**common, metric="generate", samples_s=rest, op=f"generation of {N - 1} tokens after the first",
                   work={"items": N - 1}, params={k: params[k] for k in ("label", "case", "suite")})]


def _run_tf(case: Case, base: dict, params: dict, say) -> list[Record]:
    """The TensorFlow versions (mac-ml-speed-test's tensorflow_test_*.py): Keras ResNet50 and a
    Keras DistilBERT (models/keras_models.py), Adam, `train_on_batch` per step (it returns the
    loss as a host value, so each step is complete when it returns). Backend tf-cpu or tf-gpu
    (CUDA, or Metal through tensorflow-metal on a Mac)."""
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import keras
        import tensorflow as tf
    except ImportError:
        raise CaseError(UNAVAILABLE, "TensorFlow is not installed (pip install 'gapbench[tensorflow]'; "
                                     "on a Mac also tensorflow-metal)") from None
    from ..models import keras_models as km

    gpus = tf.config.list_physical_devices("GPU")
    if case.backend == "tf-gpu" and not gpus:
        raise CaseError(UNAVAILABLE, "TensorFlow sees no GPU (CUDA build of TensorFlow, or tensorflow-metal on a Mac)")
    if case.backend not in ("tf-cpu", "tf-gpu"):
        raise CaseError(ERROR, f"TensorFlow backends are tf-cpu and tf-gpu, not {case.backend}")
    dev = "/GPU:0" if case.backend == "tf-gpu" else "/CPU:0"
    device = {"name": (gpus[0].name if case.backend == "tf-gpu" else "cpu"), "tensorflow": tf.__version__}
    rng = np.random.default_rng(case.seed)
    tf.random.set_seed(case.seed)
    ds = DATASETS[EXPERIMENTS[case.experiment][1]]
    classes, B = ds["classes"], case.batch_size
    with tf.device(dev):
        if "resnet50" in case.experiment:
            size = case.image_size or ds["size"]
            model = km.resnet50(size, classes)
            batches = [(rng.standard_normal((B, size, size, 3), dtype=np.float32), rng.integers(0, classes, B))
                       for _ in range(4)]
            params["data"] = f"synthetic {size}x{size}x3 images (channels last), {classes} classes"
            params["model_source"] = "keras.applications.ResNet50, random weights"
        else:
            cfg = DISTILBERT.get(case.model) or DISTILBERT["distilbert-base-uncased"]
            model = km.distilbert(cfg["vocab_size"], cfg["dim"], cfg["n_layers"], cfg["n_heads"], cfg["hidden_dim"],
                                  512, classes)
            T = case.seq_len
            batches = [({"input_ids": rng.integers(0, cfg["vocab_size"], (B, T)).astype(np.int32),
                         "attention_mask": np.ones((B, T), np.int32)}, rng.integers(0, classes, B)) for _ in range(4)]
            params["data"] = f"synthetic token ids, {B}x{T}, {classes} classes"
            params["model_source"] = f"Keras DistilBERT ({case.model or 'distilbert-base-uncased'} sizes), random weights; trainable: top block + head"
        params.update(params=int(model.count_params()), trainable=int(sum(int(np.prod(w.shape)) for w in model.trainable_weights)))
        model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        first = float(model.train_on_batch(*batches[0]))
        expect = math.log(classes)
        ok = math.isfinite(first) and ("resnet50" in case.experiment or abs(first - expect) < 0.5 * expect)
        detail = f"first loss {first:.3f} (ln(classes) = {expect:.3f}); every timed step's loss finite"
        if not ok:
            return _failed_check(base, detail, params, device)
        for i in range(case.warmup):
            say(f"warm-up {i + 1}/{case.warmup}")
            model.train_on_batch(*batches[i % 4])
        samples, losses = [], []
        for i in range(case.steps):
            t0 = time.perf_counter()
            loss = float(model.train_on_batch(*batches[i % 4]))  # a host float: the step has finished
            samples.append(time.perf_counter() - t0)
            losses.append(loss)
            if not math.isfinite(loss):
                raise CaseError(FAILED, f"loss became {loss} at step {i}")
            if i % 10 == 0:
                say(f"step {i + 1}/{case.steps}")
    params.update(total_s=sum(samples), steps=case.steps, losses=losses[:10] + losses[-10:])
    return [Record(**base, metric="step", clock="host_wall", samples_s=samples, warmup=case.warmup,
                   op="training step (Keras train_on_batch)", work={"items": B}, params=params, verified=True,
                   verify_detail=detail, device=device)]


def _run_llamacpp(case: Case, base: dict, params: dict, say) -> list[Record]:
    """llama.cpp through llama-cpp-python on a GGUF file, measured like llm-generate: greedy
    (top_k=1) generation of exactly N tokens counted from the ids llama.cpp returns; the time to
    the first token (prompt processing + one token) and the rate of the N-1 after it apart."""
    try:
        import llama_cpp
    except ImportError:
        raise CaseError(UNAVAILABLE, "llama-cpp-python is not installed (pip install 'gapbench[llamacpp]'; "
                                     "on a Mac build it with CMAKE_ARGS=-DGGML_METAL=on)") from None
    if not case.gguf:
        raise CaseError(ERROR, "llama.cpp needs a model file: --gguf PATH (or --path_to_gguf_model)")
    if not Path(case.gguf).is_file():
        raise CaseError(ERROR, f"--gguf {case.gguf}: no such file")
    P, N = case.prompt_tokens, case.new_tokens
    if N < 2:
        raise CaseError(ERROR, "--new-tokens must be >= 2 (prefill and generation are told apart)")
    gpu = case.backend != "llama.cpp-cpu" and bool(llama_cpp.llama_supports_gpu_offload())
    llm = llama_cpp.Llama(model_path=case.gguf, n_ctx=max(P + N + 8, 64), n_gpu_layers=-1 if gpu else 0,
                          seed=case.seed, verbose=False)
    device = {"name": "llama.cpp " + ("GPU offload (all layers)" if gpu else "CPU"),
              "llama_cpp_python": getattr(llama_cpp, "__version__", "?")}
    vocab = llm.n_vocab()
    if P + N > llm.n_ctx():
        raise CaseError(ERROR, f"prompt {P} + {N} new tokens exceed the context of {llm.n_ctx()}")
    rng = np.random.default_rng(case.seed)
    params.update(data=f"random prompts of {P} token ids (of {vocab})", n_gpu_layers=-1 if gpu else 0, gguf=case.gguf)

    def once(prompt):
        t0 = time.perf_counter()
        gen = llm.generate(prompt, top_k=1, temp=0.0, reset=True)
        ids = [next(gen)]
        t1 = time.perf_counter()
        while len(ids) < N:
            ids.append(next(gen))
        t2 = time.perf_counter()
        gen.close()
        return t1 - t0, t2 - t1, len(ids)

    prompts = [[int(x) for x in rng.integers(3, vocab, P)] for _ in range(case.repeats + 1)]
    once(prompts[-1])  # warm-up
    first, rest, counted = [], [], []
    for r in range(case.repeats):
        say(f"repetition {r + 1}/{case.repeats}")
        a, b, n = once(prompts[r])
        first.append(a)
        rest.append(b)
        counted.append(n)
    return _generation_records(base, params, device, "llama.cpp", P, N, first, rest, counted, warmup=1)


# ============================================================== seed-layout CSVs, table, figure
def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", s).strip("_").lower()


def seed_csvs(records: list[Record], root: Path, device_name: str) -> list[Path]:
    """One CSV per experiment and backend: results/<suite>/<device>_<dataset>_<model>_<backend>.csv,
    a row per case: batch, sequence, mode, steps, total seconds, median step, samples/s or '-'."""
    groups: dict[tuple, list[Record]] = {}
    for r in records:
        if r.probe != PROBE or r.metric not in ("step", "generate"):
            continue
        c = r.params["case"]
        groups.setdefault((r.params.get("suite", "?"), c["experiment"], c["model"], r.backend), []).append(r)
    paths = []
    for (suite, ex, model, backend), rs in groups.items():
        dataset = EXPERIMENTS[ex][1]
        p = root / _slug(suite) / f"{_slug(device_name)}_{dataset}_{_slug(Path(model).name)}_{backend}.csv"
        lines = ["batch_size,sequence_length,mode,steps,total_time_s,median_step_s,items_per_s,status"]
        for r in rs:
            c = r.params["case"]
            if r.status == OK:
                s = r.summary()
                lines.append(f"{c['batch_size']},{c['seq_len']},{c['mode']},{len(r.samples_s)},{sum(r.samples_s):.4f},"
                             f"{s.median:.6f},{r.rates().get('items_per_s', 0):.2f},ok")
            else:
                lines.append(f"{c['batch_size']},{c['seq_len']},{c['mode']},-,-,-,-,{'oom' if r.params.get('oom') else r.status}")
        atomic_write_text(p, "\n".join(lines) + "\n")
        paths.append(p)
    return paths


def _dur(s: float) -> str:
    """Seconds as the seed tables write them: 43s, 2m 29s, 1h 21m 2s."""
    if s < 10:
        return f"{s:.3g}s"
    s = int(round(s))
    h, m, sec = s // 3600, (s % 3600) // 60, s % 60
    return f"{h}h {m}m {sec}s" if h else f"{m}m {sec}s" if m else f"{sec}s"


def build_table(records: list[Record]):
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape("seed suites: total time of the steps (as the seeds' tables), median [p10-p90] per step, rate"))
    for c in ("experiment", "backend", "mode", "batch", "seq", "steps", "total", "step ms", "rate"):
        t.add_column(c)
    for r in records:
        if r.probe != PROBE:
            continue
        c = r.params.get("case", {})
        seq = str(c.get("seq_len")) if c.get("experiment") in ("bert", "distilbert-imdb", "tf-distilbert-imdb") else ""
        if r.status != OK:
            t.add_row(c.get("experiment", "?"), r.backend, c.get("mode", ""), str(c.get("batch_size", "")), seq, "-",
                      "-", escape(f"{r.status}: {r.reason[:80]}"), "")
            continue
        s = r.summary()
        unit = "tokens/s" if r.metric in ("generate", "prefill") else "samples/s"
        t.add_row(c["experiment"] + (f" ({r.metric})" if r.metric != "step" else ""), r.backend, c.get("mode", ""),
                  str(c["batch_size"]), seq, str(len(r.samples_s)), _dur(sum(r.samples_s)),
                  f"{s.median * 1e3:.4g} [{s.p10 * 1e3:.4g}-{s.p90 * 1e3:.4g}]" + ("~" if s.noisy else ""),
                  f"{r.rates().get('items_per_s', 0):.4g} {unit}")
    return t


def suite_figures(runs: list, out_prefix: Path) -> list[Path]:
    """Time per step against batch size, one line per machine (result file) and mode, one PNG per
    experiment and sequence length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[tuple, dict[str, list]] = {}
    for run in runs:
        mach = (run.env.get("nvidia_smi") or [{}])[0].get("name") or run.env.get("cpu", "?")
        for r in run.records:
            if r.probe != PROBE or r.status != OK or r.metric != "step":
                continue
            c = r.params["case"]
            key = (c["experiment"], c["seq_len"] if c["experiment"] in ("bert", "distilbert-imdb", "tf-distilbert-imdb") else None)
            series.setdefault(key, {}).setdefault(f"{mach} {r.backend} {c['mode']}", []).append(
                (c["batch_size"], r.summary().median))
    paths = []
    for (ex, seq), lines in series.items():
        fig, ax = plt.subplots(figsize=(6.5, 4.5))
        for name, pts in sorted(lines.items()):
            pts.sort()
            ax.plot([b for b, _ in pts], [v for _, v in pts], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size")
        ax.set_ylabel("seconds per step (median)")
        ax.set_title(ex + (f", sequence {seq}" if seq else ""))
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = out_prefix.with_name(out_prefix.name + f"-{ex}" + (f"-s{seq}" if seq else "") + ".png")
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


# ============================================================== CLI
def _ints(text: str, what: str) -> list[int]:
    out = []
    for s in str(text).split(","):
        s = s.strip()
        if not s:
            continue
        if not s.isdigit() or int(s) < 1:
            raise ValueError(f"bad {what} {s!r}: positive integers, comma separated (e.g. \"16, 32, 64\")")
        out.append(int(s))
    if not out:
        raise ValueError(f"empty {what} list")
    return out


def main(argv: list[str] | None = None, prog: str = "python -m bench.suite") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        from .train import worker

        return worker(argv[1], argv[2], Case, run_case)
    from rich.console import Console

    from ..cli import open_run
    from .train import run_in_subprocess

    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="bert", help=f"{', '.join(SUITES)} or an experiment: {', '.join(EXPERIMENTS)} (comma list)")
    ap.add_argument("--backend", "--backends", default=None, help="comma list of torch-cpu, torch-cuda, torch-mps")
    ap.add_argument("--device", help="the seed's flag: cpu|cuda|mps (comma list); same as --backend torch-<device>")
    ap.add_argument("--model", "--pre_trained_name", dest="model", default=None,
                    help="BERT: bert-base-cased|bert-large-cased (default both for --suite bert: bert-base-cased); or a local checkpoint")
    ap.add_argument("--batch-size", "--batch_size", "--batch_sizes", dest="batch_size", default=None,
                    help="comma list (defaults: BERT 16,64,256; CV 32; NLP 32; the seeds' \"16, 32, 64\" works)")
    ap.add_argument("--mode", default="training", help="training, inference or both (comma list; BERT)")
    ap.add_argument("--seq-len", "--sequence_length", dest="seq_len", default=None, help="BERT: default 128,512; DistilBERT 512")
    ap.add_argument("--steps", type=int, default=100, help="timed steps per case (default 100, as the seed)")
    ap.add_argument("--epochs", type=int, default=0, help="whole epochs of the dataset's train split instead of --steps")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--data", help="a local datasets directory (save_to_disk) for the experiment (default synthetic)")
    ap.add_argument("--gguf", "--path_to_gguf_model", dest="gguf", help="llama.cpp: a GGUF model file (--suite llamacpp)")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", "--num_times_per_question", dest="repeats", type=int, default=5)
    ap.add_argument("--image-size", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--in-process", action="store_true", help="no process per case (debugging)")
    ap.add_argument("--case-timeout", type=float, default=3600.0)
    ap.add_argument("--out", help="result JSON (default results/suite-<time>.json)")
    ap.add_argument("--results-root", default="results", help="root of the seed-layout CSVs (default results/)")
    ap.add_argument("--plot", nargs="+", metavar="RESULT.json", help="only draw the figures from these result files (one line per machine)")
    ap.add_argument("--quick", action="store_true", help="tiny models, few steps (a smoke test)")
    args = ap.parse_args(argv)
    console = Console() if Console().is_terminal else Console(width=200)
    if args.plot:
        from ..result import SchemaError, load_run

        try:
            runs = [load_run(p) for p in args.plot]
        except SchemaError as e:
            console.print(f"[red]error:[/red] {e}")
            return 2
        out = Path(args.out or Path(args.plot[0]).with_suffix("")).with_suffix("")
        for p in suite_figures(runs, out):
            console.print(f"figure: {p}")
        return 0
    try:
        exps: list[str] = []
        for s in (x.strip() for x in args.suite.split(",") if x.strip()):
            if s in SUITES:
                exps += SUITES[s]
            elif s in EXPERIMENTS:
                exps.append(s)
            else:
                raise ValueError(f"unknown suite {s!r}; choose from {', '.join(SUITES)} or {', '.join(EXPERIMENTS)}")
        if args.device:
            devs = [d.strip() for d in args.device.split(",") if d.strip()]
            bad = [d for d in devs if d not in DEVICES]
            if bad:
                raise ValueError(f"unknown device {', '.join(bad)}; choose from {', '.join(DEVICES)}")
            backends = [DEVICES[d] for d in devs]
        elif args.backend:
            backends = [b.strip() for b in args.backend.split(",") if b.strip()]
            bad = [b for b in backends if b not in DEVICES.values()]
            if bad:
                raise ValueError(f"unknown backend {', '.join(bad)}; choose from {', '.join(DEVICES.values())}")
        else:
            backends = [next((b for b in ("torch-cuda", "torch-mps", "torch-cpu") if bk.info(b).available), "torch-cpu")]
        modes = [m.strip() for m in args.mode.replace("both", "training,inference").split(",") if m.strip()]
        if any(m not in ("training", "inference") for m in modes):
            raise ValueError(f"unknown mode in {args.mode!r}; choose training, inference or both")
        if args.steps < 1 or args.warmup < 0 or args.epochs < 0 or args.repeats < 1:
            raise ValueError("--steps and --repeats must be >= 1, --warmup and --epochs >= 0")
        batches = _ints(args.batch_size, "batch size") if args.batch_size else None
        seqs = _ints(args.seq_len, "sequence length") if args.seq_len else None
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    q = args.quick
    cases = []
    for ex in exps:
        common = dict(steps=4 if q else args.steps, epochs=0 if q else args.epochs, warmup=1 if q else args.warmup,
                      data=args.data, image_size=args.image_size or (32 if q else 0))
        for backend in backends:
            if ex == "bert":
                model = args.model or ("tiny-bert" if q else "bert-base-cased")
                for mode in modes:
                    for s in seqs or ([32] if q else [128, 512]):
                        for b in batches or ([2] if q else [16, 64, 256]):
                            cases.append(Case(ex, backend, b, mode, s, model, **common))
            elif ex == "distilbert-imdb":
                model = args.model if args.model and not args.model.startswith("bert") else ("tiny-distilbert" if q else "distilbert-base-uncased")
                for s in seqs or ([32] if q else [512]):
                    for b in batches or ([2] if q else [32]):
                        cases.append(Case(ex, backend, b, "training", s, model, **common))
            elif ex.startswith("resnet50"):
                for b in batches or ([2] if q else [32]):
                    cases.append(Case(ex, backend, b, "training", 0, "resnet50", **common))
            elif ex.startswith("tf-"):
                tb = "tf-cpu" if backend == "torch-cpu" else "tf-gpu"
                for b in batches or ([2] if q else [32]):
                    if "distilbert" in ex:
                        m = "tiny-distilbert" if q else "distilbert-base-uncased"
                        for s_ in seqs or ([16] if q else [512]):
                            cases.append(Case(ex, tb, b, "training", s_, m, **common))
                    else:
                        cases.append(Case(ex, tb, b, "training", 0, "resnet50", **common))
            elif ex == "llamacpp-generate":
                lb = "llama.cpp-cpu" if backend == "torch-cpu" else "llama.cpp"
                cases.append(Case(ex, lb, 1, "inference", 0, Path(args.gguf).name if args.gguf else "gguf",
                                  prompt_tokens=16 if q else args.prompt_tokens, new_tokens=4 if q else args.new_tokens,
                                  repeats=2 if q else args.repeats, gguf=args.gguf, **common))
            else:
                model = "tiny-llama" if q else (args.model if args.model and not args.model.startswith("bert") else "llama-small")
                cases.append(Case(ex, backend, 1, "inference", 0, model, prompt_tokens=16 if q else args.prompt_tokens,
                                  new_tokens=4 if q else args.new_tokens, repeats=2 if q else args.repeats, **common))
    writer = open_run(PROBE, args.out, prog, argv, {"cases": len(cases), "experiments": exps}, backends)
    for n, case in enumerate(cases, 1):
        console.print(f"[bold]case {n}/{len(cases)}[/bold] {case.label()}", highlight=False)

        def progress(text):
            if console.is_terminal:
                console.print(f"  {text}", highlight=False, end="\r")

        if args.in_process:
            recs = run_case(case, progress)
        else:
            recs = run_in_subprocess(case, args.case_timeout, progress, module="gapbench.probes.suite",
                                     error_record=lambda reason, c=case: Record(
                                         probe=PROBE, backend=c.backend, variant=c.experiment, metric="step", status=ERROR,
                                         reason=reason, params={"case": asdict(c), "label": c.label()}))
        writer.extend(recs)
        r = recs[-1]
        console.print(f"  -> {r.metric} {r.summary().median * 1e3:.4g} ms" if r.status == OK else f"  -> {r.status}: {r.reason}",
                      highlight=False)
    writer.finish()
    console.print(build_table(writer.records))
    dev_name = next((str(r.device.get("name")) for r in writer.records if r.device.get("name")), "unknown")
    for p in seed_csvs(writer.records, Path(args.results_root), dev_name):
        console.print(f"seed-layout CSV: {p}")
    try:
        from ..result import load_run

        for p in suite_figures([load_run(writer.path)], writer.path.with_suffix("")):
            console.print(f"figure: {p}")
    except ImportError:
        console.print("figures skipped: matplotlib is not installed (pip install 'gapbench[plot]')")
    console.print(f"results: {writer.path} and {writer.csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
