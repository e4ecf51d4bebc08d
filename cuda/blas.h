// One BLAS measurement case on CUDA: device buffers for an op/dtype/shape, the library's
// reference and dispatched kernels and the vendor library behind one Impl switch, verification
// I/O, and event timing with each run released by the gate (gate.h). Raw per-run seconds come
// back; statistics live in Python.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "blas_ops.h"

namespace gb::cuda::blas {

// Streams a case can time on. Which stream a small kernel runs on moves its device time by the
// stream's own amount (on an H100: 4-8% between fresh streams at 4 us, the same buffers;
// docs/findings/between-runs.md), and a process gets its streams anew: timed on one stream, a row
// moved between runs by what its stream happened to be. The harness picks the stream of each
// paired round (use_stream(round mod streams())), so a round's arms share one warm stream, as a
// framework's runs do, and a row's median over rounds pools the streams.
constexpr int kTimingStreams = 8;

class Case {
 public:
  // Shapes: copy (n = elements); gemv (m, k); vjp_dx / vjp_dw (m, k of W); gemm (batch, m, n, k).
  Case(Op op, DType dtype, long long batch, long long m, long long n, long long k, int device = 0);
  ~Case();
  Case(const Case&) = delete;
  Case& operator=(const Case&) = delete;

  int n_inputs() const;
  std::size_t input_bytes(int i) const;
  std::size_t output_bytes() const;
  int rotations() const;     // input/output sets cycled through in hot-cache timing
  bool l2_resident() const;  // the sets together are under 2x L2 (memory did not allow more)
  int invalid_samples() const;  // gate timeouts in the last time() call (those samples were dropped)
  // Parity pads on the case's gate (gate.h set_parity_pads): each timed run is held with one or two
  // empty kernels after the gate, in turn; the last timed run's output poison is then one kernel of
  // its own, with one pad fewer, so that run keeps its place in the turn.
  void set_parity_pads(bool on);
  bool parity_pads() const;
  int streams() const;          // streams it can time on (kTimingStreams)
  // Everything after this runs on stream i (0 <= i < streams(); 0 until called): set_input,
  // run_once, time, last_output.
  void use_stream(int i);
  // The same on a stream the caller owns and keeps alive while the case uses it (a cudaStream_t of
  // the case's device as an integer): the process's timing streams (gate.h Streams), which the
  // frameworks' rows of the case time on too, so every arm of a paired round runs on one stream.
  void use_stream_handle(std::uintptr_t stream);
  void set_input(int i, const void* data, std::size_t bytes);
  // The kernel (or vendor call) `impl` runs for this case, e.g. "vjp_dx_strips256", "cublas".
  // Throws gb::NotApplicable where `impl` cannot run here.
  std::string strategy(Impl impl) const;
  // Poison the output (all-ones bytes: NaN in every float format), run once, copy the output to
  // `host` (output_bytes() of them).
  void run_once(Impl impl, void* host);
  // Device seconds per run: events around each run, after `warmup` untimed runs, each run held
  // behind the gate until the host has queued it whole, on the stream in use (use_stream). hot: the sets rotate; cold_clean: a read
  // pass of 2x L2 before each run; cold_dirty: a 2x-L2 memset before each run (l2_scrub.cuh); the
  // scrub runs before the gate's hold, so the events see the op alone. A sample whose hold timed
  // out is dropped and run again (invalid_samples counts them; too many is an error).
  std::vector<double> time(Impl impl, int samples, int warmup, Cache cache);
  // The output of the last timed run (its set's output was poisoned before that run), copied to
  // `host` (output_bytes() of them).
  void last_output(void* host);

  // The same for one kernel of this case's op named by strategy (csrc/ops.def's kernels): every
  // kernel of the library, not only the one the dispatcher picks. std::invalid_argument for a
  // kernel of another op; gb::NotApplicable where it cannot run for this dtype, shape or GPU.
  std::string strategy(Kernel kernel) const;
  void run_once(Kernel kernel, void* host);
  std::vector<double> time(Kernel kernel, int samples, int warmup, Cache cache);

  // Device seconds of an empty kernel (one thread, no work), timed as time() times a run: held
  // behind the gate, between the same events, on the stream in use. The launch floor of that
  // stream beside the case's rows: what a one-call sample holds besides its kernel moves with the
  // stream and the process (docs/findings/between-runs.md). Hot only; the sets' rotation and the
  // last timed output stay as the rows left them.
  std::vector<double> time_empty(int samples, int warmup);

 private:
  struct Impl_;
  struct Which;
  void run_once_(const Which& w, void* host);
  std::vector<double> time_(const Which& w, int samples, int warmup, Cache cache);
  std::unique_ptr<Impl_> impl_;
};

std::string cublas_load(const std::vector<std::string>& candidates);  // path loaded, or "" (see cublas_error)
std::string cublas_error();

}  // namespace gb::cuda::blas
