// The release gate (plain C++ API; kernel in gate.cuh, host code in gate.cu).
//
// Timing a few microseconds of GPU work with events needs the device busy while the host queues
// the start event, the work and the stop event; otherwise the host's submission gap lands between
// the events. A fixed spin only guesses how long the host needs (issue 15: a 50 us spin hid none of
// torch.func.vjp's 85-114 us of host time). The gate instead holds the stream until the host says
// it is done queuing:
//
//   gate.hold(stream); record start; enqueue work; record stop; gate.release(); sync stop;
//   if (gate.timed_out()) drop the sample.
//
// hold() enqueues one single-thread kernel that spins on a flag in host-mapped memory; release()
// sets the flag. The kernel also counts its SM clocks and gives up after timeout_s (default 1 s;
// counted at 3 GHz, so at most the clock ratio longer on a slower clock),
// writing "timed out" to host-mapped memory: a host that never releases cannot hang the GPU, and a
// sample whose queuing outlasted the timeout is known to be invalid. Works on any cudaStream_t of
// the gate's device, passed as an integer (torch: torch.cuda.current_stream().cuda_stream, cupy:
// cupy.cuda.get_current_stream().ptr).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace gb::cuda {

class Gate {
 public:
  explicit Gate(int device = 0, double timeout_s = 1.0);
  ~Gate();  // releases any hold and waits for the gate kernel before freeing its memory
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  void hold(std::uintptr_t stream);  // enqueue the gate kernel on `stream` (a cudaStream_t)
  // Parity pads (findings/between-runs.md, "The state is the parity of the kernels launched on the
  // timed stream"): on an H200 a cuBLAS GEMV's sample is 0.4-0.6 us longer at one parity of the count
  // of kernels launched on its stream before it than at the other, and that count is the process's
  // history. With pads on, each hold also launches one, then two, then one... empty kernels right
  // after the gate kernel (before the caller's start event: not timed), so every four consecutive
  // holds of one op, whatever it launches, time it twice at each parity. skip_pad(): the next hold
  // launches one pad fewer (for a caller that queued one kernel of its own just before it).
  void set_parity_pads(bool on);
  bool parity_pads() const;
  void skip_pad();
  void release();                    // let the last hold's kernel finish
  bool timed_out();                  // waits for the last hold's kernel; true if it ended by timeout
  // Queue an L2 scrub on `stream` before a hold (l2_scrub.cuh; mode 1: a 2x-L2 read pass, L2 left
  // clean; 2: a 2x-L2 memset, L2 left dirty), the same scrubs the BLAS case runs, so a framework's
  // cold-cache samples see the L2 the native ones see. The buffer is allocated on first use.
  void scrub(std::uintptr_t stream, int mode);
  double timeout_s() const;
  int device() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Streams a framework's rows time on, one a paired round in turn, as the BLAS case's own
// (blas.h kTimingStreams): torch and CuPy wrap them as external streams. Blocking streams (they
// wait for the legacy default stream and it for them), so an op that ignores the framework's
// current stream and launches on the default stream, e.g. a user's extension, still runs between
// the events of the held stream, as it did when the rows timed on the default stream itself.
class Streams {
 public:
  Streams(int device, int count);  // count in [1, 64]
  ~Streams();                      // waits for each stream, then destroys it
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;

  int size() const;
  std::uintptr_t handle(int i) const;  // the cudaStream_t of stream i; std::out_of_range past size()
  int device() const;

 private:
  int device_ = 0;
  std::vector<std::uintptr_t> streams_;
};

}  // namespace gb::cuda
