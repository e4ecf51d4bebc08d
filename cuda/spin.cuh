// A kernel that keeps the device busy for `cycles` SM clocks, so the host can queue work (events,
// launches) behind it and device timers see that work run back to back instead of the host's
// submission gaps. Internal linkage: several translation units include it.
#pragma once
#include <cuda_runtime.h>

namespace gb::launch {

static __global__ void spin_kernel(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

}  // namespace gb::launch
