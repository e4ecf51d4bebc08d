// Launch-latency probe (paper Table 6), host API in plain C++ for the binding.
// Every timing function returns raw per-sample durations in seconds; a sample covers
// `inner` operations where the name says so. Statistics live in Python.
#pragma once
#include <memory>
#include <vector>

namespace gb::cuda::launch {

enum Variant : int { kNull = 1, kAdd1 = 2 };

class Probe {
 public:
  // variant 1 (null kernel) or 2 (n-element add); allocates buffers and a stream.
  Probe(int variant, int n, int device = 0);
  ~Probe();
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;

  int variant() const;
  // launch + stream synchronize of one op, host clock: the cold-launch sample when this is
  // the first launch of the process.
  double timed_launch_sync();
  // (1) host cost of issuing `inner` launches (no wait inside the timed region).
  std::vector<double> submit(int samples, int inner, int warmup);
  // (2) one launch then wait for it, per sample.
  std::vector<double> roundtrip(int samples, int warmup);
  // (3a) device events around `inner` launches as the host issues them.
  std::vector<double> stream_b2b(int samples, int inner, int warmup);
  // (3b) device events around `inner` launches held behind the release gate (gate.h) until the
  //      host has issued them all: per-kernel time on the device alone.
  std::vector<double> device_kernel(int samples, int inner, int warmup);
  int invalid_samples() const;  // gate timeouts in the last device_kernel() call (dropped, re-run)
  // (4) device events around one replay of a CUDA graph of `inner` kernel nodes.
  std::vector<double> graph_replay(int samples, int inner, int warmup);

  // Checks, run before timing.
  unsigned count_launches(int k);  // null: k launches with counting on; returns the count
  std::vector<float> run_add(const std::vector<float>& a, const std::vector<float>& b);

 public:
  struct Impl;  // defined in launch.cu only

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gb::cuda::launch
