// cuda/ops/vjp_dw.cuh: the vjp_dw kernels (csrc/ops.def), shared by the library (its part at the end of this file)
// and the lab (cuda/lab/vjp_dw.cu). dW = v x^T, a write-bound outer product:
//   vjp_dw_reference: one thread per element.
//   vjp_dw_2d_stream: 2-D grid, x's pack loaded once per thread, streaming stores.
// The numbered variants these came from (1, 3) and the others: cuda/lab/.
#pragma once
#include "dtype.cuh"

namespace gb::blas {

template <class T>
__global__ void vjp_dw_reference(const T* __restrict__ v, const T* __restrict__ x, T* __restrict__ dW, long long m,
                                   long long k) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= k) return;
  for (long long i = blockIdx.y; i < m; i += gridDim.y) dW[i * k + j] = from_f<T>(to_f(v[i]) * to_f(x[j]));
}

// vjp_dw_2d_stream: thread = one 16-byte pack of columns, loaded from x once and reused down the rows
// it visits (grid-y strides over rows): no index division, and streaming stores (st.global.cs)
// because dW is written once and never read back here, so it should not evict L2.
template <class T>
__global__ void vjp_dw_2d_stream(const T* __restrict__ v, const T* __restrict__ x, T* __restrict__ dW, long long m,
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

// ---------------------------------------------------------------- host launchers
// Shared by the library's part below and the lab (cuda/lab/vjp_dw.cu).

template <class T>
void launch_vjp_dw_reference(const T* v, const T* x, T* dW, long long m, long long k, cudaStream_t s) {
  vjp_dw_reference<T><<<dim3((unsigned)((k + 255) / 256), (unsigned)(m < 65535 ? m : 65535)), 256, 0, s>>>(v, x, dW, m, k);
}

// ~4096 blocks in all, each over m/rows rows; a ragged row (k not whole 16-byte packs) takes the reference form.
template <class T>
void launch_vjp_dw_2d_stream(const T* v, const T* x, T* dW, long long m, long long k, cudaStream_t s) {
  if (k % Pack<T>::N != 0) return launch_vjp_dw_reference<T>(v, x, dW, m, k, s);
  long long packs = k / Pack<T>::N;
  long long xblocks = (packs + 255) / 256;
  long long rows = (4096LL + xblocks - 1) / xblocks;
  rows = rows > m ? m : (rows > 65535 ? 65535 : rows);
  vjp_dw_2d_stream<T><<<dim3((unsigned)xblocks, (unsigned)rows), 256, 0, s>>>(v, x, dW, m, k);
}

}  // namespace gb::blas

// ---------------------------------------------------------------- the library's part
// The op's launcher, dispatcher rule, workspace and vendor call (cuda/kernels.h), compiled once into
// the library: the build compiles this header with GB_OPS_LIBRARY defined (CMakeLists.txt); the
// lab includes the kernels above only.
#ifdef GB_OPS_LIBRARY
#include "cublas_loader.h"
#include "kernels.h"

namespace gb::blas::ops::vjp_dw {

void launch(Kernel kern, const Problem& p, const Gpu&, const Buffers& buf, cudaStream_t s) {
  const long long m = p.m, k = p.k;
  dispatch_dtype(p.dt, [&]<class T>() {
    auto vv = static_cast<const T*>(buf.a);
    auto xv = static_cast<const T*>(buf.b);
    auto out = static_cast<T*>(buf.out);
    if (kern == Kernel::vjp_dw_reference) return launch_vjp_dw_reference<T>(vv, xv, out, m, k, s);
    launch_vjp_dw_2d_stream<T>(vv, xv, out, m, k, s);
  });
}

// The dispatcher's rule: the streaming kernel where rows are whole 16-byte packs, else the
// reference form.
Kernel rule(const Problem& p, const Gpu&) {
  return p.k % (16 / dtype_bytes(p.dt)) == 0 ? Kernel::vjp_dw_2d_stream : Kernel::vjp_dw_reference;
}

long long work_floats(const Problem&, const Gpu&) { return 0; }

// Vendor row: cuBLAS, dW (row-major m x k) = column-major (k x m) = x (k x 1) * v^T (1 x m).
void vendor(const Vendor& v) {
  const auto& api = gb::cuda::cublas::api();
  const float one = 1.f, zero = 0.f;
  const int M = (int)v.p.m, K = (int)v.p.k;
  check_cublas(api.gemm_ex(v.handle, gb::cuda::cublas::kOpN, gb::cuda::cublas::kOpT, K, M, 1, &one, v.buf.b, v.type, K, v.buf.a, v.type, M,
                           &zero, v.buf.out, v.type, K, v.compute, gb::cuda::cublas::kGemmDefault), "cublasGemmEx(vjp_dw)");
}

}  // namespace gb::blas::ops::vjp_dw
#endif  // GB_OPS_LIBRARY
