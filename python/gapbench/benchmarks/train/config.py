"""Training benchmark: the configuration (models, precisions, modes) and one case."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from gapbench.core.cases import CaseError  # noqa: F401 (raised by the workloads)
from gapbench.core.names import Backend, Family

PROBE = "train"
PRECISIONS = ("fp32", "amp-fp16", "amp-bf16")
MODES = ("pretrain", "finetune", "lora")
OFFLOADS = ("none", "cpu", "auto")
#: torch AdamW: fused (one kernel per step, the harness's default on CUDA), foreach (a few
#: multi-tensor kernels), default (what torch.optim.AdamW() picks: foreach on CUDA)
OPTIMIZERS = ("fused", "foreach", "default")
#: transformers' attention implementation (hf models): sdpa (its default), eager, flash (flash-attn)
ATTENTIONS = ("sdpa", "eager", "flash")
#: torch.compile of the model: none, or a torch.compile mode
COMPILES = ("none", "default", "reduce-overhead", "max-autotune")
BACKENDS = (Backend.torch_cpu, Backend.torch_cuda, Backend.torch_mps, Backend.mlx_cpu, Backend.mlx_gpu)

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

@dataclass
class Case:
    model: str
    backend: Backend
    precision: str = "fp32"
    batch_size: int = 8
    seq_len: int = 1024  # tokens per sequence (GPT-2) or label tokens (Whisper's decoder)
    mode: str = "pretrain"
    impl: str = ""  # "hf" (transformers) or "minimal"; "" picks hf for torch, minimal for mlx
    offload: str = "none"
    optimizer: str = "fused"
    attention: str = "sdpa"
    compile: str = "none"
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

    def __post_init__(self) -> None:
        self.backend = Backend(self.backend)  # a case comes back from JSON (a worker's payload) by name

    def label(self) -> str:
        extra = "" if self.offload == "none" else f" offload={self.offload}"
        extra += "" if self.optimizer == "fused" else f" opt={self.optimizer}"
        extra += "" if self.attention == "sdpa" else f" attn={self.attention}"
        extra += "" if self.compile == "none" else f" compile={self.compile}"
        return (f"{self.model}[{self.impl or '?'}] {self.backend} {self.precision} b{self.batch_size}x{self.seq_len} "
                f"{self.mode}{extra}")

    def resolved(self) -> "Case":
        impl = self.impl or ("minimal" if self.backend.family is Family.mlx else "hf")
        return replace(self, impl=impl)


def load_roofline(path: str) -> dict:
    """Peak compute per dtype from a `bench.blas` result file (its measured roofline)."""
    from gapbench.core.result import load_run

    from gapbench.core.reportkit import ceilings

    run = load_run(path)
    out = {}
    for cls, entries in ceilings(run).items():  # --quick's small GEMMs: bound by overhead, no peak
        for k, v in entries.items():
            if not k.endswith("bytes_per_s"):  # the GEMM peaks, not the copy or stream rates
                out[k] = {"flops_per_s": v["value"], "from": f"{Path(path).name}: {v['from']}", "device_class": cls}
    if not out:
        short = any(not k.endswith("bytes_per_s") for es in (run.run.get("roofline") or {}).values() for k in es)
        why = (" (its GEMMs ran under 50 us, bound by overhead: a --quick run?)" if short else "")
        raise ValueError(f"{path}: no GEMM roofline in this result file{why} (run python -m bench.blas --ops copy,gemm "
                         "first, without --quick)")
    return out
