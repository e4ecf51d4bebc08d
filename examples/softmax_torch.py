"""Softmax over rows, torch's fused kernel against its composite of elementwise ops and reductions.
Runs on torch-cpu and torch-cuda (whichever this machine has):

    gapbench bench examples/softmax_torch.py --quick
"""
import numpy as np
import torch

import gapbench.api as gb


def softmax64(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


softmax = gb.Case(
    "softmax", axes={"m": [4096, 16384], "k": [1024, 4096]}, quick_axes={"m": [256], "k": [1024]},
    inputs=lambda s, rng: [rng.standard_normal((s["m"], s["k"]), dtype=np.float32)],
    reference=softmax64,
    tolerance={"fp32": (1e-5, 1e-9), "fp16": (2e-3, 1e-6), "bf16": (1.6e-2, 1e-5)},  # a few roundings of the output
    elements=lambda s: (s["m"] * s["k"], s["m"] * s["k"]),  # read x, write y
    flops=lambda s: 4.0 * s["m"] * s["k"],
    dtypes=("fp32", "bf16"))


@softmax.impl("torch", baseline=True, text="torch.softmax(x, -1)")
def fused(x):
    return torch.softmax(x, dim=-1)


@softmax.impl("torch", text="exp(x - max) / sum, fp32 inside")
def composite(x):
    xf = x.float()
    e = (xf - xf.amax(dim=-1, keepdim=True)).exp()
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)
