// Launch-latency probe on Metal (paper Table 6), host API in plain C++ for the binding.
// Mirrors cuda/launch.h: raw per-sample durations in seconds; statistics live in Python.
// A Metal "launch" is one command buffer holding one compute dispatch, committed.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace gb::metal::launch {

enum Variant : int { kNull = 1, kAdd1 = 2 };

double context_create_seconds();  // device + command queue creation (first call only)

class Probe {
 public:
  // Compiles `source` (the text of launch.metal) and builds the variant's pipeline; both
  // phases are timed and kept (library_compile_seconds, pipeline_create_seconds).
  Probe(int variant, int n, const std::string& source);
  ~Probe();
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;

  double library_compile_seconds() const;
  double pipeline_create_seconds() const;
  double timed_launch_sync();                                   // commit + waitUntilCompleted
  std::vector<double> submit(int samples, int inner, int warmup);   // encode + commit, no wait
  std::vector<double> roundtrip(int samples, int warmup);           // one launch, then wait
  // GPU timestamps from the first command buffer's start to the last one's end, `inner`
  // command buffers committed back to back as the host issues them.
  std::vector<double> stream_b2b(int samples, int inner, int warmup);
  // GPU time of one command buffer holding `inner` dispatches in one encoder: dispatches
  // back to back on the device with no host in between.
  std::vector<double> device_kernel(int samples, int inner, int warmup);

  unsigned count_launches(int k);
  std::vector<float> run_add(const std::vector<float>& a, const std::vector<float>& b);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gb::metal::launch
