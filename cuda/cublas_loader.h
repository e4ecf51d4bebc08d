// cuBLAS loaded at run time (dlopen), so gapbench builds and imports where cuBLAS is absent
// (this repository's CI has the CUDA compiler but no cuBLAS) and reports why the vendor rows
// are missing instead of failing. Only the few entry points the BLAS probes call are declared.
#pragma once
#include <cuda_runtime.h>
#include <library_types.h>

#include <string>
#include <vector>

namespace gb::cuda::cublas {

using Handle = void*;
using Status = int;  // cublasStatus_t; 0 is CUBLAS_STATUS_SUCCESS
enum Operation : int { kOpN = 0, kOpT = 1 };
enum ComputeType : int { kCompute32F = 68, kCompute32FPedantic = 69, kCompute32FFastTF32 = 77 };
constexpr int kGemmDefault = -1;

struct Api {
  Status (*create)(Handle*) = nullptr;
  Status (*destroy)(Handle) = nullptr;
  Status (*set_stream)(Handle, cudaStream_t) = nullptr;
  Status (*get_version)(Handle, int*) = nullptr;
  Status (*sgemv)(Handle, int, int, int, const float*, const float*, int, const float*, int, const float*,
                  float*, int) = nullptr;
  Status (*gemm_ex)(Handle, int, int, int, int, int, const void*, const void*, cudaDataType, int, const void*,
                    cudaDataType, int, const void*, void*, cudaDataType, int, int, int) = nullptr;
  Status (*gemm_strided_batched_ex)(Handle, int, int, int, int, int, const void*, const void*, cudaDataType, int,
                                    long long, const void*, cudaDataType, int, long long, const void*, void*,
                                    cudaDataType, int, long long, int, int, int) = nullptr;
};

// Tries each path in turn (then the plain soname). Returns the path loaded, or "" with `why`.
std::string load(const std::vector<std::string>& candidates, std::string* why);
bool loaded();
const Api& api();          // throws std::runtime_error when not loaded
std::string load_error();  // why the last load failed
std::string loaded_path();

}  // namespace gb::cuda::cublas
