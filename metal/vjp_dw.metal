// vjp_dw.metal: dW = v x^T (the weight cotangent of y = W x) on Apple GPUs:
//   vjp_dw_elem_<dtype>: one thread per element (write-bound). Checked on the CPU by
//   tests/test_metal_ops.py.
#include <metal_stdlib>
using namespace metal;
#include "blas_common.h"

template <typename T>
[[kernel]] void vjp_dw_elem(device const T* v [[buffer(0)]], device const T* x [[buffer(1)]], device T* dW [[buffer(2)]],
                            constant uint& m [[buffer(3)]], constant uint& k [[buffer(4)]],
                            uint idx [[thread_position_in_grid]]) {
  if (idx >= m * k) return;
  uint i = idx / k, j = idx - i * k;
  dW[idx] = static_cast<T>(static_cast<float>(v[i]) * static_cast<float>(x[j]));
}

GB_INSTANTIATE_ALL("vjp_dw_elem", vjp_dw_elem)
