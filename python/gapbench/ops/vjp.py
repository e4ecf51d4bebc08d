"""vjp: both cotangents of y = W x (W row-major m x k) for a cotangent v (paper Figure 7):
dx = W^T v (vjp_dx) and dW = v x^T (vjp_dw). Frameworks use their own autodiff (torch.func.vjp,
mx.vjp; mx.vjp also recomputes the forward product, as MLX has no separate backward call);
cupy and the native kernels compute them directly. Kernels: cuda/vjp.cu, metal/vjp.metal.
Run: python -m bench.blas --ops vjp"""
import numpy as np

from gapbench.ops.spec import OpSpec, uniform
from gapbench.ops.gemv import shapes


def dw_shapes(quick: bool):
    """gemv's shapes but 16384x16384: its 268M-element dW output costs far more host time to check
    (every arm, first and last run, against float64) than the GPU time it measures; the other
    shapes already reach the bandwidth plateau. Run it with --shapes 16384x16384."""
    return [s for s in shapes(quick) if s["m"] * s["k"] < 1 << 28]


def _dx(ad, arrays):
    W, v = arrays
    return ad.vjp_linear_dx(W, v)


def _dw(ad, arrays):
    v, x = arrays
    return ad.vjp_linear_dw(v, x)


DX = OpSpec(
    name="vjp_dx", native_op="vjp_dx",
    shapes=shapes,
    inputs=lambda s, rng: [uniform(rng, s["m"], s["k"]), uniform(rng, s["m"])],
    reference=lambda a: a[0].T @ a[1],
    reduction=lambda s: s["m"],
    elements=lambda s: (s["m"] * s["k"] + s["m"], s["k"]),
    flops=lambda s: 2.0 * s["m"] * s["k"],
    framework=_dx,
    framework_text={"torch": "torch.func.vjp(W @ x, x)(v)", "cupy": "W.T @ v", "mlx": "mx.vjp(W @ x, x, v)"},
)

DW = OpSpec(
    name="vjp_dw", native_op="vjp_dw",
    shapes=dw_shapes,
    inputs=lambda s, rng: [uniform(rng, s["m"]), uniform(rng, s["k"])],
    reference=lambda a: np.outer(a[0], a[1]),
    reduction=lambda s: 1,
    elements=lambda s: (s["m"] + s["k"], s["m"] * s["k"]),
    flops=lambda s: 1.0 * s["m"] * s["k"],
    framework=_dw,
    framework_text={"torch": "torch.func.vjp(W @ x, W)(v)", "cupy": "cupy.outer(v, x)", "mlx": "mx.vjp(W @ x, W, v)"},
)
