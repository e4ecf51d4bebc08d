// Element types of the BLAS probes (the library and the lab, cuda/lab/): fp32, fp16, bf16, always accumulated in fp32, and the
// 16-byte packs every bandwidth-bound kernel loads and stores (one LDG.128/STG.128 per pack:
// the widest access a thread can make, so a warp moves 512 B per instruction).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "contract.h"

namespace gb::blas {

// gb::DType's values as plain ints, for the kernels' templates and the standalone loops.
constexpr int kF32 = (int)gb::DType::fp32, kF16 = (int)gb::DType::fp16, kBF16 = (int)gb::DType::bf16;

inline int dtype_size(int dt) { return dt == kF32 ? 4 : 2; }

__host__ __device__ __forceinline__ float to_f(float x) { return x; }
__host__ __device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__host__ __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__host__ __device__ __forceinline__ T from_f(float x);
template <>
__host__ __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <>
__host__ __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <>
__host__ __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

template <class T>
struct alignas(16) Pack {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Calls f.template operator()<T>() with T the element type of `dt`.
template <class F>
bool dispatch_dtype(int dt, F&& f) {
  switch (dt) {
    case kF32: f.template operator()<float>(); return true;
    case kF16: f.template operator()<__half>(); return true;
    case kBF16: f.template operator()<__nv_bfloat16>(); return true;
  }
  return false;
}
template <class F>
bool dispatch_dtype(gb::DType dt, F&& f) {
  return dispatch_dtype((int)dt, static_cast<F&&>(f));
}

}  // namespace gb::blas
