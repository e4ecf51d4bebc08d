// cuda/ops/copy.cuh: the copy kernels (csrc/ops.def), shared by the library (cuda/ops/copy.cu) and
// the lab (cuda/lab/copy.cu). Device-memory copy, the measured bandwidth roofline (bytes = read +
// write). copy_reference: element by element, grid-stride (also the library's tail for bytes past
// the last 16-byte pack). copy_vec16: 16-byte packs with a grid-stride loop (the form that reaches
// the memory system's peak).
#pragma once
#include "dtype.cuh"

namespace gb::blas {

template <class T>
__global__ void copy_reference(const T* __restrict__ src, T* __restrict__ dst, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

__global__ void copy_vec16(const uint4* __restrict__ src, uint4* __restrict__ dst, long long packs) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < packs; i += (long long)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

}  // namespace gb::blas
