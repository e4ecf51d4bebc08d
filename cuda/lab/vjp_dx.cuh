// cuda/lab/vjp_dx.cuh: vjp_dx's lab variants that never shipped (csrc/lab.def), their kernels and
// launchers. Built into the extension with GAPBENCH_LAB=ON (cuda/lab_kernels.cu), where
// `bench.blas --variants all` times each by name beside the library's kernels (cuda/ops/vjp_dx.cuh:
// the reference, row slices and the shipped strips). LINEAGE.md gives each one's parent and the
// evidence; the variant numbers in the comments are the lab's.
//   vjp_dx_rows_in_flight4 (v3)  4 rows' loads issued before their FMAs, twice the slices
//   vjp_dx_rows_in_flight8 (v4)  8 rows' loads in flight, 4x fewer slices
//   vjp_dx_fused_last_block (v5) one launch: the last slice block of a column range reduces; W evict-first
//   vjp_dx_pdl_reduce (v6)       v4 with the reduce as a programmatic dependent launch (sm_90+)
//   vjp_dx_warp_rows (v7)        rows split among a block's warps, one partial row per block, PDL reduce
//   vjp_dx_warp_rows_atomic (v8) one launch, partial rows added in L2 (red.global.add), the last block converts
//   vjp_dx_tma_ring (v9)         a TMA ring of W tiles, equal work per resident block (sm_90+): slower
//   vjp_dx_persistent (v10)      v8 on a grid of exactly the resident blocks, equal shares: slower
// Every launcher refuses (gb::NotApplicable) where its kernel cannot run, rather than running
// another kernel under its name. The workspace (vjp_dx_lab_work_floats) is the lab's own part of
// the case's, after the library's, so the library's self-resetting accumulators are never touched.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include "contract.h"
#include "dtype.cuh"
#include "ops/vjp_dx.cuh"  // the library's kernels and launch helpers (dx_geometry, vjp_dx_reduce, add_and_finish)
#include "ptx.cuh"
#include "tensor_map.h"

namespace gb::blas::lab_kernels {

using gb::blas::add_and_finish;
using gb::blas::dx_geometry;
using gb::blas::kDxBlock;
using gb::blas::vjp_dx_reduce;

// Variant 3's slice kernel: the loads of R rows are issued before any of their FMAs, so each
// thread has R 16-byte loads in flight (HBM latency is covered by loads, not by more warps).
template <class T, int R, bool Pdl = false>
__global__ void vjp_dx_partial_rows(const T* __restrict__ W, const T* __restrict__ v, float* __restrict__ part,
                                    long long m, long long k, long long rows_per_slice) {
  if constexpr (Pdl) {
#if __CUDA_ARCH__ >= 900
    // Variant 6: let the reduce kernel be scheduled now; it waits (griddepcontrol.wait) for
    // this grid to finish and its writes to be visible, so its launch latency is hidden.
    asm volatile("griddepcontrol.launch_dependents;");
#endif
  }
  constexpr int N = Pack<T>::N;
  long long col0 = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * N;
  if (col0 >= k) return;
  long long r0 = blockIdx.y * rows_per_slice;
  long long r1 = r0 + rows_per_slice < m ? r0 + rows_per_slice : m;
  float acc[N];
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] = 0.f;
  long long i = r0;
  for (; i + R <= r1; i += R) {
    Pack<T> w[R];
    float vi[R];
#pragma unroll
    for (int u = 0; u < R; ++u) {
      w[u] = *reinterpret_cast<const Pack<T>*>(W + (i + u) * k + col0);
      vi[u] = to_f(v[i + u]);
    }
#pragma unroll
    for (int u = 0; u < R; ++u)
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] += to_f(w[u].v[e]) * vi[u];
  }
  for (; i < r1; ++i) {
    Pack<T> w = *reinterpret_cast<const Pack<T>*>(W + i * k + col0);
    float vi = to_f(v[i]);
#pragma unroll
    for (int e = 0; e < N; ++e) acc[e] += to_f(w.v[e]) * vi;
  }
#pragma unroll
  for (int e = 0; e < N; ++e) part[blockIdx.y * k + col0 + e] = acc[e];
}

// Variant 5: as variant 4, but one launch. Each slice block writes its fp32 partials, then bumps
// a per-column-block counter; the block that brings it to `slices` (the last one to finish that
// column range) sums every slice's partials and writes dx, then resets the counter for the next
// call. W is streamed with __ldcs (evict-first): it is read exactly once and should not push the
// partials, v and dx out of L2.
template <class T, int R>
__global__ void vjp_dx_fused(const T* __restrict__ W, const T* __restrict__ v, T* __restrict__ dx,
                             float* __restrict__ part, unsigned* __restrict__ counters, long long m, long long k,
                             long long rows_per_slice) {
  constexpr int N = Pack<T>::N;
  long long col0 = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * N;
  long long r0 = blockIdx.y * rows_per_slice;
  long long r1 = r0 + rows_per_slice < m ? r0 + rows_per_slice : m;
  if (col0 < k) {
    float acc[N];
#pragma unroll
    for (int e = 0; e < N; ++e) acc[e] = 0.f;
    long long i = r0;
    for (; i + R <= r1; i += R) {
      uint4 w[R];
      float vi[R];
#pragma unroll
      for (int u = 0; u < R; ++u) {
        w[u] = __ldcs(reinterpret_cast<const uint4*>(W + (i + u) * k + col0));
        vi[u] = to_f(v[i + u]);
      }
#pragma unroll
      for (int u = 0; u < R; ++u) {
        const T* wt = reinterpret_cast<const T*>(&w[u]);
#pragma unroll
        for (int e = 0; e < N; ++e) acc[e] += to_f(wt[e]) * vi[u];
      }
    }
    for (; i < r1; ++i) {
      uint4 w = __ldcs(reinterpret_cast<const uint4*>(W + i * k + col0));
      const T* wt = reinterpret_cast<const T*>(&w);
      float vi = to_f(v[i]);
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] += to_f(wt[e]) * vi;
    }
#pragma unroll
    for (int e = 0; e < N; ++e) part[blockIdx.y * k + col0 + e] = acc[e];
  }
  // Publish the partials, then count this slice in; only the last block reads them back.
  __threadfence();
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (col0 < k) {
    float sum[N];
#pragma unroll
    for (int e = 0; e < N; ++e) sum[e] = 0.f;
    for (unsigned sl = 0; sl < gridDim.y; ++sl) {
      const float4* p = reinterpret_cast<const float4*>(part + sl * k + col0);
#pragma unroll
      for (int q = 0; q < N / 4; ++q) {
        float4 f = __ldcg(p + q);  // L2, not a stale L1 line
        sum[4 * q] += f.x;
        sum[4 * q + 1] += f.y;
        sum[4 * q + 2] += f.z;
        sum[4 * q + 3] += f.w;
      }
    }
    Pack<T> out;
#pragma unroll
    for (int e = 0; e < N; ++e) out.v[e] = from_f<T>(sum[e]);
    *reinterpret_cast<Pack<T>*>(dx + col0) = out;
  }
  if (threadIdx.x == 0) counters[blockIdx.x] = 0;
}

// Variants 7-8: the block splits ROWS among its warps instead of columns. A block owns only 32
// packs of columns (256 fp16 / 128 fp32: 512 B of every row, four full 128-byte lines per warp
// load) and its WARPS warps take interleaved groups of R rows of its slice, so at any moment the
// block streams WARPS*R consecutive rows. The warps' sums meet in shared memory and the block
// writes ONE partial row of 32*N floats: the partials (and the reduce kernel's loop) shrink by
// WARPS x against variant 4, whose 66 slices at 16384^2 fp16 wrote and re-read 8.6 MB (1.6% of
// the pass) and left the reduce 66 dependent-ish L2 loads per column. The R cotangent values a
// warp needs are loaded as whole 16-byte packs (one load instead of R scalar ones), halving the
// load instructions per row for 2-byte types.
template <class T, int R>
__device__ __forceinline__ void load_v_rows(const T* __restrict__ v, long long g, float (&vi)[R]) {
  constexpr int N = Pack<T>::N;
  if constexpr (R % N == 0) {
#pragma unroll
    for (int q = 0; q < R / N; ++q) {
      Pack<T> p = *reinterpret_cast<const Pack<T>*>(v + g + q * N);
#pragma unroll
      for (int e = 0; e < N; ++e) vi[q * N + e] = to_f(p.v[e]);
    }
  } else {
#pragma unroll
    for (int u = 0; u < R; ++u) vi[u] = to_f(v[g + u]);
  }
}

// The WARPS warps' column sums through shared memory; returns, for thread t < 32*N, the block's
// sum for local column t (column order, so the caller's stores are coalesced). The row pitch of
// N+1 floats keeps both the pack-order writes and the column-order reads bank-conflict free.
template <int N, int WARPS>
__device__ __forceinline__ void block_column_sums(const float (&acc)[N], float* red, int lane, int warp) {
#pragma unroll
  for (int e = 0; e < N; ++e) red[warp * 32 * (N + 1) + lane * (N + 1) + e] = acc[e];
  __syncthreads();
  for (int c = threadIdx.x; c < 32 * N; c += WARPS * 32) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) s += red[w * 32 * (N + 1) + c + c / N];
    red[WARPS * 32 * (N + 1) + c] = s;
  }
  __syncthreads();
}

// Adds rows [g, min(g + R, r1)) of the 16-byte column pack at col0, each times its v, into acc:
// a whole group's R loads are all issued before the first FMA.
template <class T, int R>
__device__ __forceinline__ void add_row_group(const T* __restrict__ W, const T* __restrict__ v,
                                              float (&acc)[Pack<T>::N], long long g, long long r1, long long k,
                                              long long col0) {
  constexpr int N = Pack<T>::N;
  if (g + R <= r1) {
    Pack<T> w[R];
    float vi[R];
#pragma unroll
    for (int u = 0; u < R; ++u) w[u] = *reinterpret_cast<const Pack<T>*>(W + (g + u) * k + col0);
    load_v_rows<T, R>(v, g, vi);
#pragma unroll
    for (int u = 0; u < R; ++u)
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] += to_f(w[u].v[e]) * vi[u];
  } else {
    for (long long i = g; i < r1; ++i) {
      Pack<T> w = *reinterpret_cast<const Pack<T>*>(W + i * k + col0);
      float vi = to_f(v[i]);
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] += to_f(w.v[e]) * vi;
    }
  }
}

template <class T, int R, int WARPS>
__device__ __forceinline__ void warp_rows_accumulate(const T* __restrict__ W, const T* __restrict__ v,
                                                     float (&acc)[Pack<T>::N], long long col0, long long r0,
                                                     long long r1, long long k, int warp) {
  constexpr int N = Pack<T>::N;
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] = 0.f;
  for (long long g = r0 + (long long)warp * R; g < r1; g += (long long)WARPS * R)
    add_row_group<T, R>(W, v, acc, g, r1, k, col0);
}

// Variants 7-8: the block's column sums over its slice of rows (blockIdx.x: 32 column packs,
// blockIdx.y: the slice); returns the shared-memory row of 32*N sums.
template <class T, int R, int WARPS>
__device__ __forceinline__ const float* slice_column_sums(const T* __restrict__ W, const T* __restrict__ v,
                                                          float* red, long long m, long long k,
                                                          long long rows_per_slice) {
  constexpr int N = Pack<T>::N;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  long long col0 = blockIdx.x * 32LL * N + (long long)lane * N;
  long long r0 = blockIdx.y * rows_per_slice;
  long long r1 = r0 + rows_per_slice < m ? r0 + rows_per_slice : m;
  float acc[N];
  if (col0 < k) {
    warp_rows_accumulate<T, R, WARPS>(W, v, acc, col0, r0, r1, k, warp);
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) acc[e] = 0.f;
  }
  block_column_sums<N, WARPS>(acc, red, lane, warp);
  return red + WARPS * 32 * (N + 1);
}

// Variants 8-10 finish through the library's add_and_finish (cuda/ops/vjp_dx.cuh): block sums added into
// the fp32 accumulator in L2, the block that completes a column block converts and re-zeroes it.

// Variant 7's slice kernel: per block one partial row, then the reduce kernel (PDL on sm_90+).
template <class T, int R, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    vjp_dx_warp_rows(const T* __restrict__ W, const T* __restrict__ v, float* __restrict__ part, long long m,
                     long long k, long long rows_per_slice) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  constexpr int N = Pack<T>::N;
  __shared__ float red[(WARPS + 1) * 32 * (N + 1)];
  const float* sums = slice_column_sums<T, R, WARPS>(W, v, red, m, k, rows_per_slice);
  const long long cb = blockIdx.x * 32LL * N;
  for (int c = threadIdx.x; c < 32 * N && cb + c < k; c += WARPS * 32) part[blockIdx.y * k + cb + c] = sums[c];
}

// Variant 8: variant 7 in one launch without re-reading partials: each block adds its partial row
// into an fp32 accumulator with red.global.add (vector form on sm_90, done in L2, no DRAM
// traffic), and the last block of a column range converts the sums to T and zeroes the
// accumulator and its counter again for the next call.
template <class T, int R, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    vjp_dx_warp_rows_atomic(const T* __restrict__ W, const T* __restrict__ v, T* __restrict__ dx,
                            float* __restrict__ accum, unsigned* __restrict__ counters, long long m, long long k,
                            long long rows_per_slice) {
  constexpr int N = Pack<T>::N;
  __shared__ float red[(WARPS + 1) * 32 * (N + 1)];
  __shared__ bool last;
  const float* sums = slice_column_sums<T, R, WARPS>(W, v, red, m, k, rows_per_slice);
  add_and_finish<T, WARPS * 32>(sums, dx, accum, counters, blockIdx.x, k, 1u, gridDim.y, &last);
}

// version 10: variant 8's register loads and atomic finish on variant 9's schedule. The grid is
// exactly the blocks the SMs hold at once, and each block owns a contiguous, equal share of the
// (column block, WARPS*R-row group) units, column block by column block. Variant 8's grid is
// rounded to whole slices, so it is a few % larger than the resident blocks (1088 for 1056 slots
// at 16384^2 fp16 on 132 SMs) and its last blocks start when the others end and run nearly alone:
// a tail where too few loads are in flight to keep DRAM busy. Here every block ends within one
// unit (R*WARPS rows x 512 B) of the others. A block adds its sums into the accumulator whenever
// its range leaves a column block (at most a few times), with the units it did there as its count.
template <class T, int R, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
    vjp_dx_persistent(const T* __restrict__ W, const T* __restrict__ v, T* __restrict__ dx,
                      float* __restrict__ accum, unsigned* __restrict__ counters, long long m, long long k,
                      long long groups, long long units) {
  constexpr int N = Pack<T>::N;
  constexpr long long G = (long long)R * WARPS;
  __shared__ float red[(WARPS + 1) * 32 * (N + 1)];
  __shared__ bool last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long u0 = units * blockIdx.x / gridDim.x, u1 = units * (blockIdx.x + 1) / gridDim.x;
  long long cbi = u0 / groups, gi = u0 % groups;  // advanced incrementally: no 64-bit division per unit
  float acc[N];
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] = 0.f;
  unsigned done = 0;
  for (long long u = u0; u < u1; ++u) {
    const long long col0 = cbi * 32 * N + (long long)lane * N, g = gi * G + (long long)warp * R;
    if (col0 < k) add_row_group<T, R>(W, v, acc, g, m, k, col0);  // (the last group of a ragged m is partial)
    ++done;
    if (++gi == groups || u + 1 == u1) {  // leaving this column block (block-uniform)
      block_column_sums<N, WARPS>(acc, red, lane, warp);
      add_and_finish<T, WARPS * 32>(red + WARPS * 32 * (N + 1), dx, accum, counters, cbi, k, done,
                                    (unsigned)groups, &last);
      done = 0;
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] = 0.f;
      if (gi == groups) gi = 0, ++cbi;
    }
  }
}

// Variant 9 (sm_90): the Tensor Memory Accelerator streams W. A block owns a contiguous, equal
// share of all (column block, TR-row tile) units, so every SM gets the same bytes whatever the
// shape (no slice rounding, no second wave). One thread issues one TMA load per 512 B x TR tile
// into an S-stage shared-memory ring, so the bytes in flight per SM (up to S x TR x 512) no longer
// depend on registers and warps; warps only read shared memory and multiply. Rows past m and
// columns past k arrive as zeros. When its range leaves a column block, the block adds its sums
// into the fp32 accumulator (red.global.add in L2) and counts the tiles it did there; whoever
// completes a column block's count writes dx and clears the accumulator, as variant 8.
template <class T, int NW, int TR, int S>
__global__ void __launch_bounds__(NW * 32)
    vjp_dx_tma(const __grid_constant__ CUtensorMap map, const T* __restrict__ v, T* __restrict__ dx,
               float* __restrict__ accum, unsigned* __restrict__ counters, long long m, long long k,
               long long row_tiles, long long units) {
#if __CUDA_ARCH__ >= 900
  constexpr int N = Pack<T>::N, RPW = TR / NW;  // rows per warp per tile
  static_assert(TR % NW == 0, "each warp takes whole rows of a tile");
  extern __shared__ unsigned char vjp_tma_dyn[];
  // TMA destinations must be 128-byte aligned; the launcher adds 128 bytes of slack.
  Pack<T>* tiles = reinterpret_cast<Pack<T>*>(vjp_tma_dyn + ((128 - (gb::ptx::smem_addr(vjp_tma_dyn) & 127)) & 127));
  __shared__ __align__(8) uint64_t full[S];
  __shared__ float red[(NW + 1) * 32 * (N + 1)];
  __shared__ bool last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long u0 = units * blockIdx.x / gridDim.x, u1 = units * (blockIdx.x + 1) / gridDim.x;
  const int n = (int)(u1 - u0);
  if (threadIdx.x == 0) {
    for (int st = 0; st < S; ++st) gb::ptx::mbar_init(&full[st], 1);
    gb::ptx::mbar_fence_init();
  }
  __syncthreads();
  auto issue = [&](int t) {
    long long u = u0 + t;
    gb::ptx::mbar_arrive_expect_tx(&full[t % S], TR * 32 * 16);
    gb::ptx::tma_load_2d(gb::ptx::smem_addr(tiles + (t % S) * TR * 32), &map, &full[t % S],
                         (int)((u / row_tiles) * 32 * N), (int)((u % row_tiles) * TR));
  };
  if (threadIdx.x == 0)
    for (int t = 0; t < S && t < n; ++t) issue(t);
  auto load_v = [&](long long u, float(&vi)[RPW]) {
    long long g = (u % row_tiles) * TR + (long long)warp * RPW;
    if (g + RPW <= m) {
      load_v_rows<T, RPW>(v, g, vi);
    } else {
#pragma unroll
      for (int j = 0; j < RPW; ++j) vi[j] = g + j < m ? to_f(v[g + j]) : 0.f;
    }
  };
  float acc[N], vi[RPW], vn[RPW];
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] = 0.f;
  if (n > 0) load_v(u0, vi);
  int t_first = 0;  // this block's first tile in the current column block
  for (int t = 0; t < n; ++t) {
    const long long u = u0 + t, cbi = u / row_tiles;
    if (t + 1 < n) load_v(u + 1, vn);  // one tile ahead: the L2 latency of v hides behind this tile
    gb::ptx::mbar_wait(&full[t % S], (t / S) & 1);
    const Pack<T>* tile = tiles + (t % S) * TR * 32;
#pragma unroll
    for (int j = 0; j < RPW; ++j) {
      Pack<T> w = tile[(warp * RPW + j) * 32 + lane];
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] += to_f(w.v[e]) * vi[j];
    }
    __syncthreads();  // every warp is done with this stage: it may be refilled
    if (threadIdx.x == 0 && t + S < n) issue(t + S);
#pragma unroll
    for (int j = 0; j < RPW; ++j) vi[j] = vn[j];
    if (t == n - 1 || (u + 1) / row_tiles != cbi) {  // leaving this column block (block-uniform)
      block_column_sums<N, NW>(acc, red, lane, warp);
      add_and_finish<T, NW * 32>(red + NW * 32 * (N + 1), dx, accum, counters, cbi, k, (unsigned)(t - t_first + 1),
                                 (unsigned)row_tiles, &last);
      t_first = t + 1;
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] = 0.f;
    }
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90 code: the launcher refuses before this can run
#endif
}



// The slices' sum, one thread per column; with `pdl` (sm_90+) a programmatic dependent launch: it
// is scheduled while the slice kernel drains and waits in-kernel for its writes.
template <class T>
inline void launch_dx_reduce(const float* part, T* dx, long long k, int slices, bool pdl, cudaStream_t s) {
  if (!pdl) {
    vjp_dx_reduce<T><<<(unsigned)((k + 255) / 256), 256, 0, s>>>(part, dx, k, slices);
    return;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)((k + 255) / 256));
  cfg.blockDim = dim3(256);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, vjp_dx_reduce<T, true>, part, dx, k, slices);
}

// Variant 3: 16 blocks per SM; variant 4 (and 5, 6): 8 rows' loads in flight per thread and only ~4
// blocks per SM, so the slices (and the fp32 partials they write and re-read, ~7% extra traffic for
// 2-byte types in variant 3) are 4x fewer.
constexpr int kDxBlocksPerSmV3 = 16, kDxBlocksPerSmV4 = 4;

// Variants 7-8: blocks of 32 column packs; slices so that ~bps blocks per SM are resident, each
// slice a whole number of R-row groups (so a warp's R cotangent values are one aligned load).
inline void warp_rows_geometry(long long m, long long k, int pack, int warps, int rows, int sms, int bps,
                               long long* xblocks, long long* slices, long long* rows_per_slice) {
  *xblocks = (k + 32LL * pack - 1) / (32LL * pack);
  long long want = ((long long)bps * sms + *xblocks - 1) / *xblocks;
  long long max_slices = m / ((long long)warps * rows) > 0 ? m / ((long long)warps * rows) : 1;
  *slices = want < 1 ? 1 : (want > max_slices ? max_slices : want);
  long long rps = (m + *slices - 1) / *slices;
  *rows_per_slice = (rps + rows - 1) / rows * rows;
  *slices = (m + *rows_per_slice - 1) / *rows_per_slice;
}

// The configurations of variants 7 and 8, from the lab's tuning sweep on an H200 (cold L2, 12
// shape/dtype cases, da1a708:docs/results/vjp-dx-sweep-h200-2026-11-22-cold.txt): 8 rows in flight
// per warp and ~32 resident warps per SM in both. Variant 8 uses 4-warp blocks, 8 per SM: the
// finer blocks were the best configuration in the worst case (97.9% of cuBLAS) and on average
// (102.7%); with a second launch to amortise (variant 7), 8-warp blocks, 4 per SM, did better.
constexpr int kDxV7Rows = 8, kDxV7Warps = 8, kDxV7BlocksPerSm = 4;
constexpr int kDxV8Rows = 8, kDxV8Warps = 4, kDxV8BlocksPerSm = 8;
constexpr int kDxV9Warps = 8, kDxV9Rows = 64, kDxV9Stages = 4;
constexpr int kDxV10Rows = 8, kDxV10Warps = 4, kDxV10BlocksPerSm = 16;

// The lab's workspace (floats, from the lab's part of the case's workspace): [partials: the most
// slices any of variants 3-7 uses x k] [variant 5's counters, one per column block] [the fp32
// accumulator of variants 8-10, k] [their counters, one per 32 columns or more]. Counters and
// accumulator start zeroed (the case zeroes its workspace once) and reset themselves.
inline long long dx_partials_floats(long long m, long long k, int sms) {
  long long most = 1;
  for (int pack : {4, 8}) {
    for (int bps : {kDxBlocksPerSmV3, kDxBlocksPerSmV4}) {
      long long xb, sl, rps;
      dx_geometry(m, k, pack, sms, &xb, &sl, &rps, bps);
      most = sl > most ? sl : most;
    }
    long long xb, sl, rps;
    warp_rows_geometry(m, k, pack, kDxV7Warps, kDxV7Rows, sms, kDxV7BlocksPerSm, &xb, &sl, &rps);
    most = sl > most ? sl : most;
  }
  return (most * k + 3) / 4 * 4;  // 16-byte aligned from here on
}
inline long long dx_counter_offset(long long m, long long k, int sms) { return dx_partials_floats(m, k, sms); }
inline long long dx_accum_offset(long long m, long long k, int sms) {
  long long xblocks = ((k + 3) / 4 + kDxBlock - 1) / kDxBlock;  // most column blocks (fp32 packs)
  return dx_counter_offset(m, k, sms) + (xblocks + 3) / 4 * 4;
}
inline long long dx_accum_counter_offset(long long m, long long k, int sms) {
  return dx_accum_offset(m, k, sms) + (k + 3) / 4 * 4;
}
inline long long vjp_dx_lab_work_floats(long long m, long long k, int sms) {
  return dx_accum_counter_offset(m, k, sms) + (k + 31) / 32;
}
inline float* dx_accum(float* work, long long m, long long k, int sms) { return work + dx_accum_offset(m, k, sms); }
inline unsigned* dx_accum_counters(float* work, long long m, long long k, int sms) {
  return reinterpret_cast<unsigned*>(work + dx_accum_counter_offset(m, k, sms));
}

// Whole 16-byte packs of every row: the kernels above have no ragged-column path.
template <class T>
inline void need_packs(const char* name, long long k, int pack = Pack<T>::N) {
  if (k % pack != 0)
    throw gb::NotApplicable(std::string(name) + " needs k a multiple of " + std::to_string(pack) +
                            " (whole 16-byte packs of every row)");
}
inline void need_sm90(const char* name, int cc, const char* what) {
  if (cc < 90) throw gb::NotApplicable(std::string(name) + " needs sm_90 or newer (" + what + ")");
}

// Variants 3 and 4 (R rows in flight), 6 (variant 4 with the reduce a programmatic dependent launch).
template <class T, int R>
void launch_dx_rows_in_flight(const T* W, const T* v, T* dx, float* work, long long m, long long k, int sms, int bps,
                              bool pdl, cudaStream_t s) {
  long long xblocks, slices, rps;
  dx_geometry(m, k, Pack<T>::N, sms, &xblocks, &slices, &rps, bps);
  dim3 grid((unsigned)xblocks, (unsigned)slices);
  if (pdl) vjp_dx_partial_rows<T, R, true><<<grid, kDxBlock, 0, s>>>(W, v, work, m, k, rps);
  else vjp_dx_partial_rows<T, R><<<grid, kDxBlock, 0, s>>>(W, v, work, m, k, rps);
  launch_dx_reduce(work, dx, k, (int)slices, pdl, s);
}

// Variant 5: one launch, the last slice block of a column range sums the partials.
template <class T>
void launch_dx_fused_last_block(const T* W, const T* v, T* dx, float* work, long long m, long long k, int sms,
                                cudaStream_t s) {
  long long xblocks, slices, rps;
  dx_geometry(m, k, Pack<T>::N, sms, &xblocks, &slices, &rps, kDxBlocksPerSmV4);
  auto counters = reinterpret_cast<unsigned*>(work + dx_counter_offset(m, k, sms));
  vjp_dx_fused<T, 8><<<dim3((unsigned)xblocks, (unsigned)slices), kDxBlock, 0, s>>>(W, v, dx, work, counters, m, k,
                                                                                    rps);
}

// Variant 7 (slice kernel + reduce, the reduce a programmatic dependent where sm_90 allows) or
// variant 8 (one kernel, atomic accumulation), for one (R, WARPS) configuration.
template <class T, int R, int WARPS>
void launch_dx_warp_rows(bool atomic, const T* W, const T* v, T* dx, float* work, long long m, long long k, int sms,
                         int bps, bool pdl, cudaStream_t s) {
  long long xblocks, slices, rps;
  warp_rows_geometry(m, k, Pack<T>::N, WARPS, R, sms, bps, &xblocks, &slices, &rps);
  dim3 grid((unsigned)xblocks, (unsigned)slices);
  if (atomic) {
    vjp_dx_warp_rows_atomic<T, R, WARPS><<<grid, WARPS * 32, 0, s>>>(
        W, v, dx, dx_accum(work, m, k, sms), dx_accum_counters(work, m, k, sms), m, k, rps);
    return;
  }
  vjp_dx_warp_rows<T, R, WARPS><<<grid, WARPS * 32, 0, s>>>(W, v, work, m, k, rps);
  launch_dx_reduce(work, dx, k, (int)slices, pdl, s);
}

// Variant 10 for one (R, WARPS) configuration, at most `bps` blocks per SM (fewer if the SM holds fewer).
template <class T, int R, int WARPS>
void launch_dx_persistent(const T* W, const T* v, T* dx, float* work, long long m, long long k, int sms, int bps,
                          cudaStream_t s) {
  static std::once_flag once;
  static int resident = 0;
  std::call_once(once, [] {
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, vjp_dx_persistent<T, R, WARPS>, WARPS * 32, 0) !=
        cudaSuccess)
      resident = 0;
  });
  if (resident < 1)
    throw gb::NotApplicable("vjp_dx_persistent: its kernel does not fit on an SM (occupancy query failed)");
  long long groups = (m + (long long)R * WARPS - 1) / ((long long)R * WARPS);
  long long units = groups * ((k + 32LL * Pack<T>::N - 1) / (32LL * Pack<T>::N));
  long long grid = (long long)(bps < resident ? bps : resident) * sms;
  if (grid > units) grid = units;
  vjp_dx_persistent<T, R, WARPS><<<(unsigned)grid, WARPS * 32, 0, s>>>(
      W, v, dx, dx_accum(work, m, k, sms), dx_accum_counters(work, m, k, sms), m, k, groups, units);
}

template <class T>
CUtensorMap dx_tile_map(const T* W, long long m, long long k, int box_rows) {
  auto encode = tensor_map_encoder();
  if (!encode) throw gb::NotApplicable("vjp_dx_tma_ring: cuTensorMapEncodeTiled is not available from this driver");
  constexpr CUtensorMapDataType type = std::is_same_v<T, float>    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                       : std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                   : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  CUtensorMap map{};
  cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)m};
  cuuint64_t strides[1] = {(cuuint64_t)(k * sizeof(T))};
  cuuint32_t box[2] = {(cuuint32_t)(32 * Pack<T>::N), (cuuint32_t)box_rows}, estr[2] = {1, 1};
  CUresult rc = encode(&map, type, 2, const_cast<T*>(W), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                       CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (rc != CUDA_SUCCESS) throw std::runtime_error("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(rc));
  return map;
}

// Variant 9 for one (warps, tile rows, stages) configuration: one grid of exactly the resident
// blocks (occupancy set by the ring's shared memory). Tensor maps are cached per (W, m, k): the
// case rotates a few input sets.
template <class T, int NW, int TR, int S>
void launch_dx_tma(const T* W, const T* v, T* dx, float* work, long long m, long long k, int sms, cudaStream_t s) {
  constexpr int SMEM = S * TR * 32 * 16 + 128;
  static std::once_flag once;
  static cudaError_t rc = cudaSuccess;
  static int binary = 0, resident = 0;
  std::call_once(once, [] {
    cudaFuncAttributes fa{};
    rc = cudaFuncGetAttributes(&fa, vjp_dx_tma<T, NW, TR, S>);
    binary = fa.binaryVersion;
    if (rc == cudaSuccess)
      rc = cudaFuncSetAttribute(vjp_dx_tma<T, NW, TR, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
    if (rc == cudaSuccess)
      rc = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, vjp_dx_tma<T, NW, TR, S>, NW * 32, SMEM);
  });
  if (rc != cudaSuccess || binary < 90)
    throw gb::NotApplicable("vjp_dx_tma_ring: this build has no sm_90 code for the TMA kernel (binary sm_" +
                            std::to_string(binary) + ")");
  if (m > INT32_MAX || k > INT32_MAX) throw gb::NotApplicable("vjp_dx_tma_ring: TMA coordinates are 32-bit: m and k must fit");
  static std::mutex mu;
  static std::map<std::tuple<const void*, long long, long long>, CUtensorMap> cache;
  CUtensorMap map;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto key = std::make_tuple(static_cast<const void*>(W), m, k);
    auto it = cache.find(key);
    if (it == cache.end()) {
      if (cache.size() > 64) cache.clear();
      it = cache.emplace(key, dx_tile_map(W, m, k, TR)).first;
    }
    map = it->second;
  }
  long long row_tiles = (m + TR - 1) / TR, xblocks = (k + 32LL * Pack<T>::N - 1) / (32LL * Pack<T>::N);
  long long units = row_tiles * xblocks, grid = (long long)(resident > 0 ? resident : 1) * sms;
  if (grid > units) grid = units;
  vjp_dx_tma<T, NW, TR, S><<<(unsigned)grid, NW * 32, SMEM, s>>>(
      map, v, dx, dx_accum(work, m, k, sms), dx_accum_counters(work, m, k, sms), m, k, row_tiles, units);
}

}  // namespace gb::blas::lab_kernels
