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
