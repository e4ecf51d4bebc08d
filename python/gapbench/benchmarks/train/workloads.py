"""Training benchmark: the workloads, a torch model (transformers or the minimal GPT-2) and
an MLX model (the minimal GPT-2), each with its optimizer, batches and the phases of a step."""
from __future__ import annotations

import contextlib
import time

import numpy as np

from gapbench.core.names import Backend
from gapbench.core.cases import CaseError
from gapbench.core.result import ERROR, UNAVAILABLE
from gapbench.benchmarks.train.config import HF_MODELS, MINIMAL, Case
from gapbench.benchmarks.train.data import make_batches


# ============================================================== torch workloads
class TorchWorkload:
    """A torch model, its optimizer and device batches, with the three phases of a step."""

    def __init__(self, case: Case, rng: np.random.Generator):
        self.attention_used = "the minimal GPT-2's own (torch scaled_dot_product_attention)"
        self.optimizer_used = case.optimizer
        import torch

        self.torch, self.case = torch, case
        self.device = case.backend.device  # torch's name of it: cpu, cuda, mps
        self.notes: list[str] = []
        torch.manual_seed(case.seed)
        if case.impl == "minimal":
            if case.model not in MINIMAL:
                raise CaseError(UNAVAILABLE, f"the minimal implementation is GPT-2 only (not {case.model}); use --impl hf")
            from gapbench.models.gpt2_spec import SIZES
            from gapbench.models.gpt2_torch import GPT2

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
        attn = {"sdpa": "sdpa", "eager": "eager", "flash": "flash_attention_2"}[case.attention]
        if case.attention == "flash":
            import importlib.util

            if importlib.util.find_spec("flash_attn") is None:
                raise CaseError(UNAVAILABLE, "--attention flash needs the flash-attn package (pip install flash-attn)")
        kw = dict(kw, attn_implementation=attn)
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
                model = cls.from_pretrained(case.checkpoint, local_files_only=True, attn_implementation=attn)
            except Exception as e:
                raise CaseError(ERROR, f"--checkpoint {case.checkpoint}: cannot load a local {cls.__name__} ({e})") from None
            cfg = model.config
            self.vocab = cfg.vocab_size
        else:
            model = cls(cfg)
        model.config.use_cache = False
        self.attention_used = getattr(model.config, "_attn_implementation", None) or attn
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
        if case.compile != "none":
            self.model = torch.compile(self.model, mode=None if case.compile == "default" else case.compile)
            self.notes.append(f"torch.compile(mode={case.compile})")
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(params, lr=case.lr, **self.optimizer_kwargs())
        self._params = params
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

    def optimizer_kwargs(self) -> dict:
        """AdamW's keyword arguments for --optimizer; what ran is recorded (self.optimizer_used)."""
        case = self.case
        fusable = self.device == "cuda" and case.offload == "none"
        if case.optimizer == "fused" and fusable:
            self.optimizer_used = "fused"
            return {"fused": True}
        if case.optimizer == "foreach" or (case.optimizer == "fused" and not fusable):
            self.optimizer_used = "foreach" if case.optimizer == "foreach" else "foreach (fused needs CUDA, no offload)"
            return {"foreach": True, "fused": False}
        self.optimizer_used = "default"
        return {}

    def plain(self, steps: int) -> list[float]:
        from gapbench.benchmarks.train.plain import torch_steps

        return torch_steps(self.model, self.loss_fn, self.batches, self.opt, self.sync, steps, self.autocast, self.scaler)

    def plain_defaults(self, steps: int) -> list[float]:
        """The plain loop as a user who keeps the library's defaults writes it: torch.optim.AdamW()
        with no options (its own state), the same model, batches and precision."""
        from gapbench.benchmarks.train.plain import torch_steps

        if getattr(self, "_opt_default", None) is None:
            self._opt_default = self.torch.optim.AdamW(self._params, lr=self.case.lr)
        return torch_steps(self.model, self.loss_fn, self.batches, self._opt_default, self.sync, steps,
                           self.autocast, self.scaler)

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
        self.attention_used = "the minimal GPT-2's own (MLX)"
        self.optimizer_used = "mlx.optimizers.AdamW"
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
        from gapbench.models.gpt2_mlx import GPT2, n_params
        from gapbench.models.gpt2_spec import SIZES

        self.mx, self.case, self.notes = mx, case, []
        mx.set_default_device(mx.cpu if case.backend is Backend.mlx_cpu else mx.gpu)
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
        from gapbench.benchmarks.train.plain import mlx_steps

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
