// cuda/ops/vjp_dx.cuh: the vjp_dx kernels (csrc/ops.def), shared by the library (cuda/ops/vjp_dx.cu)
// and the lab (cuda/lab/vjp_dx.cu). dx = W^T v (W row-major m x k), a column reduction, the
// backward pass of a linear layer:
//   vjp_dx_reference: one thread per column over all rows (coalesced, but only k threads).
//   vjp_dx_row_slices: each thread owns one 16-byte pack of columns (or fewer at a ragged k) for a
//     slice of rows, so the grid fills every SM; per-slice fp32 partials, then vjp_dx_reduce.
//   vjp_dx_strips: narrow column strips, so that at wide k each block owns its columns over all
//     rows and writes dx itself: no partials, no finishing block (the structure of cuBLAS's fp16
//     kernel). The shipped vjp_dx_strips256, _strips128, _strips128_wave and _strips128_wave_ef are
//     its instantiations (strip width, block size, evict-first loads: cuda/ops/vjp_dx.cu).
// The numbered variants these came from (1, 2, 12-14) and the others: cuda/lab/.
#pragma once
#include "dtype.cuh"
#include "ptx.cuh"

namespace gb::blas {


template <class T>
__global__ void vjp_dx_reference(const T* __restrict__ W, const T* __restrict__ v, T* __restrict__ dx, long long m,
                                  long long k) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= k) return;
  float acc = 0.f;
  for (long long i = 0; i < m; ++i) acc += to_f(W[i * k + j]) * to_f(v[i]);
  dx[j] = from_f<T>(acc);
}

template <class T>
__global__ void vjp_dx_row_slices(const T* __restrict__ W, const T* __restrict__ v, float* __restrict__ part,
                               long long m, long long k, long long rows_per_slice) {
  constexpr int N = Pack<T>::N;
  long long col0 = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * N;
  if (col0 >= k) return;
  long long r0 = blockIdx.y * rows_per_slice;
  long long r1 = r0 + rows_per_slice < m ? r0 + rows_per_slice : m;
  float acc[N];
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] = 0.f;
  if (k % N == 0) {
#pragma unroll 4
    for (long long i = r0; i < r1; ++i) {
      Pack<T> w = *reinterpret_cast<const Pack<T>*>(W + i * k + col0);
      float vi = to_f(v[i]);
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] += to_f(w.v[e]) * vi;
    }
  } else {
    for (long long i = r0; i < r1; ++i) {
      float vi = to_f(v[i]);
      for (int e = 0; e < N && col0 + e < k; ++e) acc[e] += to_f(W[i * k + col0 + e]) * vi;
    }
  }
  for (int e = 0; e < N && col0 + e < k; ++e) part[blockIdx.y * k + col0 + e] = acc[e];
}

template <class T, bool Pdl = false>
__global__ void vjp_dx_reduce(const float* __restrict__ part, T* __restrict__ dx, long long k, int slices) {
  if constexpr (Pdl) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  }
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= k) return;
  float acc = 0.f;
  for (int s = 0; s < slices; ++s) acc += part[s * k + j];
  dx[j] = from_f<T>(acc);
}

// The strips' finish where slices of rows share a strip: add a block's sums for column block `cbi` into the fp32 accumulator
// (red.global.add, vector form on sm_90: done in L2, no DRAM traffic), then count the `done`
// units it covered there; the block whose count completes `total` converts the sums to T and
// zeroes the accumulator and the counter again for the next call. Block-uniform; `last` is shared.
template <class T, int THREADS, int COLS = 32 * Pack<T>::N>
__device__ __forceinline__ void add_and_finish(const float* sums, T* __restrict__ dx, float* __restrict__ accum,
                                               unsigned* __restrict__ counters, long long cbi, long long k,
                                               unsigned done, unsigned total, bool* last) {
  static_assert(COLS % 4 == 0, "whole 4-float groups");
  const long long cb = cbi * COLS;
  // k is a multiple of 8 (checked by the launchers) and cb of COLS: 4-float groups never straddle k.
  for (int c = 4 * threadIdx.x; c < COLS && cb + c < k; c += 4 * THREADS) {
#if __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float4*>(accum + cb + c), make_float4(sums[c], sums[c + 1], sums[c + 2], sums[c + 3]));
#else
    for (int e = 0; e < 4; ++e) atomicAdd(accum + cb + c + e, sums[c + e]);
#endif
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) *last = atomicAdd(&counters[cbi], done) + done == total;
  __syncthreads();
  if (*last) {
    __threadfence();
    for (int c = threadIdx.x; c < COLS && cb + c < k; c += THREADS) {
      dx[cb + c] = from_f<T>(__ldcg(accum + cb + c));
      accum[cb + c] = 0.f;
    }
    if (threadIdx.x == 0) counters[cbi] = 0;
  }
}

// The strip kernel (variants 11-14 in cuda/lab/): narrow column strips, so that at wide k no
// block shares its columns with another.
// L lanes (L x 16 B) span a strip's row; a warp load instruction covers 32/L rows (still whole
// 128-byte lines at L = 8). With k wide enough the grid is one slice of strips: every block walks
// all m rows of its strip and writes its dx values itself: no partials, no atomics, no finishing
// block. Variant 8's finish is a chain of L2 round trips (vector reds, fence, counter, re-read)
// that ends each call; cuBLAS's fp16 kernel at 16384^2 on an H200 (nvjet ..._128x8_...: 128
// blocks of 256-byte strips, no split) has none. Dropping it took about half of the ~2 us by which
// variant 8 trailed cuBLAS there. Where there are too few strips to fill the GPU, slices of rows
// share a strip and finish as variant 8 does.
// W's 16-byte packs: LD 0 a plain load, 1 evict-first (__ldcs), 2 no L1 allocation with a
// 256-byte L2 fetch (gb::ptx::ld_stream_l2_256; used by the lab only).
template <class T, int LD>
__device__ __forceinline__ Pack<T> load_w_pack(const T* p) {
  if constexpr (LD == 0) {
    return *reinterpret_cast<const Pack<T>*>(p);
  } else {
    Pack<T> r;
    *reinterpret_cast<uint4*>(&r) = LD == 1 ? __ldcs(reinterpret_cast<const uint4*>(p)) : gb::ptx::ld_stream_l2_256(p);
    return r;
  }
}

template <class T, int L, int R, int WARPS, int LD = 0>
__global__ void __launch_bounds__(WARPS * 32)
    vjp_dx_strips(const T* __restrict__ W, const T* __restrict__ v, T* __restrict__ dx, float* __restrict__ accum,
                  unsigned* __restrict__ counters, long long m, long long k, long long rows_per_slice) {
  constexpr int N = Pack<T>::N, RW = 32 / L, COLS = L * N;
  static_assert(32 % L == 0 && COLS % 4 == 0, "a strip is whole lanes of a warp and whole 4-float groups");
  __shared__ float red[WARPS][COLS];
  __shared__ float sums[COLS];
  __shared__ bool last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane / L;
  const long long col0 = blockIdx.x * (long long)COLS + (long long)(lane % L) * N;
  const long long r0 = blockIdx.y * rows_per_slice, r1 = r0 + rows_per_slice < m ? r0 + rows_per_slice : m;
  float acc[N];
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] = 0.f;
  if (col0 < k) {
    // A warp's unit: R load instructions of RW rows each, all issued before the first FMA.
    for (long long g = r0 + (long long)warp * R * RW; g < r1; g += (long long)WARPS * R * RW) {
      if (g + R * RW <= r1) {
        Pack<T> w[R];
        float vi[R];
#pragma unroll
        for (int q = 0; q < R; ++q) w[q] = load_w_pack<T, LD>(W + (g + q * RW + sub) * k + col0);
#pragma unroll
        for (int q = 0; q < R; ++q) vi[q] = to_f(v[g + q * RW + sub]);
#pragma unroll
        for (int q = 0; q < R; ++q)
#pragma unroll
          for (int e = 0; e < N; ++e) acc[e] += to_f(w[q].v[e]) * vi[q];
      } else {
        for (long long i = g + sub; i < r1; i += RW) {  // the slice's last, partial unit
          Pack<T> w = load_w_pack<T, LD>(W + i * k + col0);
          float vi = to_f(v[i]);
#pragma unroll
          for (int e = 0; e < N; ++e) acc[e] += to_f(w.v[e]) * vi;
        }
      }
    }
  }
  // Lanes lane%L alike hold the same columns for different rows: fold them, then the warps.
#pragma unroll
  for (int off = L; off < 32; off <<= 1)
#pragma unroll
    for (int e = 0; e < N; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], off);
  if (sub == 0)
#pragma unroll
    for (int e = 0; e < N; ++e) red[warp][(lane % L) * N + e] = acc[e];
  __syncthreads();
  const long long cb = blockIdx.x * (long long)COLS;
  for (int c = threadIdx.x; c < COLS; c += WARPS * 32) {
    float t = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) t += red[w][c];
    if (gridDim.y == 1) {
      if (cb + c < k) dx[cb + c] = from_f<T>(t);
    } else {
      sums[c] = t;
    }
  }
  if (gridDim.y == 1) return;  // grid-uniform
  __syncthreads();
  add_and_finish<T, WARPS * 32, COLS>(sums, dx, accum, counters, blockIdx.x, k, 1u, gridDim.y, &last);
}

}  // namespace gb::blas
