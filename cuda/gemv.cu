// gemv.cu: y = A x (A row-major m x k), fp32/fp16/bf16 with fp32 accumulation.
// Memory-bound at every useful size: each element of A is read once, so the target is the copy
// bandwidth. Variant 1: one thread per row (threads of a warp read 32 different rows: uncoalesced,
// the baseline). Variant 2: one warp per row, 16-byte packs, 4 packs in flight per lane before
// any arithmetic (enough outstanding loads to cover HBM latency), shuffle reduction.
// Run: python -m bench.blas --ops gemv
#include "blas_kernels.h"
#include "dtype.cuh"

namespace gb::blas {

template <class T>
__global__ void gemv_thread_row(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y, long long m,
                                long long k) {
  long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= m) return;
  const T* a = A + row * k;
  float acc = 0.f;
  for (long long j = 0; j < k; ++j) acc += to_f(a[j]) * to_f(x[j]);
  y[row] = from_f<T>(acc);
}

template <class T, int UNROLL>
__global__ void gemv_warp_row(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y, long long m,
                              long long k) {
  constexpr int N = Pack<T>::N;
  long long row = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= m) return;
  const T* a = A + row * k;
  float acc = 0.f;
  if (k % N == 0) {  // every row starts 16-byte aligned
    const Pack<T>* av = reinterpret_cast<const Pack<T>*>(a);
    const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(x);
    long long nv = k / N, i = lane;
    for (; i + 32 * (UNROLL - 1) < nv; i += 32 * UNROLL) {
      Pack<T> ra[UNROLL], rx[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        ra[u] = av[i + 32 * u];
        rx[u] = xv[i + 32 * u];
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
#pragma unroll
        for (int e = 0; e < N; ++e) acc += to_f(ra[u].v[e]) * to_f(rx[u].v[e]);
    }
    for (; i < nv; i += 32) {
      Pack<T> ra = av[i], rx = xv[i];
#pragma unroll
      for (int e = 0; e < N; ++e) acc += to_f(ra.v[e]) * to_f(rx.v[e]);
    }
  } else {
    for (long long j = lane; j < k; j += 32) acc += to_f(a[j]) * to_f(x[j]);
  }
  acc = warp_sum(acc);
  if (lane == 0) y[row] = from_f<T>(acc);
}

bool launch_gemv(int variant, int dt, const void* A, const void* x, void* y, long long m, long long k,
                 cudaStream_t s) {
  if (variant != 1 && variant != 2) return false;
  return dispatch_dtype(dt, [&]<class T>() {
    auto a = static_cast<const T*>(A);
    auto xv = static_cast<const T*>(x);
    auto yv = static_cast<T*>(y);
    if (variant == 1) {
      gemv_thread_row<T><<<(unsigned)((m + 127) / 128), 128, 0, s>>>(a, xv, yv, m, k);
    } else {
      constexpr int warps = 8;
      gemv_warp_row<T, 4><<<(unsigned)((m + warps - 1) / warps), warps * 32, 0, s>>>(a, xv, yv, m, k);
    }
  });
}

}  // namespace gb::blas
