// The driver's tensor-map encoder (TMA descriptors, sm_90) for the kernels that stream through
// the Tensor Memory Accelerator (gemm.cu v7-v8, vjp.cu v9).
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

namespace gb::blas {

// cuTensorMapEncodeTiled is a driver API: fetched through the runtime so that the module keeps
// linking only the static cudart (and imports on machines without a driver). nullptr where the
// driver has none.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace gb::blas
