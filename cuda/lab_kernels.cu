// The lab's variants that never shipped (csrc/lab.def), run by name through a CUDA BlasCase:
// compiled into the extension only with GAPBENCH_LAB=ON (CMakeLists.txt), so that bench.blas
// --variants all times them by the one path. Without it, cuda/dispatch.cu's launch_lab refuses.
#include <string>

#include "cuda_check.h"
#include "kernels.h"
#include "lab/vjp_dw.cuh"

namespace gb::blas {

void launch_lab(Kernel kern, const Problem& p, const Gpu&, const Buffers& buf, cudaStream_t s) {
  switch (kern) {
    case Kernel::vjp_dw_pack16:
      dispatch_dtype(p.dt, [&]<class T>() {
        lab_kernels::launch_vjp_dw_pack16<T>(static_cast<const T*>(buf.a), static_cast<const T*>(buf.b),
                                             static_cast<T*>(buf.out), p.m, p.k, s);
      });
      return;
    default:
      break;
  }
  throw std::invalid_argument(std::string(kernel_name(kern)) + " has no launcher in cuda/lab_kernels.cu");
}

}  // namespace gb::blas
