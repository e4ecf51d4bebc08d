"""Seed suites run outside torch: the TensorFlow versions and llama.cpp generation."""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from gapbench.core.cases import CaseError
from gapbench.core.result import ERROR, FAILED, OK, UNAVAILABLE, Record
from gapbench.benchmarks.suite.config import DATASETS, DISTILBERT, EXPERIMENTS, Case
from gapbench.benchmarks.suite.records import failed_check as _failed_check, generation_records as _generation_records


def run_tf(case: Case, base: dict, params: dict, say) -> list[Record]:
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
    from gapbench.models import keras_models as km

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


def run_llamacpp(case: Case, base: dict, params: dict, say) -> list[Record]:
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
