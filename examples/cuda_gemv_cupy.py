"""A raw CUDA kernel compiled at run time (CuPy's RawKernel, NVRTC) against the vendor path
(cupy's A @ x calls cuBLAS): y = A x, one warp per row. On a machine without CuPy and a GPU the
rows say why:

    gapbench bench examples/cuda_gemv_cupy.py --quick
"""
import numpy as np

import gapbench.api as gb

SOURCE = r"""
extern "C" __global__ void gemv_warp(const float* A, const float* x, float* y, int m, int k) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= m) return;
    float s = 0.f;
    for (int j = lane; j < k; j += 32) s += A[(size_t)row * k + j] * x[j];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffff, s, o);
    if (lane == 0) y[row] = s;
}"""

gemv = gb.Case(
    "raw_gemv", axes={"m": [4096, 16384], "k": [4096]}, quick_axes={"m": [1024], "k": [1024]},
    inputs=lambda s, rng: [rng.standard_normal((s["m"], s["k"]), dtype=np.float32),
                           rng.standard_normal(s["k"], dtype=np.float32)],
    reference=lambda A, x: A @ x,
    reduction=lambda s: s["k"],  # k products summed per output: the built-in fp32 accumulation bound
    elements=lambda s: (s["m"] * s["k"] + s["k"], s["m"]), flops=lambda s: 2.0 * s["m"] * s["k"])


@gemv.impl("cupy", baseline=True, text="A @ x (cuBLAS)")
def cublas(A, x):
    return A @ x


@gemv.impl("cupy", setup=True, text="RawKernel gemv_warp: one warp per row")
def warp_per_row(A, x):
    import cupy as cp

    kernel = cp.RawKernel(SOURCE, "gemv_warp")  # compiled once (CuPy caches by source)
    m, k = A.shape
    y = cp.empty(m, dtype=cp.float32)  # kept: the method poisons it before the checked run

    def run():
        kernel(((m + 7) // 8,), (256,), (A, x, y, np.int32(m), np.int32(k)))
        return y
    return run
