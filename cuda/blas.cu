// Case: see blas.h. Holds the buffers and dispatches op x variant.
#include "blas.h"
#include "blas_kernels.h"
#include "cublas_loader.h"
#include "cuda_check.h"
#include "dtype.cuh"
#include "l2_scrub.cuh"
#include "spin.cuh"

#include <stdexcept>
#include <string>

namespace gb::cuda::blas {

using gb::blas::dtype_size;

static cudaDataType cuda_type(int dt) {
  switch (dt) {
    case gb::blas::kF32: return CUDA_R_32F;
    case gb::blas::kF16: return CUDA_R_16F;
    default: return CUDA_R_16BF;
  }
}

static void check_cublas(int status, const char* what) {
  if (status != 0) throw std::runtime_error(std::string(what) + " failed with cublasStatus " + std::to_string(status));
}

struct Set {
  std::vector<void*> in;
  void* out = nullptr;
};

struct Case::Impl {
  int op, dt, device, sms = 1;
  long long batch, m, n, k;
  std::vector<std::size_t> in_bytes;
  std::size_t out_bytes = 0;
  std::vector<Set> sets;
  float* work = nullptr;  // split-k / row-slice partial sums (gemv, vjp_dx)
  gb::cache::L2Scrub scrub;  // cold-cache modes: evicts L2 before each run (l2_scrub.cuh)
  cudaStream_t stream = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  cublas::Handle handle = nullptr;

  void run(int variant, const Set& s) {
    const void* a = s.in.size() > 0 ? s.in[0] : nullptr;
    const void* b = s.in.size() > 1 ? s.in[1] : nullptr;
    bool ok = false;
    if (variant == 0 || variant == 100) {
      ok = run_vendor(variant, a, b, s.out);
    } else {
      switch (op) {
        case kCopy: ok = gb::blas::launch_copy(variant, dt, a, s.out, n, stream); break;
        case kGemv: ok = gb::blas::launch_gemv(variant, dt, a, b, s.out, m, k, stream, work, sms); break;
        case kVjpDx: ok = gb::blas::launch_vjp_dx(variant, dt, a, b, s.out, work, m, k, sms, stream); break;
        case kVjpDw: ok = gb::blas::launch_vjp_dw(variant, dt, a, b, s.out, m, k, stream); break;
        case kGemm: ok = gb::blas::launch_gemm(variant, dt, a, b, s.out, batch, m, n, k, stream); break;
      }
    }
    if (!ok) throw std::invalid_argument("no variant " + std::to_string(variant) + " for this op/dtype");
    GB_CUDA_CHECK_LAUNCH();
  }

  bool run_vendor(int variant, const void* a, const void* b, void* out) {
    if (op == kCopy) {
      if (variant != 0) return false;
      GB_CUDA_CHECK(cudaMemcpyAsync(out, a, out_bytes, cudaMemcpyDeviceToDevice, stream));
      return true;
    }
    const auto& api = cublas::api();
    if (!handle) {
      check_cublas(api.create(&handle), "cublasCreate");
      check_cublas(api.set_stream(handle, stream), "cublasSetStream");
    }
    if (variant == 100 && !(op == kGemm && dt == gb::blas::kF32)) return false;
    int compute = variant == 100 ? cublas::kCompute32FFastTF32 : cublas::kCompute32F;
    const float one = 1.f, zero = 0.f;
    cudaDataType t = cuda_type(dt);
    int M = (int)m, N = (int)n, K = (int)k;
    // cuBLAS is column-major: a row-major R x C matrix is its column-major C x R transpose.
    switch (op) {
      case kGemv:  // y = A x: column-major A^T (k x m), op T
        if (dt == gb::blas::kF32)
          check_cublas(api.sgemv(handle, cublas::kOpT, K, M, &one, (const float*)a, K, (const float*)b, 1, &zero,
                                 (float*)out, 1), "cublasSgemv");
        else
          check_cublas(api.gemm_ex(handle, cublas::kOpT, cublas::kOpN, M, 1, K, &one, a, t, K, b, t, K, &zero, out,
                                   t, M, compute, cublas::kGemmDefault), "cublasGemmEx(gemv)");
        return true;
      case kVjpDx:  // dx = W^T v: column-major W^T (k x m) times v, op N
        if (dt == gb::blas::kF32)
          check_cublas(api.sgemv(handle, cublas::kOpN, K, M, &one, (const float*)a, K, (const float*)b, 1, &zero,
                                 (float*)out, 1), "cublasSgemv");
        else
          check_cublas(api.gemm_ex(handle, cublas::kOpN, cublas::kOpN, K, 1, M, &one, a, t, K, b, t, M, &zero, out,
                                   t, K, compute, cublas::kGemmDefault), "cublasGemmEx(vjp_dx)");
        return true;
      case kVjpDw:  // dW (row-major m x k) = column-major (k x m) = x (k x 1) * v^T (1 x m)
        check_cublas(api.gemm_ex(handle, cublas::kOpN, cublas::kOpT, K, M, 1, &one, b, t, K, a, t, M, &zero, out, t,
                                 K, compute, cublas::kGemmDefault), "cublasGemmEx(vjp_dw)");
        return true;
      case kGemm:  // C = A B row-major  <=>  C^T = B^T A^T column-major
        check_cublas(api.gemm_strided_batched_ex(handle, cublas::kOpN, cublas::kOpN, N, M, K, &one, b, t, N,
                                                 (long long)K * N, a, t, K, (long long)M * K, &zero, out, t, N,
                                                 (long long)M * N, (int)batch, compute, cublas::kGemmDefault),
                     "cublasGemmStridedBatchedEx");
        return true;
    }
    return false;
  }
};

Case::Case(int op, int dtype, long long batch, long long m, long long n, long long k, int device) : impl_(new Impl) {
  auto& s = *impl_;
  if (op < kCopy || op > kGemm) throw std::invalid_argument("unknown op " + std::to_string(op));
  if (dtype < gb::blas::kF32 || dtype > gb::blas::kBF16) throw std::invalid_argument("unknown dtype");
  s.op = op;
  s.dt = dtype;
  s.device = device;
  s.batch = batch;
  s.m = m;
  s.n = n;
  s.k = k;
  gb::blas_ops::Io io = gb::blas_ops::io_bytes(op, dtype_size(dtype), batch, m, n, k);
  s.in_bytes = io.in;
  s.out_bytes = io.out;
  GB_CUDA_CHECK(cudaSetDevice(device));
  GB_CUDA_CHECK(cudaDeviceGetAttribute(&s.sms, cudaDevAttrMultiProcessorCount, device));
  int l2 = 0;
  GB_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  GB_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  GB_CUDA_CHECK(cudaEventCreate(&s.e0));
  GB_CUDA_CHECK(cudaEventCreate(&s.e1));
  std::size_t set_bytes = s.out_bytes;
  for (auto b : s.in_bytes) set_bytes += b;
  // Enough sets that one pass over all of them is 3x the L2: a rotated input was evicted.
  long long want = (3LL * l2 + (long long)set_bytes - 1) / (long long)set_bytes;
  int nsets = (int)(want < 1 ? 1 : (want > 16 ? 16 : want));
  for (int i = 0; i < nsets; ++i) {
    Set st;
    for (auto b : s.in_bytes) {
      void* p = nullptr;
      GB_CUDA_CHECK(cudaMalloc(&p, b));
      st.in.push_back(p);
    }
    GB_CUDA_CHECK(cudaMalloc(&st.out, s.out_bytes));
    s.sets.push_back(st);
  }
  if (op == kVjpDx) {
    std::size_t bytes = sizeof(float) * gb::blas::vjp_dx_work_floats(m, k, s.sms);
    GB_CUDA_CHECK(cudaMalloc(&s.work, bytes));
    GB_CUDA_CHECK(cudaMemset(s.work, 0, bytes));  // vjp_dx v5's counters start at zero, reset themselves
  }
  if (op == kGemv) {
    std::size_t bytes = sizeof(float) * gb::blas::gemv_work_floats(m, k, s.sms);
    GB_CUDA_CHECK(cudaMalloc(&s.work, bytes));
    GB_CUDA_CHECK(cudaMemset(s.work, 0, bytes));  // variant 4's accumulator and counters start at zero
  }
  GB_CUDA_CHECK(s.scrub.alloc(device));
}

Case::~Case() {
  if (!impl_) return;
  auto& s = *impl_;
  if (s.stream) cudaStreamSynchronize(s.stream);
  if (s.handle && cublas::loaded()) cublas::api().destroy(s.handle);
  for (auto& st : s.sets) {
    for (auto p : st.in) cudaFree(p);
    cudaFree(st.out);
  }
  cudaFree(s.work);
  s.scrub.release();
  if (s.e0) cudaEventDestroy(s.e0);
  if (s.e1) cudaEventDestroy(s.e1);
  if (s.stream) cudaStreamDestroy(s.stream);
}

int Case::n_inputs() const { return (int)impl_->in_bytes.size(); }
std::size_t Case::input_bytes(int i) const { return impl_->in_bytes.at(i); }
std::size_t Case::output_bytes() const { return impl_->out_bytes; }
int Case::rotations() const { return (int)impl_->sets.size(); }

void Case::set_input(int i, const void* data, std::size_t bytes) {
  auto& s = *impl_;
  if (i < 0 || i >= n_inputs()) throw std::out_of_range("input index");
  if (bytes != s.in_bytes[i])
    throw std::invalid_argument("input " + std::to_string(i) + ": expected " + std::to_string(s.in_bytes[i]) +
                                " bytes, got " + std::to_string(bytes));
  for (auto& st : s.sets) GB_CUDA_CHECK(cudaMemcpy(st.in[i], data, bytes, cudaMemcpyHostToDevice));
}

std::vector<std::uint8_t> Case::run_once(int variant) {
  auto& s = *impl_;
  Set& st = s.sets[0];
  GB_CUDA_CHECK(cudaMemsetAsync(st.out, 0xFF, s.out_bytes, s.stream));
  s.run(variant, st);
  std::vector<std::uint8_t> host(s.out_bytes);
  GB_CUDA_CHECK(cudaMemcpyAsync(host.data(), st.out, s.out_bytes, cudaMemcpyDeviceToHost, s.stream));
  GB_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  return host;
}

std::vector<double> Case::time(int variant, int samples, int warmup, int cache) {
  auto& s = *impl_;
  if (cache != gb::cache::kHot && cache != gb::cache::kColdClean && cache != gb::cache::kColdDirty)
    throw std::invalid_argument("cache mode " + std::to_string(cache) + ": want 0 (hot), 1 (cold, read scrub) or 2 (cold, memset scrub)");
  const bool cold = cache != gb::cache::kHot;
  std::vector<double> out;
  out.reserve(samples);
  int khz = 0;
  GB_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, s.device));
  long long hold = (long long)(khz / 1000) * 50;  // ~50 us of SM clocks
  for (int i = 0; i < warmup + samples; ++i) {
    const Set& st = s.sets[cold ? 0 : i % s.sets.size()];
    // Keep the device busy while the host queues start event, run and stop event: otherwise, on
    // an idle GPU, the host's submission gap after the start event is timed as if it were the
    // kernel (several us, which dominates small ops). The L2 scrub does this in cold modes.
    if (cold)
      GB_CUDA_CHECK(s.scrub.run(cache, i, s.stream));
    else
      gb::launch::spin_kernel<<<1, 1, 0, s.stream>>>(hold);
    GB_CUDA_CHECK(cudaEventRecord(s.e0, s.stream));
    s.run(variant, st);
    GB_CUDA_CHECK(cudaEventRecord(s.e1, s.stream));
    GB_CUDA_CHECK(cudaEventSynchronize(s.e1));
    float ms = 0.f;
    GB_CUDA_CHECK(cudaEventElapsedTime(&ms, s.e0, s.e1));
    if (i >= warmup) out.push_back(ms * 1e-3);
  }
  return out;
}

std::string cublas_load(const std::vector<std::string>& candidates) {
  std::string why;
  return cublas::load(candidates, &why);
}

std::string cublas_error() { return cublas::load_error(); }

}  // namespace gb::cuda::blas
