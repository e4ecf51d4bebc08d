// Collectives called directly through NCCL (loaded at run time, nccl_loader.h), one rank per
// process: the "direct NCCL" rung of bench.dist. The ncclUniqueId is made by rank 0
// (unique_id()) and shared by the caller (gapbench shares its 128 bytes through
// torch.distributed's store); the communicator is then built here with ncclCommInitRank.
// Every wait polls with a deadline: a peer that died or hangs aborts the communicator and
// raises instead of waiting forever.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "dist_types.h"
#include "nccl_loader.h"

namespace gb::cuda::dist {

struct Check {
  bool ok = false;
  unsigned long long wrong = 0;
  unsigned long long first_wrong = 0;  // index of the first wrong element (when wrong > 0)
  unsigned long long checked = 0;      // elements compared
};

std::string unique_id();  // 128 bytes from ncclGetUniqueId (call in rank 0 only)
bool supports(Op op, bool inplace);  // all_to_all and sendrecv are out of place only

class Runner {
 public:
  Runner(const std::string& uid, int rank, int world, int device, double timeout_s);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  // Fill inputs with the known pattern, poison the output, run the op once, compare on device.
  Check check(Op op, DType t, size_t count, bool inplace, int root);
  // Compare the current output with the expected one without running (after timed runs).
  Check verify_output(Op op, DType t, size_t count, bool inplace, int root);
  // Host-timed samples of `iters` back-to-back ops each (a barrier before every sample), seconds.
  std::vector<double> time(Op op, DType t, size_t count, bool inplace, int root, int iters, int samples,
                           int warmup);
  void barrier();
  void abort();

 private:
  void ensure(size_t bytes);
  void enqueue(Op op, DType t, size_t count, bool inplace, int root);
  void wait(const char* what);
  void* out_ptr(Op op, DType t, size_t count, bool inplace) const;
  size_t out_count(Op op, size_t count) const;

  int rank_, world_, device_;
  double timeout_s_;
  nccl::Comm comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  size_t cap_ = 0;
  float* scratch_ = nullptr;            // barrier all-reduce
  unsigned long long* counts_ = nullptr;  // verify: wrong, first
};

}  // namespace gb::cuda::dist
