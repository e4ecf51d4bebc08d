// The buffers each BLAS op reads and writes (cuda/blas.h, metal/blas.h, metal/mps.cpp), so CUDA
// and Metal lay out the same inputs in the same order: csrc/ops.def's inputs and output, in
// elements, times the element size. Matrices are row-major. Ops and dtypes: contract.h.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "contract.h"

namespace gb::blas_ops {

struct Io {
  std::vector<std::size_t> in;  // bytes of each input, in [[buffer(i)]] / argument order
  std::size_t out = 0;          // bytes of the output
};

inline Io io_bytes(Op op, std::size_t es, long long batch_, long long m_, long long n_, long long k_) {
  const std::size_t batch = batch_, m = m_, n = n_, k = k_;
  GB_DIMS_USED;
  Io io;
  switch (op) {
#define GB_OP(name, index, form, inputs, output, ...) \
  case Op::name:                                      \
    io = {{GB_UNPAREN inputs}, (output)};             \
    break;
#include "ops.def"
#undef GB_OP
  }
  for (auto& b : io.in) b *= es;
  io.out *= es;
  return io;
}

// A case's set_input(i, data, bytes) (CUDA and Metal): i names an input and bytes is its size.
inline void check_input(const std::vector<std::size_t>& in_bytes, int i, std::size_t bytes) {
  if (i < 0 || i >= (int)in_bytes.size()) throw std::out_of_range("input index");
  if (bytes != in_bytes[i])
    throw std::invalid_argument("input " + std::to_string(i) + ": expected " + std::to_string(in_bytes[i]) +
                                " bytes, got " + std::to_string(bytes));
}

// An op's vendor path (csrc/ops.def's vendor): its strategy name on CUDA and on Metal, whether
// cuBLAS's TF32 row exists for it (fp32), or why there is none (not_applicable, else null).
struct VendorDecl {
  const char* cuda = nullptr;
  const char* metal = nullptr;
  bool tf32 = false;
  const char* not_applicable = nullptr;
};

inline VendorDecl vendor_decl(Op op) {
#define GB_VENDOR_DECL_vendor(c, mt) {#c, #mt, false, nullptr}
#define GB_VENDOR_DECL_vendor_tf32(c, mt) {#c, #mt, true, nullptr}
#define GB_VENDOR_DECL_none(why) {nullptr, nullptr, false, why}
  switch (op) {
#define GB_OP(name, index, form, inputs, output, scalar, kernels, vendor, ...) \
  case Op::name: return VendorDecl GB_CAT(GB_VENDOR_DECL_, vendor);
#include "ops.def"
#undef GB_OP
  }
#undef GB_VENDOR_DECL_vendor
#undef GB_VENDOR_DECL_vendor_tf32
#undef GB_VENDOR_DECL_none
  return {};
}

// Impl.vendor_tf32 where it does not exist: the ops that declare it, in the message.
[[noreturn]] inline void no_vendor_tf32(const char* platform_why = nullptr) {
  if (platform_why) throw NotApplicable(platform_why);
  std::string ops;
  for (int i = 0; i < kOps; ++i)
    if (vendor_decl((Op)i).tf32) ops += std::string(ops.empty() ? "" : ", ") + op_name((Op)i);
  throw NotApplicable("vendor_tf32 (cuBLAS with TF32 tensor cores) exists for fp32 " + ops + " only");
}

}  // namespace gb::blas_ops
