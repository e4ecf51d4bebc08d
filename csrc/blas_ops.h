// The BLAS ops every backend's case runs (cuda/blas.h, metal/blas.h, metal/mps.cpp): their codes
// (the Python specs' native_op) and the buffers each one reads and writes, so CUDA and Metal lay
// out the same inputs in the same order. Matrices are row-major; shapes as in cuda/blas.h.
#pragma once
#include <cstddef>
#include <vector>

namespace gb::blas_ops {

enum Op : int { kCopy = 0, kGemv = 1, kVjpDx = 2, kVjpDw = 3, kGemm = 4 };

struct Io {
  std::vector<std::size_t> in;  // bytes of each input, in [[buffer(i)]] / argument order
  std::size_t out = 0;          // bytes of the output
};

// es: bytes per element. An unknown op gets no buffers (the cases reject it before asking).
inline Io io_bytes(int op, std::size_t es, long long batch, long long m, long long n, long long k) {
  std::size_t b = batch, M = m, N = n, K = k;
  switch (op) {
    case kCopy: return {{es * N}, es * N};
    case kGemv: return {{es * M * K, es * K}, es * M};                  // A, x -> y
    case kVjpDx: return {{es * M * K, es * M}, es * K};                 // W, v -> dx
    case kVjpDw: return {{es * M, es * K}, es * M * K};                 // v, x -> dW
    case kGemm: return {{es * b * M * K, es * b * K * N}, es * b * M * N};  // A, B -> C
  }
  return {};
}

}  // namespace gb::blas_ops
