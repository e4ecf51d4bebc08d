// The buffers each BLAS op reads and writes (cuda/blas.h, metal/blas.h, metal/mps.cpp), so CUDA
// and Metal lay out the same inputs in the same order. Matrices are row-major; shapes as in
// cuda/blas.h. Ops and dtypes are the typed enums of contract.h.
#pragma once
#include <cstddef>
#include <vector>

#include "contract.h"

namespace gb::blas_ops {

struct Io {
  std::vector<std::size_t> in;  // bytes of each input, in [[buffer(i)]] / argument order
  std::size_t out = 0;          // bytes of the output
};

inline Io io_bytes(Op op, std::size_t es, long long batch, long long m, long long n, long long k) {
  std::size_t b = batch, M = m, N = n, K = k;
  switch (op) {
    case Op::copy: return {{es * N}, es * N};
    case Op::gemv: return {{es * M * K, es * K}, es * M};                  // A, x -> y
    case Op::vjp_dx: return {{es * M * K, es * M}, es * K};                // W, v -> dx
    case Op::vjp_dw: return {{es * M, es * K}, es * M * K};                // v, x -> dW
    case Op::gemm: return {{es * b * M * K, es * b * K * N}, es * b * M * N};  // A, B -> C
  }
  return {};
}

}  // namespace gb::blas_ops
