// plain/launch.cu: the launch probe as a plain standalone C++ loop, no harness, no Python.
// It exists to check that the harness adds nothing to what it measures: bench.launch runs
// it in the same session and reports harness/plain ratios (target: within 5%).
// Build: part of `pip install .` when CUDA is found (installed as gapbench/bin/gapbench_launch_plain),
// or by hand: nvcc -O2 -arch=sm_90 -I cuda cuda/plain/launch.cu -o launch_plain
// Run:   launch_plain [samples] [inner] [warmup] [variant] [rounds]   -> per round, one line of JSON
//        on stdout; rounds > 1: each round waits for a line on stdin (plain_check.h, next_round)
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gate.h"
#include "launch_kernels.cuh"
#include "plain_check.h"

using namespace gb::launch;


static void print_array(const char* name, const std::vector<double>& v, bool last = false) {
  std::printf("\"%s\": [", name);
  for (size_t i = 0; i < v.size(); ++i) std::printf(i ? ", %.9e" : "%.9e", v[i]);
  std::printf("]%s", last ? "" : ", ");
}

int main(int argc, char** argv) {
  int samples = argc > 1 ? std::atoi(argv[1]) : 200;
  int inner = argc > 2 ? std::atoi(argv[2]) : 100;
  int warmup = argc > 3 ? std::atoi(argv[3]) : 20;
  int variant = argc > 4 ? std::atoi(argv[4]) : 1;
  int rounds = argc > 5 ? std::atoi(argv[5]) : 1;
  if (samples < 1 || inner < 1 || warmup < 0 || rounds < 1) {
    std::fprintf(stderr, "samples, inner and rounds must be >= 1 and warmup >= 0\n");
    return 1;
  }
  using clk = std::chrono::steady_clock;

  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  unsigned* counter;
  float *a, *b, *o;
  CHECK(cudaMalloc(&counter, 4));
  CHECK(cudaMalloc(&a, 4));
  CHECK(cudaMalloc(&b, 4));
  CHECK(cudaMalloc(&o, 4));
  float one = 1.5f;
  CHECK(cudaMemcpy(a, &one, 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b, &one, 4, cudaMemcpyHostToDevice));
  CHECK(cudaDeviceSynchronize());  // pageable copies return before their DMA is done
  gb::cuda::Gate gate(0, 1.0);  // the harness's release gate (cuda/gate.h)

  auto go = [&]() {
    if (variant == 1)
      null_kernel<<<1, 1, 0, st>>>(counter, 0);
    else
      add1_kernel<<<1, kAddBlock, 0, st>>>(a, b, o, 1);
  };
  auto ms = [&]() {
    float m;
    CHECK(cudaEventElapsedTime(&m, e0, e1));
    return m * 1e-3;
  };
  cudaGraph_t g;  // (4) graph replay: captured once
  cudaGraphExec_t ge;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < inner; ++k) go();
  CHECK(cudaStreamEndCapture(st, &g));
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  for (int round = 0; gb::plain::next_round(round, rounds); ++round) {
    std::vector<double> submit, roundtrip, b2b, kernel, graph;
    for (int i = 0; i < warmup + samples; ++i) {  // (1) submit
      CHECK(cudaStreamSynchronize(st));
      auto t0 = clk::now();
      for (int k = 0; k < inner; ++k) go();
      double dt = std::chrono::duration<double>(clk::now() - t0).count();
      if (i >= warmup) submit.push_back(dt);
    }
    CHECK(cudaStreamSynchronize(st));
    for (int i = 0; i < warmup + samples; ++i) {  // (2) launch + wait
      auto t0 = clk::now();
      go();
      CHECK(cudaStreamSynchronize(st));
      double dt = std::chrono::duration<double>(clk::now() - t0).count();
      if (i >= warmup) roundtrip.push_back(dt);
    }
    for (int i = 0; i < warmup + samples; ++i) {  // (3a) back to back as issued
      CHECK(cudaEventRecord(e0, st));
      for (int k = 0; k < inner; ++k) go();
      CHECK(cudaEventRecord(e1, st));
      CHECK(cudaEventSynchronize(e1));
      if (i >= warmup) b2b.push_back(ms());
    }
    int invalid = 0;
    for (int i = 0; i < warmup + samples;) {  // (3b) queue preloaded behind the release gate
      gate.hold(reinterpret_cast<std::uintptr_t>(st));
      CHECK(cudaEventRecord(e0, st));
      for (int k = 0; k < inner; ++k) go();
      CHECK(cudaEventRecord(e1, st));
      gate.release();
      CHECK(cudaEventSynchronize(e1));
      if (gate.timed_out()) {  // the host did not finish queuing within the gate's timeout: dropped
        if (++invalid > samples) {
          std::fprintf(stderr, "the gate timed out %d times\n", invalid);
          return 2;
        }
        continue;
      }
      if (i >= warmup) kernel.push_back(ms());
      ++i;
    }
    for (int i = 0; i < warmup + samples; ++i) {
      CHECK(cudaEventRecord(e0, st));
      CHECK(cudaGraphLaunch(ge, st));
      CHECK(cudaEventRecord(e1, st));
      CHECK(cudaEventSynchronize(e1));
      if (i >= warmup) graph.push_back(ms());
    }
    CHECK(cudaGetLastError());

    std::printf("{\"samples\": %d, \"inner\": %d, \"warmup\": %d, \"variant\": %d, \"round\": %d, "
                "\"invalid_samples\": %d, ", samples, inner, warmup, variant, round, invalid);
    print_array("submit", submit);
    print_array("roundtrip", roundtrip);
    print_array("stream_b2b", b2b);
    print_array("device_kernel", kernel);
    print_array("graph_replay", graph, true);
    std::printf("}\n");
    std::fflush(stdout);
  }
  return 0;
}
