// vjp.cu: both cotangents of y = W x (W row-major m x k), the backward pass of a linear layer.
//   dx = W^T v: a column reduction. Variant 1: one thread per column over all rows (coalesced,
//     but only k threads). Variant 2: each thread owns one 16-byte pack of columns for a slice of
//     rows, so the grid is wide enough to fill every SM; per-slice fp32 partials go to a small
//     workspace (a few % of W's bytes) and a second kernel sums the slices.
//   dW = v x^T: write-bound outer product. Variant 1: one thread per element; variant 2: one
//     16-byte pack per thread, grid-stride; variant 3: 2-D grid, x loaded once per thread,
//     streaming stores.
//   dx variant 3: variant 2 with 4 rows' loads issued before their FMAs and twice the slices.
//   dx variant 4: 8 rows' loads in flight, 4x fewer slices. Variant 5: variant 4 in one kernel:
//     the last slice block to finish a column range sums the slices' partials (no second launch,
//     whose gap is ~2% of a 16384^2 fp16 pass), and W is read with evict-first loads.
//   dx variant 6 (sm_90+): variant 4, its reduce kernel launched as a programmatic dependent
//     (PDL), so the second launch's latency overlaps the slice kernel's tail instead of following it.
// Run: python -m bench.blas --ops vjp
#include <stdexcept>

#include "blas_kernels.h"
#include "dtype.cuh"

namespace gb::blas {

template <class T>
__global__ void vjp_dx_thread_col(const T* __restrict__ W, const T* __restrict__ v, T* __restrict__ dx, long long m,
                                  long long k) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= k) return;
  float acc = 0.f;
  for (long long i = 0; i < m; ++i) acc += to_f(W[i * k + j]) * to_f(v[i]);
  dx[j] = from_f<T>(acc);
}

template <class T>
__global__ void vjp_dx_partial(const T* __restrict__ W, const T* __restrict__ v, float* __restrict__ part,
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

static constexpr int kDxBlock = 256;

static void dx_geometry(long long m, long long k, int pack, int sms, long long* xblocks, long long* slices,
                        long long* rows_per_slice, int blocks_per_sm = 8) {
  long long threads = (k + pack - 1) / pack;
  *xblocks = (threads + kDxBlock - 1) / kDxBlock;
  long long want = ((long long)blocks_per_sm * sms + *xblocks - 1) / *xblocks;
  long long max_slices = m / 32 > 0 ? m / 32 : 1;           // keep >= 32 rows per slice
  *slices = want < 1 ? 1 : (want > max_slices ? max_slices : want);
  *rows_per_slice = (m + *slices - 1) / *slices;
  *slices = (m + *rows_per_slice - 1) / *rows_per_slice;
}

static constexpr int kDxBlocksPerSmV3 = 16;
// Variant 4: 8 rows' loads in flight per thread and only ~4 blocks per SM, so the slices (and
// the fp32 partials they write and re-read, ~7% extra traffic for 2-byte types in variant 3)
// are 4x fewer.
static constexpr int kDxBlocksPerSmV4 = 4;

// Partials for the most slices any variant uses, then (variant 5) one counter per column block.
static long long dx_counter_offset(long long m, long long k, int sms) {
  long long most = 1;
  for (int pack : {4, 8})
    for (int bps : {8, kDxBlocksPerSmV3, kDxBlocksPerSmV4}) {
      long long xb, sl, rps;
      dx_geometry(m, k, pack, sms, &xb, &sl, &rps, bps);
      most = sl > most ? sl : most;
    }
  return (most * k + 3) / 4 * 4;  // 16-byte aligned counters
}

long long vjp_dx_work_floats(long long m, long long k, int sms) {
  long long xblocks = ((k + 3) / 4 + kDxBlock - 1) / kDxBlock;  // most column blocks (fp32 packs)
  return dx_counter_offset(m, k, sms) + xblocks;
}

bool launch_vjp_dx(int variant, int dt, const void* W, const void* v, void* dx, float* work, long long m,
                   long long k, int sms, cudaStream_t s) {
  if (variant == 6) {
    int dev = 0, major = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (major < 9)
      throw std::invalid_argument("no variant 6 here: programmatic dependent launch needs sm_90 or newer");
    if (k % 8 != 0) return false;
    return dispatch_dtype(dt, [&]<class T>() {
      long long xblocks, slices, rps;
      dx_geometry(m, k, Pack<T>::N, sms, &xblocks, &slices, &rps, kDxBlocksPerSmV4);
      vjp_dx_partial_rows<T, 8, true><<<dim3((unsigned)xblocks, (unsigned)slices), kDxBlock, 0, s>>>(
          static_cast<const T*>(W), static_cast<const T*>(v), work, m, k, rps);
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3((unsigned)((k + 255) / 256));
      cfg.blockDim = dim3(256);
      cfg.stream = s;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      cudaLaunchKernelEx(&cfg, vjp_dx_reduce<T, true>, static_cast<const float*>(work), static_cast<T*>(dx), k,
                         (int)slices);
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
        vjp_dx_partial<T><<<dim3((unsigned)xblocks, (unsigned)slices), kDxBlock, 0, s>>>(w, vv, work, m, k, rps);
      vjp_dx_reduce<T><<<(unsigned)((k + 255) / 256), 256, 0, s>>>(work, out, k, (int)slices);
    });
  }
  if (variant != 1 && variant != 2) return false;
  return dispatch_dtype(dt, [&]<class T>() {
    auto w = static_cast<const T*>(W);
    auto vv = static_cast<const T*>(v);
    auto out = static_cast<T*>(dx);
    if (variant == 1) {
      vjp_dx_thread_col<T><<<(unsigned)((k + 255) / 256), 256, 0, s>>>(w, vv, out, m, k);
      return;
    }
    long long xblocks, slices, rps;
    dx_geometry(m, k, Pack<T>::N, sms, &xblocks, &slices, &rps);
    vjp_dx_partial<T><<<dim3((unsigned)xblocks, (unsigned)slices), kDxBlock, 0, s>>>(w, vv, work, m, k, rps);
    vjp_dx_reduce<T><<<(unsigned)((k + 255) / 256), 256, 0, s>>>(work, out, k, (int)slices);
  });
}

template <class T>
__global__ void vjp_dw_thread_elem(const T* __restrict__ v, const T* __restrict__ x, T* __restrict__ dW, long long m,
                                   long long k) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long i = blockIdx.y;
  if (j < k) dW[i * k + j] = from_f<T>(to_f(v[i]) * to_f(x[j]));
}

template <class T>
__global__ void vjp_dw_pack(const T* __restrict__ v, const T* __restrict__ x, T* __restrict__ dW, long long m,
                            long long k) {
  constexpr int N = Pack<T>::N;
  long long packs_per_row = k / N, total = m * packs_per_row;
  for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < total;
       p += (long long)gridDim.x * blockDim.x) {
    long long i = p / packs_per_row, jp = p - i * packs_per_row;
    float vi = to_f(v[i]);
    Pack<T> xs = reinterpret_cast<const Pack<T>*>(x)[jp], out;
#pragma unroll
    for (int e = 0; e < N; ++e) out.v[e] = from_f<T>(vi * to_f(xs.v[e]));
    reinterpret_cast<Pack<T>*>(dW)[p] = out;
  }
}

// Variant 3: thread = one 16-byte pack of columns, loaded from x once and reused down the rows
// it visits (grid-y strides over rows): no index division, and streaming stores (st.global.cs)
// because dW is written once and never read back here, so it should not evict L2.
template <class T>
__global__ void vjp_dw_rows(const T* __restrict__ v, const T* __restrict__ x, T* __restrict__ dW, long long m,
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

bool launch_vjp_dw(int variant, int dt, const void* v, const void* x, void* dW, long long m, long long k,
                   cudaStream_t s) {
  if (variant == 3) {
    return dispatch_dtype(dt, [&]<class T>() {
      auto vv = static_cast<const T*>(v);
      auto xv = static_cast<const T*>(x);
      auto out = static_cast<T*>(dW);
      if (k % Pack<T>::N != 0) {
        vjp_dw_thread_elem<T><<<dim3((unsigned)((k + 255) / 256), (unsigned)m), 256, 0, s>>>(vv, xv, out, m, k);
        return;
      }
      long long packs = k / Pack<T>::N;
      long long xblocks = (packs + 255) / 256;
      long long rows = (4096LL + xblocks - 1) / xblocks;  // ~4096 blocks in all, each over m/rows rows
      rows = rows > m ? m : (rows > 65535 ? 65535 : rows);
      vjp_dw_rows<T><<<dim3((unsigned)xblocks, (unsigned)rows), 256, 0, s>>>(vv, xv, out, m, k);
    });
  }
  if (variant != 1 && variant != 2) return false;
  return dispatch_dtype(dt, [&]<class T>() {
    auto vv = static_cast<const T*>(v);
    auto xv = static_cast<const T*>(x);
    auto out = static_cast<T*>(dW);
    if (variant == 2 && k % Pack<T>::N == 0) {
      long long total = m * (k / Pack<T>::N);
      long long grid = (total + 255) / 256;
      vjp_dw_pack<T><<<(unsigned)(grid < 65535LL * 32 ? grid : 65535LL * 32), 256, 0, s>>>(vv, xv, out, m, k);
    } else {  // variant 1, or a row length no pack divides
      vjp_dw_thread_elem<T><<<dim3((unsigned)((k + 255) / 256), (unsigned)m), 256, 0, s>>>(vv, xv, out, m, k);
    }
  });
}

}  // namespace gb::blas
