// launch.cu: kernel-launch latency on CUDA, the hardware/driver floor under every framework.
//
// Measures, for the null kernel (variant 1) and a 1-element add (variant 2):
//   cold launch (first launch in a fresh process; lazy module loading makes it also load
//   the kernel's module), host submit cost, launch+wait round trip, back-to-back device
//   time as issued and with the queue preloaded, and CUDA-graph replay per node.
// Run:  python -m bench.launch --backends native-cuda
// Check against a plain loop: build/*/gapbench_launch_plain (cuda/plain/launch.cu).
#include "launch.h"
#include "contract.h"
#include "cuda_check.h"
#include "gate.h"
#include "launch_kernels.cuh"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

namespace gb::cuda::launch {
using namespace gb::launch;

using clock_type = std::chrono::steady_clock;

static double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

struct Probe::Impl {
  int variant = kNull;
  int n = 1;
  int flag = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  unsigned int* counter = nullptr;
  float *a = nullptr, *b = nullptr, *out = nullptr;
  std::unique_ptr<gb::cuda::Gate> gate;
  int invalid = 0;  // gate timeouts in the last device_kernel() call

  // The one dispatcher every timing loop goes through: simplest variant first.
  void launch() {
    switch (variant) {
      case kNull:
        null_kernel<<<1, 1, 0, stream>>>(counter, flag);
        break;
      case kAdd1:
        add1_kernel<<<add_grid(n), kAddBlock, 0, stream>>>(a, b, out, n);
        break;
    }
  }
  void sync() { GB_CUDA_CHECK(cudaStreamSynchronize(stream)); }
  double elapsed() {
    float ms = 0.f;
    GB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms) * 1e-3;
  }
};

Probe::Probe(int variant, int n, int device) : impl_(new Impl) {
  gb::check_launch_args(variant, n);
  auto& s = *impl_;
  s.variant = variant;
  s.n = n;
  GB_CUDA_CHECK(cudaSetDevice(device));
  // A non-blocking stream: graph capture needs one, and it never serialises with the legacy
  // default stream that other libraries in the process may use.
  GB_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  GB_CUDA_CHECK(cudaEventCreate(&s.start));
  GB_CUDA_CHECK(cudaEventCreate(&s.stop));
  GB_CUDA_CHECK(cudaMalloc(&s.counter, sizeof(unsigned int)));
  GB_CUDA_CHECK(cudaMemset(s.counter, 0, sizeof(unsigned int)));
  size_t bytes = sizeof(float) * static_cast<size_t>(n);
  GB_CUDA_CHECK(cudaMalloc(&s.a, bytes));
  GB_CUDA_CHECK(cudaMalloc(&s.b, bytes));
  GB_CUDA_CHECK(cudaMalloc(&s.out, bytes));
  // Inputs are non-zero so no timed add runs on zeros (values are checked in run_add).
  std::vector<float> init(n);
  for (int i = 0; i < n; ++i) init[i] = 1.0f + 0.25f * static_cast<float>(i % 7);
  GB_CUDA_CHECK(cudaMemcpy(s.a, init.data(), bytes, cudaMemcpyHostToDevice));
  GB_CUDA_CHECK(cudaMemcpy(s.b, init.data(), bytes, cudaMemcpyHostToDevice));
  s.gate = std::make_unique<gb::cuda::Gate>(device, 1.0);
  GB_CUDA_CHECK(cudaDeviceSynchronize());
}

Probe::~Probe() {
  if (!impl_) return;
  auto& s = *impl_;
  // Destructors never throw: errors here are ignored on purpose.
  s.gate.reset();
  if (s.stream) cudaStreamSynchronize(s.stream);
  cudaFree(s.counter);
  cudaFree(s.a);
  cudaFree(s.b);
  cudaFree(s.out);
  if (s.start) cudaEventDestroy(s.start);
  if (s.stop) cudaEventDestroy(s.stop);
  if (s.stream) cudaStreamDestroy(s.stream);
}

int Probe::variant() const { return impl_->variant; }

double Probe::timed_launch_sync() {
  auto& s = *impl_;
  auto t0 = clock_type::now();
  s.launch();
  s.sync();
  double dt = seconds_since(t0);
  GB_CUDA_CHECK_LAUNCH();
  return dt;
}

std::vector<double> Probe::submit(int samples, int inner, int warmup) {
  auto& s = *impl_;
  std::vector<double> out;
  out.reserve(samples);
  for (int i = 0; i < warmup + samples; ++i) {
    s.sync();  // start each sample with an empty queue: no back-pressure from earlier work
    auto t0 = clock_type::now();
    for (int k = 0; k < inner; ++k) s.launch();
    double dt = seconds_since(t0);
    GB_CUDA_CHECK_LAUNCH();
    if (i >= warmup) out.push_back(dt);
  }
  s.sync();
  return out;
}

std::vector<double> Probe::roundtrip(int samples, int warmup) {
  auto& s = *impl_;
  std::vector<double> out;
  out.reserve(samples);
  for (int i = 0; i < warmup + samples; ++i) {
    auto t0 = clock_type::now();
    s.launch();
    s.sync();
    double dt = seconds_since(t0);
    if (i >= warmup) out.push_back(dt);
  }
  GB_CUDA_CHECK_LAUNCH();
  return out;
}

// Device events around `inner` launches. With `gated`, the gate holds the stream until the host
// has queued the start event, every launch and the stop event, so the events see kernels running
// back to back rather than the host's issue rate; a sample whose hold timed out is dropped and
// run again (counted in invalid_samples; `inner` must fit the stream's queue).
static std::vector<double> events_around_launches(Probe::Impl& s, int samples, int inner, int warmup, bool gated) {
  std::vector<double> out;
  out.reserve(samples);
  s.invalid = 0;
  const int max_invalid = std::max(3, samples);
  if (gated) {
    // One launch outside the gate first: a kernel's first launch in a process loads its module
    // (lazy loading), and that load waits for the device, which the gate is holding: the hold
    // then ends only by its timeout (seen on the lent H100, 2026-11-23).
    s.launch();
    GB_CUDA_CHECK_LAUNCH();
    GB_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  }
  for (int i = 0; i < warmup + samples;) {
    if (gated) s.gate->hold(reinterpret_cast<std::uintptr_t>(s.stream));
    GB_CUDA_CHECK(cudaEventRecord(s.start, s.stream));
    for (int k = 0; k < inner; ++k) s.launch();
    GB_CUDA_CHECK(cudaEventRecord(s.stop, s.stream));
    if (gated) s.gate->release();
    GB_CUDA_CHECK(cudaEventSynchronize(s.stop));
    GB_CUDA_CHECK_LAUNCH();
    if (gated && s.gate->timed_out()) {
      if (++s.invalid > max_invalid)
        throw std::runtime_error("the gate timed out " + std::to_string(s.invalid) + " times: the host could not "
                                 "queue " + std::to_string(inner) + " launches within its timeout");
      continue;
    }
    if (i >= warmup) out.push_back(s.elapsed());
    ++i;
  }
  return out;
}

std::vector<double> Probe::stream_b2b(int samples, int inner, int warmup) {
  return events_around_launches(*impl_, samples, inner, warmup, false);
}

std::vector<double> Probe::device_kernel(int samples, int inner, int warmup) {
  return events_around_launches(*impl_, samples, inner, warmup, true);
}

int Probe::invalid_samples() const { return impl_->invalid; }

std::vector<double> Probe::graph_replay(int samples, int inner, int warmup) {
  auto& s = *impl_;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  GB_CUDA_CHECK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < inner; ++k) s.launch();
  GB_CUDA_CHECK(cudaStreamEndCapture(s.stream, &graph));
  std::vector<double> out;
  try {
    GB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    out.reserve(samples);
    for (int i = 0; i < warmup + samples; ++i) {
      GB_CUDA_CHECK(cudaEventRecord(s.start, s.stream));
      GB_CUDA_CHECK(cudaGraphLaunch(exec, s.stream));
      GB_CUDA_CHECK(cudaEventRecord(s.stop, s.stream));
      GB_CUDA_CHECK(cudaEventSynchronize(s.stop));
      if (i >= warmup) out.push_back(s.elapsed());
    }
  } catch (...) {
    if (exec) cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    throw;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return out;
}

unsigned Probe::count_launches(int k) {
  auto& s = *impl_;
  if (s.variant != kNull) throw std::logic_error("count_launches is the check of variant 1");
  GB_CUDA_CHECK(cudaMemsetAsync(s.counter, 0, sizeof(unsigned), s.stream));
  s.flag = 1;
  for (int i = 0; i < k; ++i) s.launch();
  s.flag = 0;
  GB_CUDA_CHECK_LAUNCH();
  unsigned host = 0;
  GB_CUDA_CHECK(cudaMemcpyAsync(&host, s.counter, sizeof host, cudaMemcpyDeviceToHost, s.stream));
  s.sync();
  return host;
}

std::vector<float> Probe::run_add(const std::vector<float>& a, const std::vector<float>& b) {
  auto& s = *impl_;
  if (s.variant != kAdd1) throw std::logic_error("run_add is the check of variant 2");
  if (static_cast<int>(a.size()) != s.n || static_cast<int>(b.size()) != s.n)
    throw std::invalid_argument("run_add: inputs must have n = " + std::to_string(s.n) + " elements");
  size_t bytes = sizeof(float) * s.n;
  GB_CUDA_CHECK(cudaMemcpyAsync(s.a, a.data(), bytes, cudaMemcpyHostToDevice, s.stream));
  GB_CUDA_CHECK(cudaMemcpyAsync(s.b, b.data(), bytes, cudaMemcpyHostToDevice, s.stream));
  // Poison the output (all-ones bytes are a NaN) so an element the kernel skips is caught.
  GB_CUDA_CHECK(cudaMemsetAsync(s.out, 0xFF, bytes, s.stream));
  s.launch();
  GB_CUDA_CHECK_LAUNCH();
  std::vector<float> host(s.n);
  GB_CUDA_CHECK(cudaMemcpyAsync(host.data(), s.out, bytes, cudaMemcpyDeviceToHost, s.stream));
  s.sync();
  return host;
}

}  // namespace gb::cuda::launch
