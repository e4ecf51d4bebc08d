"""vjp_dw: the cotangent of W for y = W x (W row-major m x k) and a cotangent v: dW = v x^T, a
write-bound outer product (paper Figure 7). Frameworks use their own autodiff (torch.func.vjp,
mx.vjp); CuPy computes it directly. Kernels: cuda/ and metal/ (csrc/ops.def).
Run: python -m bench.blas --ops vjp_dw (or vjp)"""
import numpy as np

from gapbench.core import hostpar
from gapbench.ops.gemv import shapes
from gapbench.ops.spec import C, FrameworkImpl, M, OpSpec, T, draw, from_ops_def


def dw_shapes(quick: bool):
    """gemv's shapes but 16384x16384: its 268M-element dW output costs far more host time to check
    (every arm, first and last run, against float64) than the GPU time it measures; the other
    shapes already reach the bandwidth plateau. Run it with --shapes 16384x16384."""
    return [s for s in shapes(quick) if s["m"] * s["k"] < 1 << 28]


def _torch(ad, a):
    v, x = a
    torch = ad.torch
    W = torch.ones(v.shape[0], x.shape[0], dtype=x.dtype, device=x.device)
    _, fn = torch.func.vjp(lambda W_: W_ @ x, W)
    return lambda: fn(v)[0]


def _mlx(ad, a):
    v, x = a
    mx = ad.mx
    W = mx.ones((v.shape[0], x.shape[0]), dtype=x.dtype)
    return lambda: mx.vjp(lambda W_: W_ @ x, [W], [v])[1][0]


SPEC = OpSpec(
    **from_ops_def("vjp_dw"), group="vjp",
    shapes=dw_shapes,
    inputs=lambda s, rng: [draw(rng, s["m"]), draw(rng, s["k"])],
    reference=lambda a: np.outer(a[0], a[1]),
    values64=lambda a: hostpar.outer64(a[0], a[1]),
    reduction=lambda s: 1,
    flops=lambda s: 1.0 * s["m"] * s["k"],
    frameworks=(
        FrameworkImpl(T, "torch.func.vjp(W @ x, W)(v)", _torch),
        FrameworkImpl(C, "cupy.outer(v, x)", lambda ad, a: lambda: ad.cp.outer(a[0], a[1])),
        FrameworkImpl(M, "mx.vjp(W @ x, W, v)", _mlx),
    ),
    test_shapes=({"m": 1, "k": 1}, {"m": 7, "k": 33}, {"m": 64, "k": 256}, {"m": 33, "k": 1000}),
    # one product per output, nothing summed
    fault_shape={"m": 512, "k": 512},
    term=lambda a, j: np.outer(a[0], a[1]),
)
