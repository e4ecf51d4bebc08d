// gemv.cu: y = A x (A row-major m x k), fp32/fp16/bf16 with fp32 accumulation.
// Memory-bound at every useful size: each element of A is read once, so the target is the copy
// bandwidth. Variant 1: one thread per row (threads of a warp read 32 different rows: uncoalesced,
// the baseline). Variant 2: one warp per row, 16-byte packs, 4 packs in flight per lane before
// any arithmetic (enough outstanding loads to cover HBM latency), shuffle reduction.
// Variant 3: split-k over (row, k-slice) so short m still fills the GPU (see below).
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

// Variant 3: split-k. A warp per (row, k-slice), 8 packs in flight per lane; when m alone
// cannot fill the GPU (m warps < ~4 per SM slot) the row is cut into slices whose fp32 partial
// sums a second kernel adds. For large m it is variant 2 with deeper unrolling.
template <class T, int UNROLL>
__global__ void gemv_split(const T* __restrict__ A, const T* __restrict__ x, float* __restrict__ part,
                           T* __restrict__ y, long long m, long long k, long long slice) {
  constexpr int N = Pack<T>::N;
  long long row = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= m) return;
  long long j0 = blockIdx.y * slice, j1 = j0 + slice < k ? j0 + slice : k;  // slice is a multiple of N
  const Pack<T>* av = reinterpret_cast<const Pack<T>*>(A + row * k);
  const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(x);
  long long i = j0 / N + lane, end = j1 / N;
  float acc = 0.f;
  for (; i + 32 * (UNROLL - 1) < end; i += 32 * UNROLL) {
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
  for (; i < end; i += 32) {
    Pack<T> ra = av[i], rx = xv[i];
#pragma unroll
    for (int e = 0; e < N; ++e) acc += to_f(ra.v[e]) * to_f(rx.v[e]);
  }
  acc = warp_sum(acc);
  if (lane == 0) {
    if (gridDim.y == 1)
      y[row] = from_f<T>(acc);
    else
      part[blockIdx.y * m + row] = acc;
  }
}

template <class T>
__global__ void gemv_reduce(const float* __restrict__ part, T* __restrict__ y, long long m, int slices) {
  long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (r >= m) return;
  float acc = 0.f;
  for (int s = 0; s < slices; ++s) acc += part[s * m + r];
  y[r] = from_f<T>(acc);
}

long long gemv_split_slices(long long m, long long k, int pack, int sms) {
  long long want = (64LL * sms + m - 1) / m;                 // about 64 warps per SM in all
  long long max_slices = k / (32LL * pack * 8) > 0 ? k / (32LL * pack * 8) : 1;  // >= one full unrolled pass
  return want < 1 ? 1 : (want > max_slices ? max_slices : want);
}

long long gemv_work_floats(long long m, long long k, int sms) {
  return gemv_split_slices(m, k, 4, sms) * m;  // the fp32 pack allows the most slices
}

bool launch_gemv(int variant, int dt, const void* A, const void* x, void* y, long long m, long long k,
                 cudaStream_t s, float* work, int sms) {
  if (variant == 3) {
    return dispatch_dtype(dt, [&]<class T>() {
      auto a = static_cast<const T*>(A);
      auto xv = static_cast<const T*>(x);
      auto yv = static_cast<T*>(y);
      constexpr int warps = 8;
      if (k % Pack<T>::N != 0) {  // rows not 16-byte aligned: the warp-per-row form handles it
        gemv_warp_row<T, 4><<<(unsigned)((m + warps - 1) / warps), warps * 32, 0, s>>>(a, xv, yv, m, k);
        return;
      }
      long long slices = gemv_split_slices(m, k, Pack<T>::N, sms);
      long long per = (k + slices - 1) / slices;
      per = (per + Pack<T>::N - 1) / Pack<T>::N * Pack<T>::N;
      slices = (k + per - 1) / per;
      dim3 grid((unsigned)((m + warps - 1) / warps), (unsigned)slices);
      gemv_split<T, 8><<<grid, warps * 32, 0, s>>>(a, xv, work, yv, m, k, per);
      if (slices > 1) gemv_reduce<T><<<(unsigned)((m + 255) / 256), 256, 0, s>>>(work, yv, m, (int)slices);
    });
  }
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
