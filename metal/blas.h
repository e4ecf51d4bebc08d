// One BLAS measurement case on Metal (mirrors cuda/blas.h): shared-storage buffers, the
// hand-written kernels of metal/<op>.metal compiled at run time from the source Python
// assembles (local includes inlined), verification I/O, and GPU-timestamp timing.
// Impl::vendor is the vendor path (blit copy, MPS: mps.h); Impl::reference each op's first kernel
// (<kernel>_<dtype>); Impl::dispatch the shipped kernel (the simdgroup-matrix GEMM for gemm, the
// reference kernel elsewhere). Impl::vendor_tf32 throws gb::NotApplicable (no TF32 on Apple GPUs).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "blas_ops.h"

namespace gb::metal::blas {

class Case {
 public:
  Case(Op op, DType dtype, long long batch, long long m, long long n, long long k, const std::string& source);
  ~Case();
  Case(const Case&) = delete;
  Case& operator=(const Case&) = delete;

  int n_inputs() const;
  std::size_t input_bytes(int i) const;
  std::size_t output_bytes() const;
  double library_compile_seconds() const;
  void set_input(int i, const void* data, std::size_t bytes);
  std::string strategy(Impl impl) const;  // the kernel `impl` runs, e.g. "gemm_simd", "mps"
  void run_once(Impl impl, void* host);  // output poisoned first (all-ones bytes: NaN), copied to host
  // GPU seconds per run (GPUEndTime - GPUStartTime of a command buffer holding one dispatch). The
  // output is poisoned before the last timed run, so last_output() shows what that run wrote.
  std::vector<double> time(Impl impl, int samples, int warmup);
  void last_output(void* host);  // output_bytes() of them

 private:
  struct State;  // (not "Impl": that is gb::Impl here)
  std::unique_ptr<State> impl_;
};

}  // namespace gb::metal::blas
