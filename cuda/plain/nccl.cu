// plain/nccl.cu: NCCL all-reduce as a plain standalone C++ loop, no harness, no Python. It
// exists to check that bench.dist's direct-NCCL timing adds nothing: one process drives every
// visible GPU (as nccl-tests -g N does), each sample is a host-timed loop of `iters` grouped
// all-reduces ended by a synchronize of every stream. Each size is checked before timing with the
// harness's pattern (dist_pattern.cuh) and once more after the last timed loop.
// Build: part of `pip install .` when CUDA is found (installed as gapbench/bin/gapbench_nccl_plain),
// or by hand: nvcc -O2 -arch=sm_90a -I cuda cuda/plain/nccl.cu cuda/nccl_loader.cpp -ldl -o nccl_plain
// Run:   nccl_plain LIBNCCL min_bytes max_bytes factor iters samples warmup dtype(fp32|fp16|bf16)
//        (iters 0: bench.dist's rule, 50 up to 1 MiB, 20 up to 64 MiB, 5 beyond)
//        -> one JSON object on stdout. Keep NCCL_NVLS_ENABLE=0 in the environment (bench.dist does).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dist_pattern.cuh"
#include "nccl_loader.h"
#include "plain_check.h"

using namespace gb::cuda;

#define NCHECK(x)                                                                               \
  do {                                                                                          \
    int r_ = (x);                                                                               \
    if (r_ != 0) {                                                                              \
      std::fprintf(stderr, "%s failed: NCCL error %d (%s)\n", #x, r_, nccl::api().get_error_string(r_)); \
      std::exit(2);                                                                             \
    }                                                                                           \
  } while (0)

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  if (argc < 9) {
    std::fprintf(stderr, "usage: %s LIBNCCL min_bytes max_bytes factor iters samples warmup fp32|fp16|bf16\n", argv[0]);
    return 2;
  }
  std::string why;
  if (nccl::load({argv[1]}, &why).empty()) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 3;
  }
  size_t minb = std::strtoull(argv[2], nullptr, 10), maxb = std::strtoull(argv[3], nullptr, 10);
  double factor = std::atof(argv[4]);
  int iters = std::atoi(argv[5]), samples = std::atoi(argv[6]), warmup = std::atoi(argv[7]);
  std::string dts = argv[8];
  dist::DType dt = dts == "fp32" ? dist::DType::fp32 : dts == "fp16" ? dist::DType::fp16 : dist::DType::bf16;
  int ntype = dt == dist::DType::fp32 ? nccl::kFloat32 : dt == dist::DType::fp16 ? nccl::kFloat16 : nccl::kBfloat16;
  size_t es = dist::dtype_size(dt);
  if (factor <= 1.0 || minb < es || maxb < minb || iters < 0 || samples < 1) {
    std::fprintf(stderr, "bad arguments: need factor > 1, min >= element size, max >= min, iters, samples >= 1\n");
    return 2;
  }
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  int version = 0;
  NCHECK(nccl::api().get_version(&version));
  std::vector<nccl::Comm> comms(n);
  std::vector<cudaStream_t> streams(n);
  std::vector<void*> sbuf(n), rbuf(n);
  std::vector<unsigned long long*> counts(n);
  nccl::UniqueId id;
  NCHECK(nccl::api().get_unique_id(&id));
  NCHECK(nccl::api().group_start());
  for (int d = 0; d < n; ++d) {
    CHECK(cudaSetDevice(d));
    NCHECK(nccl::api().comm_init_rank(&comms[d], n, id, d));
  }
  NCHECK(nccl::api().group_end());
  for (int d = 0; d < n; ++d) {
    CHECK(cudaSetDevice(d));
    CHECK(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking));
    CHECK(cudaMalloc(&sbuf[d], maxb));
    CHECK(cudaMalloc(&rbuf[d], maxb));
    CHECK(cudaMalloc(&counts[d], 2 * sizeof(unsigned long long)));
  }
  auto run = [&](size_t count) {
    NCHECK(nccl::api().group_start());
    for (int d = 0; d < n; ++d)
      NCHECK(nccl::api().all_reduce(sbuf[d], rbuf[d], count, ntype, nccl::kSum, comms[d], streams[d]));
    NCHECK(nccl::api().group_end());
  };
  auto sync = [&]() {
    for (int d = 0; d < n; ++d) {
      CHECK(cudaSetDevice(d));
      CHECK(cudaStreamSynchronize(streams[d]));
    }
  };
  auto verify = [&](size_t count) {
    unsigned long long wrong = 0;
    for (int d = 0; d < n; ++d) {
      CHECK(cudaSetDevice(d));
      unsigned long long init[2] = {0ull, ~0ull}, got[2];
      CHECK(cudaMemcpy(counts[d], init, sizeof(init), cudaMemcpyHostToDevice));
      CHECK(cudaDeviceSynchronize());  // pageable copies return before their DMA is done
      dist::verify(rbuf[d], count, dt, dist::Op::all_reduce, d, n, 0, count / n, counts[d], streams[d]);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpyAsync(got, counts[d], sizeof(got), cudaMemcpyDeviceToHost, streams[d]));
      CHECK(cudaStreamSynchronize(streams[d]));
      wrong += got[0];
    }
    return wrong;
  };
  std::printf("{\"nccl_version\": %d, \"ngpus\": %d, \"op\": \"all_reduce\", \"dtype\": \"%s\", \"rows\": [\n",
              version, n, dts.c_str());
  bool first = true;
  for (double b = double(minb); b <= double(maxb) * 1.0000001; b *= factor) {
    size_t count = size_t(b) / es;
    int it = iters ? iters : (count * es <= (1u << 20) ? 50 : count * es <= (64u << 20) ? 20 : 5);
    for (int d = 0; d < n; ++d) {
      CHECK(cudaSetDevice(d));
      CHECK(cudaMemsetAsync(rbuf[d], 0xFF, count * es, streams[d]));
      dist::fill(sbuf[d], count, dt, dist::Op::all_reduce, d, 0, count / n, 0, streams[d]);
      CHECK(cudaGetLastError());
    }
    run(count);
    sync();
    unsigned long long wrong_before = verify(count);
    for (int i = 0; i < warmup; ++i) run(count);
    sync();
    std::vector<double> t;
    for (int s = 0; s < samples; ++s) {
      double t0 = now_s();
      for (int i = 0; i < it; ++i) run(count);
      sync();
      t.push_back(now_s() - t0);
    }
    unsigned long long wrong_after = verify(count);
    std::printf("%s{\"bytes\": %zu, \"count\": %zu, \"iters\": %d, \"wrong_before\": %llu, \"wrong_after\": %llu, \"samples_s\": [",
                first ? "" : ",\n", count * es, count, it, wrong_before, wrong_after);
    for (size_t i = 0; i < t.size(); ++i) std::printf(i ? ", %.9e" : "%.9e", t[i]);
    std::printf("]}");
    first = false;
  }
  std::printf("\n]}\n");
  for (int d = 0; d < n; ++d) nccl::api().comm_destroy(comms[d]);
  return 0;
}
