// The typed contract between gapbench._native and Python: the enums and the one exception every
// part (CPU, CUDA, Metal) shares. Bound in python/_native/module.cpp; stubs in python/gapbench/_native.pyi.
//
// What the extension exposes (the one table; keep _native.pyi in step, tests/test_native.py checks):
//
//   gapbench._native
//     Op {the ops of csrc/ops.def}               DType {fp32, fp16, bf16}
//     Cache {hot, cold_clean, cold_dirty}         Impl {reference, dispatch, vendor, vendor_tf32}
//     Kernel {every CUDA kernel of ops.def, by strategy name}
//     LaunchKernel {null, add1}                   NotApplicable (ValueError)    build_info (dict)
//   .cpu    noop, noop_args, now_ns
//   .cuda   built, status, context_create_seconds, cublas_load, cublas_error,
//           LaunchProbe(kernel, n, device), BlasCase(op, dtype, batch, m, n, k, device), Gate(device, timeout_s)
//   .metal  built, status, context_create_seconds, LaunchProbe(kernel, n, source),
//           BlasCase(op, dtype, batch, m, n, k, source)
//   .dist   built, reason, CollOp, CopyMethod, nccl_load, nccl_loaded_path, nccl_version, nccl_unique_id,
//           supports, can_access_peer, NcclRunner(unique_id, rank, world, device, timeout_s),
//           PeerCopy(src, dst, bytes)   (collectives take the shared DType)
//
// Per op, the CUDA library holds a reference kernel (the simplest correct one: Impl.reference) and
// the kernels its dispatcher picks from (Impl.dispatch; rules in cuda/ops/<op>.cuh). The vendor
// path (Impl.vendor) is cuBLAS (cudaMemcpyAsync for copy) on CUDA, MPS (a blit for copy) on Metal;
// Impl.vendor_tf32 is cuBLAS with TF32 tensor cores, fp32 GEMM only.
#pragma once
#include <stdexcept>
#include <string>

#include "ops.h"

namespace gb {

// The ops of csrc/ops.def, valued by their index there.
enum class Op : int {
#define GB_OP(name, index, ...) name = index,
#include "ops.def"
#undef GB_OP
};
// How many ops there are; the declared indices are their positions (checked here).
constexpr int kOps = 0
#define GB_OP(name, index, ...) +1
#include "ops.def"
#undef GB_OP
    ;
namespace detail {
constexpr int kOpPosition[] = {
#define GB_OP(name, index, ...) index,
#include "ops.def"
#undef GB_OP
};
constexpr bool indices_are_positions() {
  for (int i = 0; i < kOps; ++i)
    if (kOpPosition[i] != i) return false;
  return true;
}
static_assert(indices_are_positions(), "csrc/ops.def: each op's index must be its line's position from 0");
}  // namespace detail
enum class DType : int { fp32 = 0, fp16 = 1, bf16 = 2 };
// hot: input sets rotate (enough to exceed 2x L2 where memory allows); cold_clean: a 2x-L2 read
// pass before each run; cold_dirty: a 2x-L2 memset before each run (cuda/l2_scrub.cuh).
enum class Cache : int { hot = 0, cold_clean = 1, cold_dirty = 2 };
enum class Impl : int { reference = 0, dispatch = 1, vendor = 2, vendor_tf32 = 3 };
// Every CUDA kernel of every op, by strategy name (csrc/ops.def's kernels): besides Impl's
// reference and dispatcher, a CUDA BlasCase runs any kernel of its op by name (bench.blas
// --variants all: each kernel a row of the same paired timing, verified first and last).
enum class Kernel : int {
#define GB_OP(name, index, form, inputs, output, scalar, kernels, ...) GB_UNPAREN kernels,
#include "ops.def"
#undef GB_OP
// then the lab's variants that never shipped (csrc/lab.def; runnable with GAPBENCH_LAB=ON only)
#define GB_LAB(op, kernels) GB_UNPAREN kernels,
#include "lab.def"
#undef GB_LAB
};
enum class LaunchKernel : int { null = 1, add1 = 2 };

// An Impl that cannot run for this op, dtype, GPU or shape (vendor_tf32 off fp32 GEMM, cuBLAS not
// loaded, ...). Python sees gapbench._native.NotApplicable, a ValueError.
struct NotApplicable : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

inline const char* op_name(Op op) {
  switch (op) {
#define GB_OP(name, ...) \
  case Op::name: return #name;
#include "ops.def"
#undef GB_OP
  }
  return "?";
}

// The op's float parameter (csrc/ops.def's scalar; 0 where it has none).
inline float op_scalar(Op op) {
  switch (op) {
#define GB_OP(name, index, form, inputs, output, scalar, ...) \
  case Op::name: return (float)(scalar);
#include "ops.def"
#undef GB_OP
  }
  return 0.f;
}

inline const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::fp32: return "fp32";
    case DType::fp16: return "fp16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

inline int dtype_bytes(DType dt) { return dt == DType::fp32 ? 4 : 2; }

// The launch probe's arguments (CUDA and Metal): a LaunchKernel value and an element count.
inline void check_launch_args(int variant, int n) {
  if (variant != (int)LaunchKernel::null && variant != (int)LaunchKernel::add1)
    throw std::invalid_argument("launch variant must be 1 (null) or 2 (add1), got " + std::to_string(variant));
  if (n < 1) throw std::invalid_argument("n must be >= 1");
}

// Enum values that come from outside (a cast int) are checked where they enter.
inline void check_enums(Op op, DType dt) {
  if ((int)op < 0 || (int)op >= kOps) throw std::invalid_argument("unknown op " + std::to_string((int)op));
  if ((int)dt < 0 || (int)dt > 2) throw std::invalid_argument("unknown dtype " + std::to_string((int)dt));
}

}  // namespace gb
