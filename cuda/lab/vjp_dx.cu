/*
VJP dx = W^T v (W row-major m x k, v of length m): the input cotangent of y = W x, a column
reduction. Memory-bound: W is read once, so the target is the copy bandwidth and cuBLAS (sgemv for
fp32, GemmEx with n = 1 for fp16/bf16, which runs nvjet / gemvx kernels).

Build (or: cmake -S . -B build-lab -DGAPBENCH_LAB=ON && cmake --build build-lab):
  nvcc -O3 -std=c++20 -arch=sm_90a cuda/lab/vjp_dx.cu -o vjp_dx -ldl

version 1, vjp_dx_reference: one thread per column over all rows (coalesced, but only k threads).
version 2, vjp_dx_row_slices (parent 1): each thread owns one 16-byte pack of columns for a slice of
  rows, so the grid fills every SM; per-slice fp32 partials and a second kernel that sums them.
version 3, dx_rows_in_flight4 (parent 2): 4 rows' loads issued before their FMAs, twice the slices.
version 4, dx_rows_in_flight8 (parent 3): 8 rows' loads in flight, 4x fewer slices.
version 5, dx_fused_last_block (parent 4): one launch; the last slice block to finish a column
  range sums the partials; W read with evict-first loads. Slower: the serial finish costs more
  than the launch it saves.
version 6, dx_pdl_reduce (parent 4, sm_90+): the reduce kernel as a programmatic dependent launch,
  so its launch latency overlaps the slice kernel's tail.
version 7, dx_warp_rows (parent 4): a block owns 32 column packs (512 B of each row) and splits the
  ROWS of its slice among its warps; sums meet in shared memory, one partial row per block (8x
  fewer partials), then the reduce (PDL on sm_90).
version 8, dx_warp_rows_atomic (parent 7): one launch, 4-warp blocks; partial rows added into an
  fp32 accumulator with red.global.add (in L2), the last block of a column range converts.
version 9, dx_tma_ring (parent 8, sm_90+): a TMA ring streams W tiles into shared memory, equal
  work per resident block. Correct and slower (80-98% of cuBLAS): the measured negative result.
version 10, dx_persistent (parent 8): variant 8's loads and finish on a grid of exactly the
  resident blocks, each an equal contiguous share. 1-3% slower than variant 8.
version 11, vjp_dx_strips128 (parent 8): narrow column strips (128 B of a row) so at wide k each block
  owns its columns over all rows and writes dx itself: no cross-block finish (cuBLAS's structure).
version 12, vjp_dx_strips256 (parent 11): 256-byte strips, one 32-warp block per SM; 128-byte strips
  only where the wide ones cannot fill the SMs. Chosen with the clean (read-pass) cold scrub.
version 13, vjp_dx_strips128_wave (parent 12): variant 12 from 4096 rows up; below, 128-byte strips in
  blocks sized so every strip runs in one wave.
version 14, vjp_dx_strips128_wave_ef (parent 13): variant 13 with evict-first loads of W under 4096
  rows, so a W read once does not push other (possibly dirty) lines out of L2.
The library ships the variant 12-14 family (strips) with the fp32 choices among 6-8 where they led
(see LINEAGE.md).

Tuning families (--configs; each adds configurations of a variant's kernel as extra arms):
  pdl (variant 7's kernel), atomic (8's), persistent (10's) over rows in flight R x warps W x blocks
  per SM; strips (11's) over lanes per strip row L x R x W x blocks per SM; loads (11's and 13's
  rules with each load policy for W: plain, evict-first, no-L1 + 256-byte L2 fetch); ws (an
  experiment, not a variant: cuBLAS's warp-specialized TMA structure, producer warp + full/empty
  mbarriers).

Sweep: ./vjp_dx [--variants all|1,2,..] [--configs all|pdl,..] [--dtypes fp16,bf16,fp32]
                [--shapes MxK,...] [--rounds N] [--cold read|write|none] [--json FILE] [--cublas PATH]
*/
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include "common.h"
#include "ops/vjp_dx.cuh"  // the library's kernels of the op (reference and shipped)

// The library's kernels this file runs (cuda/ops/vjp_dx.cuh), by their strategy names.
using gb::blas::add_and_finish;
using gb::blas::dx_geometry;
using gb::blas::kDxBlock;
using gb::blas::launch_vjp_dx_strips;
using gb::blas::launch_vjp_dx_strips128_wave;
using gb::blas::load_w_pack;
using gb::blas::vjp_dx_reduce;
using gb::blas::vjp_dx_reference;
using gb::blas::vjp_dx_row_slices;
using gb::blas::vjp_dx_strips;
#include "ptx.cuh"

using namespace lab;

[[noreturn]] static void refuse_dx(int variant, const std::string& why) {
  die(1, "vjp_dx variant " + std::to_string(variant) + " cannot run here: " + why);
}

// ----------------------------------------------------------------------------
// CPU reference: dx[j] = sum_i W[i,j] v[i] in float64 on the inputs as rounded to the dtype.

static std::vector<double> vjp_dx_cpu(const void* W, const void* v, long long m, long long k, int dt) {
  std::vector<double> dx(k, 0.0);
  for (long long i = 0; i < m; ++i) {
    double vi = host_value(v, i, dt);
    for (long long j = 0; j < k; ++j) dx[j] += host_value(W, i * k + j, dt) * vi;
  }
  return dx;
}

// ----------------------------------------------------------------------------
// GPU kernels and their launch geometry (variant numbers in each comment)

// version 1

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

// Variants 8-9's finish: add a block's sums for column block `cbi` into the fp32 accumulator
// (red.global.add, vector form on sm_90: done in L2, no DRAM traffic), then count the `done`
// units it covered there; the block whose count completes `total` converts the sums to T and
// zeroes the accumulator and the counter again for the next call. Block-uniform; `last` is shared.

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

// version 11: narrow column strips, so that at wide k no block shares its columns with another.
// L lanes (L x 16 B) span a strip's row; a warp load instruction covers 32/L rows (still whole
// 128-byte lines at L = 8). With k wide enough the grid is one slice of strips: every block walks
// all m rows of its strip and writes its dx values itself: no partials, no atomics, no finishing
// block. Variant 8's finish is a chain of L2 round trips (vector reds, fence, counter, re-read)
// that ends each call; cuBLAS's fp16 kernel at 16384^2 on an H200 (nvjet ..._128x8_...: 128
// blocks of 256-byte strips, no split) has none. Dropping it took about half of the ~2 us by which
// variant 8 trailed cuBLAS there. Where there are too few strips to fill the GPU, slices of rows
// share a strip and finish as variant 8 does.
// W's 16-byte packs for variant 11: LD 0 a plain load, 1 evict-first (__ldcs), 2 no L1
// allocation with a 256-byte L2 fetch (lab::ptx::ld_stream_l2_256).

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
  Pack<T>* tiles = reinterpret_cast<Pack<T>*>(vjp_tma_dyn + ((128 - (lab::ptx::smem_addr(vjp_tma_dyn) & 127)) & 127));
  __shared__ __align__(8) uint64_t full[S];
  __shared__ float red[(NW + 1) * 32 * (N + 1)];
  __shared__ bool last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long u0 = units * blockIdx.x / gridDim.x, u1 = units * (blockIdx.x + 1) / gridDim.x;
  const int n = (int)(u1 - u0);
  if (threadIdx.x == 0) {
    for (int st = 0; st < S; ++st) lab::ptx::mbar_init(&full[st], 1);
    lab::ptx::mbar_fence_init();
  }
  __syncthreads();
  auto issue = [&](int t) {
    long long u = u0 + t;
    lab::ptx::mbar_arrive_expect_tx(&full[t % S], TR * 32 * 16);
    lab::ptx::tma_load_2d(lab::ptx::smem_addr(tiles + (t % S) * TR * 32), &map, &full[t % S],
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
    lab::ptx::mbar_wait(&full[t % S], (t / S) & 1);
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
static void launch_dx_reduce(const float* part, T* dx, long long k, int slices, bool pdl, cudaStream_t s) {
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


static constexpr int kDxBlocksPerSmV3 = 16;
// Variant 4: 8 rows' loads in flight per thread and only ~4 blocks per SM, so the slices (and
// the fp32 partials they write and re-read, ~7% extra traffic for 2-byte types in variant 3)
// are 4x fewer.
static constexpr int kDxBlocksPerSmV4 = 4;

// Variants 7-8: blocks of 32 column packs; slices so that ~bps blocks per SM are resident, each
// slice a whole number of R-row groups (so a warp's R cotangent values are one aligned load).
static void warp_rows_geometry(long long m, long long k, int pack, int warps, int rows, int sms, int bps,
                               long long* xblocks, long long* slices, long long* rows_per_slice) {
  *xblocks = (k + 32LL * pack - 1) / (32LL * pack);
  long long want = ((long long)bps * sms + *xblocks - 1) / *xblocks;
  long long max_slices = m / ((long long)warps * rows) > 0 ? m / ((long long)warps * rows) : 1;
  *slices = want < 1 ? 1 : (want > max_slices ? max_slices : want);
  long long rps = (m + *slices - 1) / *slices;
  *rows_per_slice = (rps + rows - 1) / rows * rows;
  *slices = (m + *rows_per_slice - 1) / *rows_per_slice;
}

// The configurations of variants 7 and 8, from the tuning sweep (now this file's --configs) on an H200 (cold L2,
// 12 shape/dtype cases, da1a708:docs/results/vjp-dx-sweep-h200-2026-11-22-cold.txt): 8 rows in flight
// per warp and ~32 resident warps per SM in both. Variant 8 uses 4-warp blocks, 8 per SM: the
// finer blocks were the best configuration in the worst case (97.9% of cuBLAS) and on average
// (102.7%); with a second launch to amortise (variant 7), 8-warp blocks, 4 per SM, did better.
static constexpr int kDxV7Rows = 8, kDxV7Warps = 8, kDxV7BlocksPerSm = 4;
static constexpr int kDxV8Rows = 8, kDxV8Warps = 4, kDxV8BlocksPerSm = 8;

// Workspace layout (floats): [partials: the most slices any variant uses x k]
// [variant 5's counters, one per column block] [variant 8's fp32 accumulator, k]
// [variant 8's counters]. Counters and accumulator start zeroed and reset themselves.
static long long dx_partials_floats(long long m, long long k, int sms) {
  long long most = 1;
  for (int pack : {4, 8}) {
    for (int bps : {8, kDxBlocksPerSmV3, kDxBlocksPerSmV4}) {
      long long xb, sl, rps;
      dx_geometry(m, k, pack, sms, &xb, &sl, &rps, bps);
      most = sl > most ? sl : most;
    }
    long long xb, sl, rps;
    warp_rows_geometry(m, k, pack, kDxV7Warps, kDxV7Rows, sms, kDxV7BlocksPerSm, &xb, &sl, &rps);
    most = sl > most ? sl : most;  // (variant 8 keeps no partials)
  }
  return (most * k + 3) / 4 * 4;  // 16-byte aligned from here on
}
static long long dx_counter_offset(long long m, long long k, int sms) { return dx_partials_floats(m, k, sms); }
static long long dx_accum_offset(long long m, long long k, int sms) {
  long long xblocks = ((k + 3) / 4 + kDxBlock - 1) / kDxBlock;  // most column blocks (fp32 packs)
  return dx_counter_offset(m, k, sms) + (xblocks + 3) / 4 * 4;
}
static long long dx_accum_counter_offset(long long m, long long k, int sms) {
  return dx_accum_offset(m, k, sms) + (k + 3) / 4 * 4;
}

static long long vjp_dx_work_floats(long long m, long long k, int sms) {
  // one counter per column block: variant 8's are 128 columns or more, variant 11's 32 or more
  return dx_accum_counter_offset(m, k, sms) + (k + 31) / 32;
}

// Variant 7 (slice kernel + reduce, the reduce a programmatic dependent where sm_90 allows) or
// variant 8 (one kernel, atomic accumulation), for one (R, WARPS) configuration; --configs calls this with
// others.
template <class T, int R, int WARPS>
void launch_dx_warp_rows(bool atomic, const T* W, const T* v, T* dx, float* work, long long m, long long k,
                         int sms, int bps, bool pdl, cudaStream_t s) {
  long long xblocks, slices, rps;
  warp_rows_geometry(m, k, Pack<T>::N, WARPS, R, sms, bps, &xblocks, &slices, &rps);
  dim3 grid((unsigned)xblocks, (unsigned)slices);
  if (atomic) {
    vjp_dx_warp_rows_atomic<T, R, WARPS><<<grid, WARPS * 32, 0, s>>>(
        W, v, dx, work + dx_accum_offset(m, k, sms),
        reinterpret_cast<unsigned*>(work + dx_accum_counter_offset(m, k, sms)), m, k, rps);
    return;
  }
  vjp_dx_warp_rows<T, R, WARPS><<<grid, WARPS * 32, 0, s>>>(W, v, work, m, k, rps);
  launch_dx_reduce(work, dx, k, (int)slices, pdl, s);
}


// version 10 for one (R, WARPS) configuration, at most `bps` blocks per SM (fewer if the SM holds
// fewer); --configs calls this with others.
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
  if (resident < 1) refuse_dx(10, "the persistent kernel does not fit on an SM (occupancy query failed)");
  long long groups = (m + (long long)R * WARPS - 1) / ((long long)R * WARPS);
  long long units = groups * ((k + 32LL * Pack<T>::N - 1) / (32LL * Pack<T>::N));
  long long grid = (long long)(bps < resident ? bps : resident) * sms;
  if (grid > units) grid = units;
  vjp_dx_persistent<T, R, WARPS><<<(unsigned)grid, WARPS * 32, 0, s>>>(
      W, v, dx, work + dx_accum_offset(m, k, sms),
      reinterpret_cast<unsigned*>(work + dx_accum_counter_offset(m, k, sms)), m, k, groups, units);
}

// The library's strip launchers (cuda/ops/vjp_dx.cuh: variants 11-14's kernel) on this file's
// workspace layout.
static float* dx_accum(float* work, long long m, long long k, int sms) { return work + dx_accum_offset(m, k, sms); }
static unsigned* dx_accum_counters(float* work, long long m, long long k, int sms) {
  return reinterpret_cast<unsigned*>(work + dx_accum_counter_offset(m, k, sms));
}
template <class T, int L, int R, int WARPS, int LD = 0>
void launch_dx_strips(const T* W, const T* v, T* dx, float* work, long long m, long long k, int sms, int bps,
                      cudaStream_t s) {
  launch_vjp_dx_strips<T, L, R, WARPS, LD>(W, v, dx, dx_accum(work, m, k, sms), dx_accum_counters(work, m, k, sms), m,
                                           k, sms, bps, s);
}
template <class T, int LD>
void launch_dx_wave(const T* W, const T* v, T* dx, float* work, long long m, long long k, int sms, cudaStream_t s) {
  launch_vjp_dx_strips128_wave<T, LD>(W, v, dx, dx_accum(work, m, k, sms), dx_accum_counters(work, m, k, sms), m, k,
                                      sms, s);
}

template <class T>
static CUtensorMap dx_tile_map(const T* W, long long m, long long k, int box_rows) {
  auto encode = tensor_map_encoder();
  if (!encode) refuse_dx(9, "cuTensorMapEncodeTiled is not available from this driver");
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

// Variant 9 for one (warps, tile rows, stages) configuration; --configs calls others.
// One grid of exactly the resident blocks (occupancy set by the ring's shared memory).
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
    refuse_dx(9, "this build has no sm_90 code for the TMA kernel (binary sm_" + std::to_string(binary) + ")");
  if (m > INT32_MAX || k > INT32_MAX) refuse_dx(9, "TMA coordinates are 32-bit: m and k must fit");
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
      map, v, dx, work + dx_accum_offset(m, k, sms),
      reinterpret_cast<unsigned*>(work + dx_accum_counter_offset(m, k, sms)), m, k, row_tiles, units);
}

static constexpr int kDxV9Warps = 8, kDxV9Rows = 64, kDxV9Stages = 4;
static constexpr int kDxV10Rows = 8, kDxV10Warps = 4, kDxV10BlocksPerSm = 16;
// version 11: 8 lanes (128 B) per strip row, 8 loads in flight per warp; the block size follows
// the number of strips (see launch_vjp_dx). From the sweep's "strips" family on an H200
// (da1a708:docs/results/vjp-dx-sweep-h200-2026-11-22-strips.txt): with more strips than SMs, 16-warp
// blocks two per SM (L8 R8 W16 bps2) were best or within noise; with fewer, one 32-warp block per
// SM (L8 R8 W32 bps1) avoided the second slice that cost 8192^2 bf16 3% there.
static constexpr int kDxV11Lanes = 8, kDxV11Rows = 8;
// version 12: variant 11's kernel retuned with the clean cold scrub (a read pass, so no dirty L2
// lines to write back; da1a708:docs/results/vjp-dx-sweep-h200-2026-11-22-paired-strips.txt): 256-byte
// strips (16 lanes, the width of cuBLAS's nvjet dx kernel) and one 32-warp block per SM, which
// at 16384 and 32768 rows streamed ~1% faster than variant 11's 128-byte strips: each row visit
// reads two whole 128-byte lines of W instead of one. Where 256-byte strips are too few to fill
// the SMs (fewer than ~3/4 of them) it falls back to 128-byte strips, so a strip still needs no
// second slice while the strips fill the GPU.
static constexpr int kDxV12WideLanes = 16, kDxV12NarrowLanes = 8, kDxV12Rows = 8, kDxV12Warps = 32;
// version 13: variant 12 from kDxV13TallRows rows up; below, 128-byte strips in blocks small
// enough that every strip's block is resident at once (16, 8 or 4 warps, ~32 warps per SM). With
// few rows a strip is a short job: variant 12's 256-byte strips in one 32-warp block per SM run
// in two or more waves when the strips outnumber the SMs, and the last wave leaves SMs idle
// (1024x16384 fp32: 256 strips, 95% of cuBLAS; one wave of 8-warp blocks: 103%;
// da1a708:docs/results/vjp-dx-sweep-h200-2026-11-22-small-m.txt).
static constexpr long long kDxV13TallRows = 4096;
// version 14: variant 13 with evict-first loads of W (ld.global.cs) below kDxV13TallRows. Such a
// W (under ~L2-sized to a few L2s) is read once; marking its lines first to go means the op
// replaces its own lines instead of evicting what else L2 holds, such as a previous kernel's
// dirty output, so that no write-back lands inside the op. With dirty lines in L2 (the memset
// scrub) this turned 88-94% of cuBLAS at 512-2048 x 16384 fp32 into 101.5-103.5%; with a clean
// L2 it is within 0.5% of plain loads (da1a708:docs/results/vjp-dx-sweep-h200-2026-11-22-loads13.txt).
// Tall W keeps variant 12's plain loads: evict-first was 4-11% slower there.
// Experiment (config family "ws"; not a numbered variant): cuBLAS's structure for dx as profiled on the H200
// (da1a708:docs/results/cublas-dx-kernels-h200-2026-11-22.txt): a block per 256-byte column strip walking
// all m rows; one producer warp streams 256 B x TR-row tiles by TMA into an S-stage ring with a
// full and an empty mbarrier per stage; C consumer warps multiply out of shared memory and free a
// stage by arriving on its empty barrier, so no block-wide barrier sits in the loop (variant 9 had
// one per tile). One block per SM (the ring is most of the shared memory); more strips than SMs
// run as a second wave, so this is only a contender at k*bytes ~ SMs * 256 B. VB = 1: the tile's
// v slice comes with it by a bulk copy on the same barrier (first version: v from global memory,
// an L2 round trip per tile in every consumer warp's path).
template <class T, int C, int TR, int S, int VB>
__global__ void __launch_bounds__((C + 1) * 32)
    dx_ws(const __grid_constant__ CUtensorMap map, const T* __restrict__ v, T* __restrict__ dx, long long m,
          long long k) {
#if __CUDA_ARCH__ >= 900
  constexpr int N = Pack<T>::N, RPW = TR / C;  // rows of a tile per consumer warp
  static_assert(TR % C == 0 && RPW % 2 == 0, "a consumer warp reads whole row pairs");
  extern __shared__ unsigned char ws_dyn[];
  Pack<T>* tiles = reinterpret_cast<Pack<T>*>(ws_dyn + ((128 - (lab::ptx::smem_addr(ws_dyn) & 127)) & 127));
  __shared__ __align__(8) uint64_t full[S], empty[S];
  __shared__ __align__(16) T vstage[VB ? S : 1][TR];  // VB: the tile's v slice arrives with its W tile
  __shared__ float red[C][16 * N];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long col_base = blockIdx.x * 16LL * N;
  const int ntiles = (int)((m + TR - 1) / TR);
  if (threadIdx.x == 0) {
    for (int st = 0; st < S; ++st) {
      lab::ptx::mbar_init(&full[st], 1);
      lab::ptx::mbar_init(&empty[st], C);
    }
    lab::ptx::mbar_fence_init();
  }
  __syncthreads();
  if (warp == C) {  // producer
    if (lane == 0)
      for (int t = 0; t < ntiles; ++t) {
        const int st = t % S;
        if (t >= S) lab::ptx::mbar_wait(&empty[st], ((t / S) - 1) & 1);
        const unsigned vbytes = VB ? (unsigned)(((m - (long long)t * TR < TR ? m - (long long)t * TR : TR) * sizeof(T) + 15) / 16 * 16) : 0u;
        lab::ptx::mbar_arrive_expect_tx(&full[st], TR * 256 + vbytes);
        lab::ptx::tma_load_2d(lab::ptx::smem_addr(tiles + st * TR * 16), &map, &full[st], (int)col_base, t * TR);
        if (VB)
          asm volatile(
              "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                  lab::ptx::smem_addr(&vstage[VB ? st : 0][0])),
              "l"(v + (long long)t * TR), "r"(vbytes), "r"(lab::ptx::smem_addr(&full[st]))
              : "memory");
      }
    return;
  }
  const int sub = lane >> 4, cl = lane & 15;  // a row is 16 lanes x 16 B: a warp load covers 2 rows
  float acc[N];
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] = 0.f;
  for (int t = 0; t < ntiles; ++t) {
    const int st = t % S;
    float vi[RPW / 2];
    if (!VB) {
#pragma unroll
      for (int j = 0; j < RPW / 2; ++j) {
        long long r = (long long)t * TR + warp * RPW + 2 * j + sub;
        vi[j] = r < m ? to_f(v[r]) : 0.f;
      }
    }
    lab::ptx::mbar_wait(&full[st], (t / S) & 1);
    if (VB) {
#pragma unroll
      for (int j = 0; j < RPW / 2; ++j) {
        long long r = (long long)t * TR + warp * RPW + 2 * j + sub;
        vi[j] = r < m ? to_f(vstage[VB ? st : 0][warp * RPW + 2 * j + sub]) : 0.f;
      }
    }
#pragma unroll
    for (int j = 0; j < RPW / 2; ++j) {
      Pack<T> w = tiles[st * TR * 16 + (warp * RPW + 2 * j + sub) * 16 + cl];
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] += to_f(w.v[e]) * vi[j];
    }
    __syncwarp();
    if (lane == 0) lab::ptx::mbar_arrive(&empty[st]);
  }
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], 16);
  if (sub == 0)
#pragma unroll
    for (int e = 0; e < N; ++e) red[warp][cl * N + e] = acc[e];
  asm volatile("bar.sync 1, %0;" ::"n"(C * 32) : "memory");  // the consumer warps only
  for (int c = threadIdx.x; c < 16 * N; c += C * 32) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < C; ++w) sum += red[w][c];
    if (col_base + c < k) dx[col_base + c] = from_f<T>(sum);
  }
#endif
}

template <class T, int C, int TR, int S, int VB>
static void launch_dx_ws(const T* W, const T* v, T* dx, long long m, long long k, cudaStream_t s) {
  constexpr int SMEM = S * TR * 256 + 128;
  static CUtensorMap map;
  static const void* mapped = nullptr;
  static long long mm = -1, mk = -1;
  if (mapped != W || mm != m || mk != k) {
    auto encode = tensor_map_encoder();
    constexpr CUtensorMapDataType type = std::is_same_v<T, float>    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                         : std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                     : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)m};
    cuuint64_t strides[1] = {(cuuint64_t)(k * sizeof(T))};
    cuuint32_t box[2] = {(cuuint32_t)(16 * Pack<T>::N), (cuuint32_t)TR}, estr[2] = {1, 1};
    if (!encode || encode(&map, type, 2, const_cast<T*>(W), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                          CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      die(1, "ws: tensor map encode failed");
    }
    cudaFuncSetAttribute(dx_ws<T, C, TR, S, VB>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
    mapped = W, mm = m, mk = k;
  }
  long long strips = (k + 16LL * Pack<T>::N - 1) / (16LL * Pack<T>::N);
  dx_ws<T, C, TR, S, VB><<<(unsigned)strips, (C + 1) * 32, SMEM, s>>>(map, v, dx, m, k);
}
static bool has_sm90() {
  int dev = 0, major = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  return major >= 9;
}

// The variants as the library numbered them; applicability is checked by dx_not_applicable first.
static bool launch_vjp_dx(int variant, int dt, const void* W, const void* v, void* dx, float* work, long long m,
                          long long k, int sms, cudaStream_t s) {
  if (variant == 9) {
    if (!has_sm90()) refuse_dx(9, "the Tensor Memory Accelerator needs sm_90 or newer");
    if (k % 8 != 0) return false;  // 16-byte row pitch for the TMA, every dtype
    return dispatch_dtype(dt, [&]<class T>() {
      launch_dx_tma<T, kDxV9Warps, kDxV9Rows, kDxV9Stages>(static_cast<const T*>(W), static_cast<const T*>(v),
                                                          static_cast<T*>(dx), work, m, k, sms, s);
    });
  }
  if (variant == 11) {
    if (k % 8 != 0) return false;  // whole 16-byte packs for every dtype
    return dispatch_dtype(dt, [&]<class T>() {
      auto w = static_cast<const T*>(W);
      auto vv = static_cast<const T*>(v);
      auto out = static_cast<T*>(dx);
      // More strips than SMs: 16-warp blocks, two per SM. Fewer: one 32-warp block per SM, so
      // that a strip needs no second slice (and no finish) until the strips no longer fill the GPU.
      if ((k + kDxV11Lanes * Pack<T>::N - 1) / (kDxV11Lanes * Pack<T>::N) > sms)
        launch_dx_strips<T, kDxV11Lanes, kDxV11Rows, 16>(w, vv, out, work, m, k, sms, 2, s);
      else
        launch_dx_strips<T, kDxV11Lanes, kDxV11Rows, 32>(w, vv, out, work, m, k, sms, 1, s);
    });
  }
  if (variant == 12) {
    if (k % 8 != 0) return false;  // whole 16-byte packs for every dtype
    return dispatch_dtype(dt, [&]<class T>() {
      auto w = static_cast<const T*>(W);
      auto vv = static_cast<const T*>(v);
      auto out = static_cast<T*>(dx);
      long long wide = (k + kDxV12WideLanes * Pack<T>::N - 1) / (kDxV12WideLanes * Pack<T>::N);
      if (4 * wide >= 3LL * sms)
        launch_dx_strips<T, kDxV12WideLanes, kDxV12Rows, kDxV12Warps>(w, vv, out, work, m, k, sms, 1, s);
      else
        launch_dx_strips<T, kDxV12NarrowLanes, kDxV12Rows, kDxV12Warps>(w, vv, out, work, m, k, sms, 1, s);
    });
  }
  if (variant == 13 || variant == 14) {
    if (m >= kDxV13TallRows) return launch_vjp_dx(12, dt, W, v, dx, work, m, k, sms, s);
    if (k % 8 != 0) return false;  // whole 16-byte packs for every dtype
    return dispatch_dtype(dt, [&]<class T>() {
      auto w = static_cast<const T*>(W);
      auto vv = static_cast<const T*>(v);
      auto out = static_cast<T*>(dx);
      if (variant == 13) launch_dx_wave<T, 0>(w, vv, out, work, m, k, sms, s);
      else launch_dx_wave<T, 1>(w, vv, out, work, m, k, sms, s);  // evict-first
    });
  }
  if (variant == 10) {
    if (k % 8 != 0) return false;  // whole 16-byte packs for every dtype
    return dispatch_dtype(dt, [&]<class T>() {
      launch_dx_persistent<T, kDxV10Rows, kDxV10Warps>(static_cast<const T*>(W), static_cast<const T*>(v),
                                                       static_cast<T*>(dx), work, m, k, sms, kDxV10BlocksPerSm, s);
    });
  }
  if (variant == 7 || variant == 8) {
    if (k % 8 != 0) return false;  // whole 16-byte packs for every dtype
    return dispatch_dtype(dt, [&]<class T>() {
      auto w = static_cast<const T*>(W);
      auto vv = static_cast<const T*>(v);
      auto out = static_cast<T*>(dx);
      if (variant == 7)
        launch_dx_warp_rows<T, kDxV7Rows, kDxV7Warps>(false, w, vv, out, work, m, k, sms, kDxV7BlocksPerSm,
                                                      has_sm90(), s);
      else
        launch_dx_warp_rows<T, kDxV8Rows, kDxV8Warps>(true, w, vv, out, work, m, k, sms, kDxV8BlocksPerSm, false, s);
    });
  }
  if (variant == 6) {
    if (!has_sm90())
      refuse_dx(6, "programmatic dependent launch needs sm_90 or newer");
    if (k % 8 != 0) return false;
    return dispatch_dtype(dt, [&]<class T>() {
      long long xblocks, slices, rps;
      dx_geometry(m, k, Pack<T>::N, sms, &xblocks, &slices, &rps, kDxBlocksPerSmV4);
      vjp_dx_partial_rows<T, 8, true><<<dim3((unsigned)xblocks, (unsigned)slices), kDxBlock, 0, s>>>(
          static_cast<const T*>(W), static_cast<const T*>(v), work, m, k, rps);
      launch_dx_reduce(work, static_cast<T*>(dx), k, (int)slices, true, s);
    });
  }
  if (variant == 5) {
    if (k % 8 != 0) return false;  // whole 16-byte packs for every dtype
    return dispatch_dtype(dt, [&]<class T>() {
      long long xblocks, slices, rps;
      dx_geometry(m, k, Pack<T>::N, sms, &xblocks, &slices, &rps, kDxBlocksPerSmV4);
      auto counters = reinterpret_cast<unsigned*>(work + dx_counter_offset(m, k, sms));
      vjp_dx_fused<T, 8><<<dim3((unsigned)xblocks, (unsigned)slices), kDxBlock, 0, s>>>(
          static_cast<const T*>(W), static_cast<const T*>(v), static_cast<T*>(dx), work, counters, m, k, rps);
    });
  }
  if (variant == 3 || variant == 4) {
    return dispatch_dtype(dt, [&]<class T>() {
      auto w = static_cast<const T*>(W);
      auto vv = static_cast<const T*>(v);
      auto out = static_cast<T*>(dx);
      long long xblocks, slices, rps;
      dx_geometry(m, k, Pack<T>::N, sms, &xblocks, &slices, &rps, variant == 3 ? kDxBlocksPerSmV3 : kDxBlocksPerSmV4);
      dim3 grid((unsigned)xblocks, (unsigned)slices);
      if (k % Pack<T>::N == 0 && variant == 4)
        vjp_dx_partial_rows<T, 8><<<grid, kDxBlock, 0, s>>>(w, vv, work, m, k, rps);
      else if (k % Pack<T>::N == 0)
        vjp_dx_partial_rows<T, 4><<<grid, kDxBlock, 0, s>>>(w, vv, work, m, k, rps);
      else
        vjp_dx_row_slices<T><<<dim3((unsigned)xblocks, (unsigned)slices), kDxBlock, 0, s>>>(w, vv, work, m, k, rps);
      vjp_dx_reduce<T><<<(unsigned)((k + 255) / 256), 256, 0, s>>>(work, out, k, (int)slices);
    });
  }
  if (variant != 1 && variant != 2) return false;
  return dispatch_dtype(dt, [&]<class T>() {
    auto w = static_cast<const T*>(W);
    auto vv = static_cast<const T*>(v);
    auto out = static_cast<T*>(dx);
    if (variant == 1) {
      vjp_dx_reference<T><<<(unsigned)((k + 255) / 256), 256, 0, s>>>(w, vv, out, m, k);
      return;
    }
    long long xblocks, slices, rps;
    dx_geometry(m, k, Pack<T>::N, sms, &xblocks, &slices, &rps);
    vjp_dx_row_slices<T><<<dim3((unsigned)xblocks, (unsigned)slices), kDxBlock, 0, s>>>(w, vv, work, m, k, rps);
    vjp_dx_reduce<T><<<(unsigned)((k + 255) / 256), 256, 0, s>>>(work, out, k, (int)slices);
  });
}

// Why a variant cannot run for this dtype/shape/GPU, or nullptr.
static const char* dx_not_applicable(int variant, long long m, long long k, int cc) {
  if (variant >= 5 && k % 8 != 0) return "needs k a multiple of 8 (whole 16-byte packs for every dtype)";
  if ((variant == 6 || variant == 9) && cc < 90) return "needs sm_90 or newer (PDL / Tensor Memory Accelerator)";
  if (variant == 9 && (m > INT32_MAX || k > INT32_MAX)) return "TMA coordinates are 32-bit: m and k must fit";
  return nullptr;
}

// ----------------------------------------------------------------------------
// tuning configurations (--configs): the kernels of variants 7, 8, 10, 11 and 13 with other
// parameters, and the ws experiment. Arms named by their parameters; id = the variant they tune.

template <class T>
static void add_configs(std::vector<Arm>& arms, const std::vector<std::string>& want, const void* W, const void* v,
                        void* dx, float* big, float* work, long long m, long long k, int sms, int cc) {
  auto wanted = [&](const char* f) { return std::find(want.begin(), want.end(), f) != want.end(); };
  auto arm = [&](int id, const char* family, const std::string& name, std::function<void(cudaStream_t)> run) {
    Arm a;
    a.id = id;
    a.name = name;
    a.config = family;
    a.run = std::move(run);
    if (k % 8) a.na = "needs k a multiple of 8";
    arms.push_back(std::move(a));
  };
  auto w = static_cast<const T*>(W);
  auto vv = static_cast<const T*>(v);
  auto out = static_cast<T*>(dx);
  auto rows = [&]<int R, int WARPS>() {
    for (int bps : {4, 8, 16}) {
      if (bps * WARPS * 32 > 2048) continue;  // more than an SM's resident threads
      char name[96];
      if (wanted("pdl") && bps != 16) {
        std::snprintf(name, sizeof name, "pdl R%d W%d bps%d", R, WARPS, bps);
        arm(7, "pdl", name, [=](cudaStream_t s) {
          launch_dx_warp_rows<T, R, WARPS>(false, w, vv, out, big, m, k, sms, bps, cc >= 90, s);
        });
      }
      if (wanted("atomic") && bps != 16) {
        std::snprintf(name, sizeof name, "atomic R%d W%d bps%d", R, WARPS, bps);
        arm(8, "atomic", name, [=](cudaStream_t s) {
          launch_dx_warp_rows<T, R, WARPS>(true, w, vv, out, work, m, k, sms, bps, false, s);
        });
      }
      if (wanted("persistent")) {
        std::snprintf(name, sizeof name, "persistent R%d W%d bps%d", R, WARPS, bps);
        arm(10, "persistent", name, [=](cudaStream_t s) {
          launch_dx_persistent<T, R, WARPS>(w, vv, out, work, m, k, sms, bps, s);
        });
      }
    }
  };
  rows.template operator()<4, 8>();
  rows.template operator()<8, 4>();
  rows.template operator()<8, 8>();
  rows.template operator()<16, 4>();
  auto strips = [&]<int L, int R, int WARPS>() {
    for (int bps : {1, 2, 4}) {
      if (bps * WARPS * 32 > 2048) continue;
      char name[96];
      std::snprintf(name, sizeof name, "strips L%d R%d W%d bps%d", L, R, WARPS, bps);
      arm(11, "strips", name, [=](cudaStream_t s) { launch_dx_strips<T, L, R, WARPS>(w, vv, out, work, m, k, sms, bps, s); });
    }
  };
  if (wanted("strips")) {
    strips.template operator()<8, 8, 16>();
    strips.template operator()<8, 4, 16>();
    strips.template operator()<8, 8, 8>();
    strips.template operator()<8, 16, 8>();
    strips.template operator()<16, 8, 16>();
    strips.template operator()<16, 8, 8>();
    strips.template operator()<8, 8, 32>();
    strips.template operator()<8, 4, 32>();
    strips.template operator()<16, 8, 32>();
    // small blocks: many strips over few rows (e.g. 1024x16384 fp32) in one wave
    strips.template operator()<8, 8, 4>();
    strips.template operator()<8, 4, 4>();
    strips.template operator()<16, 8, 4>();
    strips.template operator()<16, 4, 8>();
  }
  if (wanted("ws")) {
    auto ws = [&]<int C, int TR, int S, int VB>() {
      char name[96];
      std::snprintf(name, sizeof name, "ws C%d TR%d S%d%s", C, TR, S, VB ? " vTMA" : "");
      arm(-1, "ws", name, [=](cudaStream_t s) { launch_dx_ws<T, C, TR, S, VB>(w, vv, out, m, k, s); });
      if (cc < 90) arms.back().na = "needs sm_90 (TMA)";
      if (m > INT32_MAX || k > INT32_MAX) arms.back().na = "TMA coordinates are 32-bit";
    };
    ws.template operator()<8, 64, 12, 0>();
    ws.template operator()<8, 64, 8, 0>();
    ws.template operator()<8, 64, 12, 1>();
    ws.template operator()<8, 64, 8, 1>();
    ws.template operator()<4, 64, 12, 1>();
  }
  if (!wanted("loads")) return;
  // variant 11's block-size rule with each load policy for W (LD 0 plain, 1 evict-first, 2 no-L1 + 256-byte L2 fetch)
  auto loads = [&]<int LD>() {
    char name[96];
    std::snprintf(name, sizeof name, "loads v11 LD%d", LD);
    arm(11, "loads", name, [=](cudaStream_t s) {
      if ((k + 8 * Pack<T>::N - 1) / (8 * Pack<T>::N) > sms)
        launch_dx_strips<T, 8, 8, 16, LD>(w, vv, out, work, m, k, sms, 2, s);
      else
        launch_dx_strips<T, 8, 8, 32, LD>(w, vv, out, work, m, k, sms, 1, s);
    });
  };
  loads.template operator()<0>();
  loads.template operator()<1>();
  loads.template operator()<2>();
  // variant 13's small-m rule (one wave of 128-byte-strip blocks) with each load policy
  auto loads13 = [&]<int LD>() {
    char name[96];
    std::snprintf(name, sizeof name, "loads v13 LD%d", LD);
    arm(13, "loads", name, [=](cudaStream_t s) { launch_dx_wave<T, LD>(w, vv, out, work, m, k, sms, s); });
  };
  loads13.template operator()<0>();
  loads13.template operator()<1>();
  loads13.template operator()<2>();
}

// ----------------------------------------------------------------------------
// the lab's case

static const OpInfo kInfo = {
    "vjp_dx", "MxK", 2, "16384x16384,8192x8192,4096x16384,16384x4096,1024x16384",
    {{1, "vjp_dx_reference", "-", "one thread per column over all rows"},
     {2, "vjp_dx_row_slices", "1", "16-byte column packs x row slices, fp32 partials + reduce kernel"},
     {3, "dx_rows_in_flight4", "2", "4 rows' loads before their FMAs, 2x the slices"},
     {4, "dx_rows_in_flight8", "3", "8 rows' loads in flight, 4x fewer slices"},
     {5, "dx_fused_last_block", "4", "one launch: the last slice block reduces; evict-first W"},
     {6, "dx_pdl_reduce", "4", "reduce as a programmatic dependent launch (sm_90+)"},
     {7, "dx_warp_rows", "4", "rows split among a block's warps, one partial row per block, PDL reduce"},
     {8, "dx_warp_rows_atomic", "7", "one launch, partial rows added in L2 (red.global.add), last block converts"},
     {9, "dx_tma_ring", "8", "TMA ring of W tiles, equal work per resident block (sm_90+); slower"},
     {10, "dx_persistent", "8", "grid of exactly the resident blocks, equal contiguous shares; slower"},
     {11, "vjp_dx_strips128", "8", "128-byte column strips over all rows, no cross-block finish at wide k"},
     {12, "vjp_dx_strips256", "11", "256-byte strips, one 32-warp block per SM; shipped"},
     {13, "vjp_dx_strips128_wave", "12", "under 4096 rows: 128-byte strips in one wave of right-sized blocks; shipped"},
     {14, "vjp_dx_strips128_wave_ef", "13", "variant 13 with evict-first W under 4096 rows; shipped"}},
    "cublas", nullptr, {"pdl", "atomic", "persistent", "strips", "loads", "ws"}};

static Case make_case(int dt, const std::vector<long long>& dims, Context& ctx, const std::vector<int>& variants) {
  const long long m = dims[0], k = dims[1];
  const int sms = ctx.dev.sms, cc = ctx.dev.cc;
  auto W_h = random_input(m * k, dt, 1);
  auto v_h = random_input(m, dt, 2);
  auto ref = std::make_shared<std::vector<double>>(vjp_dx_cpu(W_h.data(), v_h.data(), m, k, dt));
  void* W = to_device(W_h);
  void* v = to_device(v_h);
  W_h = {};
  void* dx = nullptr;
  float *work = nullptr, *big = nullptr;
  cudaCheck(cudaMalloc(&dx, k * dtype_size(dt)));
  const size_t wbytes = sizeof(float) * vjp_dx_work_floats(m, k, sms);
  cudaCheck(cudaMalloc(&work, wbytes));
  cudaCheck(cudaMemset(work, 0, wbytes));  // counters and accumulator start at zero and reset themselves
  if (!ctx.args.configs.empty()) {         // the pdl family's partials: up to m/32 slices
    cudaCheck(cudaMalloc(&big, sizeof(float) * (m / 32 + 1) * k));
  }
  Case c;
  c.out = dx;
  c.out_bytes = k * dtype_size(dt);
  c.bytes = (double)(m * k + m + k) * dtype_size(dt);
  c.flops = 2.0 * m * k;
  c.check = [ref, dt](const std::vector<unsigned char>& out) {
    ErrAcc e;
    for (size_t j = 0; j < ref->size(); ++j) e.add(host_value(out.data(), j, dt), (*ref)[j]);
    return e.done();
  };
  const int M = (int)m, K = (int)k;
  Cublas* b = &ctx.blas;
  c.arms.push_back(vendor_arm(ctx, [=](cudaStream_t) {
    const float one = 1.f, zero = 0.f;
    cudaDataType t = cuda_type(dt);
    if (dt == kF32)  // dx = W^T v: column-major W^T (k x m) times v, op N
      cublas_check(b->sgemv(b->handle, Cublas::kOpN, K, M, &one, (const float*)W, K, (const float*)v, 1, &zero,
                            (float*)dx, 1), "cublasSgemv");
    else
      cublas_check(b->gemm_ex(b->handle, Cublas::kOpN, Cublas::kOpN, K, 1, M, &one, W, t, K, v, t, M, &zero, dx, t, K,
                              Cublas::kCompute32F, Cublas::kGemmDefault), "cublasGemmEx");
  }));
  for (int var : variants) {
    Arm a;
    a.id = var;
    a.name = find_variant(kInfo, var)->name;
    if (const char* why = dx_not_applicable(var, m, k, cc)) a.na = why;
    a.run = [=](cudaStream_t s) {
      if (!launch_vjp_dx(var, dt, W, v, dx, work, m, k, sms, s)) refuse_dx(var, "no launcher for this case");
    };
    c.arms.push_back(a);
  }
  if (!ctx.args.configs.empty())
    dispatch_dtype(dt, [&]<class T>() { add_configs<T>(c.arms, ctx.args.configs, W, v, dx, big, work, m, k, sms, cc); });
  c.release = [=] {
    cudaFree(W);
    cudaFree(v);
    cudaFree(dx);
    cudaFree(work);
    if (big) cudaFree(big);
  };
  return c;
}

int main(int argc, char** argv) { return run_main(argc, argv, kInfo, make_case); }
