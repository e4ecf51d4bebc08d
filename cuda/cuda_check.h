// Error handling shared by the CUDA probes: every runtime call is checked, and a failure
// becomes a C++ exception naming the call, the error and where it happened, which the
// binding turns into a Python RuntimeError (one failed case never takes the others down).
#pragma once
#include <cuda_runtime.h>
#include <stdexcept>
#include <string>

namespace gb {

inline std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

[[noreturn]] inline void cuda_fail(cudaError_t e, const char* what, const char* file, int line) {
  throw std::runtime_error(std::string(what) + " failed at " + file + ":" + std::to_string(line) +
                           " (" + cuda_error_text(e) + ")");
}

}  // namespace gb

#define GB_CUDA_CHECK(call)                                            \
  do {                                                                 \
    cudaError_t gb_err_ = (call);                                      \
    if (gb_err_ != cudaSuccess) gb::cuda_fail(gb_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch-configuration errors only show up through cudaGetLastError.
#define GB_CUDA_CHECK_LAUNCH() GB_CUDA_CHECK(cudaGetLastError())
