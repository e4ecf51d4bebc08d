// One BLAS measurement case on Metal (mirrors cuda/blas.h): shared-storage buffers, the
// hand-written kernels of metal/<op>.metal compiled at run time from the source Python
// assembles (local includes inlined), verification I/O, and GPU-timestamp timing.
// Variant 0 is the vendor path (blit copy, MPS: mps.h), 1 each op's first kernel (<op kernel>_<dtype>),
// 2 the simdgroup-matrix GEMM. A variant that cannot run throws std::invalid_argument("no variant ...").
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "blas_ops.h"

namespace gb::metal::blas {

using namespace gb::blas_ops;  // Op codes kCopy .. kGemm

class Case {
 public:
  Case(int op, int dtype, long long batch, long long m, long long n, long long k, const std::string& source);
  ~Case();
  Case(const Case&) = delete;
  Case& operator=(const Case&) = delete;

  int n_inputs() const;
  std::size_t input_bytes(int i) const;
  std::size_t output_bytes() const;
  double library_compile_seconds() const;
  void set_input(int i, const void* data, std::size_t bytes);
  std::vector<std::uint8_t> run_once(int variant);  // output poisoned first (all-ones bytes: NaN)
  // GPU seconds per run (GPUEndTime - GPUStartTime of a command buffer holding one dispatch).
  std::vector<double> time(int variant, int samples, int warmup);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gb::metal::blas
