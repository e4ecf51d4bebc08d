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

Modules: this file (the cases, the torch models and one case), suite_runners (TensorFlow and
llama.cpp), suite_tables (seed-layout CSVs, tables, figures), suite_cli (the command).
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

from gapbench.backends import registry
from gapbench.core.names import Backend
from gapbench.core.result import ERROR, FAILED, OK, UNAVAILABLE, Record, atomic_write_text
from gapbench.core.cases import CaseError  # a case that cannot run as asked: a row with its reason

from gapbench.benchmarks.suite.records import failed_check as _failed_check, generation_records as _generation_records
from gapbench.benchmarks.suite.config import BERT_CONFIGS, DATASETS, DEVICES, DISTILBERT, EXPERIMENTS, LLAMA, PROBE, SUITES, Case
from gapbench.benchmarks.suite.tables import _dur, build_table, seed_csvs, suite_figures  # noqa: F401


# ============================================================== models and data
def _torch_device(backend: str) -> str:
    return Backend(backend).device  # torch's name of it: cpu, cuda, mps


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
        info = registry.info(Backend(case.backend))
        if not info.available:
            return [Record(**base, metric="step", status=UNAVAILABLE, reason=info.reason, params=params)]
    say = progress or (lambda s: None)
    device = dict(info.device) if info else {}
    try:
        if case.experiment.startswith("tf-"):
            from gapbench.benchmarks.suite.runners import run_tf

            return run_tf(case, base, params, say)
        if info is None:
            from gapbench.benchmarks.suite.runners import run_llamacpp

            return run_llamacpp(case, base, params, say)
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


# ============================================================== in a fresh process
def case_worker(payload: dict) -> list[dict]:
    """gapbench.core.worker target: one case from its fields; its records as dicts."""
    from gapbench.core.worker import progress

    return [r.to_dict() for r in run_case(Case(**payload), progress)]


def run_in_subprocess(case: Case, timeout_s: float, progress=None) -> list[Record]:
    """One case in a fresh process (gapbench.core.worker): an out-of-memory or a crash is a row."""
    from gapbench.core.cases import error_record, run_case_in_worker

    return run_case_in_worker("gapbench.benchmarks.suite.run:case_worker", case, timeout_s, progress,
                              error_record(PROBE, case.backend, case.experiment,
                                           {"case": asdict(case), "label": case.label()}))
