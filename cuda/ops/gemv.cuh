// cuda/ops/gemv.cuh: the gemv kernels (csrc/ops.def), shared by the library (its part at the end of this file) and
// the lab (cuda/lab/gemv.cu). y = A x (A row-major m x k), fp32/fp16/bf16 with fp32 accumulation.
// Memory-bound at every useful size: each element of A is read once, so the target is the copy
// bandwidth. gemv_reference: one thread per row (threads of a warp read 32 different rows).
// gemv_warp_rows: one warp per row, 16-byte packs, 4 packs in flight per lane before any
// arithmetic, shuffle reduction. gemv_split_k: a warp per (row, k-slice), so short m still fills
// the GPU; fp32 partials summed by a second kernel. gemv_x_stationary: a block owns a k-range and
// a run of rows; each warp keeps its part of x in registers for all those rows (x is read once
// per block, not once per row), and the k-slices of a row meet by fp32 atomics in L2, the last
// slice's block writing y (one launch). Which one runs: the rule in
// its library part below.
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

// One lane's share of a row's dot product over 16-byte packs [i, end), stepping by the warp:
// UNROLL packs of A and of x in flight before any arithmetic, then the tail one pack at a time.
template <class T, int UNROLL>
__device__ __forceinline__ float dot_packs(const Pack<T>* __restrict__ av, const Pack<T>* __restrict__ xv, long long i,
                                           long long end) {
  constexpr int N = Pack<T>::N;
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
  return acc;
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
    acc = dot_packs<T, UNROLL>(reinterpret_cast<const Pack<T>*>(a), reinterpret_cast<const Pack<T>*>(x), lane, k / N);
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
  float acc = dot_packs<T, UNROLL>(av, xv, j0 / N + lane, j1 / N);
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

// ---------------------------------------------------------------- host launchers
// Each kernel's launch configuration and workspace layout, used by the library's part below and by
// the lab (cuda/lab/gemv.cu), so both run a kernel the same way.

static constexpr int kGemvV4Packs = 4, kGemvV4Rows = 2, kGemvV4BlocksPerSm = 4, kGemvV4MaxRows = 512;
static constexpr int kGemvWarps = 8;  // warps per block of the warp-per-row kernels

template <class T>
void launch_gemv_reference(const T* A, const T* x, T* y, long long m, long long k, cudaStream_t s) {
  gemv_reference<T><<<(unsigned)((m + 127) / 128), 128, 0, s>>>(A, x, y, m, k);
}

template <class T>
void launch_gemv_warp_rows(const T* A, const T* x, T* y, long long m, long long k, cudaStream_t s) {
  gemv_warp_rows<T, 4><<<(unsigned)((m + kGemvWarps - 1) / kGemvWarps), kGemvWarps * 32, 0, s>>>(A, x, y, m, k);
}

inline long long gemv_split_slices(long long m, long long k, int pack, int sms) {
  long long want = (64LL * sms + m - 1) / m;                 // about 64 warps per SM in all
  long long max_slices = k / (32LL * pack * 8) > 0 ? k / (32LL * pack * 8) : 1;  // >= one full unrolled pass
  return want < 1 ? 1 : (want > max_slices ? max_slices : want);
}

// Workspace (floats): [gemv_split_k's partials: slices x m] [gemv_x_stationary's accumulator: m]
// [its counters: one per run of rows, at most m]. The x-stationary part starts zeroed (the case
// clears the workspace once) and clears itself.
inline long long gemv_partials_floats(long long m, long long k, int sms) {
  return (gemv_split_slices(m, k, 4, sms) * m + 3) / 4 * 4;  // the fp32 pack allows the most slices
}
inline long long gemv_work_floats(long long m, long long k, int sms) { return gemv_partials_floats(m, k, sms) + 2 * m; }

// Rows that are not 16-byte aligned fall back to gemv_warp_rows (scalar loads handle any k).
template <class T>
void launch_gemv_split_k(const T* A, const T* x, T* y, long long m, long long k, float* work, int sms, cudaStream_t s) {
  if (k % Pack<T>::N != 0) return launch_gemv_warp_rows<T>(A, x, y, m, k, s);
  long long slices = gemv_split_slices(m, k, Pack<T>::N, sms);
  long long per = (k + slices - 1) / slices;
  per = (per + Pack<T>::N - 1) / Pack<T>::N * Pack<T>::N;
  slices = (k + per - 1) / per;
  dim3 grid((unsigned)((m + kGemvWarps - 1) / kGemvWarps), (unsigned)slices);
  gemv_split_k<T, 8><<<grid, kGemvWarps * 32, 0, s>>>(A, x, work, y, m, k, per);
  if (slices > 1) gemv_split_k_reduce<T><<<(unsigned)((m + 255) / 256), 256, 0, s>>>(work, y, m, (int)slices);
}

// Warps per block: as many (up to 8) as the row's packs keep busy, so a narrow k does not leave
// warps holding nothing but zeros. Needs k % 8 == 0; `work` is the whole workspace.
template <class T>
void launch_gemv_x_stationary(const T* A, const T* x, T* y, long long m, long long k, float* work, int sms,
                              cudaStream_t s) {
  constexpr int P = kGemvV4Packs, R = kGemvV4Rows;
  float* accum = work + gemv_partials_floats(m, k, sms);
  unsigned* counters = reinterpret_cast<unsigned*>(accum + m);
  long long kp = k / Pack<T>::N;
  auto go = [&]<int WARPS>() {
    long long slices = (kp + 32LL * P * WARPS - 1) / (32LL * P * WARPS);
    long long want = ((long long)kGemvV4BlocksPerSm * sms + slices - 1) / slices;  // row runs wanted
    long long rpb = (m + want - 1) / want;
    rpb = (rpb + R - 1) / R * R;
    if (rpb > kGemvV4MaxRows) rpb = kGemvV4MaxRows;
    long long runs = (m + rpb - 1) / rpb;
    gemv_x_stationary<T, P, R, WARPS><<<dim3((unsigned)runs, (unsigned)slices), WARPS * 32,
                                 sizeof(float) * WARPS * rpb, s>>>(A, x, y, accum, counters, m, k, (int)rpb);
  };
  long long busy = (kp + 32LL * P - 1) / (32LL * P);  // warps the row can keep busy
  if (busy >= 8) go.template operator()<8>();
  else if (busy >= 4) go.template operator()<4>();
  else if (busy >= 2) go.template operator()<2>();
  else go.template operator()<1>();
}

}  // namespace gb::blas

// ---------------------------------------------------------------- the library's part
// The op's launcher, dispatcher rule, workspace and vendor call (cuda/kernels.h), compiled once into
// the library: the build compiles this header with GB_OPS_LIBRARY defined (CMakeLists.txt); the
// lab includes the kernels and launchers above only.
#ifdef GB_OPS_LIBRARY
#include "cublas_loader.h"
#include "kernels.h"

namespace gb::blas::ops::gemv {

long long work_floats(const Problem& p, const Gpu& g) { return gemv_work_floats(p.m, p.k, g.sms); }

void launch(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s) {
  const long long m = p.m, k = p.k;
  if (kern == Kernel::gemv_x_stationary && k % 8 != 0)
    throw gb::NotApplicable("gemv_x_stationary needs k % 8 == 0 (16-byte rows)");
  dispatch_dtype(p.dt, [&]<class T>() {
    auto a = static_cast<const T*>(buf.a);
    auto xv = static_cast<const T*>(buf.b);
    auto yv = static_cast<T*>(buf.out);
    switch (kern) {
      case Kernel::gemv_reference: return launch_gemv_reference<T>(a, xv, yv, m, k, s);
      case Kernel::gemv_x_stationary: return launch_gemv_x_stationary<T>(a, xv, yv, m, k, buf.work, g.sms, s);
      case Kernel::gemv_split_k: return launch_gemv_split_k<T>(a, xv, yv, m, k, buf.work, g.sms, s);
      default: return launch_gemv_warp_rows<T>(a, xv, yv, m, k, s);
    }
  });
}

// The dispatcher's rule, gemv's rows of the table (evidence: H200 paired sweeps, gemv-v4 at da1a708):
//   fp32       k % 8 == 0                    gemv_x_stationary (v4): 102-127% of cuBLAS
//   fp16/bf16  m < 4096                      gemv_split_k (v3): short m fills the GPU
//   fp16/bf16  m >= 4096                     gemv_warp_rows (v2): no split needed
//   any        k % 8 != 0 (no 16-byte rows)  gemv_warp_rows (v2, scalar loads)
Kernel rule(const Problem& p, const Gpu&) {
  if (p.k % 8 != 0) return Kernel::gemv_warp_rows;
  if (p.dt == DType::fp32) return Kernel::gemv_x_stationary;
  return p.m < 4096 ? Kernel::gemv_split_k : Kernel::gemv_warp_rows;
}

// Vendor row: cuBLAS, y = A x as column-major A^T (k x m), op T: sgemv for fp32, GemmEx with n = 1
// for fp16/bf16.
void vendor(const Vendor& v) {
  const auto& api = gb::cuda::cublas::api();
  const float one = 1.f, zero = 0.f;
  const int M = (int)v.p.m, K = (int)v.p.k;
  if (v.p.dt == DType::fp32)
    check_cublas(api.sgemv(v.handle, gb::cuda::cublas::kOpT, K, M, &one, (const float*)v.buf.a, K, (const float*)v.buf.b, 1,
                           &zero, (float*)v.buf.out, 1), "cublasSgemv");
  else
    check_cublas(api.gemm_ex(v.handle, gb::cuda::cublas::kOpT, gb::cuda::cublas::kOpN, M, 1, K, &one, v.buf.a, v.type, K, v.buf.b, v.type,
                             K, &zero, v.buf.out, v.type, M, v.compute, gb::cuda::cublas::kGemmDefault), "cublasGemmEx(gemv)");
}

}  // namespace gb::blas::ops::gemv
#endif  // GB_OPS_LIBRARY
