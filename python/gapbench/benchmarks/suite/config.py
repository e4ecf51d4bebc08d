"""Seed suites: the experiments, the model sizes and datasets they use, and one case."""
from __future__ import annotations

from gapbench.core.names import Backend

from dataclasses import dataclass

PROBE = "suite"
DEVICES = {"cpu": Backend.torch_cpu, "cuda": Backend.torch_cuda, "mps": Backend.torch_mps}

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
