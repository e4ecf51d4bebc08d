// plain/nccl.cu: NCCL all-reduce as a plain standalone C++ loop, no harness, no Python. It
// exists to check that bench.dist's direct-NCCL timing adds nothing. Like the harness, it runs
// one process per GPU (as nccl-tests does under mpirun): rank 0 makes NCCL's unique id and writes
// it to UIDFILE (written to UIDFILE.tmp, then renamed), the other ranks wait for that file. Each
// sample is a 1-element all-reduce as a barrier, then a host-timed loop of `iters` all-reduces
// ended by a stream synchronize (the harness's Runner::time does the same). Each size is checked
// before timing with the harness's pattern (dist_pattern.cuh) and once more after the last loop.
// Build: part of `pip install .` when CUDA is found (installed as gapbench/bin/gapbench_nccl_plain),
// or by hand: nvcc -O2 -arch=sm_90a -I cuda cuda/plain/nccl.cu cuda/nccl_loader.cpp -ldl -o nccl_plain
// Run (one per rank): nccl_plain LIBNCCL RANK WORLD DEVICE UIDFILE min_bytes max_bytes factor iters
//        samples warmup fp32|fp16|bf16   (iters 0: bench.dist's rule, 50 up to 1 MiB, 20 up to
//        64 MiB, 5 beyond) -> one JSON object on stdout. Keep NCCL_NVLS_ENABLE=0 in the environment.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
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

// Rank 0 publishes the id atomically; the others wait up to 60 s for it.
static nccl::UniqueId share_id(int rank, const std::string& path) {
  nccl::UniqueId id;
  if (rank == 0) {
    NCHECK(nccl::api().get_unique_id(&id));
    std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f || std::fwrite(id.internal, 1, nccl::kUniqueIdBytes, f) != size_t(nccl::kUniqueIdBytes) || std::fclose(f)) {
      std::fprintf(stderr, "cannot write %s\n", tmp.c_str());
      std::exit(2);
    }
    if (std::rename(tmp.c_str(), path.c_str())) {
      std::fprintf(stderr, "cannot rename %s\n", tmp.c_str());
      std::exit(2);
    }
    return id;
  }
  for (double t0 = now_s(); now_s() - t0 < 60.0; std::this_thread::sleep_for(std::chrono::milliseconds(5))) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) continue;
    size_t got = std::fread(id.internal, 1, nccl::kUniqueIdBytes, f);
    std::fclose(f);
    if (got == size_t(nccl::kUniqueIdBytes)) return id;
  }
  std::fprintf(stderr, "rank %d: no NCCL unique id in %s after 60 s (rank 0 did not start?)\n", rank, path.c_str());
  std::exit(2);
}

int main(int argc, char** argv) {
  if (argc < 13) {
    std::fprintf(stderr, "usage: %s LIBNCCL RANK WORLD DEVICE UIDFILE min_bytes max_bytes factor iters samples warmup "
                 "fp32|fp16|bf16\n", argv[0]);
    return 2;
  }
  std::string why;
  if (nccl::load({argv[1]}, &why).empty()) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 3;
  }
  int rank = std::atoi(argv[2]), world = std::atoi(argv[3]), device = std::atoi(argv[4]);
  std::string uidfile = argv[5];
  size_t minb = std::strtoull(argv[6], nullptr, 10), maxb = std::strtoull(argv[7], nullptr, 10);
  double factor = std::atof(argv[8]);
  int iters = std::atoi(argv[9]), samples = std::atoi(argv[10]), warmup = std::atoi(argv[11]);
  std::string dts = argv[12];
  dist::DType dt = dts == "fp32" ? dist::DType::fp32 : dts == "fp16" ? dist::DType::fp16 : dist::DType::bf16;
  int ntype = dt == dist::DType::fp32 ? nccl::kFloat32 : dt == dist::DType::fp16 ? nccl::kFloat16 : nccl::kBfloat16;
  size_t es = dist::dtype_size(dt);
  if (world < 1 || rank < 0 || rank >= world || factor <= 1.0 || minb < es * world || maxb < minb || iters < 0 ||
      samples < 1 || warmup < 0) {
    std::fprintf(stderr, "bad arguments: need 0 <= rank < world, factor > 1, min >= element size x world, "
                 "max >= min, samples >= 1\n");
    return 2;
  }
  int version = 0;
  NCHECK(nccl::api().get_version(&version));
  CHECK(cudaSetDevice(device));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void *sbuf, *rbuf;
  float* one;
  unsigned long long* counts;
  CHECK(cudaMalloc(&sbuf, maxb));
  CHECK(cudaMalloc(&rbuf, maxb));
  CHECK(cudaMalloc(&one, sizeof(float)));
  CHECK(cudaMalloc(&counts, 2 * sizeof(unsigned long long)));
  nccl::UniqueId id = share_id(rank, uidfile);
  nccl::Comm comm;
  NCHECK(nccl::api().comm_init_rank(&comm, world, id, rank));
  auto run = [&](size_t count) { NCHECK(nccl::api().all_reduce(sbuf, rbuf, count, ntype, nccl::kSum, comm, stream)); };
  auto verify = [&](size_t count) {
    unsigned long long init[2] = {0ull, ~0ull}, got[2];
    CHECK(cudaMemcpyAsync(counts, init, sizeof(init), cudaMemcpyHostToDevice, stream));
    dist::verify(rbuf, count, dt, dist::Op::all_reduce, rank, world, 0, count / world, counts, stream);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(got, counts, sizeof(got), cudaMemcpyDeviceToHost, stream));
    CHECK(cudaStreamSynchronize(stream));
    return got[0];
  };
  std::printf("{\"nccl_version\": %d, \"rank\": %d, \"world\": %d, \"op\": \"all_reduce\", \"dtype\": \"%s\", \"rows\": [\n",
              version, rank, world, dts.c_str());
  bool first = true;
  for (double b = double(minb); b <= double(maxb) * 1.0000001; b *= factor) {
    size_t count = size_t(b) / es;
    count -= count % world;
    int it = iters ? iters : (count * es <= (1u << 20) ? 50 : count * es <= (64u << 20) ? 20 : 5);
    CHECK(cudaMemsetAsync(rbuf, 0xFF, count * es, stream));
    dist::fill(sbuf, count, dt, dist::Op::all_reduce, rank, 0, count / world, 0, stream);
    CHECK(cudaGetLastError());
    run(count);
    CHECK(cudaStreamSynchronize(stream));
    unsigned long long wrong_before = verify(count);
    for (int i = 0; i < warmup; ++i) run(count);
    CHECK(cudaStreamSynchronize(stream));
    std::vector<double> t;
    for (int s = 0; s < samples; ++s) {
      NCHECK(nccl::api().all_reduce(one, one, 1, nccl::kFloat32, nccl::kSum, comm, stream));  // barrier
      CHECK(cudaStreamSynchronize(stream));
      double t0 = now_s();
      for (int i = 0; i < it; ++i) run(count);
      CHECK(cudaStreamSynchronize(stream));
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
  std::fflush(stdout);
  nccl::api().comm_destroy(comm);
  return 0;
}
