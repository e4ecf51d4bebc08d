"""vjp_dx: the cotangent of x for y = W x (W row-major m x k) and a cotangent v: dx = W^T v
(paper Figure 7). Frameworks use their own autodiff (torch.func.vjp, mx.vjp; mx.vjp also
recomputes the forward product, as MLX has no separate backward call); CuPy computes it directly.
Kernels: cuda/ and metal/ (csrc/ops.def). Run: python -m bench.blas --ops vjp_dx (or vjp)"""
from gapbench.core import hostpar
from gapbench.ops.gemv import shapes
from gapbench.ops.spec import C, FrameworkImpl, M, OpSpec, T, draw, from_ops_def


def _torch(ad, a):
    W, v = a
    torch = ad.torch
    x = torch.ones(W.shape[1], dtype=W.dtype, device=W.device)
    _, fn = torch.func.vjp(lambda x_: W @ x_, x)
    return lambda: fn(v)[0]


def _mlx(ad, a):
    W, v = a
    mx = ad.mx
    x = mx.ones((W.shape[1],), dtype=W.dtype)
    return lambda: mx.vjp(lambda x_: W @ x_, [x], [v])[1][0]


SPEC = OpSpec(
    **from_ops_def("vjp_dx"), group="vjp",
    shapes=shapes,
    inputs=lambda s, rng: [draw(rng, s["m"], s["k"]), draw(rng, s["m"])],
    reference=lambda a: a[0].T @ a[1],
    values64=lambda a: hostpar.rmatvec64(a[0], a[1]),
    reduction=lambda s: s["m"],
    flops=lambda s: 2.0 * s["m"] * s["k"],
    frameworks=(
        FrameworkImpl(T, "torch.func.vjp(W @ x, x)(v)", _torch),
        FrameworkImpl(C, "W.T @ v", lambda ad, a: lambda: a[0].T @ a[1]),
        FrameworkImpl(M, "mx.vjp(W @ x, x, v)", _mlx),
    ),
    test_shapes=({"m": 1, "k": 1}, {"m": 33, "k": 7}, {"m": 256, "k": 64}, {"m": 1000, "k": 33}),
    # dx = W^T v: 1024 outputs, each a sum over the 16384 rows of W
    fault_shape={"m": 16384, "k": 1024},
    term=lambda a, j: a[0][j] * a[1][j],
)
