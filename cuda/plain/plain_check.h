// The plain loops' error check (cuda/plain/*.cu): no harness and no exceptions, so a failing call
// prints what failed and exits, and the harness reports the loop as failed with that text.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                   \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_));         \
      std::exit(2);                                                                \
    }                                                                              \
  } while (0)

namespace gb {
namespace plain {
// Paced rounds (gapbench.worker.PacedCommand): a loop, once set up (its CUDA context, cuBLAS,
// buffers), prints {"ready": true} on one line, so the harness can set up its own side while this
// process starts and time nothing until it is idle. With ROUNDS > 1 it then waits for one line on
// its stdin before each round and prints that round's JSON on one line, so the harness can run its
// own round in between (paired in time) without paying this process's start again. ROUNDS = 1 runs
// once and reads nothing. False once the rounds are done or stdin is closed.
inline bool next_round(int round, int rounds) {
  if (round >= rounds) return false;
  if (round == 0) {
    std::printf("{\"ready\": true}\n");
    std::fflush(stdout);
  }
  if (rounds <= 1) return true;
  char line[64];
  return std::fgets(line, sizeof line, stdin) != nullptr;
}
}  // namespace plain
}  // namespace gb
