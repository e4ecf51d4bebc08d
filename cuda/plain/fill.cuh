// Inputs for the standalone loops (cuda/plain/, cuda/tune/): uniform in [-1, 1) at full fp32
// resolution from a splitmix64 hash of the index (and a stream number, so two buffers differ).
// Tensor-core power, and so clocks, depend on the data, and a result on zeros or few distinct
// values would be neither checkable nor comparable.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace gb::plain {

static __global__ void fill(void* p, long long count, int dt, unsigned long long stream = 0) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= count) return;
  unsigned long long z = (unsigned long long)i + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  float v = (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
  if (dt == 0) {
    static_cast<float*>(p)[i] = v;
  } else {
    unsigned u = __float_as_uint(v);
    unsigned short h = dt == 2 ? (unsigned short)(u >> 16) : __half_as_ushort(__float2half(v));
    static_cast<unsigned short*>(p)[i] = h;
  }
}

}  // namespace gb::plain
