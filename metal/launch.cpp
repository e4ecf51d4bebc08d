// launch.cpp: kernel-launch latency on Metal (host side of metal/launch.metal), metal-cpp.
// Measures what cuda/launch.cu measures, in Metal's terms: a launch is a command buffer with
// one compute dispatch. Cold launch includes the driver's first use of the pipeline; the
// library compile and pipeline creation are timed as their own phases.
// Run: python -m bench.launch --backends native-metal   (macOS on Apple Silicon)
#include <Foundation/Foundation.hpp>
#include <Metal/Metal.hpp>

#include "launch.h"
#include "contract.h"
#include "metal_context.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace gb::metal::launch {

using clock_type = std::chrono::steady_clock;

static double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Every sample allocates autoreleased command buffers; a pool per sample keeps memory flat.
struct Pool {
  NS::AutoreleasePool* p = NS::AutoreleasePool::alloc()->init();
  ~Pool() { p->release(); }
};

static void check_completed(MTL::CommandBuffer* cb) {
  if (cb->status() == MTL::CommandBufferStatusError) {
    NS::Error* e = cb->error();
    std::string msg = (e && e->localizedDescription()) ? e->localizedDescription()->utf8String()
                                                       : "unknown error";
    throw std::runtime_error("Metal command buffer failed: " + msg);
  }
}

double context_create_seconds() { return context().create_seconds; }

struct Probe::Impl {
  int variant = kNull;
  std::uint32_t n = 1;
  std::uint32_t flag = 0;
  double compile_s = 0, pipeline_s = 0;
  MTL::Library* lib = nullptr;
  MTL::ComputePipelineState* pso = nullptr;
  MTL::Buffer *counter = nullptr, *a = nullptr, *b = nullptr, *out = nullptr;

  void encode(MTL::ComputeCommandEncoder* enc) {
    enc->setComputePipelineState(pso);
    switch (variant) {
      case kNull:
        enc->setBuffer(counter, 0, 0);
        enc->setBytes(&flag, sizeof flag, 1);
        enc->dispatchThreads(MTL::Size(1, 1, 1), MTL::Size(1, 1, 1));
        break;
      case kAdd1: {
        enc->setBuffer(a, 0, 0);
        enc->setBuffer(b, 0, 1);
        enc->setBuffer(out, 0, 2);
        enc->setBytes(&n, sizeof n, 3);
        NS::UInteger tg = std::min<NS::UInteger>(n, pso->maxTotalThreadsPerThreadgroup());
        enc->dispatchThreads(MTL::Size(n, 1, 1), MTL::Size(tg, 1, 1));
        break;
      }
    }
  }
  // One launch: a command buffer with one dispatch, committed. Returned buffer is autoreleased.
  MTL::CommandBuffer* launch() {
    MTL::CommandBuffer* cb = context().queue->commandBuffer();
    MTL::ComputeCommandEncoder* enc = cb->computeCommandEncoder();
    encode(enc);
    enc->endEncoding();
    cb->commit();
    return cb;
  }
};

Probe::Probe(int variant, int n, const std::string& source) : impl_(new Impl) {
  gb::check_launch_args(variant, n);
  auto& s = *impl_;
  s.variant = variant;
  s.n = static_cast<std::uint32_t>(n);
  Context& ctx = context();
  s.lib = compile_library(source, &s.compile_s);
  s.pso = make_pipeline(s.lib, variant == kNull ? "launch_null" : "launch_add1_float", &s.pipeline_s);
  // Shared storage: on unified memory the CPU writes inputs and reads results in place.
  auto opts = MTL::ResourceStorageModeShared;
  s.counter = ctx.device->newBuffer(sizeof(std::uint32_t), opts);
  std::size_t bytes = sizeof(float) * s.n;
  s.a = ctx.device->newBuffer(bytes, opts);
  s.b = ctx.device->newBuffer(bytes, opts);
  s.out = ctx.device->newBuffer(bytes, opts);
  if (!s.counter || !s.a || !s.b || !s.out) throw std::runtime_error("Metal: newBuffer failed");
  std::memset(s.counter->contents(), 0, sizeof(std::uint32_t));
  float* pa = static_cast<float*>(s.a->contents());
  float* pb = static_cast<float*>(s.b->contents());
  for (std::uint32_t i = 0; i < s.n; ++i) pa[i] = pb[i] = 1.0f + 0.25f * static_cast<float>(i % 7);
}

Probe::~Probe() {
  if (!impl_) return;
  auto& s = *impl_;
  for (MTL::Buffer* buf : {s.counter, s.a, s.b, s.out})
    if (buf) buf->release();
  if (s.pso) s.pso->release();
  if (s.lib) s.lib->release();
}

double Probe::library_compile_seconds() const { return impl_->compile_s; }
double Probe::pipeline_create_seconds() const { return impl_->pipeline_s; }

double Probe::timed_launch_sync() {
  Pool pool;
  auto t0 = clock_type::now();
  MTL::CommandBuffer* cb = impl_->launch();
  cb->waitUntilCompleted();
  double dt = seconds_since(t0);
  check_completed(cb);
  return dt;
}

std::vector<double> Probe::submit(int samples, int inner, int warmup) {
  std::vector<double> out;
  out.reserve(samples);
  for (int i = 0; i < warmup + samples; ++i) {
    Pool pool;
    MTL::CommandBuffer* last = nullptr;
    auto t0 = clock_type::now();
    for (int k = 0; k < inner; ++k) last = impl_->launch();
    double dt = seconds_since(t0);
    last->waitUntilCompleted();  // drain outside the timed region
    check_completed(last);
    if (i >= warmup) out.push_back(dt);
  }
  return out;
}

std::vector<double> Probe::roundtrip(int samples, int warmup) {
  std::vector<double> out;
  out.reserve(samples);
  for (int i = 0; i < warmup + samples; ++i) {
    double dt = timed_launch_sync();
    if (i >= warmup) out.push_back(dt);
  }
  return out;
}

std::vector<double> Probe::stream_b2b(int samples, int inner, int warmup) {
  std::vector<double> out;
  out.reserve(samples);
  for (int i = 0; i < warmup + samples; ++i) {
    Pool pool;
    MTL::CommandBuffer* first = nullptr;
    MTL::CommandBuffer* last = nullptr;
    for (int k = 0; k < inner; ++k) {
      last = impl_->launch();
      if (k == 0) first = last;
    }
    last->waitUntilCompleted();
    check_completed(last);
    // One queue executes its command buffers in commit order, so first start .. last end
    // spans every launch of the sample.
    double dt = last->GPUEndTime() - first->GPUStartTime();
    if (i >= warmup) out.push_back(dt);
  }
  return out;
}

std::vector<double> Probe::device_kernel(int samples, int inner, int warmup) {
  std::vector<double> out;
  out.reserve(samples);
  for (int i = 0; i < warmup + samples; ++i) {
    Pool pool;
    MTL::CommandBuffer* cb = context().queue->commandBuffer();
    MTL::ComputeCommandEncoder* enc = cb->computeCommandEncoder();
    for (int k = 0; k < inner; ++k) impl_->encode(enc);
    enc->endEncoding();
    cb->commit();
    cb->waitUntilCompleted();
    check_completed(cb);
    double dt = cb->GPUEndTime() - cb->GPUStartTime();
    if (i >= warmup) out.push_back(dt);
  }
  return out;
}

unsigned Probe::count_launches(int k) {
  auto& s = *impl_;
  if (s.variant != kNull) throw std::logic_error("count_launches is the check of variant 1");
  std::memset(s.counter->contents(), 0, sizeof(std::uint32_t));
  s.flag = 1;
  Pool pool;
  MTL::CommandBuffer* last = nullptr;
  for (int i = 0; i < k; ++i) last = s.launch();
  s.flag = 0;
  if (last) {
    last->waitUntilCompleted();
    check_completed(last);
  }
  std::uint32_t v = 0;
  std::memcpy(&v, s.counter->contents(), sizeof v);
  return v;
}

std::vector<float> Probe::run_add(const std::vector<float>& a, const std::vector<float>& b) {
  auto& s = *impl_;
  if (s.variant != kAdd1) throw std::logic_error("run_add is the check of variant 2");
  if (a.size() != s.n || b.size() != s.n)
    throw std::invalid_argument("run_add: inputs must have n = " + std::to_string(s.n) + " elements");
  std::size_t bytes = sizeof(float) * s.n;
  std::memcpy(s.a->contents(), a.data(), bytes);
  std::memcpy(s.b->contents(), b.data(), bytes);
  std::memset(s.out->contents(), 0xFF, bytes);  // poison: all-ones bytes are a NaN
  timed_launch_sync();
  std::vector<float> host(s.n);
  std::memcpy(host.data(), s.out->contents(), bytes);
  return host;
}

}  // namespace gb::metal::launch
