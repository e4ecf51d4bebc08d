// The gate's kernel (see gate.h): one thread spins on a host-mapped flag until the host writes the
// generation it waits for, or until `timeout_ns` of %globaltimer have passed; it then writes
// whether it timed out and which generation it served into host-mapped memory.
#pragma once
#include <cuda_runtime.h>

namespace gb::cuda {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// flag[0]: the generation the host has released up to. result[0]: 1 if this hold timed out;
// result[1]: the generation this kernel served (so the host can tell a stale result).
static __global__ void gate_kernel(const volatile unsigned* flag, unsigned want, volatile unsigned* result,
                                   unsigned long long timeout_ns) {
  const unsigned long long t0 = global_ns();
  unsigned timed_out = 0;
  while (*flag < want) {
    if (global_ns() - t0 > timeout_ns) {
      timed_out = 1;
      break;
    }
#if __CUDA_ARCH__ >= 700
    __nanosleep(200);  // fewer reads over the bus; release is seen within ~1 us
#endif
  }
  result[0] = timed_out;
  __threadfence_system();
  result[1] = want;
  __threadfence_system();
}

}  // namespace gb::cuda
