// The CUDA kernel library: per op (csrc/ops.def) a reference kernel (the simplest correct one) and
// the kernels the dispatcher ships, named by strategy: cuda/ops/<op>.cuh holds them, each a
// __global__ of its strategy's name (the lab, cuda/lab/, includes the same headers and adds the
// numbered variants that do not ship; cuda/lab/LINEAGE.md). The header's library part (compiled
// with GB_OPS_LIBRARY, one generated translation unit per op) holds what is the op's own: its
// launcher, the dispatcher's rule for it (with its table and evidence), its workspace and its
// vendor call. Everything here that lists ops or kernels is generated from
// csrc/ops.def. Matrices are row-major, accumulation is fp32 for every dtype.
#pragma once
#include <cuda_runtime.h>
#include <library_types.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "blas_ops.h"
#include "contract.h"

namespace gb::blas {

// Every kernel of every op, by strategy name (csrc/ops.def's kernels: the contract's gb::Kernel).
using Kernel = gb::Kernel;

const char* kernel_name(Kernel k);
Op kernel_op(Kernel k);

// What the rule needs to know about the GPU (queried once per case).
struct Gpu {
  int sms = 1;
  int cc = 0;                   // compute capability, e.g. 90
  std::size_t l2_bytes = 0;
};
Gpu query_gpu(int device);

struct Problem {
  Op op;
  DType dt;
  long long batch = 1, m = 1, n = 1, k = 1;
  float scalar = 0.f;  // the op's parameter (csrc/ops.def), e.g. an epsilon
};

// Device buffers of one run: inputs in blas_ops::io_bytes order, the output, and the op's
// workspace (work_floats() floats, zeroed once when allocated: kernels that count leave it zeroed).
struct Buffers {
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  float* work = nullptr;
};

// One call of an op's vendor path (cuda/ops/<op>.cuh: vendor()). `handle` is a cuBLAS handle on
// the case's stream where the op's vendor strategy is cublas (else null); `compute` the cuBLAS
// compute type (TF32 allowed for Impl.vendor_tf32), `type` the element type.
struct Vendor {
  const Problem& p;
  const Buffers& buf;
  std::size_t out_bytes;
  cudaStream_t stream;
  void* handle;
  int compute;
  cudaDataType type;
};

inline void check_cublas(int status, const char* what) {
  if (status != 0) throw std::runtime_error(std::string(what) + " failed with cublasStatus " + std::to_string(status));
}

Kernel reference_kernel(Op op);
Kernel dispatch(const Problem& p, const Gpu& g);  // the op's rule (cuda/ops/<op>.cuh)
long long work_floats(const Problem& p, const Gpu& g);
// Launches one kernel of p.op's library. Throws gb::NotApplicable if it cannot run here.
void launch(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s);
// The op's vendor call; gb::NotApplicable where csrc/ops.def declares none.
void vendor(const Vendor& v);
// A kernel of the lab (csrc/lab.def): launch_lab runs it (cuda/lab_kernels.cu, built with
// GAPBENCH_LAB=ON; elsewhere it throws gb::NotApplicable saying so). launch() calls it.
// Its workspace, lab_work_floats floats, is the case's last part (work_floats() counts it in): launch()
// hands launch_lab a Buffers whose `work` points there.
bool is_lab_kernel(Kernel k);
long long lab_work_floats(const Problem& p, const Gpu& g);
void launch_lab(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s);

// What the library part of each op's cuda/ops/<op>.cuh defines (a vendor() only where ops.def declares a vendor path).
#define GB_VENDOR_DECL_vendor(...) void vendor(const Vendor& v);
#define GB_VENDOR_DECL_vendor_tf32(...) void vendor(const Vendor& v);
#define GB_VENDOR_DECL_none(...)
#define GB_OP(name, index, form, inputs, output, scalar, kernels, vendor_decl, ...)   \
  namespace ops::name {                                                               \
  Kernel rule(const Problem& p, const Gpu& g);                                        \
  long long work_floats(const Problem& p, const Gpu& g);                              \
  void launch(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s); \
  GB_CAT(GB_VENDOR_DECL_, vendor_decl)                                                \
  }
#include "ops.def"
#undef GB_OP
#undef GB_VENDOR_DECL_vendor
#undef GB_VENDOR_DECL_vendor_tf32
#undef GB_VENDOR_DECL_none

}  // namespace gb::blas
