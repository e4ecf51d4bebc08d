// plain/blas.cu: cuBLAS called from a plain standalone C++ loop, no harness, no Python.
// It checks that the harness's vendor rows (cuda/blas.cu) add nothing to the library's own time:
// bench.blas runs it in the same session and reports harness/plain ratios (target: within 2%).
// Usage: gapbench_blas_plain LIBCUBLAS OP(gemm|gemv) DTYPE(fp32|fp16|bf16) B M N K SAMPLES WARMUP [ROUNDS]
//        -> per round, one line of JSON with the per-run seconds (CUDA events around each call).
//        ROUNDS > 1: each round waits for a line on stdin (plain_check.h, next_round).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cublas_loader.h"
#include "cublas_or_exit.h"
#include "fill.cuh"
#include "plain_check.h"
#include "gate.h"

#define CHECK_BLAS(x)                                                              \
  do {                                                                             \
    int s_ = (x);                                                                  \
    if (s_ != 0) {                                                                 \
      std::fprintf(stderr, "%s failed: cublasStatus %d\n", #x, s_);                \
      std::exit(3);                                                                \
    }                                                                              \
  } while (0)

// Inputs drawn like the harness's (uniform in [-1, 1) at full fp32 resolution): see fill.cuh.
using gb::plain::fill;

int main(int argc, char** argv) {
  if (argc != 10 && argc != 11) {
    std::fprintf(stderr, "usage: %s LIBCUBLAS gemm|gemv DTYPE B M N K SAMPLES WARMUP [ROUNDS]\n", argv[0]);
    return 1;
  }
  std::string lib = gb::plain::load_cublas_or_exit(argv[1]);
  const auto& api = gb::cuda::cublas::api();
  bool gemm = std::strcmp(argv[2], "gemm") == 0;
  // The dtype by name, as gapbench._native.DType spells it (no hand-kept codes across files).
  int dt = std::strcmp(argv[3], "fp32") == 0 ? 0 : std::strcmp(argv[3], "fp16") == 0 ? 1 : std::strcmp(argv[3], "bf16") == 0 ? 2 : -1;
  if (dt < 0) {
    std::fprintf(stderr, "DTYPE must be fp32, fp16 or bf16, got %s\n", argv[3]);
    return 1;
  }
  long long B = std::atoll(argv[4]), M = std::atoll(argv[5]), N = std::atoll(argv[6]), K = std::atoll(argv[7]);
  int samples = std::atoi(argv[8]), warmup = std::atoi(argv[9]), rounds = argc > 10 ? std::atoi(argv[10]) : 1;
  if (samples < 1 || warmup < 0 || rounds < 1) {
    std::fprintf(stderr, "SAMPLES and ROUNDS must be >= 1 and WARMUP >= 0\n");
    return 1;
  }
  cudaDataType t = dt == 0 ? CUDA_R_32F : (dt == 1 ? CUDA_R_16F : CUDA_R_16BF);
  size_t es = dt == 0 ? 4 : 2;
  long long na = gemm ? B * M * K : M * K, nb = gemm ? B * K * N : K, nc = gemm ? B * M * N : M;
  void *a, *b, *c;
  CHECK(cudaMalloc(&a, na * es));
  CHECK(cudaMalloc(&b, nb * es));
  CHECK(cudaMalloc(&c, nc * es));
  fill<<<(unsigned)((na + 255) / 256), 256>>>(a, na, dt);
  fill<<<(unsigned)((nb + 255) / 256), 256>>>(b, nb, dt);
  CHECK(cudaDeviceSynchronize());
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  gb::cuda::cublas::Handle h;
  CHECK_BLAS(api.create(&h));
  CHECK_BLAS(api.set_stream(h, st));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const float one = 1.f, zero = 0.f;
  int m = (int)M, n = (int)N, k = (int)K;
  gb::cuda::Gate gate(0, 1.0);
  for (int round = 0; gb::plain::next_round(round, rounds); ++round) {
    std::vector<double> out;
    int invalid = 0;
    for (int i = 0; i < warmup + samples;) {
      // Same method as the harness (cuda/blas.cu): the release gate holds the stream until the host
      // has queued the start event, the call and the stop event, so no submission gap is timed.
      gate.hold(reinterpret_cast<std::uintptr_t>(st));
      CHECK(cudaEventRecord(e0, st));
      if (gemm) {  // row-major C = A B as column-major C^T = B^T A^T
        CHECK_BLAS(api.gemm_strided_batched_ex(h, 0, 0, n, m, k, &one, b, t, n, (long long)k * n, a, t, k,
                                               (long long)m * k, &zero, c, t, n, (long long)m * n, (int)B, 68, -1));
      } else if (dt == 0) {  // y = A x, row-major A is column-major A^T
        CHECK_BLAS(api.sgemv(h, 1, k, m, &one, (const float*)a, k, (const float*)b, 1, &zero, (float*)c, 1));
      } else {
        CHECK_BLAS(api.gemm_ex(h, 1, 0, m, 1, k, &one, a, t, k, b, t, k, &zero, c, t, m, 68, -1));
      }
      CHECK(cudaEventRecord(e1, st));
      gate.release();
      CHECK(cudaEventSynchronize(e1));
      if (gate.timed_out()) {  // dropped, never silently valid
        if (++invalid > samples) {
          std::fprintf(stderr, "the gate timed out %d times\n", invalid);
          return 2;
        }
        continue;
      }
      float ms;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= warmup) out.push_back(ms * 1e-3);
      ++i;
    }
    std::printf("{\"library\": \"%s\", \"round\": %d, \"invalid_samples\": %d, \"samples\": [", lib.c_str(), round,
                invalid);
    for (size_t i = 0; i < out.size(); ++i) std::printf(i ? ", %.9e" : "%.9e", out[i]);
    std::printf("]}\n");
    std::fflush(stdout);
  }
  api.destroy(h);
  return 0;
}
