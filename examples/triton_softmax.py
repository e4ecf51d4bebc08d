"""A Triton kernel (the tutorial's fused row softmax) against torch.softmax, on CUDA. On a machine
without a GPU or Triton its row says why:

    gapbench bench examples/triton_softmax.py --quick
"""
import functools

import numpy as np

import gapbench.api as gb


def softmax64(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


softmax = gb.Case(
    "triton_softmax", axes={"m": [4096, 16384], "k": [1024, 4096]}, quick_axes={"m": [1024], "k": [1024]},
    inputs=lambda s, rng: [rng.standard_normal((s["m"], s["k"]), dtype=np.float32)],
    reference=softmax64, tolerance={"fp32": (1e-5, 1e-9), "fp16": (2e-3, 1e-6)},
    elements=lambda s: (s["m"] * s["k"], s["m"] * s["k"]), dtypes=("fp32", "fp16"))


@softmax.impl("torch", baseline=True, text="torch.softmax(x, -1)")
def torch_softmax(x):
    import torch

    return torch.softmax(x, dim=-1)


@functools.cache
def _kernel():
    """The Triton kernel, defined once (imported only where a CUDA row runs it)."""
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        v = tl.load(in_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        e = tl.exp(v - tl.max(v, axis=0))
        tl.store(out_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(out_ptr.dtype.element_ty),
                 mask=cols < n_cols)
    return kernel


@softmax.impl("torch", setup=True, devices=["cuda"], text="Triton: one program per row, fp32 inside")
def triton_rows(x):
    import torch
    import triton

    kernel = _kernel()
    out = torch.empty_like(x)  # kept: the method poisons it before the checked run
    m, k = x.shape
    block = triton.next_power_of_2(k)

    def run():
        kernel[(m,)](out, x, x.stride(0), k, BLOCK=block)
        return out
    return run
