// The typed contract between gapbench._native and Python: the enums and the one exception every
// part (CPU, CUDA, Metal) shares. Bound in csrc/module.cpp; stubs in python/gapbench/_native.pyi.
//
// What the extension exposes (the one table; keep _native.pyi in step, tests/test_native.py checks):
//
//   gapbench._native
//     Op {copy, gemv, vjp_dx, vjp_dw, gemm}      DType {fp32, fp16, bf16}
//     Cache {hot, cold_clean, cold_dirty}         Impl {reference, dispatch, vendor, vendor_tf32}
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
// the kernels its dispatcher picks from (Impl.dispatch; rule table in cuda/kernels.h). The vendor
// path (Impl.vendor) is cuBLAS (cudaMemcpyAsync for copy) on CUDA, MPS (a blit for copy) on Metal;
// Impl.vendor_tf32 is cuBLAS with TF32 tensor cores, fp32 GEMM only.
#pragma once
#include <stdexcept>
#include <string>

namespace gb {

enum class Op : int { copy = 0, gemv = 1, vjp_dx = 2, vjp_dw = 3, gemm = 4 };
enum class DType : int { fp32 = 0, fp16 = 1, bf16 = 2 };
// hot: input sets rotate (enough to exceed 2x L2 where memory allows); cold_clean: a 2x-L2 read
// pass before each run; cold_dirty: a 2x-L2 memset before each run (cuda/l2_scrub.cuh).
enum class Cache : int { hot = 0, cold_clean = 1, cold_dirty = 2 };
enum class Impl : int { reference = 0, dispatch = 1, vendor = 2, vendor_tf32 = 3 };
enum class LaunchKernel : int { null = 1, add1 = 2 };

// An Impl that cannot run for this op, dtype, GPU or shape (vendor_tf32 off fp32 GEMM, cuBLAS not
// loaded, ...). Python sees gapbench._native.NotApplicable, a ValueError.
struct NotApplicable : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

inline const char* op_name(Op op) {
  switch (op) {
    case Op::copy: return "copy";
    case Op::gemv: return "gemv";
    case Op::vjp_dx: return "vjp_dx";
    case Op::vjp_dw: return "vjp_dw";
    case Op::gemm: return "gemm";
  }
  return "?";
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

// Enum values that come from outside (a cast int) are checked where they enter.
inline void check_enums(Op op, DType dt) {
  if ((int)op < 0 || (int)op > 4) throw std::invalid_argument("unknown op " + std::to_string((int)op));
  if ((int)dt < 0 || (int)dt > 2) throw std::invalid_argument("unknown dtype " + std::to_string((int)dt));
}

}  // namespace gb
