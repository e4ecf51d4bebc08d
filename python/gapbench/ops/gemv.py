"""gemv: y = A x, A row-major m x k (paper Figure 6). Memory-bound: held against the copy
bandwidth. Kernels: cuda/ and metal/ (csrc/ops.def). Run: python -m bench.blas --ops gemv"""
from gapbench.core import hostpar
from gapbench.ops.spec import C, FrameworkImpl, M, OpSpec, T, draw, from_ops_def

SQUARE = [256, 1024, 4096, 16384]
SKINNY = [(1024, 16384), (16384, 1024), (4096, 16384)]


def shapes(quick: bool):
    if quick:
        return [{"m": 256, "k": 256}, {"m": 512, "k": 1024}]
    return [{"m": s, "k": s} for s in SQUARE] + [{"m": m, "k": k} for m, k in SKINNY]


SPEC = OpSpec(
    **from_ops_def("gemv"),
    shapes=shapes,
    inputs=lambda s, rng: [draw(rng, s["m"], s["k"]), draw(rng, s["k"])],
    reference=lambda a: a[0] @ a[1],
    values64=lambda a: hostpar.matvec64(a[0], a[1]),
    reduction=lambda s: s["k"],
    flops=lambda s: 2.0 * s["m"] * s["k"],
    frameworks=(
        FrameworkImpl(T, "torch.mv(A, x)", lambda ad, a: lambda: ad.torch.mv(a[0], a[1])),
        FrameworkImpl(C, "A @ x", lambda ad, a: lambda: a[0] @ a[1]),
        FrameworkImpl(M, "A @ x", lambda ad, a: lambda: a[0] @ a[1]),
    ),
    test_shapes=({"m": 1, "k": 1}, {"m": 7, "k": 33}, {"m": 64, "k": 256}, {"m": 33, "k": 1000}),
    # 2048 outputs of 4096 terms each
    fault_shape={"m": 2048, "k": 4096},
    term=lambda a, j: a[0][:, j] * a[1][j],
)
