// One BLAS measurement case on CUDA: device buffers for an op/dtype/shape, the vendor library and
// hand-written variants behind one dispatcher, verification I/O and event timing.
// Variant 0 is the vendor path (cuBLAS; cudaMemcpyAsync for copy), 100 is cuBLAS with TF32
// tensor cores (fp32 GEMM only), 1.. are the hand-written kernels of cuda/<op>.cu.
// Raw per-run seconds come back; statistics live in Python.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "blas_ops.h"

namespace gb::cuda::blas {

using namespace gb::blas_ops;  // Op codes kCopy .. kGemm

class Case {
 public:
  // Shapes: copy (n = elements); gemv (m, k); vjp_dx / vjp_dw (m, k of W); gemm (batch, m, n, k).
  Case(int op, int dtype, long long batch, long long m, long long n, long long k, int device = 0);
  ~Case();
  Case(const Case&) = delete;
  Case& operator=(const Case&) = delete;

  int n_inputs() const;
  std::size_t input_bytes(int i) const;
  std::size_t output_bytes() const;
  int rotations() const;  // input/output sets cycled through in hot-cache timing
  void set_input(int i, const void* data, std::size_t bytes);
  // Poison the output (all-ones bytes: NaN in every float format), run once, return the output.
  std::vector<std::uint8_t> run_once(int variant);
  // Device seconds per run: events around each run, after `warmup` untimed runs. cache 0 (hot):
  // the sets rotate so inputs are not simply re-read from L2. 1 (cold, clean): a read pass of 2x
  // L2 before each run leaves L2 holding none of the op's data and no dirty lines. 2 (cold,
  // dirty): a 2x-L2 memset before each run, which also leaves dirty lines for the op to write back
  // (see l2_scrub.cuh). Any other value: std::invalid_argument.
  std::vector<double> time(int variant, int samples, int warmup, int cache);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string cublas_load(const std::vector<std::string>& candidates);  // path loaded, or "" (see cublas_error)
std::string cublas_error();

}  // namespace gb::cuda::blas
