// cuda/lab/vjp_dw.cuh: vjp_dw's lab variant that never shipped (csrc/lab.def), its kernel and
// launcher. Built into the extension with GAPBENCH_LAB=ON (cuda/lab_kernels.cu), where
// `bench.blas --variants all` times it by name beside the library's kernels. LINEAGE.md: v2.
#pragma once
#include <string>

#include "dtype.cuh"
#include "contract.h"

namespace gb::blas::lab_kernels {

// vjp_dw_pack16 (v2, parent the reference): one 16-byte pack of a row per thread, grid-stride
// over all packs (an index division per pack).
template <class T>
__global__ void vjp_dw_pack16(const T* __restrict__ v, const T* __restrict__ x, T* __restrict__ dW, long long m,
                              long long k) {
  constexpr int N = Pack<T>::N;
  long long packs_per_row = k / N, total = m * packs_per_row;
  for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < total;
       p += (long long)gridDim.x * blockDim.x) {
    long long i = p / packs_per_row, jp = p - i * packs_per_row;
    float vi = to_f(v[i]);
    Pack<T> xs = reinterpret_cast<const Pack<T>*>(x)[jp], out;
#pragma unroll
    for (int e = 0; e < N; ++e) out.v[e] = from_f<T>(vi * to_f(xs.v[e]));
    reinterpret_cast<Pack<T>*>(dW)[p] = out;
  }
}

// Whole 16-byte packs only: a row length no pack divides is NotApplicable here (the lab's own
// sweep fell back to the reference kernel for it).
template <class T>
void launch_vjp_dw_pack16(const T* v, const T* x, T* dW, long long m, long long k, cudaStream_t s) {
  if (k % Pack<T>::N != 0)
    throw gb::NotApplicable("vjp_dw_pack16 needs k a multiple of " + std::to_string(Pack<T>::N) +
                            " (whole 16-byte packs)");
  long long total = m * (k / Pack<T>::N);
  long long grid = (total + 255) / 256;
  vjp_dw_pack16<T><<<(unsigned)(grid < 65535LL * 32 ? grid : 65535LL * 32), 256, 0, s>>>(v, x, dW, m, k);
}

}  // namespace gb::blas::lab_kernels
