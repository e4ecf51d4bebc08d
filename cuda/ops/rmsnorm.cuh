// cuda/ops/rmsnorm.cuh: the rmsnorm kernels (csrc/ops.def), shared by the library (its part at the
// end of this file) and the lab. RMSNorm forward, row-wise over x (m rows of k): y = x * w /
// sqrt(mean(x^2) + eps), w of length k, eps the op's declared scalar; fp32 accumulation for every
// dtype. Memory-bound (bytes = read x + w, write y): the target is the copy bandwidth.
//   rmsnorm_reference: one thread per row, two passes over the row (the simplest correct form).
//   rmsnorm_block_rows: one block per row (grid = m). Each thread loads its P 16-byte packs of the
//     row into registers before any arithmetic (the whole row in flight at once), sums their
//     squares in fp32, the block reduces by warp shuffles and one shared-memory step, and each
//     thread scales its packs from registers and stores them: x is read once. Rows that are not
//     whole 16-byte packs, or too long for the registers, take the same block-per-row form with
//     element loads and a second read of x.
#pragma once
#include "dtype.cuh"

namespace gb::blas {

template <class T>
__global__ void rmsnorm_reference(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, long long m,
                                  long long k, float eps) {
  long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= m) return;
  const T* xr = x + row * k;
  float ss = 0.f;
  for (long long j = 0; j < k; ++j) ss += to_f(xr[j]) * to_f(xr[j]);
  const float inv = rsqrtf(ss / (float)k + eps);
  for (long long j = 0; j < k; ++j) y[row * k + j] = from_f<T>(to_f(xr[j]) * inv * to_f(w[j]));
}

// The sum of `v` over the block (every thread gets it). `red` holds one float per warp.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = warp_sum(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < warps ? red[lane] : 0.f;
    t = warp_sum(t);
    if (lane == 0) red[0] = t;
  }
  __syncthreads();
  return red[0];
}

// P > 0: each thread holds P packs of the row (k % Pack<T>::N == 0, k / N <= P * blockDim.x);
// P == 0: element loads, x read twice (any k).
template <class T, int P>
__global__ void __launch_bounds__(1024) rmsnorm_block_rows(const T* __restrict__ x, const T* __restrict__ w,
                                                           T* __restrict__ y, long long m, long long k, float eps) {
  __shared__ float red[32];
  const long long row = blockIdx.x;
  const T* xr = x + row * k;
  T* yr = y + row * k;
  float ss = 0.f;
  if constexpr (P == 0) {
    for (long long j = threadIdx.x; j < k; j += blockDim.x) ss += to_f(xr[j]) * to_f(xr[j]);
    const float inv = rsqrtf(block_sum(ss, red) / (float)k + eps);
    for (long long j = threadIdx.x; j < k; j += blockDim.x) yr[j] = from_f<T>(to_f(xr[j]) * inv * to_f(w[j]));
  } else {
    constexpr int N = Pack<T>::N;
    const long long packs = k / N;
    const Pack<T>* xv = reinterpret_cast<const Pack<T>*>(xr);
    const Pack<T>* wv = reinterpret_cast<const Pack<T>*>(w);
    Pack<T>* yv = reinterpret_cast<Pack<T>*>(yr);
    Pack<T> r[P];
#pragma unroll
    for (int u = 0; u < P; ++u) {
      const long long i = threadIdx.x + (long long)u * blockDim.x;
      if (i < packs) r[u] = xv[i];
    }
#pragma unroll
    for (int u = 0; u < P; ++u) {
      const long long i = threadIdx.x + (long long)u * blockDim.x;
      if (i < packs)
#pragma unroll
        for (int e = 0; e < N; ++e) ss += to_f(r[u].v[e]) * to_f(r[u].v[e]);
    }
    const float inv = rsqrtf(block_sum(ss, red) / (float)k + eps);
#pragma unroll
    for (int u = 0; u < P; ++u) {
      const long long i = threadIdx.x + (long long)u * blockDim.x;
      if (i < packs) {
        const Pack<T> wp = wv[i];
        Pack<T> out;
#pragma unroll
        for (int e = 0; e < N; ++e) out.v[e] = from_f<T>(to_f(r[u].v[e]) * inv * to_f(wp.v[e]));
        yv[i] = out;
      }
    }
  }
}

}  // namespace gb::blas

// ---------------------------------------------------------------- the library's part
// The op's launcher, dispatcher rule, workspace and vendor call (cuda/kernels.h), compiled once into
// the library: the build compiles this header with GB_OPS_LIBRARY defined (CMakeLists.txt); the
// lab includes the kernels above only.
#ifdef GB_OPS_LIBRARY
#include "kernels.h"

namespace gb::blas::ops::rmsnorm {

// rmsnorm_block_rows' block: about kThreads threads, each holding the fewest packs (a power of two
// up to kMaxPacks) that cover the row; rows beyond kMaxPacks x 1024 packs take the element form.
static constexpr int kThreads = 256, kMaxPacks = 16, kMaxThreads = 1024;

template <class T, int P>
static void launch_rows(const T* x, const T* w, T* y, long long m, long long k, float eps, long long packs,
                        cudaStream_t s) {
  long long threads = P == 0 ? kThreads : (packs + P - 1) / P;
  threads = (threads + 31) / 32 * 32;
  rmsnorm_block_rows<T, P><<<(unsigned)m, (unsigned)threads, 0, s>>>(x, w, y, m, k, eps);
}

void launch(Kernel kern, const Problem& p, const Gpu&, const Buffers& buf, cudaStream_t s) {
  const long long m = p.m, k = p.k;
  if (m > 0x7FFFFFFFLL) throw gb::NotApplicable(std::string(kernel_name(kern)) + ": at most 2^31 - 1 rows (one block each)");
  dispatch_dtype(p.dt, [&]<class T>() {
    auto x = static_cast<const T*>(buf.a);
    auto w = static_cast<const T*>(buf.b);
    auto y = static_cast<T*>(buf.out);
    if (kern == Kernel::rmsnorm_reference) {
      rmsnorm_reference<T><<<(unsigned)((m + 127) / 128), 128, 0, s>>>(x, w, y, m, k, p.scalar);
      return;
    }
    const long long packs = k / Pack<T>::N;
    const bool regs = k % Pack<T>::N == 0 && packs <= (long long)kMaxPacks * kMaxThreads;
    if (!regs) return launch_rows<T, 0>(x, w, y, m, k, p.scalar, packs, s);
    if (packs <= 1LL * kThreads) return launch_rows<T, 1>(x, w, y, m, k, p.scalar, packs, s);
    if (packs <= 2LL * kThreads) return launch_rows<T, 2>(x, w, y, m, k, p.scalar, packs, s);
    if (packs <= 4LL * kThreads) return launch_rows<T, 4>(x, w, y, m, k, p.scalar, packs, s);
    if (packs <= 8LL * kThreads) return launch_rows<T, 8>(x, w, y, m, k, p.scalar, packs, s);
    launch_rows<T, kMaxPacks>(x, w, y, m, k, p.scalar, packs, s);
  });
}

// The dispatcher's rule: one kernel (its block adapts to k).
Kernel rule(const Problem&, const Gpu&) { return Kernel::rmsnorm_block_rows; }

long long work_floats(const Problem&, const Gpu&) { return 0; }

}  // namespace gb::blas::ops::rmsnorm
#endif  // GB_OPS_LIBRARY
