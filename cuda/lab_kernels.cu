// The lab's variants that never shipped (csrc/lab.def), run by name through a CUDA BlasCase:
// compiled into the extension only with GAPBENCH_LAB=ON (CMakeLists.txt), so that bench.blas
// --variants all times them by the one path. Without it, cuda/dispatch.cu's launch_lab refuses.
// Each case below is a kernel's launch (cuda/lab/<op>.cuh); `buf.work` is the lab's part of the
// case's workspace (lab_work_floats floats after the library's, zeroed once).
#include <string>

#include "cuda_check.h"
#include "kernels.h"
#include "lab/gemm.cuh"
#include "lab/vjp_dw.cuh"
#include "lab/vjp_dx.cuh"

namespace gb::blas {

long long lab_work_floats(const Problem& p, const Gpu& g) {
  return p.op == Op::vjp_dx ? lab_kernels::vjp_dx_lab_work_floats(p.m, p.k, g.sms) : 0;
}

namespace {

namespace lk = lab_kernels;

void launch_vjp_dx_lab(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s) {
  const char* name = kernel_name(kern);
  dispatch_dtype(p.dt, [&]<class T>() {
    auto W = static_cast<const T*>(buf.a);
    auto v = static_cast<const T*>(buf.b);
    auto dx = static_cast<T*>(buf.out);
    const long long m = p.m, k = p.k;
    switch (kern) {
      case Kernel::vjp_dx_rows_in_flight4:
        lk::need_packs<T>(name, k);
        lk::launch_dx_rows_in_flight<T, 4>(W, v, dx, buf.work, m, k, g.sms, lk::kDxBlocksPerSmV3, false, s);
        return;
      case Kernel::vjp_dx_rows_in_flight8:
        lk::need_packs<T>(name, k);
        lk::launch_dx_rows_in_flight<T, 8>(W, v, dx, buf.work, m, k, g.sms, lk::kDxBlocksPerSmV4, false, s);
        return;
      case Kernel::vjp_dx_pdl_reduce:
        lk::need_sm90(name, g.cc, "programmatic dependent launch");
        lk::need_packs<T>(name, k, 8);
        lk::launch_dx_rows_in_flight<T, 8>(W, v, dx, buf.work, m, k, g.sms, lk::kDxBlocksPerSmV4, true, s);
        return;
      case Kernel::vjp_dx_fused_last_block:
        lk::need_packs<T>(name, k, 8);
        lk::launch_dx_fused_last_block<T>(W, v, dx, buf.work, m, k, g.sms, s);
        return;
      case Kernel::vjp_dx_warp_rows:  // the reduce a programmatic dependent where sm_90 allows
        lk::need_packs<T>(name, k, 8);
        lk::launch_dx_warp_rows<T, lk::kDxV7Rows, lk::kDxV7Warps>(false, W, v, dx, buf.work, m, k, g.sms,
                                                                  lk::kDxV7BlocksPerSm, g.cc >= 90, s);
        return;
      case Kernel::vjp_dx_warp_rows_atomic:
        lk::need_packs<T>(name, k, 8);
        lk::launch_dx_warp_rows<T, lk::kDxV8Rows, lk::kDxV8Warps>(true, W, v, dx, buf.work, m, k, g.sms,
                                                                  lk::kDxV8BlocksPerSm, false, s);
        return;
      case Kernel::vjp_dx_tma_ring:
        lk::need_sm90(name, g.cc, "the Tensor Memory Accelerator");
        lk::need_packs<T>(name, k, 8);  // a 16-byte row pitch for the TMA, every dtype
        lk::launch_dx_tma<T, lk::kDxV9Warps, lk::kDxV9Rows, lk::kDxV9Stages>(W, v, dx, buf.work, m, k, g.sms, s);
        return;
      case Kernel::vjp_dx_persistent:
        lk::need_packs<T>(name, k, 8);
        lk::launch_dx_persistent<T, lk::kDxV10Rows, lk::kDxV10Warps>(W, v, dx, buf.work, m, k, g.sms,
                                                                     lk::kDxV10BlocksPerSm, s);
        return;
      default:
        throw std::invalid_argument(std::string(name) + " has no launcher in cuda/lab_kernels.cu");
    }
  });
}

void launch_gemm_lab(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s) {
  dispatch_dtype(p.dt, [&]<class T>() {
    auto a = static_cast<const T*>(buf.a);
    auto b = static_cast<const T*>(buf.b);
    auto c = static_cast<T*>(buf.out);
    switch (kern) {
      case Kernel::gemm_smem_tiles: lk::launch_gemm_smem_tiles<T>(a, b, c, p.batch, p.m, p.n, p.k, s); return;
      case Kernel::gemm_reg_tiles: lk::launch_gemm_reg_tiles<T>(a, b, c, p.batch, p.m, p.n, p.k, s); return;
      case Kernel::gemm_wmma: lk::launch_gemm_wmma<T>(a, b, c, p.batch, p.m, p.n, p.k, g.cc, s); return;
      default: throw std::invalid_argument(std::string(kernel_name(kern)) + " has no launcher in cuda/lab_kernels.cu");
    }
  });
}

}  // namespace

void launch_lab(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s) {
  switch (kernel_op(kern)) {
    case Op::vjp_dx: launch_vjp_dx_lab(kern, p, g, buf, s); return;
    case Op::gemm: launch_gemm_lab(kern, p, g, buf, s); return;
    case Op::vjp_dw:
      if (kern == Kernel::vjp_dw_pack16) {
        dispatch_dtype(p.dt, [&]<class T>() {
          lab_kernels::launch_vjp_dw_pack16<T>(static_cast<const T*>(buf.a), static_cast<const T*>(buf.b),
                                               static_cast<T*>(buf.out), p.m, p.k, s);
        });
        return;
      }
      break;
    default:
      break;
  }
  throw std::invalid_argument(std::string(kernel_name(kern)) + " has no launcher in cuda/lab_kernels.cu");
}

}  // namespace gb::blas
