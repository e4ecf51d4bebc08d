// Kernels of the launch probe, shared by the harness (cuda/launch.cu) and the plain
// standalone loop (cuda/plain/launch.cu) so both time exactly the same launches.
//
// Variant 1, null: one thread, no memory traffic: the launch floor itself. With flag set it
//   counts its executions, which is how the probe checks that every launch really ran.
// Variant 2, add1: out[i] = a[i] + b[i] over n elements (n = 1 by default): the smallest
//   real op, the same one the frameworks are timed on.
#pragma once
#include <cuda_runtime.h>


namespace gb::launch {

__global__ void null_kernel(unsigned int* counter, int flag) {
  if (flag != 0 && threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(counter, 1u);
}

__global__ void add1_kernel(const float* __restrict__ a, const float* __restrict__ b,
                            float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

constexpr int kAddBlock = 256;

inline int add_grid(int n) { return (n + kAddBlock - 1) / kAddBlock; }

}  // namespace gb::launch

