// plain/blas.cu: cuBLAS called from a plain standalone C++ loop, no harness, no Python.
// It checks that the harness's vendor rows (cuda/blas.cu) add nothing to the library's own time:
// bench.blas runs it in the same session and reports harness/plain ratios (target: within 2%).
// Usage: gapbench_blas_plain LIBCUBLAS OP(gemm|gemv) DTYPE(0 fp32|1 fp16|2 bf16) B M N K SAMPLES WARMUP
//        -> one JSON object with the per-run seconds (CUDA events around each call).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cublas_loader.h"
#include "cublas_or_exit.h"
#include "fill.cuh"
#include "plain_check.h"
#include "spin.cuh"

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
  if (argc != 10) {
    std::fprintf(stderr, "usage: %s LIBCUBLAS gemm|gemv DTYPE B M N K SAMPLES WARMUP\n", argv[0]);
    return 1;
  }
  std::string lib = gb::plain::load_cublas_or_exit(argv[1]);
  const auto& api = gb::cuda::cublas::api();
  bool gemm = std::strcmp(argv[2], "gemm") == 0;
  int dt = std::atoi(argv[3]);
  long long B = std::atoll(argv[4]), M = std::atoll(argv[5]), N = std::atoll(argv[6]), K = std::atoll(argv[7]);
  int samples = std::atoi(argv[8]), warmup = std::atoi(argv[9]);
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
  std::vector<double> out;
  int khz = 0;
  CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  long long hold = (long long)(khz / 1000) * 50;  // ~50 us of SM clocks, as the harness
  for (int i = 0; i < warmup + samples; ++i) {
    // Same method as the harness (cuda/blas.cu): the device is kept busy while the host queues
    // the start event and the call, so the host's submission gap is not timed as the library's.
    gb::launch::spin_kernel<<<1, 1, 0, st>>>(hold);
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
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= warmup) out.push_back(ms * 1e-3);
  }
  std::printf("{\"library\": \"%s\", \"samples\": [", lib.c_str());
  for (size_t i = 0; i < out.size(); ++i) std::printf(i ? ", %.9e" : "%.9e", out[i]);
  std::printf("]}\n");
  api.destroy(h);
  return 0;
}
