// The gate's kernel (see gate.h): one thread spins on a host-mapped flag until the host writes the
// generation it waits for, or until `timeout_cycles` of its SM's clock (clock64, monotonic) have
// passed; it then writes whether it timed out and which generation it served into host-mapped
// memory. Not %globaltimer: on the lent H100 it stepped backwards now and then, which read as a
// huge elapsed time and let holds go at once (seen 2026-11-23: the gate test's work ran while held).
#pragma once
#include <cuda_runtime.h>

namespace gb::cuda {

// flag[0]: the generation the host has released up to. result[0]: 1 if this hold timed out;
// result[1]: the generation this kernel served (so the host can tell a stale result).
static __global__ void gate_kernel(const volatile unsigned* flag, unsigned want, volatile unsigned* result,
                                   long long timeout_cycles) {
  const long long t0 = clock64();
  unsigned timed_out = 0;
  while (*flag < want) {
    if (clock64() - t0 > timeout_cycles) {
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

// The parity pad (gate.h set_parity_pads): an empty kernel, one launch on the stream.
static __global__ void pad_kernel() {}

}  // namespace gb::cuda
