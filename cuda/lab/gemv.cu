/*
GEMV, y = A x (A row-major m x k), fp32/fp16/bf16 with fp32 accumulation. Memory-bound at every
useful size (each element of A is read once): the target is the copy bandwidth. Vendor: cuBLAS
(sgemv for fp32, GemmEx with n = 1 for fp16/bf16).

Build (or: cmake -S . -B build-lab -DGAPBENCH_LAB=ON && cmake --build build-lab):
  nvcc -O3 -std=c++20 -arch=sm_90a cuda/lab/gemv.cu -o gemv -ldl

version 1, gemv_reference: one thread per row; the threads of a warp read 32 different rows
  (uncoalesced): the baseline.
version 2, gemv_warp_rows (parent 1): one warp per row, 16-byte packs, 4 packs in flight per lane
  before any arithmetic (enough outstanding loads to cover HBM latency), shuffle reduction.
  Shipped for fp16/bf16 and where variant 4 does not apply.
version 3, gemv_split_k (parent 2): a warp per (row, k-slice), 8 packs in flight; when m alone
  cannot fill the GPU the row is cut into slices whose fp32 partials a second kernel adds.
version 4, gemv_x_stationary (parent 2): a block owns a k-range and a run of rows; each warp keeps
  its part of x in registers for all those rows (x read once per block, not once per row); the
  k-slices of a row meet by fp32 atomics in L2 and the last slice's block writes y (one launch).
  Shipped for fp32.

Sweep: ./gemv [--variants all|1,2,..] [--dtypes fp16,bf16,fp32] [--shapes MxK,...] [--rounds N]
              [--cold read|write|none] [--json FILE] [--cublas PATH]
*/
#include "common.h"
#include "ops/gemv.cuh"  // the library's kernels of the op (reference and shipped)

// The library's kernels this file runs (cuda/ops/gemv.cuh), through its launchers.
using gb::blas::gemv_work_floats;
using gb::blas::launch_gemv_reference;
using gb::blas::launch_gemv_split_k;
using gb::blas::launch_gemv_warp_rows;
using gb::blas::launch_gemv_x_stationary;

using namespace lab;

// ----------------------------------------------------------------------------
// CPU reference: y[i] = sum_j A[i,j] x[j] in float64 on the inputs as rounded to the dtype.

static std::vector<double> gemv_cpu(const void* A, const void* x, long long m, long long k, int dt) {
  std::vector<double> xs(k), y(m, 0.0);
  for (long long j = 0; j < k; ++j) xs[j] = host_value(x, j, dt);
  for (long long i = 0; i < m; ++i) {
    double acc = 0;
    for (long long j = 0; j < k; ++j) acc += host_value(A, i * k + j, dt) * xs[j];
    y[i] = acc;
  }
  return y;
}

// ----------------------------------------------------------------------------
// launchers: every variant here ships (or is the reference), so each runs through the library's own
// host launcher (cuda/ops/gemv.cuh); `work` is zeroed once when allocated and variant 4 clears its part.

static void gemv1(int dt, const void* A, const void* x, void* y, long long m, long long k, cudaStream_t s) {
  dispatch_dtype(dt, [&]<class T>() {
    launch_gemv_reference<T>(static_cast<const T*>(A), static_cast<const T*>(x), static_cast<T*>(y), m, k, s);
  });
}

static void gemv2(int dt, const void* A, const void* x, void* y, long long m, long long k, cudaStream_t s) {
  dispatch_dtype(dt, [&]<class T>() {
    launch_gemv_warp_rows<T>(static_cast<const T*>(A), static_cast<const T*>(x), static_cast<T*>(y), m, k, s);
  });
}

static void gemv3(int dt, const void* A, const void* x, void* y, long long m, long long k, float* work, int sms,
                  cudaStream_t s) {
  dispatch_dtype(dt, [&]<class T>() {
    launch_gemv_split_k<T>(static_cast<const T*>(A), static_cast<const T*>(x), static_cast<T*>(y), m, k, work, sms, s);
  });
}

static void gemv4(int dt, const void* A, const void* x, void* y, long long m, long long k, float* work, int sms,
                  cudaStream_t s) {
  dispatch_dtype(dt, [&]<class T>() {
    launch_gemv_x_stationary<T>(static_cast<const T*>(A), static_cast<const T*>(x), static_cast<T*>(y), m, k, work,
                                sms, s);
  });
}

// ----------------------------------------------------------------------------
// the lab's case

static const OpInfo kInfo = {
    "gemv", "MxK", 2, "4096x4096,16384x16384,1024x16384,16384x1024,4096x16384",
    {{1, "gemv_reference", "-", "one thread per row (uncoalesced baseline)"},
     {2, "gemv_warp_rows", "1", "warp per row, 16-byte packs, 4 in flight per lane; shipped (fp16/bf16)"},
     {3, "gemv_split_k", "2", "warp per (row, k-slice), 8 packs in flight, fp32 partials + reduce kernel"},
     {4, "gemv_x_stationary", "2", "x in registers for a run of rows, k-slices added atomically; shipped (fp32)"}},
    "cublas", nullptr};

static Case make_case(int dt, const std::vector<long long>& dims, Context& ctx, const std::vector<int>& variants) {
  const long long m = dims[0], k = dims[1];
  const int sms = ctx.dev.sms;
  auto A_h = std::make_shared<std::vector<unsigned char>>(random_input(m * k, dt, 1));
  auto x_h = random_input(k, dt, 2);
  auto ref = std::make_shared<std::vector<double>>(gemv_cpu(A_h->data(), x_h.data(), m, k, dt));
  void* A = to_device(*A_h);
  void* x = to_device(x_h);
  A_h.reset();  // the reference holds all the check needs
  void* y = nullptr;
  float* work = nullptr;
  cudaCheck(cudaMalloc(&y, m * dtype_size(dt)));
  const size_t wbytes = sizeof(float) * gemv_work_floats(m, k, sms);
  cudaCheck(cudaMalloc(&work, wbytes));
  cudaCheck(cudaMemset(work, 0, wbytes));
  Case c;
  c.out = y;
  c.out_bytes = m * dtype_size(dt);
  c.bytes = (double)(m * k + k + m) * dtype_size(dt);
  c.flops = 2.0 * m * k;
  c.check = [ref, dt](const std::vector<unsigned char>& out) {
    ErrAcc e;
    for (size_t i = 0; i < ref->size(); ++i) e.add(host_value(out.data(), i, dt), (*ref)[i]);
    return e.done();
  };
  const int M = (int)m, K = (int)k;
  Cublas* b = &ctx.blas;
  c.arms.push_back(vendor_arm(ctx, [=](cudaStream_t) {
    const float one = 1.f, zero = 0.f;
    cudaDataType t = cuda_type(dt);
    if (dt == kF32)  // y = A x: column-major A^T (k x m), op T
      cublas_check(b->sgemv(b->handle, Cublas::kOpT, K, M, &one, (const float*)A, K, (const float*)x, 1, &zero,
                            (float*)y, 1), "cublasSgemv");
    else
      cublas_check(b->gemm_ex(b->handle, Cublas::kOpT, Cublas::kOpN, M, 1, K, &one, A, t, K, x, t, K, &zero, y, t, M,
                              Cublas::kCompute32F, Cublas::kGemmDefault), "cublasGemmEx");
  }));
  for (int v : variants) {
    Arm a;
    a.id = v;
    a.name = find_variant(kInfo, v)->name;
    if (v == 1) a.run = [=](cudaStream_t s) { gemv1(dt, A, x, y, m, k, s); };
    if (v == 2) a.run = [=](cudaStream_t s) { gemv2(dt, A, x, y, m, k, s); };
    if (v == 3) a.run = [=](cudaStream_t s) { gemv3(dt, A, x, y, m, k, work, sms, s); };
    if (v == 4) {
      if (k % 8) a.na = "needs k a multiple of 8 (whole 16-byte packs for every dtype)";
      a.run = [=](cudaStream_t s) { gemv4(dt, A, x, y, m, k, work, sms, s); };
    }
    c.arms.push_back(a);
  }
  c.release = [=] {
    cudaFree(A);
    cudaFree(x);
    cudaFree(y);
    cudaFree(work);
  };
  return c;
}

int main(int argc, char** argv) { return run_main(argc, argv, kInfo, make_case); }
