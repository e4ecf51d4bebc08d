// cuda/ops/vjp_dw.cu: the vjp_dw op's launcher, dispatch rule and vendor call (kernels: vjp_dw.cuh).
#include "cublas_loader.h"
#include "kernels.h"
#include "ops/vjp_dw.cuh"

namespace gb::blas::ops::vjp_dw {

void launch(Kernel kern, const Problem& p, const Gpu&, const Buffers& buf, cudaStream_t s) {
  const long long m = p.m, k = p.k;
  dispatch_dtype(p.dt, [&]<class T>() {
    auto vv = static_cast<const T*>(buf.a);
    auto xv = static_cast<const T*>(buf.b);
    auto out = static_cast<T*>(buf.out);
    if (kern == Kernel::vjp_dw_reference || k % Pack<T>::N != 0) {  // (a ragged row: the reference form)
      vjp_dw_reference<T><<<dim3((unsigned)((k + 255) / 256), (unsigned)(m < 65535 ? m : 65535)), 256, 0, s>>>(
          vv, xv, out, m, k);
      return;
    }
    long long packs = k / Pack<T>::N;
    long long xblocks = (packs + 255) / 256;
    long long rows = (4096LL + xblocks - 1) / xblocks;  // ~4096 blocks in all, each over m/rows rows
    rows = rows > m ? m : (rows > 65535 ? 65535 : rows);
    vjp_dw_2d_stream<T><<<dim3((unsigned)xblocks, (unsigned)rows), 256, 0, s>>>(vv, xv, out, m, k);
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
