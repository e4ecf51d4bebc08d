// cuda/ops/gemv.cuh: the gemv kernels (csrc/ops.def), shared by the library (cuda/ops/gemv.cu) and
// the lab (cuda/lab/gemv.cu). y = A x (A row-major m x k), fp32/fp16/bf16 with fp32 accumulation.
// Memory-bound at every useful size: each element of A is read once, so the target is the copy
// bandwidth. gemv_reference: one thread per row (threads of a warp read 32 different rows).
// gemv_warp_rows: one warp per row, 16-byte packs, 4 packs in flight per lane before any
// arithmetic, shuffle reduction. gemv_split_k: a warp per (row, k-slice), so short m still fills
// the GPU; fp32 partials summed by a second kernel. gemv_x_stationary: a block owns a k-range and
// a run of rows; each warp keeps its part of x in registers for all those rows (x is read once
// per block, not once per row), and the k-slices of a row meet by fp32 atomics in L2, the last
// slice's block writing y (one launch). Which one runs: the rule in
// cuda/ops/gemv.cu.
#pragma once
#include "dtype.cuh"

namespace gb::blas {

template <class T>
__global__ void gemv_reference(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y, long long m,
                                long long k) {
  long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= m) return;
  const T* a = A + row * k;
  float acc = 0.f;
  for (long long j = 0; j < k; ++j) acc += to_f(a[j]) * to_f(x[j]);
  y[row] = from_f<T>(acc);
}

template <class T, int UNROLL>
__global__ void gemv_warp_rows(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y, long long m,
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

// gemv_split_k. A warp per (row, k-slice), 8 packs in flight per lane; when m alone
// cannot fill the GPU (m warps < ~4 per SM slot) the row is cut into slices whose fp32 partial
// sums a second kernel adds. For large m it is gemv_warp_rows with deeper unrolling.
template <class T, int UNROLL>
__global__ void gemv_split_k(const T* __restrict__ A, const T* __restrict__ x, float* __restrict__ part,
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
__global__ void gemv_split_k_reduce(const float* __restrict__ part, T* __restrict__ y, long long m, int slices) {
  long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (r >= m) return;
  float acc = 0.f;
  for (int s = 0; s < slices; ++s) acc += part[s * m + r];
  y[r] = from_f<T>(acc);
}

// gemv_x_stationary. Each lane holds P packs of x (its warp's k-range: 32 x P packs, contiguous, so a
// warp reads 512 B-runs of a row and the block's warps together a contiguous WARPS x 32 x P-pack
// run), walks its block's rows R at a time (R x P independent 16-byte loads in flight per lane)
// and leaves one sum per (warp, row) in shared memory. After one barrier the block sums its
// warps per row; with one k-slice it writes y, else it adds into an fp32 accumulator and the
// block that completes a run of rows (a counter per run) converts it to y and clears it, so the
// workspace is reusable without a memset. Needs k % N == 0 (16-byte rows).
template <class T, int P, int R, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) gemv_x_stationary(const T* __restrict__ A, const T* __restrict__ x,
                                                          T* __restrict__ y, float* accum, unsigned* counters,
                                                          long long m, long long k, int rows_per_block) {
  constexpr int N = Pack<T>::N;
  extern __shared__ float red[];  // [WARPS][rows_per_block]
  __shared__ bool last;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long long kp = k / N;
  const long long p0 = ((long long)blockIdx.y * WARPS + warp) * 32 * P + lane;
  const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(x);
  const Pack<T>* av = reinterpret_cast<const Pack<T>*>(A);
  Pack<T> xr[P];
#pragma unroll
  for (int u = 0; u < P; ++u) {
    long long i = p0 + 32LL * u;
    if (i < kp) xr[u] = xv[i];
    else
#pragma unroll
      for (int e = 0; e < N; ++e) xr[u].v[e] = from_f<T>(0.f);  // past k: contributes nothing
  }
  const long long r0 = (long long)blockIdx.x * rows_per_block;
  const int rows = (int)(m - r0 < rows_per_block ? m - r0 : rows_per_block);
  for (int r = 0; r < rows; r += R) {
    Pack<T> ra[R][P];
#pragma unroll
    for (int rr = 0; rr < R; ++rr)
#pragma unroll
      for (int u = 0; u < P; ++u) {
        long long i = p0 + 32LL * u;
        if (r + rr < rows && i < kp) ra[rr][u] = av[(r0 + r + rr) * kp + i];
        else
#pragma unroll
          for (int e = 0; e < N; ++e) ra[rr][u].v[e] = from_f<T>(0.f);
      }
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      float acc = 0.f;
#pragma unroll
      for (int u = 0; u < P; ++u)
#pragma unroll
        for (int e = 0; e < N; ++e) acc += to_f(ra[rr][u].v[e]) * to_f(xr[u].v[e]);
      acc = warp_sum(acc);
      if (lane == 0 && r + rr < rows) red[warp * rows_per_block + r + rr] = acc;
    }
  }
  __syncthreads();
  const bool one = gridDim.y == 1;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) sum += red[w * rows_per_block + i];
    if (one) y[r0 + i] = from_f<T>(sum);
    else atomicAdd(accum + r0 + i, sum);
  }
  if (one) return;
  __threadfence();  // this block's adds are visible before its count
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counters + blockIdx.x, 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int i = threadIdx.x; i < rows; i += blockDim.x) y[r0 + i] = from_f<T>(atomicExch(accum + r0 + i, 0.f));
  if (threadIdx.x == 0) counters[blockIdx.x] = 0u;
}

}  // namespace gb::blas
