// rmsnorm.metal: RMSNorm forward on Apple GPUs, y = x * w / sqrt(mean(x^2) + eps) over each row of
// x (m rows of k), fp32 accumulation for every dtype; eps is the op's declared scalar
// (csrc/ops.def). rmsnorm_row_<dtype>: one thread per row, two passes over it. Checked on the CPU
// by tests/test_metal_ops.py.
#include <metal_stdlib>
using namespace metal;
#include "blas_common.h"

template <typename T>
[[kernel]] void rmsnorm_row(device const T* x [[buffer(0)]], device const T* w [[buffer(1)]], device T* y [[buffer(2)]],
                            constant uint& m [[buffer(3)]], constant uint& k [[buffer(4)]],
                            constant float& eps [[buffer(5)]], uint row [[thread_position_in_grid]]) {
  if (row >= m) return;
  device const T* xr = x + row * k;
  float ss = 0.0f;
  for (uint j = 0; j < k; ++j) ss += static_cast<float>(xr[j]) * static_cast<float>(xr[j]);
  float inv = rsqrt(ss / static_cast<float>(k) + eps);
  for (uint j = 0; j < k; ++j) y[row * k + j] = static_cast<T>(static_cast<float>(xr[j]) * inv * static_cast<float>(w[j]));
}

GB_INSTANTIATE_ALL("rmsnorm_row", rmsnorm_row)
