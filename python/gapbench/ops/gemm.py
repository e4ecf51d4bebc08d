"""gemm: batched C = A B, row-major (paper Figure 5: batch 8, 2000 x 2000). Compute-bound at
size: the roofline is the vendor GEMM's rate at the largest size. Kernels: cuda/gemm.cu.
Run: python -m bench.blas --ops gemm"""
import numpy as np

from gapbench.ops.spec import OpSpec, uniform


def _shapes(quick: bool):
    if quick:
        return [{"batch": 2, "m": 64, "n": 64, "k": 64}, {"batch": 2, "m": 128, "n": 128, "k": 128}]
    # Up to the paper's 8 x 2000^3. 8 x 4096^3 costs 2.2 Tflop of float64 reference on the host per
    # dtype (about 20 s on the lent machines) for the GPU's 0.2 ms: --shapes 8x4096x4096x4096.
    return [{"batch": 8, "m": s, "n": s, "k": s} for s in (256, 1024, 2000)]


def _framework(ad, arrays):
    A, B = arrays
    return lambda: ad.bmm(A, B)


SPEC = OpSpec(
    name="gemm", native_op="gemm",
    shapes=_shapes,
    inputs=lambda s, rng: [uniform(rng, s["batch"], s["m"], s["k"]), uniform(rng, s["batch"], s["k"], s["n"])],
    reference=lambda a: np.matmul(a[0], a[1]),
    reduction=lambda s: s["k"],
    elements=lambda s: (s["batch"] * (s["m"] * s["k"] + s["k"] * s["n"]), s["batch"] * s["m"] * s["n"]),
    flops=lambda s: 2.0 * s["batch"] * s["m"] * s["n"] * s["k"],
    framework=_framework,
    framework_text={"torch": "torch.bmm(A, B)", "cupy": "A @ B", "mlx": "A @ B"},
    memory_bound=False,
)
