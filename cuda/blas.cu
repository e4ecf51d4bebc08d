// Case: see blas.h. Holds the buffers, the GPU facts the dispatcher's rule needs, and the gate.
#include "blas.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "cublas_loader.h"
#include "cuda_check.h"
#include "gate.h"
#include "kernels.h"
#include "l2_scrub.cuh"

namespace gb::cuda::blas {

using gb::blas::Kernel;

static cudaDataType cuda_type(DType dt) {
  switch (dt) {
    case DType::fp32: return CUDA_R_32F;
    case DType::fp16: return CUDA_R_16F;
    case DType::bf16: break;
  }
  return CUDA_R_16BF;
}

static std::size_t align256(std::size_t b) { return (b + 255) / 256 * 256; }

// Hot-mode rotation: at most this many sets (ops of a few KB would otherwise want ~10^5); beyond,
// the case says it is L2-resident.
static constexpr long long kMaxSets = 4096;

struct Set {
  std::vector<void*> in;
  void* out = nullptr;
};

struct Case::Impl_ {
  gb::blas::Problem p;
  gb::blas::Gpu gpu;
  int device = 0;
  std::vector<std::size_t> in_bytes;
  std::size_t out_bytes = 0;
  char* slab = nullptr;  // every set's inputs and output, one allocation
  std::size_t set_stride = 0;  // bytes from one set to the next in the slab
  std::vector<Set> sets;
  bool l2_resident = false;
  long long round = 0;   // runs so far: the hot rotation carries on across time() calls
  int last_set = -1;     // set of the last timed run
  int invalid = 0;
  float* work = nullptr;  // split-k / row-slice partials, self-resetting accumulators (gemv, vjp_dx)
  gb::cache::L2Scrub scrub;  // cold-cache modes: evicts L2 before each run (l2_scrub.cuh)
  std::vector<cudaStream_t> streams;  // kTimingStreams of them
  cudaStream_t stream = nullptr;      // the one in use (Case::use_stream)
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  cublas::Handle handle = nullptr;
  std::unique_ptr<Gate> gate;

  void require_cublas() const {
    if (!cublas::loaded())
      throw gb::NotApplicable("cuBLAS is not loaded" +
                              (cublas::load_error().empty() ? std::string(" (call cublas_load first)")
                                                            : ": " + cublas::load_error()));
  }

  void run(const Which& w, const Set& s);

  // Runs go to `st` from now on (the cuBLAS handle too, once it exists).
  void use_stream(cudaStream_t st) {
    if (st == stream) return;
    stream = st;
    if (handle) gb::blas::check_cublas(cublas::api().set_stream(handle, stream), "cublasSetStream");
  }

  void run(Impl impl, const Set& s) {
    gb::blas::Buffers buf{s.in.size() > 0 ? s.in[0] : nullptr, s.in.size() > 1 ? s.in[1] : nullptr, s.out, work};
    switch (impl) {
      case Impl::reference: gb::blas::launch(gb::blas::reference_kernel(p.op), p, gpu, buf, stream); return;
      case Impl::dispatch: gb::blas::launch(gb::blas::dispatch(p, gpu), p, gpu, buf, stream); return;
      case Impl::vendor:
      case Impl::vendor_tf32: run_vendor(impl, buf); GB_CUDA_CHECK_LAUNCH(); return;
    }
    throw std::invalid_argument("unknown impl " + std::to_string((int)impl));
  }

  // The op's vendor path (csrc/ops.def): cuda/ops/<op>.cuh's vendor(), with a cuBLAS handle on this
  // case's stream where its strategy is cublas; gb::NotApplicable where it declares none.
  void run_vendor(Impl impl, const gb::blas::Buffers& buf) {
    const gb::blas_ops::VendorDecl decl = gb::blas_ops::vendor_decl(p.op);
    if (impl == Impl::vendor_tf32 && !(decl.tf32 && p.dt == DType::fp32)) gb::blas_ops::no_vendor_tf32();
    if (decl.not_applicable) throw gb::NotApplicable(decl.not_applicable);
    if (uses_cublas(decl)) {
      require_cublas();
      if (!handle) {
        const auto& api = cublas::api();
        gb::blas::check_cublas(api.create(&handle), "cublasCreate");
        gb::blas::check_cublas(api.set_stream(handle, stream), "cublasSetStream");
      }
    }
    int compute = impl == Impl::vendor_tf32 ? cublas::kCompute32FFastTF32 : cublas::kCompute32F;
    gb::blas::vendor({p, buf, out_bytes, stream, uses_cublas(decl) ? handle : nullptr, compute, cuda_type(p.dt)});
  }

  static bool uses_cublas(const gb::blas_ops::VendorDecl& d) { return d.cuda && std::string(d.cuda) == "cublas"; }
};

Case::Case(Op op, DType dtype, long long batch, long long m, long long n, long long k, int device)
    : impl_(new Impl_) {
  gb::check_enums(op, dtype);
  for (long long d : {batch, m, n, k})
    if (d < 1) throw std::invalid_argument("every dimension must be >= 1");
  auto& s = *impl_;
  s.p = {op, dtype, batch, m, n, k, gb::op_scalar(op)};
  s.device = device;
  gb::blas_ops::Io io = gb::blas_ops::io_bytes(op, gb::dtype_bytes(dtype), batch, m, n, k);
  s.in_bytes = io.in;
  s.out_bytes = io.out;
  GB_CUDA_CHECK(cudaSetDevice(device));
  s.gpu = gb::blas::query_gpu(device);
  for (int i = 0; i < kTimingStreams; ++i) {
    cudaStream_t st = nullptr;
    GB_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    s.streams.push_back(st);
  }
  s.stream = s.streams[0];
  GB_CUDA_CHECK(cudaEventCreate(&s.e0));
  GB_CUDA_CHECK(cudaEventCreate(&s.e1));
  std::size_t set_bytes = align256(s.out_bytes);
  for (auto b : s.in_bytes) set_bytes += align256(b);
  // Hot mode rotates through enough sets that one pass over them all is at least 2x the L2, so a
  // rotated input has been evicted; memory (a quarter of what is free) and kMaxSets permitting,
  // else the case says it is L2-resident.
  const double l2x2 = 2.0 * (double)(s.gpu.l2_bytes > 0 ? s.gpu.l2_bytes : 1);
  std::size_t free_b = 0, total_b = 0;
  GB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  long long want = (long long)std::ceil(l2x2 / (double)set_bytes);
  long long fit = std::min((long long)((free_b / 4) / set_bytes), kMaxSets);
  long long nsets = std::max(1LL, std::min(want, fit));
  s.set_stride = set_bytes;
  s.l2_resident = (double)nsets * (double)set_bytes < l2x2;
  GB_CUDA_CHECK(cudaMalloc(&s.slab, (std::size_t)nsets * set_bytes));
  char* cur = s.slab;
  for (long long i = 0; i < nsets; ++i) {
    Set st;
    for (auto b : s.in_bytes) {
      st.in.push_back(cur);
      cur += align256(b);
    }
    st.out = cur;
    cur += align256(s.out_bytes);
    s.sets.push_back(st);
  }
  if (long long wf = gb::blas::work_floats(s.p, s.gpu)) {
    GB_CUDA_CHECK(cudaMalloc(&s.work, sizeof(float) * wf));
    GB_CUDA_CHECK(cudaMemset(s.work, 0, sizeof(float) * wf));  // counters and accumulators start at zero
  }
  GB_CUDA_CHECK(s.scrub.alloc(device));
  s.gate = std::make_unique<Gate>(device, 1.0);
}

Case::~Case() {
  if (!impl_) return;
  auto& s = *impl_;
  s.gate.reset();
  if (s.stream) cudaStreamSynchronize(s.stream);  // a caller's stream (use_stream_handle) too
  for (cudaStream_t st : s.streams) cudaStreamSynchronize(st);
  if (s.handle && cublas::loaded()) cublas::api().destroy(s.handle);
  cudaFree(s.slab);
  cudaFree(s.work);
  s.scrub.release();
  if (s.e0) cudaEventDestroy(s.e0);
  if (s.e1) cudaEventDestroy(s.e1);
  for (cudaStream_t st : s.streams) cudaStreamDestroy(st);
}

int Case::n_inputs() const { return (int)impl_->in_bytes.size(); }
std::size_t Case::input_bytes(int i) const { return impl_->in_bytes.at(i); }
std::size_t Case::output_bytes() const { return impl_->out_bytes; }
int Case::rotations() const { return (int)impl_->sets.size(); }
bool Case::l2_resident() const { return impl_->l2_resident; }
int Case::invalid_samples() const { return impl_->invalid; }
int Case::streams() const { return (int)impl_->streams.size(); }
void Case::use_stream(int i) {
  auto& s = *impl_;
  if (i < 0 || i >= (int)s.streams.size())
    throw std::invalid_argument("stream " + std::to_string(i) + " out of range: a case has " +
                                std::to_string(s.streams.size()) + " (0.." + std::to_string(s.streams.size() - 1) + ")");
  GB_CUDA_CHECK(cudaStreamSynchronize(s.stream));  // whatever ran before is done before the next stream starts
  s.use_stream(s.streams[i]);
}

void Case::use_stream_handle(std::uintptr_t stream) {
  auto& s = *impl_;
  if (!stream) throw std::invalid_argument("use_stream_handle: a null stream (the legacy default stream) is not a timing stream");
  GB_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  s.use_stream(reinterpret_cast<cudaStream_t>(stream));
}

void Case::set_input(int i, const void* data, std::size_t bytes) {
  auto& s = *impl_;
  gb::blas_ops::check_input(s.in_bytes, i, bytes);
  // On the case's stream, so the replication below is ordered after it: a cudaMemcpy from pageable
  // memory returns once the data is staged, before its DMA to the device is done, and the
  // non-blocking stream does not wait for it. (Copied with cudaMemcpy, rotated sets on the lent
  // H200 held partly unwritten inputs: caught by verifying the last timed run, 2026-11-23.)
  GB_CUDA_CHECK(cudaMemcpyAsync(s.sets[0].in[i], data, bytes, cudaMemcpyHostToDevice, s.stream));
  // Replicate into every set by doubling: sets [0, have) are copied to [have, 2 have), one strided
  // 2-D copy each (the sets are evenly spaced in the slab).
  const std::size_t n = s.sets.size(), stride = s.set_stride;
  for (std::size_t have = 1; have < n; have *= 2) {
    std::size_t count = have < n - have ? have : n - have;
    GB_CUDA_CHECK(cudaMemcpy2DAsync(s.sets[have].in[i], stride, s.sets[0].in[i], stride, bytes, count,
                                    cudaMemcpyDeviceToDevice, s.stream));
  }
  GB_CUDA_CHECK(cudaStreamSynchronize(s.stream));
}

std::string Case::strategy(Impl impl) const {
  auto& s = *impl_;
  switch (impl) {
    case Impl::reference: return gb::blas::kernel_name(gb::blas::reference_kernel(s.p.op));
    case Impl::dispatch: return gb::blas::kernel_name(gb::blas::dispatch(s.p, s.gpu));
    case Impl::vendor:
    case Impl::vendor_tf32: {
      const gb::blas_ops::VendorDecl decl = gb::blas_ops::vendor_decl(s.p.op);
      if (impl == Impl::vendor_tf32 && !(decl.tf32 && s.p.dt == DType::fp32)) gb::blas_ops::no_vendor_tf32();
      if (decl.not_applicable) throw gb::NotApplicable(decl.not_applicable);
      if (Impl_::uses_cublas(decl)) s.require_cublas();
      return std::string(decl.cuda) + (impl == Impl::vendor_tf32 ? "_tf32" : "");
    }
  }
  throw std::invalid_argument("unknown impl " + std::to_string((int)impl));
}

// What one run launches: an Impl, or (named) one kernel of the op by strategy, or (empty) the
// empty kernel of time_empty.
struct Case::Which {
  bool named = false;
  Impl impl = Impl::dispatch;
  Kernel kernel{};
  bool empty = false;
};

namespace {
__global__ void empty_kernel() {}
// All-ones bytes (NaN in every float format) over n bytes: the last timed run's poison as one kernel
// launch (cudaMemsetAsync need not be one), under parity pads.
__global__ void poison_kernel(unsigned char* p, std::size_t n) {
  const std::size_t step = (std::size_t)gridDim.x * blockDim.x;
  for (std::size_t i = (std::size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) p[i] = 0xFF;
}
}  // namespace

void Case::set_parity_pads(bool on) { impl_->gate->set_parity_pads(on); }
bool Case::parity_pads() const { return impl_->gate->parity_pads(); }

void Case::Impl_::run(const Which& w, const Set& s) {
  if (w.empty) {
    empty_kernel<<<1, 1, 0, stream>>>();
    GB_CUDA_CHECK(cudaGetLastError());
    return;
  }
  if (!w.named) return run(w.impl, s);
  gb::blas::Buffers buf{s.in.size() > 0 ? s.in[0] : nullptr, s.in.size() > 1 ? s.in[1] : nullptr, s.out, work};
  gb::blas::launch(w.kernel, p, gpu, buf, stream);
}

std::string Case::strategy(Kernel kernel) const {
  if (gb::blas::kernel_op(kernel) != impl_->p.op)
    throw std::invalid_argument(std::string(gb::blas::kernel_name(kernel)) + " is not a kernel of " +
                                gb::op_name(impl_->p.op));
  return gb::blas::kernel_name(kernel);
}

void Case::run_once(Impl impl, void* host) { run_once_(Which{false, impl, {}}, host); }
void Case::run_once(Kernel kernel, void* host) {
  strategy(kernel);
  run_once_(Which{true, Impl::dispatch, kernel}, host);
}
std::vector<double> Case::time(Impl impl, int samples, int warmup, Cache cache) {
  return time_(Which{false, impl, {}}, samples, warmup, cache);
}
std::vector<double> Case::time(Kernel kernel, int samples, int warmup, Cache cache) {
  strategy(kernel);
  return time_(Which{true, Impl::dispatch, kernel}, samples, warmup, cache);
}
std::vector<double> Case::time_empty(int samples, int warmup) {
  return time_(Which{false, Impl::dispatch, {}, true}, samples, warmup, Cache::hot);
}

void Case::run_once_(const Which& w, void* host) {
  auto& s = *impl_;
  Set& st = s.sets[0];
  GB_CUDA_CHECK(cudaMemsetAsync(st.out, 0xFF, s.out_bytes, s.stream));
  s.run(w, st);
  GB_CUDA_CHECK(cudaMemcpyAsync(host, st.out, s.out_bytes, cudaMemcpyDeviceToHost, s.stream));
  GB_CUDA_CHECK(cudaStreamSynchronize(s.stream));
}

std::vector<double> Case::time_(const Which& w, int samples, int warmup, Cache cache) {
  auto& s = *impl_;
  if (cache != Cache::hot && cache != Cache::cold_clean && cache != Cache::cold_dirty)
    throw std::invalid_argument("unknown cache mode " + std::to_string((int)cache));
  if (samples < 1 || warmup < 0) throw std::invalid_argument("samples must be >= 1 and warmup >= 0");
  const bool cold = cache != Cache::hot;
  const int scrub_mode = cache == Cache::cold_clean ? gb::cache::kColdClean : gb::cache::kColdDirty;
  const int max_invalid = std::max(3, samples);
  s.invalid = 0;
  std::vector<double> out;
  out.reserve(samples);
  for (int i = 0; (int)out.size() < samples;) {
    const int set = cold ? 0 : (int)(s.round % (long long)s.sets.size());
    const Set& st = s.sets[set];
    const bool timed = i >= warmup, last = !w.empty && timed && (int)out.size() == samples - 1;
    if (last) {  // so that last_output() shows what the last timed run wrote, not an older result
      if (s.gate->parity_pads()) {  // one kernel, in place of one pad (gate.h skip_pad)
        const unsigned blocks = (unsigned)std::min<std::size_t>(1024, (s.out_bytes + 255) / 256);
        poison_kernel<<<blocks ? blocks : 1, 256, 0, s.stream>>>(reinterpret_cast<unsigned char*>(st.out), s.out_bytes);
        GB_CUDA_CHECK(cudaGetLastError());
        s.gate->skip_pad();
      } else {
        GB_CUDA_CHECK(cudaMemsetAsync(st.out, 0xFF, s.out_bytes, s.stream));
      }
      s.last_set = set;
    }
    if (cold) GB_CUDA_CHECK(s.scrub.run(scrub_mode, i, s.stream));
    s.gate->hold(reinterpret_cast<std::uintptr_t>(s.stream));
    GB_CUDA_CHECK(cudaEventRecord(s.e0, s.stream));
    try {
      s.run(w, st);
    } catch (...) {
      s.gate->release();
      cudaStreamSynchronize(s.stream);
      throw;
    }
    GB_CUDA_CHECK(cudaEventRecord(s.e1, s.stream));
    s.gate->release();
    GB_CUDA_CHECK(cudaEventSynchronize(s.e1));
    if (!w.empty) ++s.round;  // the empty kernel reads no set: the rows' rotation carries on
    if (s.gate->timed_out()) {  // the host took longer than the gate's timeout to queue: invalid
      if (++s.invalid > max_invalid)
        throw std::runtime_error("the gate timed out " + std::to_string(s.invalid) +
                                 " times: the host could not queue one run within its timeout");
      continue;
    }
    float ms = 0.f;
    GB_CUDA_CHECK(cudaEventElapsedTime(&ms, s.e0, s.e1));
    if (timed) out.push_back(ms * 1e-3);
    ++i;
  }
  return out;
}

void Case::last_output(void* host) {
  auto& s = *impl_;
  if (s.last_set < 0) throw std::logic_error("last_output() before any timed run: call time() first");
  GB_CUDA_CHECK(cudaMemcpyAsync(host, s.sets[s.last_set].out, s.out_bytes, cudaMemcpyDeviceToHost, s.stream));
  GB_CUDA_CHECK(cudaStreamSynchronize(s.stream));
}

std::string cublas_load(const std::vector<std::string>& candidates) {
  std::string why;
  return cublas::load(candidates, &why);
}

std::string cublas_error() { return cublas::load_error(); }

}  // namespace gb::cuda::blas
