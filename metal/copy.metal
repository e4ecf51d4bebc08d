// copy.metal: device-memory copy on Apple GPUs, the bandwidth roofline (bytes = read + write).
// v1 copy_elem_<dtype>: one element per thread. Run on the CPU against numpy by tests/test_metal_ops.py;
// the Metal host path that times it on a Mac is not written yet (see README).
#include <metal_stdlib>
using namespace metal;
#include "blas_common.h"

template <typename T>
[[kernel]] void copy_elem(device const T* src [[buffer(0)]], device T* dst [[buffer(1)]],
                          constant uint& n [[buffer(2)]], uint gid [[thread_position_in_grid]]) {
  if (gid < n) dst[gid] = src[gid];
}

GB_INSTANTIATE_ALL("copy_elem", copy_elem)
