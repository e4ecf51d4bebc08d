"""The minimal GPT-2 in PyTorch: the same modules, names and order as models/gpt2_mlx.py, so
one set of weights loads into both and the two are compared op for op (tests/test_train.py)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

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

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, s: GPT2Spec):
        super().__init__()
        self.spec = s
        self.wte = nn.Embedding(s.vocab, s.n_embd)
        self.wpe = nn.Embedding(s.n_ctx, s.n_embd)
        self.blocks = nn.ModuleList(Block(s) for _ in range(s.n_layer))
        self.ln_f = nn.LayerNorm(s.n_embd)
        for name, p in self.named_parameters():  # GPT-2's initialisation
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02 / (2 * s.n_layer) ** 0.5 if name.endswith(("proj.weight", "fc_out.weight")) else 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.T  # tied output projection

    def loss(self, idx, targets):
        logits = self(idx)
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
