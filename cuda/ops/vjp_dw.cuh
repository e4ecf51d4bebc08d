// cuda/ops/vjp_dw.cuh: the vjp_dw kernels (csrc/ops.def), shared by the library (cuda/ops/vjp_dw.cu)
// and the lab (cuda/lab/vjp_dw.cu). dW = v x^T, a write-bound outer product:
//   vjp_dw_reference: one thread per element.
//   vjp_dw_2d_stream: 2-D grid, x's pack loaded once per thread, streaming stores.
// The numbered variants these came from (1, 3) and the others: cuda/lab/.
#pragma once
#include "dtype.cuh"

namespace gb::blas {

template <class T>
__global__ void vjp_dw_reference(const T* __restrict__ v, const T* __restrict__ x, T* __restrict__ dW, long long m,
                                   long long k) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= k) return;
  for (long long i = blockIdx.y; i < m; i += gridDim.y) dW[i * k + j] = from_f<T>(to_f(v[i]) * to_f(x[j]));
}

// vjp_dw_2d_stream: thread = one 16-byte pack of columns, loaded from x once and reused down the rows
// it visits (grid-y strides over rows): no index division, and streaming stores (st.global.cs)
// because dW is written once and never read back here, so it should not evict L2.
template <class T>
__global__ void vjp_dw_2d_stream(const T* __restrict__ v, const T* __restrict__ x, T* __restrict__ dW, long long m,
                            long long k) {
  constexpr int N = Pack<T>::N;
  long long packs = k / N;
  long long jp = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (jp >= packs) return;
  Pack<T> xs = reinterpret_cast<const Pack<T>*>(x)[jp];
  float xf[N];
#pragma unroll
  for (int e = 0; e < N; ++e) xf[e] = to_f(xs.v[e]);
  for (long long i = blockIdx.y; i < m; i += gridDim.y) {
    float vi = to_f(v[i]);
    Pack<T> out;
#pragma unroll
    for (int e = 0; e < N; ++e) out.v[e] = from_f<T>(vi * xf[e]);
    __stcs(reinterpret_cast<uint4*>(dW + i * k) + jp, *reinterpret_cast<const uint4*>(&out));
  }
}

}  // namespace gb::blas
