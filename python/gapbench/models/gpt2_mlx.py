"""The minimal GPT-2 in MLX: module for module the model of models/gpt2_torch.py (same
parameter names, so `load_torch_state` copies one into the other)."""
from __future__ import annotations

import math

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from gapbench.models.gpt2_spec import GPT2Spec


class Block(nn.Module):
    def __init__(self, s: GPT2Spec):
        super().__init__()
        self.n_head = s.n_head
        self.ln1 = nn.LayerNorm(s.n_embd)
        self.qkv = nn.Linear(s.n_embd, 3 * s.n_embd)
        self.proj = nn.Linear(s.n_embd, s.n_embd)
        self.ln2 = nn.LayerNorm(s.n_embd)
        self.fc = nn.Linear(s.n_embd, 4 * s.n_embd)
        self.fc_out = nn.Linear(4 * s.n_embd, s.n_embd)

    def __call__(self, x):
        B, T, C = x.shape
        h = C // self.n_head
        q, k, v = mx.split(self.qkv(self.ln1(x)), 3, axis=2)
        q, k, v = (t.reshape(B, T, self.n_head, h).transpose(0, 2, 1, 3) for t in (q, k, v))
        a = mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0 / math.sqrt(h), mask="causal")
        x = x + self.proj(a.transpose(0, 2, 1, 3).reshape(B, T, C))
        return x + self.fc_out(nn.gelu_approx(self.fc(self.ln2(x))))


class GPT2(nn.Module):
    def __init__(self, s: GPT2Spec, seed: int = 0):
        super().__init__()
        self.spec = s
        self.wte = nn.Embedding(s.vocab, s.n_embd)
        self.wpe = nn.Embedding(s.n_ctx, s.n_embd)
        self.blocks = [Block(s) for _ in range(s.n_layer)]
        self.ln_f = nn.LayerNorm(s.n_embd)
        # GPT-2's initialisation, as in the torch model
        mx.random.seed(seed)
        upd = []
        for name, p in _flatten(self.parameters()):
            if p.ndim == 2:
                std = 0.02 / math.sqrt(2 * s.n_layer) if name.endswith(("proj.weight", "fc_out.weight")) else 0.02
                upd.append((name, mx.random.normal(p.shape) * std))
            elif name.endswith("bias"):
                upd.append((name, mx.zeros(p.shape)))
        self.load_weights(upd, strict=False)

    def __call__(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(mx.arange(T))
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.T

    def loss(self, idx, targets):
        logits = self(idx).astype(mx.float32)
        return nn.losses.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="mean")


def _flatten(tree, prefix=""):
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _flatten(v, f"{prefix}{k}.")
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _flatten(v, f"{prefix}{i}.")
    else:
        yield prefix[:-1], tree


def n_params(model: GPT2) -> int:
    return sum(int(p.size) for _, p in _flatten(model.parameters()))


def load_torch_state(model: GPT2, state: dict) -> None:
    """Copy a torch minimal GPT-2's state_dict (tensors or arrays) into the MLX model."""
    weights = [(k, mx.array(np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v)))
               for k, v in state.items()]
    model.load_weights(weights, strict=True)
