// dispatch.cu: the library's names, its reference kernels and the dispatcher's rule (the table in
// kernels.h), and the one launch entry point the case runner calls.
#include <cstdint>

#include "cuda_check.h"
#include "dtype.cuh"
#include "kernels.h"

namespace gb::blas {

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::copy_reference: return "copy_reference";
    case Kernel::copy_vec16: return "copy_vec16";
    case Kernel::gemv_reference: return "gemv_reference";
    case Kernel::gemv_warp_rows: return "gemv_warp_rows";
    case Kernel::gemv_split_k: return "gemv_split_k";
    case Kernel::gemv_x_stationary: return "gemv_x_stationary";
    case Kernel::vjp_dx_reference: return "vjp_dx_reference";
    case Kernel::vjp_dx_row_slices: return "vjp_dx_row_slices";
    case Kernel::vjp_dx_strips256: return "vjp_dx_strips256";
    case Kernel::vjp_dx_strips128: return "vjp_dx_strips128";
    case Kernel::vjp_dx_strips128_wave: return "vjp_dx_strips128_wave";
    case Kernel::vjp_dx_strips128_wave_ef: return "vjp_dx_strips128_wave_ef";
    case Kernel::vjp_dw_reference: return "vjp_dw_reference";
    case Kernel::vjp_dw_2d_stream: return "vjp_dw_2d_stream";
    case Kernel::gemm_reference: return "gemm_reference";
    case Kernel::gemm_simt_tiles: return "gemm_simt_tiles";
    case Kernel::gemm_mma_async: return "gemm_mma_async";
    case Kernel::gemm_wgmma_tma128: return "gemm_wgmma_tma128";
    case Kernel::gemm_wgmma_tma256: return "gemm_wgmma_tma256";
  }
  return "?";
}

Gpu query_gpu(int device) {
  Gpu g;
  int major = 0, minor = 0, l2 = 0;
  GB_CUDA_CHECK(cudaDeviceGetAttribute(&g.sms, cudaDevAttrMultiProcessorCount, device));
  GB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  GB_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  GB_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  g.cc = major * 10 + minor;
  g.l2_bytes = l2 > 0 ? (std::size_t)l2 : 0;
  g.wgmma = major == 9 && gemm_wgmma_built();
  return g;
}

Kernel reference_kernel(Op op) {
  switch (op) {
    case Op::copy: return Kernel::copy_reference;
    case Op::gemv: return Kernel::gemv_reference;
    case Op::vjp_dx: return Kernel::vjp_dx_reference;
    case Op::vjp_dw: return Kernel::vjp_dw_reference;
    case Op::gemm: break;
  }
  return Kernel::gemm_reference;
}

Kernel dispatch(const Problem& p, const Gpu& g) {
  const bool half = p.dt != DType::fp32;
  switch (p.op) {
    case Op::copy:
      return Kernel::copy_vec16;
    case Op::gemv:
      if (p.k % 8 != 0) return Kernel::gemv_warp_rows;
      if (!half) return Kernel::gemv_x_stationary;
      return p.m < 4096 ? Kernel::gemv_split_k : Kernel::gemv_warp_rows;
    case Op::vjp_dx:
      return vjp_dx_rule(p, g);
    case Op::vjp_dw:
      return p.k % (16 / dtype_bytes(p.dt)) == 0 ? Kernel::vjp_dw_2d_stream : Kernel::vjp_dw_reference;
    case Op::gemm:
      break;
  }
  const bool aligned = p.k % 8 == 0 && p.n % 8 == 0;
  if (!half || !aligned) return Kernel::gemm_simt_tiles;
  const bool fits32 = p.m <= INT32_MAX && p.n <= INT32_MAX && p.k <= INT32_MAX;
  if (g.wgmma && fits32) return p.n > 128 ? Kernel::gemm_wgmma_tma256 : Kernel::gemm_wgmma_tma128;
  return g.cc >= 80 ? Kernel::gemm_mma_async : Kernel::gemm_simt_tiles;
}

long long work_floats(const Problem& p, const Gpu& g) {
  if (p.op == Op::gemv) return gemv_work_floats(p.m, p.k, g.sms);
  if (p.op == Op::vjp_dx) return vjp_dx_work_floats(p.m, p.k, g.sms);
  return 0;
}

void launch(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s) {
  switch (p.op) {
    case Op::copy: launch_copy(kern, p, buf, s); break;
    case Op::gemv: launch_gemv(kern, p, g, buf, s); break;
    case Op::vjp_dx: launch_vjp_dx(kern, p, g, buf, s); break;
    case Op::vjp_dw: launch_vjp_dw(kern, p, buf, s); break;
    case Op::gemm: launch_gemm(kern, p, g, buf, s); break;
  }
  GB_CUDA_CHECK_LAUNCH();
}

}  // namespace gb::blas
