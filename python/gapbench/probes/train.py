"""python -m bench.train: end-to-end training steps (GPT-2, Whisper) split into forward, backward
and optimizer, with memory and page faults over time, energy per step, clocks, and the memory
scenario of the paper's Figure 2.

Spec: the paper's sections 3-4.3, Tables 2-5, Figures 2-4. Each case (model x backend x precision
x batch x mode) runs in a fresh process, so its memory timeline starts clean and a crash or an
out-of-memory in one case is a row while the sweep goes on.

Per case, in this order:
  1. check: the memory plan (theory vs device capacity), then build the model; a random-weight
     model's first loss must be finite and near ln(vocab) (it predicts uniformly), and every
     timed step's loss must be finite: a case that fails is recorded as failed, not timed.
  2. warm-up steps (reported apart, metric step_warmup).
  3. timed steps in interleaved rounds of three arms on the same model and batches: the harness
     (one sync per step like the plain loop; the phases split by device events recorded between
     them, or host timestamps on the CPU; MLX: one mx.eval per step, its phases from extra
     phase-by-phase evaluated steps after the rounds), the harness with the
     sampler paused, and the plain loop of gapbench/plain/train.py (one sync per step). Ratios between the arms say
     what the harness and its sampler cost.
  4. energy over the whole timed window (all arms do the same work), memory peaks, clocks and
     throttle reasons, and the declared work: FLOPs per step (torch's flop counter on one extra
     step for transformers models; the analytic count for the minimal GPT-2, which a test checks
     against the counter) and tokens or samples per step.
Run: python -m bench.train --model gpt2-large --batch-size 8 --seq-len 1024 --precision fp32 \\
       --backend torch-cuda --steps 20
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from .. import registry as bk
from ..result import ERROR, FAILED, OK, UNAVAILABLE, Record

PROBE = "train"
PRECISIONS = ("fp32", "amp-fp16", "amp-bf16")
MODES = ("pretrain", "finetune", "lora")
OFFLOADS = ("none", "cpu", "auto")
BACKENDS = ("torch-cpu", "torch-cuda", "torch-mps", "mlx-cpu", "mlx-gpu")

#: transformers configurations of the released checkpoints' sizes (random weights, no download)
HF_MODELS = {
    "gpt2": ("gpt2", dict(n_embd=768, n_layer=12, n_head=12)),
    "gpt2-medium": ("gpt2", dict(n_embd=1024, n_layer=24, n_head=16)),
    "gpt2-large": ("gpt2", dict(n_embd=1280, n_layer=36, n_head=20)),
    "gpt2-xl": ("gpt2", dict(n_embd=1600, n_layer=48, n_head=25)),
    "whisper-medium": ("whisper", dict(d_model=1024, encoder_layers=24, decoder_layers=24, encoder_attention_heads=16,
                                       decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096)),
    "whisper-large": ("whisper", dict(d_model=1280, encoder_layers=32, decoder_layers=32, encoder_attention_heads=20,
                                      decoder_attention_heads=20, encoder_ffn_dim=5120, decoder_ffn_dim=5120)),
    # test sizes: milliseconds per step on a CPU
    "tiny-gpt2": ("gpt2", dict(n_embd=64, n_layer=2, n_head=2, vocab_size=512, n_positions=128, bos_token_id=1, eos_token_id=2)),
    "tiny-whisper": ("whisper", dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                                     decoder_attention_heads=2, encoder_ffn_dim=128, decoder_ffn_dim=128,
                                     vocab_size=512, max_source_positions=50, max_target_positions=64,
                                     pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)),
}
#: the minimal GPT-2's sizes (gapbench.models.gpt2_spec), by the same names
MINIMAL = {"gpt2": "gpt2", "gpt2-medium": "gpt2-medium", "gpt2-large": "gpt2-large", "gpt2-xl": "gpt2-xl",
           "tiny-gpt2": "tiny"}
MODELS = tuple(HF_MODELS)


class CaseError(Exception):
    """A case that cannot run as asked (a row with this reason; the sweep goes on)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass
class Case:
    model: str
    backend: str
    precision: str = "fp32"
    batch_size: int = 8
    seq_len: int = 1024  # tokens per sequence (GPT-2) or label tokens (Whisper's decoder)
    mode: str = "pretrain"
    impl: str = ""  # "hf" (transformers) or "minimal"; "" picks hf for torch, minimal for mlx
    offload: str = "none"
    steps: int = 20  # timed harness steps (the plain and no-sampler arms get as many)
    warmup: int = 3
    warmup_s: float = 3.0  # and at least this long
    rounds: int = 2
    plain: bool = True
    checkpoint: str | None = None
    data: str | None = None
    tokenizer: str | None = None
    sample_interval_s: float = 0.1
    lr: float = 1e-4
    seed: int = 0
    roofline: dict = field(default_factory=dict)  # from --roofline FILE: {dtype: flops_per_s}
    capacity_bytes: int | None = None  # override of the device capacity (tests, what-if)

    def label(self) -> str:
        extra = "" if self.offload == "none" else f" offload={self.offload}"
        return (f"{self.model}[{self.impl or '?'}] {self.backend} {self.precision} b{self.batch_size}x{self.seq_len} "
                f"{self.mode}{extra}")

    def resolved(self) -> "Case":
        impl = self.impl or ("minimal" if self.backend.startswith("mlx") else "hf")
        return replace(self, impl=impl)


# ============================================================== data
def byte_tokens(text: str, vocab: int) -> np.ndarray:
    """Token ids without a tokenizer: the UTF-8 bytes (0-255), folded into the vocabulary.
    Used when no local tokenizer is given; the record says so."""
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64) % vocab


def load_local(path: str, kind: str, vocab: int, tokenizer: str | None, n_mels: int = 80, frames: int = 3000):
    """Real data from a local path: a `datasets` directory (save_to_disk) or a .txt file.
    Text: a "text" (or "sentence") column. Audio: an "audio" column of {"array", "sampling_rate"}
    plus a "sentence" or "text" column for the labels. Returns (items, description)."""
    p = Path(path)
    if not p.exists():
        raise CaseError(ERROR, f"--data {path}: no such file or directory")
    tok = None
    if tokenizer:
        try:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
        except Exception as e:
            raise CaseError(ERROR, f"--tokenizer {tokenizer}: cannot load a local tokenizer ({e})") from None
    encode = (lambda s: np.asarray(tok(s)["input_ids"], dtype=np.int64) % vocab) if tok else (lambda s: byte_tokens(s, vocab))
    how = f"tokenizer {tokenizer}" if tok else "UTF-8 bytes as token ids (no --tokenizer given)"
    if p.is_file() and kind == "text":
        return {"tokens": encode(p.read_text(encoding="utf-8"))}, f"text file {p} ({how})"
    try:
        import datasets
    except ImportError:
        raise CaseError(UNAVAILABLE, "reading a dataset directory needs `datasets` (pip install datasets)") from None
    try:
        ds = datasets.load_from_disk(str(p))
    except Exception as e:
        raise CaseError(ERROR, f"--data {path}: not a dataset saved with save_to_disk ({e})") from None
    if isinstance(ds, datasets.DatasetDict):
        ds = ds["train"] if "train" in ds else ds[next(iter(ds))]
    cols = ds.column_names
    tcol = next((c for c in ("text", "sentence") if c in cols), None)
    if kind == "text":
        if tcol is None:
            raise CaseError(ERROR, f"--data {path}: needs a 'text' or 'sentence' column (has {cols})")
        return {"tokens": np.concatenate([encode(t) for t in ds[tcol]])}, f"dataset {p} [{tcol}] ({how})"
    if "audio" not in cols or tcol is None:
        raise CaseError(ERROR, f"--data {path}: Whisper needs 'audio' and 'sentence'/'text' columns (has {cols})")
    from transformers import WhisperFeatureExtractor

    sr = 16000
    fe = WhisperFeatureExtractor(feature_size=n_mels, sampling_rate=sr, chunk_length=frames * 160 // sr)
    feats, labels = [], []
    for row in ds:
        a = row["audio"]
        if hasattr(a, "get_all_samples"):  # datasets >= 4 decodes Audio columns with torchcodec
            smp = a.get_all_samples()
            a = {"array": np.asarray(smp.data).mean(axis=0), "sampling_rate": smp.sample_rate}
        if int(a["sampling_rate"]) != sr:
            raise CaseError(ERROR, f"--data {path}: audio must be sampled at {sr} Hz (got {a['sampling_rate']}); resample it first")
        feats.append(fe(np.asarray(a["array"], dtype=np.float32), sampling_rate=sr, return_tensors="np")["input_features"][0])
        labels.append(encode(row[tcol]))
    return {"features": feats, "labels": labels}, f"dataset {p} (audio -> log-mel, labels: {how})"


def make_batches(case: Case, family: str, vocab: int, n_mels: int, frames: int, rng: np.random.Generator, n: int = 4):
    """`n` host batches as numpy arrays: synthetic by default, from --data when given."""
    B, T = case.batch_size, case.seq_len
    real, desc = (None, "synthetic (uniform random token ids" + (", Gaussian log-mel features)" if family == "whisper" else ")"))
    if case.data:
        real, desc = load_local(case.data, "audio" if family == "whisper" else "text", vocab, case.tokenizer, n_mels, frames)
    out = []
    for i in range(n):
        if family == "whisper":
            if real is None:
                feats = rng.standard_normal((B, n_mels, frames), dtype=np.float32)
                labels = rng.integers(3, vocab, (B, T))
            else:
                idx = [(i * B + j) % len(real["features"]) for j in range(B)]
                feats = np.stack([real["features"][j] for j in idx]).astype(np.float32)
                labels = np.stack([np.resize(real["labels"][j], T) if len(real["labels"][j]) else np.zeros(T, np.int64)
                                   for j in idx])
            out.append({"input_features": feats, "labels": labels.astype(np.int64)})
        else:
            if real is None:
                toks = rng.integers(0, vocab, (B, T))
            else:
                t = real["tokens"]
                if len(t) < T + 1:
                    t = np.resize(t, T + 1)
                starts = rng.integers(0, len(t) - T, B) if len(t) > T else np.zeros(B, np.int64)
                toks = np.stack([t[s:s + T] for s in starts])
            out.append({"input_ids": toks.astype(np.int64)})
    return out, desc


# ============================================================== torch workloads
class TorchWorkload:
    """A torch model, its optimizer and device batches, with the three phases of a step."""

    def __init__(self, case: Case, rng: np.random.Generator):
        import torch

        self.torch, self.case = torch, case
        self.device = {"torch-cpu": "cpu", "torch-cuda": "cuda", "torch-mps": "mps"}[case.backend]
        self.notes: list[str] = []
        torch.manual_seed(case.seed)
        if case.impl == "minimal":
            if case.model not in MINIMAL:
                raise CaseError(UNAVAILABLE, f"the minimal implementation is GPT-2 only (not {case.model}); use --impl hf")
            from ..models.gpt2_spec import SIZES
            from ..models.gpt2_torch import GPT2

            self.spec = SIZES[MINIMAL[case.model]]
            self.family, self.vocab = "gpt2", self.spec.vocab
            if case.seq_len > self.spec.n_ctx:
                raise CaseError(ERROR, f"--seq-len {case.seq_len} exceeds the model's context of {self.spec.n_ctx}")
            if case.checkpoint:
                raise CaseError(UNAVAILABLE, "--checkpoint loads transformers checkpoints; use --impl hf")
            model = GPT2(self.spec)
            self.loss_fn = lambda m, b: m.loss(b["input_ids"][:, :-1], b["input_ids"][:, 1:])
            n_mels = frames = 0
        else:
            model, n_mels, frames = self._build_hf()
            if self.family == "whisper":
                self.loss_fn = lambda m, b: m(input_features=b["input_features"], labels=b["labels"]).loss
            else:
                self.loss_fn = lambda m, b: m(input_ids=b["input_ids"], labels=b["input_ids"]).loss
        self.params = sum(p.numel() for p in model.parameters())
        if case.mode == "lora":
            model = self._lora(model)
        self.trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        self.model_cpu = model
        self.n_mels, self.frames = n_mels, frames
        self.host_batches, self.data_desc = make_batches(case, self.family, self.vocab, n_mels, frames, rng)

    def _build_hf(self):
        try:
            import transformers
        except ImportError:
            raise CaseError(UNAVAILABLE, "transformers is not installed (pip install 'gapbench[train]')") from None
        case = self.case
        self.family, kw = HF_MODELS[case.model]
        if self.family == "gpt2":
            cfg = transformers.GPT2Config(**kw)
            self.vocab, ctx = cfg.vocab_size, cfg.n_positions
            if case.seq_len > ctx:
                raise CaseError(ERROR, f"--seq-len {case.seq_len} exceeds {case.model}'s context of {ctx}")
            cls = transformers.GPT2LMHeadModel
        else:
            cfg = transformers.WhisperConfig(num_mel_bins=80, **kw)
            self.vocab, ctx = cfg.vocab_size, cfg.max_target_positions
            if case.seq_len > ctx:
                raise CaseError(ERROR, f"--seq-len {case.seq_len} (label tokens) exceeds {case.model}'s decoder context of {ctx}")
            cls = transformers.WhisperForConditionalGeneration
        if case.checkpoint:
            try:
                model = cls.from_pretrained(case.checkpoint, local_files_only=True)
            except Exception as e:
                raise CaseError(ERROR, f"--checkpoint {case.checkpoint}: cannot load a local {cls.__name__} ({e})") from None
            cfg = model.config
            self.vocab = cfg.vocab_size
        else:
            model = cls(cfg)
        model.config.use_cache = False
        n_mels = getattr(cfg, "num_mel_bins", 0)
        frames = 2 * getattr(cfg, "max_source_positions", 0)
        return model, n_mels, frames

    def _lora(self, model):
        try:
            import peft
        except ImportError:
            raise CaseError(UNAVAILABLE, "LoRA needs peft (pip install peft)") from None
        targets = {"gpt2": ["c_attn"], "whisper": ["q_proj", "v_proj"]}[self.family]
        if self.case.impl == "minimal":
            targets = ["qkv"]
        cfg = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=targets)
        self.notes.append(f"LoRA r=8 alpha=16 on {','.join(targets)}")
        return peft.get_peft_model(model, cfg)

    # ---- device placement, precision, optimizer
    def prepare(self):
        torch, case = self.torch, self.case
        self.pg = None
        if case.offload == "cpu":
            self.model = self._fsdp_offload(self.model_cpu)
        else:
            self.model = self.model_cpu.to(self.device)
        self.model.train()
        self.batches = [{k: torch.from_numpy(v).to(self.device) for k, v in b.items()} for b in self.host_batches]
        params = [p for p in self.model.parameters() if p.requires_grad]
        fused = {"fused": True} if self.device == "cuda" and case.offload == "none" else {}
        self.opt = torch.optim.AdamW(params, lr=case.lr, **fused)
        self.scaler = None
        if case.precision == "fp32":
            self.autocast = contextlib.nullcontext
        else:
            dt = torch.float16 if case.precision == "amp-fp16" else torch.bfloat16
            dev = "cuda" if self.device == "cuda" else self.device
            try:
                with torch.autocast(dev, dtype=dt):
                    pass
            except Exception as e:
                raise CaseError(UNAVAILABLE, f"torch autocast has no {case.precision} on {dev}: {e}") from None
            self.autocast = lambda: torch.autocast(dev, dtype=dt)
            if case.precision == "amp-fp16":
                self.scaler = torch.amp.GradScaler(dev)

    def _fsdp_offload(self, model):
        """PyTorch FSDP2 with CPU offload in one process: parameters, gradients and AdamW state live
        in host memory, each block's weights are copied to the device for its forward/backward
        and the optimizer steps on the CPU (ZeRO-Offload's split)."""
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

        if not dist.is_initialized():
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            dist.init_process_group("nccl" if self.device == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                                    rank=0, world_size=1)
            self.pg = True
        mesh = init_device_mesh(self.device, (1,))
        policy = CPUOffloadPolicy(pin_memory=self.device == "cuda")
        base = model.base_model.model if hasattr(model, "base_model") and hasattr(model.base_model, "model") else model
        if self.case.impl == "minimal":
            blocks = list(base.blocks)
        elif self.family == "gpt2":
            blocks = list(base.transformer.h)
        else:
            blocks = list(base.model.encoder.layers) + list(base.model.decoder.layers)
        for b in blocks:
            fully_shard(b, mesh=mesh, offload_policy=policy)
        fully_shard(model, mesh=mesh, offload_policy=policy)
        self.notes.append("FSDP2 CPU offload (one process): params, grads and AdamW state in host memory")
        return model

    def close(self):
        if getattr(self, "pg", None):
            import torch.distributed as dist

            dist.destroy_process_group()

    def sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()
        elif self.device == "mps":
            self.torch.mps.synchronize()

    # ---- the step, phase by phase (each boundary synchronised)
    def forward(self, i):
        with self.autocast():
            self.loss = self.loss_fn(self.model, self.batches[i % len(self.batches)])

    def backward(self, i):
        (self.scaler.scale(self.loss) if self.scaler else self.loss).backward()

    def optimizer(self, i):
        if self.scaler:
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def loss_value(self) -> float:
        return float(self.loss.detach().float().cpu())

    def timed_step(self, k: int) -> tuple[float, tuple[float, float, float]]:
        """One step timed as the plain loop times it (host clock, one sync at the end), with the
        phase split from device events recorded between the phases: no sync inside the step,
        so the CPU keeps issuing ahead of the GPU exactly as it does without the harness. On the
        CPU (synchronous) the phase boundaries are host timestamps."""
        torch = self.torch
        ev = None
        if self.device == "cuda":
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        elif self.device == "mps" and hasattr(torch.mps, "event"):
            ev = [torch.mps.event.Event(enable_timing=True) for _ in range(4)]
        self.sync()
        t = [time.perf_counter()]
        for i, phase in enumerate((self.forward, self.backward, self.optimizer)):
            if ev:
                ev[i].record()
            phase(k)
            if not ev:
                t.append(time.perf_counter())
        if ev:
            ev[3].record()
        self.sync()
        wall = time.perf_counter() - t[0]
        if ev:
            return wall, tuple(ev[i].elapsed_time(ev[i + 1]) * 1e-3 for i in range(3))
        return t[3] - t[0], (t[1] - t[0], t[2] - t[1], t[3] - t[2])

    @property
    def phase_clock(self) -> str:
        return "device_events" if self.device == "cuda" or (self.device == "mps" and hasattr(self.torch.mps, "event")) else "host_wall"

    def plain(self, steps: int) -> list[float]:
        from ..plain.train import torch_steps

        return torch_steps(self.model, self.loss_fn, self.batches, self.opt, self.sync, steps, self.autocast, self.scaler)

    def flops_per_step(self) -> tuple[float | None, str]:
        if self.case.impl == "minimal":
            f = self.spec.train_flops(self.case.batch_size, self.case.seq_len - 1)
            return (f if self.case.mode != "lora" else None), "analytic (models/gpt2_spec.py)"
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as fc:
            self.forward(0)
            self.backward(0)
        self.opt.zero_grad(set_to_none=True)
        self.sync()
        how = "torch.utils.flop_counter on one extra step (matmuls, convolutions, attention kernels torch registers"
        how += "; the CPU's fused SDPA is not counted)" if self.device == "cpu" else ")"
        return float(fc.get_total_flops()) or None, how

    def kernels_per_step(self) -> int | None:
        """GPU kernels (and copies/memsets) one training step launches, counted by torch's
        profiler on one extra step after every timing is done; None off CUDA. The report multiplies it by the
        native launch cost to estimate a step's launch overhead (labelled as an estimate)."""
        if self.device != "cuda":
            return None
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            self.forward(0)
            self.backward(0)
            self.optimizer(0)
            self.sync()
        dev = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
        self.kernel_time_s = sum(e.time_range.elapsed_us() for e in dev) * 1e-6  # busy time on the GPU
        return len(dev)

    def items_per_step(self) -> tuple[int, str]:
        if self.family == "whisper":
            return self.case.batch_size, "samples"
        T = self.case.seq_len - 1 if self.case.impl == "minimal" else self.case.seq_len
        return self.case.batch_size * T, "tokens"

    def memory_peaks(self) -> dict:
        if self.device == "cuda":
            t = self.torch.cuda
            return {"torch_cuda_max_allocated_bytes": t.max_memory_allocated(), "torch_cuda_max_reserved_bytes": t.max_memory_reserved()}
        if self.device == "mps":
            return {"torch_mps_driver_bytes_end": self.torch.mps.driver_allocated_memory()}
        return {}


# ============================================================== MLX workload
class MLXWorkload:
    """The minimal GPT-2 in MLX. MLX computes value and gradient in one call, so the backward time
    is derived: (forward + backward) minus the median of separately timed forward passes."""

    def __init__(self, case: Case, rng: np.random.Generator):
        try:
            import mlx.core as mx
            import mlx.nn as nn
            import mlx.optimizers as optim
        except ImportError as e:
            raise CaseError(UNAVAILABLE, f"mlx not installed ({e})") from None
        if case.impl != "minimal":
            raise CaseError(UNAVAILABLE, "transformers has no MLX models: MLX runs gapbench's minimal GPT-2 (--impl minimal)")
        if case.model not in MINIMAL:
            raise CaseError(UNAVAILABLE, f"MLX runs the minimal GPT-2 only (not {case.model})")
        if case.precision != "fp32":
            raise CaseError(UNAVAILABLE, "MLX has no automatic mixed precision (autocast); gapbench runs MLX in fp32")
        if case.mode == "lora":
            raise CaseError(UNAVAILABLE, "LoRA on MLX is not implemented in gapbench (torch + peft has it)")
        if case.offload == "cpu":
            raise CaseError(UNAVAILABLE, "MLX has no CPU offload (unified memory on Apple Silicon)")
        if case.checkpoint:
            raise CaseError(UNAVAILABLE, "--checkpoint loads transformers checkpoints (torch)")
        from ..models.gpt2_mlx import GPT2, n_params
        from ..models.gpt2_spec import SIZES

        self.mx, self.case, self.notes = mx, case, []
        mx.set_default_device(mx.cpu if case.backend == "mlx-cpu" else mx.gpu)
        self.spec = SIZES[MINIMAL[case.model]]
        if case.seq_len > self.spec.n_ctx:
            raise CaseError(ERROR, f"--seq-len {case.seq_len} exceeds the model's context of {self.spec.n_ctx}")
        self.family, self.vocab = "gpt2", self.spec.vocab
        self.model = GPT2(self.spec, seed=case.seed)
        mx.eval(self.model.parameters())
        self.matmul_precision = mlx_fp32_matmul_precision(mx)
        if self.matmul_precision != "fp32":
            self.notes.append(f"MLX on this device computes fp32 matmuls at {self.matmul_precision} precision "
                              "(measured against float64): its fp32 rows are not fp32 arithmetic")
        self.params = self.trainable = n_params(self.model)
        self.opt = optim.AdamW(learning_rate=case.lr)
        self.loss_and_grad = nn.value_and_grad(self.model, lambda x, y: self.model.loss(x, y))
        self.host_batches, self.data_desc = make_batches(case, "gpt2", self.vocab, 0, 0, rng)

    def prepare(self):
        mx = self.mx
        self.batches = [(mx.array(b["input_ids"][:, :-1]), mx.array(b["input_ids"][:, 1:])) for b in self.host_batches]
        mx.eval(*[t for b in self.batches for t in b])

    def close(self):
        pass

    def sync(self):
        self.mx.synchronize()

    def forward_only(self, i):
        x, y = self.batches[i % len(self.batches)]
        self.loss = self.model.loss(x, y)
        self.mx.eval(self.loss)

    def fwd_bwd(self, i):
        x, y = self.batches[i % len(self.batches)]
        self.loss, self.grads = self.loss_and_grad(x, y)
        self.mx.eval(self.loss, self.grads)

    def optimizer(self, i):
        self.opt.update(self.model, self.grads)
        self.mx.eval(self.model.parameters(), self.opt.state)

    def fused_step(self, i):
        x, y = self.batches[i % len(self.batches)]
        self.loss, grads = self.loss_and_grad(x, y)
        self.opt.update(self.model, grads)
        self.mx.eval(self.loss, self.model.parameters(), self.opt.state)

    def loss_value(self) -> float:
        return float(self.loss.item())

    def plain(self, steps: int) -> list[float]:
        from ..plain.train import mlx_steps

        return mlx_steps(self.model, self.loss_and_grad, self.batches, self.opt, steps)

    def flops_per_step(self):
        return self.spec.train_flops(self.case.batch_size, self.case.seq_len - 1), "analytic (models/gpt2_spec.py)"

    def items_per_step(self):
        return self.case.batch_size * (self.case.seq_len - 1), "tokens"

    def memory_peaks(self) -> dict:
        return {"mlx_peak_bytes": self.mx.get_peak_memory()}


def mlx_fp32_matmul_precision(mx) -> str:
    """"fp32" or "tf32": what an fp32 matmul on MLX's default device really computes. TF32 keeps
    10 mantissa bits, so against float64 its relative error is ~1e-3; true fp32 gives ~1e-6."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    got = np.array(mx.matmul(mx.array(a32), mx.array(b32))).astype(np.float64)
    ref = a32.astype(np.float64) @ b32.astype(np.float64)
    err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
    return "fp32" if err < 1e-5 else "tf32"


# ============================================================== one case
def _backend_device(backend: str) -> dict:
    info = bk.info(backend)
    return dict(info.device)


def _timed(fn, i, sync) -> float:
    t0 = time.perf_counter()
    fn(i)
    sync()
    return time.perf_counter() - t0


def _is_oom(e: BaseException) -> bool:
    t = f"{type(e).__name__}: {e}".lower()
    return "out of memory" in t or "outofmemory" in t or "malloc" in t and "metal" in t


def run_case(case: Case, progress=None) -> list[Record]:
    """Every record of one case. Never raises for a case-level problem: those become rows."""
    case = case.resolved()
    base = dict(probe=PROBE, backend=case.backend, variant=case.impl)
    params = {"case": asdict(case), "label": case.label()}
    info = bk.info(case.backend)
    if not info.available:
        return [Record(**base, metric="step", status=UNAVAILABLE, reason=info.reason, params=params)]
    try:
        return _run_case(case, base, params, progress)
    except CaseError as e:
        return [Record(**base, metric="step", status=e.status, reason=e.reason, params=params, device=_backend_device(case.backend))]
    except Exception as e:  # an OOM or a crash inside one case is a row; the sweep goes on
        oom = _is_oom(e)
        params["oom"] = oom
        reason = ("out of memory: " if oom else f"{type(e).__name__}: ") + str(e).strip().splitlines()[0][:400]
        params["traceback"] = traceback.format_exc()[-4000:]
        return [Record(**base, metric="step", status=ERROR, reason=reason, params=params, device=_backend_device(case.backend))]


def _run_case(case: Case, base: dict, params: dict, progress) -> list[Record]:
    from .. import memplan
    from ..monitor import NVML, Energy, Sampler

    rng = np.random.default_rng(case.seed)
    device = _backend_device(case.backend)
    wl = (MLXWorkload if case.backend.startswith("mlx") else TorchWorkload)(case, rng)
    plan = memplan.plan(wl.params, wl.trainable, case.backend, case.capacity_bytes)
    params.update(memory_plan=plan.to_dict(), params=wl.params, trainable=wl.trainable, data=wl.data_desc)
    offload = case.offload
    if offload == "auto":
        offload = "cpu" if plan.scenario == memplan.DOES_NOT_FIT and case.backend in ("torch-cuda",) else "none"
        wl.case = case = replace(case, offload=offload)
        params["case"]["offload"] = f"auto -> {offload}"
    wl.prepare()
    is_mlx = isinstance(wl, MLXWorkload)
    nvml = NVML() if info_class(case.backend) == "cuda" else None
    if nvml is not None and nvml.ok:
        device.update(nvml=nvml.info())
    records: list[Record] = []
    say = progress or (lambda text: None)
    losses: list[float] = []

    def check_loss(where: str):
        v = wl.loss_value()
        losses.append(v)
        if not math.isfinite(v):
            raise CaseError(FAILED, f"loss is {v} at {where}: the step is broken, nothing was timed")

    # ---- 1. correctness: the first loss of a random model is ~ln(vocab)
    if is_mlx:
        wl.fwd_bwd(0)
        wl.optimizer(0)
    else:
        wl.forward(0)
        wl.backward(0)
        wl.optimizer(0)
    wl.sync()
    check_loss("the first step")
    expect = math.log(wl.vocab)
    verified, detail = True, f"every step's loss finite; first loss {losses[0]:.3f}"
    if not case.checkpoint and not case.data:
        ok = abs(losses[0] - expect) < 0.25 * expect
        detail += f" vs ln(vocab) = {expect:.3f} for a random-weight model ({'ok' if ok else 'FAILED'})"
        if not ok:
            return [Record(**base, metric="step", status=FAILED, verified=False, verify_detail=detail,
                           reason="first loss of a random-weight model is far from ln(vocab): the model or its loss is wrong",
                           params=params, device=device)]

    # ---- 2. warm-up (reported apart)
    # At least `warmup` steps and `warmup_s` seconds: a GPU needs seconds of load before its
    # clocks and power settle (seen on an H200: 150 W -> 360 W over the first 1.5 s of Whisper
    # bf16 steps, which ran 20% slower meanwhile), however short the step.
    warm = []
    t_warm = time.perf_counter()
    i = 0
    while i < case.warmup or (time.perf_counter() - t_warm < case.warmup_s and i < 10_000):
        say(f"warm-up {i + 1} (>= {case.warmup} steps and {case.warmup_s:g} s)")
        t0 = time.perf_counter()
        if is_mlx:
            wl.fwd_bwd(i)
            wl.optimizer(i)
        else:
            wl.forward(i)
            wl.backward(i)
            wl.optimizer(i)
        wl.sync()
        warm.append(time.perf_counter() - t0)
        check_loss(f"warm-up step {i}")
        i += 1
    flops, flops_how = wl.flops_per_step()
    items, item_unit = wl.items_per_step()
    work = {"items": items}
    if flops:
        work["flops"] = flops
    params.update(flops_source=flops_how, item_unit=item_unit, notes=wl.notes)

    # ---- 3. interleaved rounds: harness (sampler on), harness (sampler paused), plain loop
    fwd, bwd, opt, step, fwdbwd = [], [], [], [], []
    nosamp, plain = [], []
    arms = ["harness", "nosampler", "plain"] if case.plain else ["harness"]
    per_round = [case.steps // case.rounds + (1 if r < case.steps % case.rounds else 0) for r in range(case.rounds)]
    energy = Energy(info_class(case.backend), nvml)
    sampler = Sampler(case.backend, case.sample_interval_s, nvml)
    done = 0
    total = case.steps * len(arms)
    with sampler:
        wl.sync()
        energy.start()
        for r, n in enumerate(per_round):
            order = arms if r % 2 == 0 else arms[::-1]
            for arm in order:
                if arm == "plain":
                    sampler.pause()
                    plain += wl.plain(n)
                    sampler.resume()
                    done += n
                    say(f"round {r + 1}/{case.rounds} plain loop ({done}/{total} steps)")
                    continue
                if arm == "nosampler":
                    sampler.pause()
                for i in range(n):
                    k = len(step) + len(nosamp)
                    sampler.mark(f"step {k}")
                    wl.sync()
                    if is_mlx:
                        wall = _timed(wl.fused_step, k, wl.sync)
                    else:
                        wall, (a, b, c) = wl.timed_step(k)
                    check_loss(f"step {k}")
                    if arm == "nosampler":
                        nosamp.append(wall)
                    else:
                        step.append(wall)
                        if not is_mlx:
                            fwd.append(a)
                            bwd.append(b)
                            opt.append(c)
                    done += 1
                    say(f"round {r + 1}/{case.rounds} {arm} step {i + 1}/{n} ({done}/{total}) loss {losses[-1]:.3f}")
                if arm == "nosampler":
                    sampler.resume()
        wl.sync()
        energy.stop()
        if is_mlx:
            # MLX evaluates a whole step lazily in one mx.eval, so its phases are timed in extra
            # steps evaluated phase by phase (value_and_grad, then the update), and the forward
            # alone in extra passes; backward is derived. The step record keeps the fused step
            # users run (on MLX-CUDA the split steps measured up to 5% faster than fused ones).
            for i in range(case.steps):
                say(f"MLX phase-split step {i + 1}/{case.steps}")
                fwdbwd.append(_timed(wl.fwd_bwd, i, wl.sync))
                opt.append(_timed(wl.optimizer, i, wl.sync))
                check_loss(f"phase-split step {i}")
            wl.forward_only(0)  # untimed: the first forward-only graph is built and allocated here
            for i in range(max(case.steps // 2, 3)):
                say(f"MLX forward-only pass {i + 1}")
                fwd.append(_timed(wl.forward_only, i, wl.sync))
            med = float(np.median(fwd))
            bwd = [max(x - med, 0.0) for x in fwdbwd]
            params["mlx_split_step_s"] = [a + c for a, c in zip(fwdbwd, opt)]
    tl = sampler.timeline()
    steps_run = len(step) + len(nosamp) + len(plain)
    params.update(
        energy=energy.result(steps_run),
        memory_peaks=dict(wl.memory_peaks(), **_timeline_peaks(tl)),
        timeline=tl,
        losses=losses,
        throttle_reasons=nvml.throttle_reasons() if nvml is not None and nvml.ok else [],
        roofline=_roofline_for(case),
    )
    if not is_mlx:
        # After all timing: once CUPTI has profiled a process, launches in it stay slower (on
        # the H200 a launch-bound GPT-2 bf16 step went from 34 to 52 ms when counted first).
        params["kernels_per_step"] = wl.kernels_per_step()
        if params["kernels_per_step"] is not None:
            params["kernel_time_per_step_s"] = wl.kernel_time_s  # sum of the profiled kernels' durations
    wl.close()
    common = dict(base, device=device)
    pclock = "host_wall" if is_mlx else wl.phase_clock
    rec = lambda metric, samples, op, clock="host_wall", **kw: Record(  # noqa: E731
        **common, metric=metric, samples_s=samples, op=op, clock=clock, **kw)
    how = ("value_and_grad + update, one mx.eval (as the plain loop)" if is_mlx else
           "host clock from a sync to the sync after the optimizer, no sync inside (as the plain loop)")
    records.append(rec("step", step, f"one training step: forward + backward + AdamW; {how}",
                       work=work, params=params, verified=verified, verify_detail=detail, warmup=len(warm)))
    records.append(rec("forward", fwd, "forward pass incl. loss" + (" (timed apart, MLX)" if is_mlx else ""),
                       clock=pclock, params={"label": case.label()}))
    records.append(rec("backward", bwd, "backward pass" + (": derived, (forward+backward in phase-split steps) - median(forward)" if is_mlx else ""),
                       clock=pclock, params={"label": case.label(), "derived": is_mlx}))
    records.append(rec("optimizer", opt, "AdamW step" + (" (its own mx.eval, in the phase-split steps)" if is_mlx else " + zero_grad"),
                       clock=pclock, params={"label": case.label()}))
    if warm:
        records.append(rec("step_warmup", warm, "warm-up steps, in order (not in the statistics of step)",
                           params={"label": case.label()}))
    if nosamp:
        records.append(rec("step_nosampler", nosamp, "harness step with the memory sampler paused", work=work,
                           params={"label": case.label()}))
    if plain:
        records.append(rec("plain_step", plain, "plain loop step (gapbench/plain/train.py): one sync per step",
                           work=work, params={"label": case.label()}))
    return records


def info_class(backend: str) -> str:
    return bk.info(backend).device_class


def _timeline_peaks(tl: dict) -> dict:
    out = {}
    for k, col in tl["columns"].items():
        vals = [v for v in col if v is not None]
        if k.endswith("_bytes") and vals:
            out[f"{k[:-6]}_peak_bytes" if not k.endswith("peak_bytes") else k] = max(vals)
    return out


def _roofline_for(case: Case) -> dict:
    key = {"fp32": "fp32", "amp-fp16": "fp16", "amp-bf16": "bf16"}[case.precision]
    r = case.roofline.get(key)
    return {"dtype": key, **r} if r else {}


# ============================================================== sweep, processes
def run_in_subprocess(case, timeout_s: float, progress=None, module: str = "gapbench.probes.train",
                      error_record=None) -> list[Record]:
    """One case (a dataclass) in a fresh Python process running `module --worker CASE OUT`: a
    clean memory timeline, and a crash (or the OS killing it for memory) is an error row made by
    `error_record(reason)` instead of the end of the sweep."""
    with tempfile.TemporaryDirectory(prefix="gapbench-train-") as d:
        cpath, opath = Path(d) / "case.json", Path(d) / "records.json"
        cpath.write_text(json.dumps(asdict(case)))
        cmd = [sys.executable, "-m", module, "--worker", str(cpath), str(opath)]
        try:
            p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
            tail: list[str] = []
            t_end = time.monotonic() + timeout_s
            for line in p.stderr:  # the worker reports progress one line at a time
                line = line.rstrip("\n")
                if line.startswith("@progress "):
                    if progress:
                        progress(line[len("@progress "):])
                else:
                    tail = (tail + [line])[-40:]
                if time.monotonic() > t_end:
                    p.kill()
                    break
            rc = p.wait(timeout=max(1.0, t_end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            rc = None
        if opath.exists():
            return [Record.from_dict(r) for r in json.loads(opath.read_text())]
        why = "timed out" if rc is None or time.monotonic() > t_end else f"exited with status {rc}"
        if rc is not None and rc < 0:
            why = f"was killed by signal {-rc}" + (" (SIGKILL: often the OS out-of-memory killer)" if rc == -9 else "")
        reason = f"the case's process {why}: " + " | ".join(tail[-3:])[:600]
        if error_record is not None:
            rec = error_record(reason)
            rec.params["stderr_tail"] = tail
            return [rec]
        return [Record(probe=PROBE, backend=case.backend, variant=case.resolved().impl, metric="step", status=ERROR,
                       reason=reason, params={"case": asdict(case.resolved()), "label": case.resolved().label(), "stderr_tail": tail})]


def worker(case_path: str, out_path: str, case_cls=None, run=None) -> int:
    """The child side of run_in_subprocess: read the case, run it, write its records atomically;
    progress goes to stderr as "@progress ..." lines. Other suites pass their Case and runner."""
    from ..result import atomic_write_text

    case = (case_cls or Case)(**json.loads(Path(case_path).read_text()))
    records = (run or run_case)(case, lambda text: print(f"@progress {text}", file=sys.stderr, flush=True))
    atomic_write_text(out_path, json.dumps([r.to_dict() for r in records]))
    return 0


def expand(args_lists: dict, base: dict) -> list[Case]:
    keys = list(args_lists)
    return [Case(**base, **dict(zip(keys, combo))) for combo in itertools.product(*args_lists.values())]


# ============================================================== table
def _ms(r: Record | None) -> str:
    if r is None or r.status != OK:
        return "-"
    s = r.summary()
    return f"{s.median * 1e3:.4g} [{s.p10 * 1e3:.4g}-{s.p90 * 1e3:.4g}]" + ("~" if s.noisy else "")


def build_table(records: list[Record]):
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape("training step: median [p10-p90] ms per step; rates from the median step"))
    for c in ("case", "scenario", "fwd", "bwd", "opt", "step", "items/s", "TFLOP/s", "% roof", "peak mem GiB",
              "J/step", "harness/plain", "sampler on/off"):
        t.add_column(c)
    by_label: dict[str, dict[str, Record]] = {}
    for r in records:
        if r.probe == PROBE:
            by_label.setdefault(r.params.get("label", "?"), {})[r.metric] = r
    for label, m in by_label.items():
        st = m.get("step")
        if st is None:
            continue
        if st.status != OK:
            t.add_row(escape(label), "", "", "", "", f"{st.status}: {escape(st.reason[:90])}", *[""] * 7)
            continue
        p = st.params
        rates = st.rates()
        unit = p.get("item_unit", "items")
        roof = p.get("roofline", {})
        pct = f"{100 * rates['flops_per_s'] / roof['flops_per_s']:.0f}%" if roof and rates.get("flops_per_s") else "-"
        peaks = p.get("memory_peaks", {})
        dev_peak = max([v for k, v in peaks.items() if k.startswith(("torch_cuda_max_reserved", "mlx_peak", "nvml_used"))] or [0])
        mem = f"{dev_peak / 2**30:.1f} dev / {peaks.get('rss_peak_bytes', 0) / 2**30:.1f} rss" if peaks else "-"
        e = p.get("energy", {})
        joules = f"{e['joules_per_step']:.4g}" if e.get("status") == "ok" else "n/a"
        med = st.summary().median
        hp = f"{med / m['plain_step'].summary().median:.3f}" if "plain_step" in m and m["plain_step"].status == OK else "-"
        so = f"{med / m['step_nosampler'].summary().median:.3f}" if "step_nosampler" in m else "-"
        t.add_row(escape(label), p.get("memory_plan", {}).get("scenario", ""), _ms(m.get("forward")),
                  _ms(m.get("backward")), _ms(m.get("optimizer")), _ms(st),
                  f"{rates.get('items_per_s', 0):.4g} {unit}", f"{rates.get('flops_per_s', 0) / 1e12:.3g}" if rates.get("flops_per_s") else "-",
                  pct, mem, joules, hp, so)
    return t


# ============================================================== CLI
def _list(text: str | None, default, allowed, what: str, conv=str) -> list:
    if text is None:
        return list(default)
    items = [s.strip() for s in str(text).split(",") if s.strip()]
    out = []
    for s in items:
        try:
            v = conv(s)
        except ValueError:
            raise ValueError(f"bad {what} {s!r}: expected {conv.__name__}") from None
        if allowed is not None and v not in allowed:
            raise ValueError(f"unknown {what} {s!r}; choose from {', '.join(map(str, allowed))}")
        if conv is int and v < 1:
            raise ValueError(f"{what} must be >= 1, got {v}")
        out.append(v)
    if not out:
        raise ValueError(f"empty {what} list")
    return out


def load_roofline(path: str) -> dict:
    """Peak compute per dtype from a `bench.blas` result file (its measured roofline)."""
    from ..result import load_run

    run = load_run(path)
    roof = run.run.get("roofline") or {}
    out = {}
    for cls, entries in roof.items():
        for k, v in entries.items():
            if k != "bytes_per_s":
                out[k] = {"flops_per_s": v["value"], "from": f"{Path(path).name}: {v['from']}", "device_class": cls}
    if not out:
        raise ValueError(f"{path}: no GEMM roofline in this result file (run python -m bench.blas --ops copy,gemm first)")
    return out


def main(argv: list[str] | None = None, prog: str = "python -m bench.train") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        return worker(argv[1], argv[2])
    from rich.console import Console

    from ..cli import open_run, write_figures

    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gpt2", help=f"comma list of {', '.join(MODELS)} (default gpt2)")
    ap.add_argument("--backend", "--backends", dest="backend", default=None,
                    help=f"comma list of {', '.join(BACKENDS)} (default: torch-cuda, torch-mps or torch-cpu, whichever is here)")
    ap.add_argument("--precision", default="fp32", help=f"comma list of {', '.join(PRECISIONS)}")
    ap.add_argument("--batch-size", default="8", help="comma list, e.g. 4,8,16")
    ap.add_argument("--seq-len", default=None, help="tokens per sequence (GPT-2, default 1024) or label tokens (Whisper, default 128); comma list")
    ap.add_argument("--mode", default="pretrain", help=f"comma list of {', '.join(MODES)} (lora: peft LoRA r=8)")
    ap.add_argument("--impl", default="", choices=["", "hf", "minimal"], help="hf: transformers (torch); minimal: gapbench's GPT-2 (torch and MLX); default hf for torch, minimal for MLX")
    ap.add_argument("--offload", default="none", choices=OFFLOADS, help="cpu: FSDP2 CPU offload; auto: offload when the memory plan says the model state does not fit")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per arm (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up steps, reported apart (default 3)")
    ap.add_argument("--warmup-s", type=float, default=3.0, help="and warm up for at least this many seconds (default 3)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds of harness / no-sampler / plain arms")
    ap.add_argument("--no-plain", action="store_true", help="time the harness arm only (no plain loop, no sampler-off arm)")
    ap.add_argument("--checkpoint", help="a local transformers checkpoint directory (instead of random weights)")
    ap.add_argument("--data", help="local data: a datasets directory (save_to_disk) or a .txt file (default synthetic)")
    ap.add_argument("--tokenizer", help="a local tokenizer directory for --data (default: UTF-8 bytes as ids)")
    ap.add_argument("--roofline", help="a bench.blas result JSON whose measured GEMM peak the FLOP/s are compared with")
    ap.add_argument("--sample-interval", type=float, default=0.1, help="memory sampler period in seconds")
    ap.add_argument("--case-timeout", type=float, default=3600.0, help="seconds before a case's process is stopped")
    ap.add_argument("--in-process", action="store_true", help="run cases in this process (no isolation; for debugging)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="result JSON (default results/train-<time>.json); CSV and figures beside it")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--quick", action="store_true", help="tiny-gpt2 on this machine's first backend, a few steps (a smoke test)")
    ap.add_argument("--list", action="store_true", help="list models and backends, then exit")
    args = ap.parse_args(argv)
    console = Console() if Console().is_terminal else Console(width=200)
    if args.list:
        console.print("models: " + ", ".join(MODELS) + "\nminimal GPT-2 sizes: " + ", ".join(MINIMAL))
        for b in BACKENDS:
            i = bk.info(b)
            console.print(f"  {b}: " + ("available" if i.available else f"unavailable: {i.reason}"), highlight=False)
        return 0
    try:
        if args.quick:
            args.model, args.steps, args.warmup, args.rounds, args.warmup_s = "tiny-gpt2", 4, 1, 2, 0.0
            args.batch_size, args.seq_len = "2", args.seq_len or "64"
        models = _list(args.model, [], MODELS, "model")
        default_backend = next((b for b in ("torch-cuda", "torch-mps", "torch-cpu") if bk.info(b).available), "torch-cpu")
        backends = _list(args.backend, [default_backend], BACKENDS, "backend")
        precisions = _list(args.precision, [], PRECISIONS, "precision")
        batches = _list(args.batch_size, [], None, "batch size", int)
        modes = _list(args.mode, [], MODES, "mode")
        seqs = _list(args.seq_len, [], None, "sequence length", int) if args.seq_len else None
        if args.steps < 1 or args.warmup < 0 or args.warmup_s < 0 or args.rounds < 1 or args.rounds > args.steps:
            raise ValueError("--steps must be >= 1, --warmup >= 0, --warmup-s >= 0, 1 <= --rounds <= --steps")
        roof = load_roofline(args.roofline) if args.roofline else {}
    except (ValueError, OSError) as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    base = dict(impl=args.impl, offload=args.offload, steps=args.steps, warmup=args.warmup, warmup_s=args.warmup_s, rounds=args.rounds,
                plain=not args.no_plain, checkpoint=args.checkpoint, data=args.data, tokenizer=args.tokenizer,
                sample_interval_s=args.sample_interval, seed=args.seed, roofline=roof)
    cases = []
    for model in models:
        seq_default = [128] if HF_MODELS[model][0] == "whisper" else ([64] if model.startswith("tiny") else [1024])
        cases += expand({"backend": backends, "precision": precisions, "batch_size": batches,
                         "seq_len": seqs or seq_default, "mode": modes}, dict(base, model=model))
    writer = open_run(PROBE, args.out, prog, argv, {"cases": len(cases), **{k: v for k, v in base.items() if k != "roofline"},
                                                    "roofline": roof}, backends)
    for n, case in enumerate(cases, 1):
        label = case.resolved().label()
        console.print(f"[bold]case {n}/{len(cases)}[/bold] {label}", highlight=False)
        last = [0.0]

        def progress(text, _label=label):
            now = time.monotonic()
            if console.is_terminal and now - last[0] > 0.2:
                console.print(f"  {text}", highlight=False, end="\r")
                last[0] = now

        recs = run_case(case, progress) if args.in_process else run_in_subprocess(case, args.case_timeout, progress)
        writer.extend(recs)
        st = next((r for r in recs if r.metric == "step"), None)
        if st is not None:
            msg = f"step {st.summary().median * 1e3:.4g} ms" if st.status == OK else f"{st.status}: {st.reason}"
            console.print(f"  -> {msg}", highlight=False)
    writer.finish()
    console.print(build_table(writer.records))
    if not args.no_plots:
        write_figures(console, "train_figures", writer)
    console.print(f"results: {writer.path} and {writer.csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
