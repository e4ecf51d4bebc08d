// Cold-cache timing: evicting an op's data from L2 before each timed run, two ways.
//
//   kColdClean ("read"): a kernel reads a buffer of twice the L2's size and stores nothing. The
//     L2 ends up holding clean lines of that buffer only, so the timed op finds none of its data
//     and nothing dirty to write back: it pays for its own traffic alone. This is what
//     "flushed" means for a CPU cache and what Nsight Compute's cache control gives.
//   kColdDirty ("write"): a memset over the same buffer (nvbench's L2 flush). The L2 ends up full
//     of *dirty* lines, so the timed op's first ~L2-size of misses also write those back to DRAM:
//     on an H200 (50 MB L2, ~4.5 TB/s) that adds up to ~11 us of write traffic to whatever runs
//     next, and how much of it overlaps the op's own reads depends on the op's access order.
//
// Either scrub also keeps the device busy while the host queues the start event and the op.
// Internal linkage: the library and the tuning tools include it.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace gb::cache {

enum Mode : int { kHot = 0, kColdClean = 1, kColdDirty = 2 };

// Reads n 16-byte words. The store happens only if the xor of everything read equals a constant
// that a buffer filled with one byte value never produces (each word's x^y^z^w is 0), but the
// compiler cannot know that, so no load is dropped.
// Unrolled so each thread has four independent 16-byte loads in flight (the read runs near DRAM
// rate instead of being latency-bound).
static __global__ void l2_read_scrub(uint4* p, std::size_t n) {
  unsigned acc = 0;
  const std::size_t stride = (std::size_t)gridDim.x * blockDim.x;
  std::size_t i = (std::size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 w[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) w[u] = p[i + u * stride];
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
  }
  for (; i < n; i += stride) acc ^= p[i].x ^ p[i].y ^ p[i].z ^ p[i].w;
  if (acc == 0x9e3779b9u) p[0].x = acc;
}

// The scrub buffer: 2x the L2 (the L2's replacement is not strict LRU, one L2's worth can leave
// survivors), zero-filled once so the read scrub reads defined data.
struct L2Scrub {
  void* buf = nullptr;
  std::size_t bytes = 0;
  int blocks = 1;

  cudaError_t alloc(int device) {
    int l2 = 0, sms = 1;
    cudaError_t e = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e != cudaSuccess) return e;
    bytes = 2 * (std::size_t)(l2 > 0 ? l2 : 1 << 20);
    blocks = 4 * sms;
    e = cudaMalloc(&buf, bytes);
    return e == cudaSuccess ? cudaMemset(buf, 0, bytes) : e;
  }
  void release() {
    if (buf) cudaFree(buf);
    buf = nullptr;
  }
  // Queue one scrub of the given mode (kHot queues nothing). `round` varies the memset's byte so
  // no layer can skip a write of what is already there.
  cudaError_t run(int mode, int round, cudaStream_t stream) const {
    if (mode == kColdDirty) return cudaMemsetAsync(buf, round & 0xFF, bytes, stream);
    if (mode == kColdClean) {
      l2_read_scrub<<<blocks, 256, 0, stream>>>((uint4*)buf, bytes / sizeof(uint4));
      return cudaGetLastError();
    }
    return cudaSuccess;
  }
};

}  // namespace gb::cache
