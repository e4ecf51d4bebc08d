// The hardware floor of bench.dist: copies between two GPUs of this process, timed with CUDA
// events on the stream that does the work. Methods:
//   memcpy_peer  cudaMemcpyPeerAsync (the driver's copy engines; works without peer access)
//   kernel_pull  a copy kernel on the destination GPU reading the source through a peer pointer
//   kernel_push  a copy kernel on the source GPU writing the destination through a peer pointer
// The kernels need peer access (cudaDeviceCanAccessPeer); without it they raise.
// Every method is checked before timing: the source holds a known pattern, the destination is
// poisoned, and the copy is compared byte for byte on the destination GPU.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace gb::cuda::p2p {

enum class Method : int { memcpy_peer = 0, kernel_pull = 1, kernel_push = 2 };

bool can_access_peer(int src, int dst);

class PeerCopy {
 public:
  PeerCopy(int src, int dst, size_t bytes);
  ~PeerCopy();
  PeerCopy(const PeerCopy&) = delete;
  PeerCopy& operator=(const PeerCopy&) = delete;

  bool peer_access() const { return peer_; }
  size_t bytes() const { return bytes_; }
  // Poison the destination, copy once, count wrong bytes (0 = correct).
  unsigned long long check(Method m);
  // Count wrong bytes of the destination as it is now (after timed copies: the last one's output).
  unsigned long long verify();
  // Device seconds of `iters` copies per sample.
  std::vector<double> time(Method m, int iters, int samples, int warmup);

 private:
  void launch(Method m, cudaStream_t s);
  int src_, dst_;
  size_t bytes_;
  bool peer_ = false;
  void* a_ = nullptr;  // on src
  void* b_ = nullptr;  // on dst
  cudaStream_t s_src_ = nullptr, s_dst_ = nullptr;
  cudaEvent_t e0_src_ = nullptr, e1_src_ = nullptr, e0_dst_ = nullptr, e1_dst_ = nullptr;
  unsigned long long* wrong_ = nullptr;  // on dst
  int blocks_src_ = 0, blocks_dst_ = 0;
};

}  // namespace gb::cuda::p2p
