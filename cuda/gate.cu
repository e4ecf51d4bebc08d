// gate.cu: the release gate's host side (see gate.h).
#include "gate.h"

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>

#include "cuda_check.h"
#include "gate.cuh"
#include "l2_scrub.cuh"

namespace gb::cuda {

struct Gate::Impl {
  int device = 0;
  double timeout_s = 1.0;
  volatile unsigned* host = nullptr;  // [0] released generation, [1] timed out, [2] served generation
  unsigned* dev = nullptr;
  unsigned gen = 0;                   // generation of the last hold
  cudaEvent_t done = nullptr;         // recorded after the last hold's kernel
  gb::cache::L2Scrub l2;              // scrub(): 2x the L2, allocated on first use
  bool l2_ready = false;
  int scrubs = 0;                     // varies the dirty scrub's byte from one run to the next
  bool pads = false;                  // parity pads after each hold (set_parity_pads)
  unsigned pad_turn = 0;              // holds padded so far: one pad, then two, in turn
  bool skip = false;                  // the next hold launches one pad fewer (skip_pad)
};

namespace {
constexpr double kMaxClockHz = 3.0e9;

// Runs f with `device` current, restoring the caller's device (frameworks keep their own).
template <class F>
void on_device(int device, F&& f) {
  int prev = 0;
  GB_CUDA_CHECK(cudaGetDevice(&prev));
  if (prev != device) GB_CUDA_CHECK(cudaSetDevice(device));
  try {
    f();
  } catch (...) {
    if (prev != device) cudaSetDevice(prev);
    throw;
  }
  if (prev != device) GB_CUDA_CHECK(cudaSetDevice(prev));
}
}  // namespace

Gate::Gate(int device, double timeout_s) : impl_(new Impl) {
  if (!(timeout_s > 0) || !std::isfinite(timeout_s) || timeout_s > 3600)
    throw std::invalid_argument("gate timeout_s must be in (0, 3600] seconds, got " + std::to_string(timeout_s));
  auto& s = *impl_;
  s.device = device;
  s.timeout_s = timeout_s;
  on_device(device, [&] {
    void* p = nullptr;
    GB_CUDA_CHECK(cudaHostAlloc(&p, 4 * sizeof(unsigned), cudaHostAllocMapped | cudaHostAllocPortable));
    s.host = static_cast<volatile unsigned*>(p);
    for (int i = 0; i < 4; ++i) s.host[i] = 0;
    void* d = nullptr;
    GB_CUDA_CHECK(cudaHostGetDevicePointer(&d, p, 0));
    s.dev = static_cast<unsigned*>(d);
    GB_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  });
  // One hold and release on a private stream before any real one, so the gate kernel's own module
  // is loaded (lazy loading) outside any timed region. Whatever runs behind a hold must likewise
  // have run once before: a first launch loads its module, which waits for the held device, and
  // the hold then ends only by its timeout (seen on the lent H100, 2026-11-23). The harness's
  // verification runs do that; the result here is not a sample and is not looked at.
  on_device(device, [&] {
    cudaStream_t warm = nullptr;
    GB_CUDA_CHECK(cudaStreamCreateWithFlags(&warm, cudaStreamNonBlocking));
    hold(reinterpret_cast<std::uintptr_t>(warm));
    release();
    pad_kernel<<<1, 1, 0, warm>>>();  // the parity pad's too: it is launched behind holds (set_parity_pads)
    GB_CUDA_CHECK_LAUNCH();
    GB_CUDA_CHECK(cudaStreamSynchronize(warm));
    GB_CUDA_CHECK(cudaStreamDestroy(warm));
  });
}

Gate::~Gate() {
  if (!impl_) return;
  auto& s = *impl_;
  if (s.host) s.host[0] = s.gen;  // never leave a kernel waiting on memory about to be freed
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (s.done) {
    cudaEventSynchronize(s.done);  // destructors never throw: errors ignored on purpose
    cudaEventDestroy(s.done);
  }
  if (s.host) cudaFreeHost(const_cast<unsigned*>(s.host));
  if (s.l2_ready) {
    int prev = 0;
    if (cudaGetDevice(&prev) == cudaSuccess && prev != s.device) cudaSetDevice(s.device);
    cudaDeviceSynchronize();  // no scrub may still read the buffer
    s.l2.release();
    if (prev != s.device) cudaSetDevice(prev);
  }
}

void Gate::scrub(std::uintptr_t stream, int mode) {
  if (mode != gb::cache::kColdClean && mode != gb::cache::kColdDirty)
    throw std::invalid_argument("gate scrub mode must be 1 (read pass) or 2 (memset), got " + std::to_string(mode));
  auto& s = *impl_;
  on_device(s.device, [&] {
    if (!s.l2_ready) {
      GB_CUDA_CHECK(s.l2.alloc(s.device));
      s.l2_ready = true;
    }
    GB_CUDA_CHECK(s.l2.run(mode, s.scrubs++, reinterpret_cast<cudaStream_t>(stream)));
  });
}

void Gate::hold(std::uintptr_t stream) {
  auto& s = *impl_;
  if (s.gen != 0 && s.host[0] < s.gen) release();  // one hold at a time: a forgotten one is let go
  auto st = reinterpret_cast<cudaStream_t>(stream);
  on_device(s.device, [&] {
    unsigned want = s.gen + 1;
    // SM clocks of the timeout at kMaxClockHz, above any current GPU's boost clock: at a lower
    // clock the hold lasts longer, never shorter, than timeout_s.
    auto cycles = (long long)(s.timeout_s * kMaxClockHz);
    gate_kernel<<<1, 1, 0, st>>>(s.dev, want, s.dev + 1, cycles);
    GB_CUDA_CHECK_LAUNCH();
    GB_CUDA_CHECK(cudaEventRecord(s.done, st));
    s.gen = want;
    if (s.pads) {
      int n = 1 + (int)(s.pad_turn++ & 1u) - (s.skip ? 1 : 0);
      for (int i = 0; i < n; ++i) {
        pad_kernel<<<1, 1, 0, st>>>();
        GB_CUDA_CHECK_LAUNCH();
      }
    }
    s.skip = false;
  });
}

void Gate::set_parity_pads(bool on) {
  impl_->pads = on;
  impl_->pad_turn = 0;
  impl_->skip = false;
}
bool Gate::parity_pads() const { return impl_->pads; }
void Gate::skip_pad() { impl_->skip = true; }

void Gate::release() {
  auto& s = *impl_;
  std::atomic_thread_fence(std::memory_order_seq_cst);  // everything queued before is visible first
  s.host[0] = s.gen;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool Gate::timed_out() {
  auto& s = *impl_;
  if (s.gen == 0) return false;
  if (s.host[0] < s.gen)
    throw std::logic_error("Gate.timed_out() before release(): release the hold first (it would wait for the timeout)");
  on_device(s.device, [&] { GB_CUDA_CHECK(cudaEventSynchronize(s.done)); });
  if (s.host[2] != s.gen) throw std::runtime_error("gate kernel finished without reporting (generation mismatch)");
  return s.host[1] != 0;
}

Streams::Streams(int device, int count) : device_(device) {
  if (count < 1 || count > 64) throw std::invalid_argument("Streams count must be in [1, 64], got " + std::to_string(count));
  on_device(device, [&] {
    try {
      for (int i = 0; i < count; ++i) {
        cudaStream_t st = nullptr;
        GB_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamDefault));  // blocking: see gate.h
        streams_.push_back(reinterpret_cast<std::uintptr_t>(st));
      }
    } catch (...) {
      for (auto h : streams_) cudaStreamDestroy(reinterpret_cast<cudaStream_t>(h));
      streams_.clear();
      throw;
    }
  });
}

Streams::~Streams() {
  int prev = 0;
  bool got = cudaGetDevice(&prev) == cudaSuccess;
  if (got && prev != device_) cudaSetDevice(device_);
  for (auto h : streams_) {  // destructors never throw: errors ignored on purpose
    cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(h));
    cudaStreamDestroy(reinterpret_cast<cudaStream_t>(h));
  }
  if (got && prev != device_) cudaSetDevice(prev);
}

int Streams::size() const { return static_cast<int>(streams_.size()); }
int Streams::device() const { return device_; }
std::uintptr_t Streams::handle(int i) const {
  if (i < 0 || i >= size())
    throw std::out_of_range("stream " + std::to_string(i) + " of " + std::to_string(size()));
  return streams_[static_cast<std::size_t>(i)];
}

double Gate::timeout_s() const { return impl_->timeout_s; }
int Gate::device() const { return impl_->device; }

}  // namespace gb::cuda
