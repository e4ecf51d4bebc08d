// cuda/ops/vjp_dx.cuh: the vjp_dx kernels (csrc/ops.def), shared by the library (its part at the end of this file)
// and the lab (cuda/lab/vjp_dx.cuh). dx = W^T v (W row-major m x k), a column reduction, the
// backward pass of a linear layer:
//   vjp_dx_reference: one thread per column over all rows (coalesced, but only k threads).
//   vjp_dx_row_slices: each thread owns one 16-byte pack of columns (or fewer at a ragged k) for a
//     slice of rows, so the grid fills every SM; per-slice fp32 partials, then vjp_dx_reduce.
//   vjp_dx_strips: narrow column strips, so that at wide k each block owns its columns over all
//     rows and writes dx itself: no partials, no finishing block (the structure of cuBLAS's fp16
//     kernel). The shipped vjp_dx_strips256, _strips128, _strips128_wave and _strips128_wave_ef are
//     its instantiations (strip width, block size, evict-first loads: its library part below).
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

// The shipped strip configurations by strategy name (the rule picks among them; why these values:
// the library part below): lanes per strip row (16: 256-byte strips, 8: 128-byte), rows per lane
// step, warps per block (the wave forms size it to the strips), evict-first loads of W (_ef).
static constexpr int kDxWideLanes = 16, kDxNarrowLanes = 8, kDxRows = 8, kDxWarps = 32;
template <class T>
constexpr auto vjp_dx_strips256 = vjp_dx_strips<T, kDxWideLanes, kDxRows, kDxWarps>;
template <class T>
constexpr auto vjp_dx_strips128 = vjp_dx_strips<T, kDxNarrowLanes, kDxRows, kDxWarps>;
template <class T, int WARPS>
constexpr auto vjp_dx_strips128_wave = vjp_dx_strips<T, kDxNarrowLanes, kDxRows, WARPS>;
template <class T, int WARPS>
constexpr auto vjp_dx_strips128_wave_ef = vjp_dx_strips<T, kDxNarrowLanes, kDxRows, WARPS, 1>;

// ---------------------------------------------------------------- host launchers
// Launch configurations shared by the library's part below and the lab (cuda/lab/vjp_dx.cuh); the
// caller owns the workspace layout and passes the pieces a kernel writes.

static constexpr int kDxBlock = 256;  // threads per block of vjp_dx_row_slices

// vjp_dx_row_slices' grid: blocks across k, and row slices enough for ~blocks_per_sm per SM.
inline void dx_geometry(long long m, long long k, int pack, int sms, long long* xblocks, long long* slices,
                        long long* rows_per_slice, int blocks_per_sm = 8) {
  long long threads = (k + pack - 1) / pack;
  *xblocks = (threads + kDxBlock - 1) / kDxBlock;
  long long want = ((long long)blocks_per_sm * sms + *xblocks - 1) / *xblocks;
  long long max_slices = m / 32 > 0 ? m / 32 : 1;           // keep >= 32 rows per slice
  *slices = want < 1 ? 1 : (want > max_slices ? max_slices : want);
  *rows_per_slice = (m + *slices - 1) / *slices;
  *slices = (m + *rows_per_slice - 1) / *rows_per_slice;
}

// The strip kernel for one (L, R, WARPS, LD) configuration: one slice when there are at least half as many
// strips as the `bps` x SMs blocks wanted, else as many slices as bring the grid near that. `accum`
// (k floats) and `counters` (one per strip) start zeroed and are left zeroed.
template <class T, int L, int R, int WARPS, int LD = 0>
void launch_vjp_dx_strips(const T* W, const T* v, T* dx, float* accum, unsigned* counters, long long m, long long k,
                          int sms, int bps, cudaStream_t s) {
  constexpr long long COLS = (long long)L * Pack<T>::N, UNIT = (long long)R * (32 / L);
  long long strips = (k + COLS - 1) / COLS, want = (long long)bps * sms;
  long long slices = (want + strips / 2) / strips, most = m / (UNIT * WARPS);
  slices = slices < 1 ? 1 : (slices > most ? (most > 0 ? most : 1) : slices);
  long long rps = (m + slices - 1) / slices;
  rps = (rps + UNIT - 1) / UNIT * UNIT;
  slices = (m + rps - 1) / rps;
  vjp_dx_strips<T, L, R, WARPS, LD><<<dim3((unsigned)strips, (unsigned)slices), WARPS * 32, 0, s>>>(
      W, v, dx, accum, counters, m, k, rps);
}

// The wave form (vjp_dx_strips128_wave[_ef]): 128-byte strips, blocks per SM x warps per block =
// 32 resident warps, the widest block whose grid of one block per strip still fits in one wave.
template <class T, int LD>
void launch_vjp_dx_strips128_wave(const T* W, const T* v, T* dx, float* accum, unsigned* counters, long long m,
                                  long long k, int sms, cudaStream_t s) {
  constexpr int L = kDxNarrowLanes, R = kDxRows;
  long long strips_n = (k + L * Pack<T>::N - 1) / (L * Pack<T>::N);
  if (strips_n <= 1LL * sms) launch_vjp_dx_strips<T, L, R, 32, LD>(W, v, dx, accum, counters, m, k, sms, 1, s);
  else if (strips_n <= 2LL * sms) launch_vjp_dx_strips<T, L, R, 16, LD>(W, v, dx, accum, counters, m, k, sms, 2, s);
  else if (strips_n <= 4LL * sms) launch_vjp_dx_strips<T, L, R, 8, LD>(W, v, dx, accum, counters, m, k, sms, 4, s);
  else launch_vjp_dx_strips<T, L, R, 4, LD>(W, v, dx, accum, counters, m, k, sms, 8, s);
}

}  // namespace gb::blas

// ---------------------------------------------------------------- the library's part
// The op's launcher, dispatcher rule, workspace and vendor call (cuda/kernels.h), compiled once into
// the library: the build compiles this header with GB_OPS_LIBRARY defined (CMakeLists.txt); the
// lab includes the kernels and launchers above only.
#ifdef GB_OPS_LIBRARY
#include <stdexcept>
#include <string>
#include "cublas_loader.h"
#include "kernels.h"

namespace gb::blas::ops::vjp_dx {

// Workspace layout (floats): [row slices' partials: slices x k] [the strips' fp32 accumulator, k]
// [the strips' counters, one per strip of 32 columns or more]. Accumulator and counters start
// zeroed and reset themselves.
static long long dx_partials_floats(long long m, long long k, int sms) {
  long long most = 1;
  for (int pack : {4, 8}) {
    long long xb, sl, rps;
    dx_geometry(m, k, pack, sms, &xb, &sl, &rps);
    most = sl > most ? sl : most;
  }
  return (most * k + 3) / 4 * 4;  // 16-byte aligned from here on
}
static long long dx_accum_floats(long long k) { return (k + 3) / 4 * 4; }  // the accumulator, 16-byte aligned

long long work_floats(const Problem& p, const Gpu& g) {
  // counters: strips are >= 32 columns
  return dx_partials_floats(p.m, p.k, g.sms) + dx_accum_floats(p.k) + (p.k + 31) / 32;
}

// vjp_dx_strips256 / strips128 (was variant 12): the strip kernel retuned with the clean cold scrub (a read pass, so no dirty L2
// lines to write back; da1a708:docs/results/vjp-dx-sweep-h200-2026-11-22-paired-strips.txt): 256-byte
// strips (16 lanes, the width of cuBLAS's nvjet dx kernel) and one 32-warp block per SM, which
// at 16384 and 32768 rows streamed ~1% faster than variant 11's 128-byte strips: each row visit
// reads two whole 128-byte lines of W instead of one. Where 256-byte strips are too few to fill
// the SMs (fewer than ~3/4 of them) it falls back to 128-byte strips, so a strip still needs no
// second slice while the strips fill the GPU.
// (kDxWideLanes, kDxNarrowLanes, kDxRows, kDxWarps: with the strip kernel above.)
// vjp_dx_strips128_wave (was variant 13): under kDxTallRows rows, 128-byte strips in blocks small
// enough that every strip's block is resident at once (16, 8 or 4 warps, ~32 warps per SM). With
// few rows a strip is a short job: variant 12's 256-byte strips in one 32-warp block per SM run
// in two or more waves when the strips outnumber the SMs, and the last wave leaves SMs idle
// (1024x16384 fp32: 256 strips, 95% of cuBLAS; one wave of 8-warp blocks: 103%;
// da1a708:docs/results/vjp-dx-sweep-h200-2026-11-22-small-m.txt).
static constexpr long long kDxTallRows = 4096;
// vjp_dx_strips128_wave_ef (was variant 14): the wave form with evict-first loads of W (ld.global.cs).
// Such a W (under ~L2-sized to a few L2s) is read once; marking its lines first to go means the op
// replaces its own lines instead of evicting what else L2 holds, such as a previous kernel's
// dirty output, so that no write-back lands inside the op. With dirty lines in L2 (the memset
// scrub) this turned 88-94% of cuBLAS at 512-2048 x 16384 fp32 into 101.5-103.5%; with a clean
// L2 it is within 0.5% of plain loads (da1a708:docs/results/vjp-dx-sweep-h200-2026-11-22-loads13.txt).
// Tall W keeps variant 12's plain loads: evict-first was 4-11% slower there.

void launch(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s) {
  const long long m = p.m, k = p.k;
  const int sms = g.sms;
  float* work = buf.work;
  const bool strips = kern == Kernel::vjp_dx_strips256 || kern == Kernel::vjp_dx_strips128 ||
                      kern == Kernel::vjp_dx_strips128_wave || kern == Kernel::vjp_dx_strips128_wave_ef;
  if (strips && k % 8 != 0) throw gb::NotApplicable(std::string(kernel_name(kern)) + " needs k % 8 == 0 (16-byte rows)");
  dispatch_dtype(p.dt, [&]<class T>() {
    auto w = static_cast<const T*>(buf.a);
    auto vv = static_cast<const T*>(buf.b);
    auto out = static_cast<T*>(buf.out);
    float* accum = work + dx_partials_floats(m, k, sms);  // the layout above, computed once a launch
    auto counters = reinterpret_cast<unsigned*>(accum + dx_accum_floats(k));
    constexpr int R = kDxRows;
    switch (kern) {
      case Kernel::vjp_dx_reference:
        vjp_dx_reference<T><<<(unsigned)((k + 255) / 256), 256, 0, s>>>(w, vv, out, m, k);
        return;
      case Kernel::vjp_dx_strips256:
        return launch_vjp_dx_strips<T, kDxWideLanes, R, kDxWarps>(w, vv, out, accum, counters, m, k, sms, 1, s);
      case Kernel::vjp_dx_strips128:
        return launch_vjp_dx_strips<T, kDxNarrowLanes, R, kDxWarps>(w, vv, out, accum, counters, m, k, sms, 1, s);
      case Kernel::vjp_dx_strips128_wave:
        return launch_vjp_dx_strips128_wave<T, 0>(w, vv, out, accum, counters, m, k, sms, s);
      case Kernel::vjp_dx_strips128_wave_ef:
        return launch_vjp_dx_strips128_wave<T, 1>(w, vv, out, accum, counters, m, k, sms, s);
      default: {  // vjp_dx_row_slices
        long long xblocks, slices, rps;
        dx_geometry(m, k, Pack<T>::N, sms, &xblocks, &slices, &rps);
        vjp_dx_row_slices<T><<<dim3((unsigned)xblocks, (unsigned)slices), kDxBlock, 0, s>>>(w, vv, work, m, k, rps);
        vjp_dx_reduce<T><<<(unsigned)((k + 255) / 256), 256, 0, s>>>(work, out, k, (int)slices);
      }
    }
  });
}

// The dispatcher's rule, dx's rows of the table (evidence: dx sweep v14 at da1a708):
//   k % 8 != 0                                  vjp_dx_row_slices (v2)
//   m >= 4096, 256-byte strips fill 3/4 of SMs  vjp_dx_strips256 (v12)
//   m >= 4096, otherwise                        vjp_dx_strips128 (v12)
//   m < 4096, W < L2/4                          vjp_dx_strips128_wave (v13)
//   m < 4096, W >= L2/4                         vjp_dx_strips128_wave_ef (v14)
// Why the last rows: v14's evict-first loads of W only pay where W is large against L2 (with dirty
// L2 lines they took 512-2048 x 16384 fp32 from 88-94% to 101-104% of cuBLAS); on a W far below L2
// they cost (1024x1024 fp16: v14 84.6% of cuBLAS, v13 108.8%), so v14 applies from W >= L2/4.
Kernel rule(const Problem& p, const Gpu& g) {
  if (p.k % 8 != 0) return Kernel::vjp_dx_row_slices;
  if (p.m >= kDxTallRows) {
    const long long pack = 16 / dtype_bytes(p.dt);
    long long wide = (p.k + kDxWideLanes * pack - 1) / (kDxWideLanes * pack);
    return 4 * wide >= 3LL * g.sms ? Kernel::vjp_dx_strips256 : Kernel::vjp_dx_strips128;
  }
  const double w_bytes = (double)p.m * (double)p.k * dtype_bytes(p.dt);
  return w_bytes >= 0.25 * (double)g.l2_bytes ? Kernel::vjp_dx_strips128_wave_ef : Kernel::vjp_dx_strips128_wave;
}

// Vendor row: cuBLAS, dx = W^T v as column-major W^T (k x m) times v, op N: sgemv for fp32,
// GemmEx with n = 1 for fp16/bf16.
void vendor(const Vendor& v) {
  const auto& api = gb::cuda::cublas::api();
  const float one = 1.f, zero = 0.f;
  const int M = (int)v.p.m, K = (int)v.p.k;
  if (v.p.dt == DType::fp32)
    check_cublas(api.sgemv(v.handle, gb::cuda::cublas::kOpN, K, M, &one, (const float*)v.buf.a, K, (const float*)v.buf.b, 1,
                           &zero, (float*)v.buf.out, 1), "cublasSgemv");
  else
    check_cublas(api.gemm_ex(v.handle, gb::cuda::cublas::kOpN, gb::cuda::cublas::kOpN, K, 1, M, &one, v.buf.a, v.type, K, v.buf.b, v.type,
                             M, &zero, v.buf.out, v.type, K, v.compute, gb::cuda::cublas::kGemmDefault), "cublasGemmEx(vjp_dx)");
}

}  // namespace gb::blas::ops::vjp_dx
#endif  // GB_OPS_LIBRARY
