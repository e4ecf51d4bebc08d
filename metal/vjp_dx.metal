// vjp_dx.metal: dx = W^T v (W row-major m x k) on Apple GPUs, the backward pass of y = W x:
//   vjp_dx_col_<dtype>: one thread per column (threads of a simdgroup read neighbouring columns of
//   a row: contiguous accesses). Checked on the CPU by tests/test_metal_ops.py.
#include <metal_stdlib>
using namespace metal;
#include "blas_common.h"

template <typename T>
[[kernel]] void vjp_dx_col(device const T* W [[buffer(0)]], device const T* v [[buffer(1)]], device T* dx [[buffer(2)]],
                           constant uint& m [[buffer(3)]], constant uint& k [[buffer(4)]],
                           uint col [[thread_position_in_grid]]) {
  if (col >= k) return;
  float acc = 0.0f;
  for (uint i = 0; i < m; ++i) acc += static_cast<float>(W[i * k + col]) * static_cast<float>(v[i]);
  dx[col] = static_cast<T>(acc);
}

GB_INSTANTIATE_ALL("vjp_dx_col", vjp_dx_col)
