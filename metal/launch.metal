// launch.metal: kernels of the launch-latency probe (paper Table 6) for Apple GPUs.
// Compiled at run time by the host (metal/launch.cpp, newLibrary from source), so installing
// gapbench never needs Xcode's `metal` tool. Also compiled as C++ through
// metal/compat/metal_cpu.h and run on the CPU against numpy by tests/test_launch.py.
// Run: python -m bench.launch --backends native-metal
//
// Variant 1, launch_null: one thread, no memory traffic: the dispatch floor. With flag set it
//   counts its executions, which is how the probe checks every dispatch really ran.
// Variant 2, launch_add1_float: out[i] = a[i] + b[i]: the smallest real op, the one the
//   frameworks are timed on.
#include <metal_stdlib>
using namespace metal;

kernel void launch_null(device atomic_uint* counter [[buffer(0)]],
                        constant uint& flag [[buffer(1)]],
                        uint gid [[thread_position_in_grid]]) {
  if (flag != 0u && gid == 0u) {
    atomic_fetch_add_explicit(counter, 1u, memory_order_relaxed);
  }
}

kernel void launch_add1_float(device const float* a [[buffer(0)]],
                              device const float* b [[buffer(1)]],
                              device float* out [[buffer(2)]],
                              constant uint& n [[buffer(3)]],
                              uint gid [[thread_position_in_grid]]) {
  if (gid < n) {
    out[gid] = a[gid] + b[gid];
  }
}
