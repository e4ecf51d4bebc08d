// gemm.metal: batched C = A B (row-major) on Apple GPUs, fp32 accumulation.
// v1 gemm_naive_<dtype>: one thread per output element. The simdgroup-matrix variant
// (simdgroup_float8x8, the Apple GPU's matrix unit) needs the compat header's simdgroup support
// first. Checked on the CPU by tests/test_gemm.py; the Metal host path is not written yet.
#include <metal_stdlib>
using namespace metal;
#include "blas_common.h"

template <typename T>
[[kernel]] void gemm_naive(device const T* A [[buffer(0)]], device const T* B [[buffer(1)]], device T* C [[buffer(2)]],
                           constant uint& m [[buffer(3)]], constant uint& n [[buffer(4)]], constant uint& k [[buffer(5)]],
                           uint3 pos [[thread_position_in_grid]]) {
  uint col = pos.x, row = pos.y, b = pos.z;
  if (row >= m || col >= n) return;
  device const T* a = A + b * m * k + row * k;
  device const T* bb = B + b * k * n + col;
  float acc = 0.0f;
  for (uint p = 0; p < k; ++p) acc += static_cast<float>(a[p]) * static_cast<float>(bb[p * n]);
  C[b * m * n + row * n + col] = static_cast<T>(acc);
}

GB_INSTANTIATE_ALL("gemm_naive", gemm_naive)
