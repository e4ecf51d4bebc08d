// gemv.metal: y = A x (A row-major m x k) on Apple GPUs, fp32 accumulation for every dtype.
// v1 gemv_row_<dtype>: one thread per row (the baseline; simdgroup-per-row variants with
// simd_sum come with the compat header's simdgroup support). Checked on the CPU by
// tests/test_metal_ops.py; the Metal host path that times it on a Mac is not written yet.
#include <metal_stdlib>
using namespace metal;
#include "blas_common.h"

template <typename T>
[[kernel]] void gemv_row(device const T* A [[buffer(0)]], device const T* x [[buffer(1)]], device T* y [[buffer(2)]],
                         constant uint& m [[buffer(3)]], constant uint& k [[buffer(4)]],
                         uint row [[thread_position_in_grid]]) {
  if (row >= m) return;
  float acc = 0.0f;
  for (uint j = 0; j < k; ++j) acc += static_cast<float>(A[row * k + j]) * static_cast<float>(x[j]);
  y[row] = static_cast<T>(acc);
}

GB_INSTANTIATE_ALL("gemv_row", gemv_row)
