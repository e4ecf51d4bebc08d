"""gemm: batched C = A B, row-major (paper Figure 5: batch 8, 2000 x 2000). Compute-bound at
size: held against the vendor GEMM's rate at the largest size. Kernels: cuda/ and metal/
(csrc/ops.def). Run: python -m bench.blas --ops gemm"""
import numpy as np

from gapbench.ops.spec import Bound, C, FrameworkImpl, M, OpSpec, T, draw, from_ops_def


def _shapes(quick: bool):
    if quick:
        return [{"batch": 2, "m": 64, "n": 64, "k": 64}, {"batch": 2, "m": 128, "n": 128, "k": 128}]
    # Up to the paper's 8 x 2000^3. 8 x 4096^3 costs 2.2 Tflop of float64 reference on the host per
    # dtype (about 20 s on the lent machines) for the GPU's 0.2 ms: --shapes 8x4096x4096x4096.
    return [{"batch": 8, "m": s, "n": s, "k": s} for s in (256, 1024, 2000)]


SPEC = OpSpec(
    **from_ops_def("gemm"),
    shapes=_shapes,
    inputs=lambda s, rng: [draw(rng, s["batch"], s["m"], s["k"]), draw(rng, s["batch"], s["k"], s["n"])],
    reference=lambda a: np.matmul(a[0], a[1]),
    reduction=lambda s: s["k"],
    flops=lambda s: 2.0 * s["batch"] * s["m"] * s["n"] * s["k"],
    frameworks=(
        FrameworkImpl(T, "torch.bmm(A, B)", lambda ad, a: lambda: ad.torch.bmm(a[0], a[1])),
        FrameworkImpl(C, "A @ B", lambda ad, a: lambda: a[0] @ a[1]),
        FrameworkImpl(M, "A @ B", lambda ad, a: lambda: a[0] @ a[1]),
    ),
    bound=Bound.compute, ceiling=Bound.compute, tf32_row=True,
    test_shapes=({"batch": 1, "m": 1, "n": 1, "k": 1}, {"batch": 2, "m": 5, "n": 7, "k": 3},
                 {"batch": 3, "m": 16, "n": 24, "k": 40}, {"batch": 2, "m": 70, "n": 33, "k": 50}),
    # 2 x (128 x 2048) @ (2048 x 128)
    fault_shape={"batch": 2, "m": 128, "n": 128, "k": 2048},
    term=lambda a, j: a[0][:, :, j, None] * a[1][:, None, j, :],
)
