// vjp.metal: both cotangents of y = W x (W row-major m x k) on Apple GPUs:
//   vjp_dx_col_<dtype>: dx = W^T v, one thread per column (threads of a simdgroup read
//     neighbouring columns of a row: contiguous accesses);
//   vjp_dw_elem_<dtype>: dW = v x^T, one thread per element (write-bound).
// Checked on the CPU by tests/test_vjp.py; the Metal host path is not written yet.
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

template <typename T>
[[kernel]] void vjp_dw_elem(device const T* v [[buffer(0)]], device const T* x [[buffer(1)]], device T* dW [[buffer(2)]],
                            constant uint& m [[buffer(3)]], constant uint& k [[buffer(4)]],
                            uint idx [[thread_position_in_grid]]) {
  if (idx >= m * k) return;
  uint i = idx / k, j = idx - i * k;
  dW[idx] = static_cast<T>(static_cast<float>(v[i]) * static_cast<float>(x[j]));
}

GB_INSTANTIATE_ALL("vjp_dx_col", vjp_dx_col)
GB_INSTANTIATE_ALL("vjp_dw_elem", vjp_dw_elem)
