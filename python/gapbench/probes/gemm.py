"""gemm: batched C = A B, row-major (paper Figure 5: batch 8, 2000 x 2000). Compute-bound at
size: the roofline is the vendor GEMM's rate at the largest size. Kernels: cuda/gemm.cu.
Run: python -m bench.blas --ops gemm"""
import numpy as np

from ..blasspec import OpSpec, uniform


def _shapes(quick: bool):
    if quick:
        return [{"batch": 2, "m": 64, "n": 64, "k": 64}, {"batch": 2, "m": 128, "n": 128, "k": 128}]
    return [{"batch": 8, "m": s, "n": s, "k": s} for s in (256, 1024, 2000, 4096)]


def _framework(ad, fam, arrays):
    A, B = arrays
    if fam == "torch":
        return lambda: ad.torch.bmm(A, B)
    return lambda: A @ B


SPEC = OpSpec(
    name="gemm", native_op=4,
    variants={1: "one thread per output", 2: "32x32 shared-memory tiles",
              3: "128x128 tiles, 8x8 register tile per thread",
              4: "tensor cores via WMMA, 128x128x32 tiles (fp16/bf16)",
              5: "as 3, double-buffered, conflict-free 16-byte smem reads",
              6: "mma.sync + ldmatrix, 4-stage cp.async ring (fp16/bf16, sm_80+)",
              7: "TMA + wgmma, producer warpgroup, 128x128 tiles (fp16/bf16, sm_90a)",
              8: "TMA + wgmma, producer warpgroup, 128x256 tiles (fp16/bf16, sm_90a)"},
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
