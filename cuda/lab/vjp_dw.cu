/*
VJP dW = v x^T (v of length m, x of length k, dW row-major m x k): the weight cotangent of
y = W x, a write-bound outer product. The target is the copy bandwidth; vendor: cuBLAS GemmEx
with inner dimension 1 (which is far from it: 30-67% of the copy rate on an H200).

Build (or: cmake -S . -B build-lab -DGAPBENCH_LAB=ON && cmake --build build-lab):
  nvcc -O3 -std=c++20 -arch=sm_90a cuda/lab/vjp_dw.cu -o vjp_dw -ldl

version 1, vjp_dw_reference: one thread per element (2-D grid: columns x rows).
version 2, dw_pack16 (parent 1): one 16-byte pack of a row per thread, grid-stride over all packs
  (an index division per pack).
version 3, vjp_dw_2d_stream (parent 2): a thread owns one 16-byte pack of columns, loads x once
  and walks rows (2-D grid, no division), streaming stores (st.global.cs: dW is written once and
  not read back here, so it should not evict L2). The library ships this one.

Sweep: ./vjp_dw [--variants all|1,2,3] [--dtypes fp16,bf16,fp32] [--shapes MxK,...] [--rounds N]
                [--cold read|write|none] [--json FILE] [--cublas PATH]
*/
#include "common.h"
#include "ops/vjp_dw.cuh"  // the library's kernels of the op (reference and shipped)

// The library's kernels this file runs (cuda/ops/vjp_dw.cuh), by their strategy names.
using gb::blas::launch_vjp_dw_2d_stream;
using gb::blas::launch_vjp_dw_reference;

using namespace lab;

// ----------------------------------------------------------------------------
// CPU reference: dW[i,j] = v[i] x[j] in float64 on the inputs as rounded to the dtype (compared
// element by element as the output is read back, so no m x k reference is stored).

// ----------------------------------------------------------------------------
// GPU kernels

// version 1

// version 2
template <class T>
__global__ void vjp_dw_pack(const T* __restrict__ v, const T* __restrict__ x, T* __restrict__ dW, long long m,
                            long long k) {
  constexpr int N = Pack<T>::N;
  long long packs_per_row = k / N, total = m * packs_per_row;
  for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < total;
       p += (long long)gridDim.x * blockDim.x) {
    long long i = p / packs_per_row, jp = p - i * packs_per_row;
    float vi = to_f(v[i]);
    Pack<T> xs = reinterpret_cast<const Pack<T>*>(x)[jp], out;
#pragma unroll
    for (int e = 0; e < N; ++e) out.v[e] = from_f<T>(vi * to_f(xs.v[e]));
    reinterpret_cast<Pack<T>*>(dW)[p] = out;
  }
}

// version 3: thread = one 16-byte pack of columns, loaded from x once and reused down the rows
// it visits (grid-y strides over rows): no index division, and streaming stores (st.global.cs)
// because dW is written once and never read back here, so it should not evict L2.

// ----------------------------------------------------------------------------
// launchers

static void dw1(int dt, const void* v, const void* x, void* dW, long long m, long long k, cudaStream_t s) {
  dispatch_dtype(dt, [&]<class T>() {
    launch_vjp_dw_reference<T>(static_cast<const T*>(v), static_cast<const T*>(x), static_cast<T*>(dW), m, k, s);
  });
}

static void dw2(int dt, const void* v, const void* x, void* dW, long long m, long long k, cudaStream_t s) {
  dispatch_dtype(dt, [&]<class T>() {
    auto vv = static_cast<const T*>(v);
    auto xv = static_cast<const T*>(x);
    auto out = static_cast<T*>(dW);
    if (k % Pack<T>::N == 0) {
      long long total = m * (k / Pack<T>::N);
      long long grid = (total + 255) / 256;
      vjp_dw_pack<T><<<(unsigned)(grid < 65535LL * 32 ? grid : 65535LL * 32), 256, 0, s>>>(vv, xv, out, m, k);
    } else {  // a row length no pack divides
      launch_vjp_dw_reference<T>(vv, xv, out, m, k, s);
    }
  });
}

static void dw3(int dt, const void* v, const void* x, void* dW, long long m, long long k, cudaStream_t s) {
  dispatch_dtype(dt, [&]<class T>() {
    launch_vjp_dw_2d_stream<T>(static_cast<const T*>(v), static_cast<const T*>(x), static_cast<T*>(dW), m, k, s);
  });
}

// ----------------------------------------------------------------------------
// the lab's case

static const OpInfo kInfo = {
    "vjp_dw", "MxK", 2, "16384x16384,4096x16384,16384x4096",
    {{1, "vjp_dw_reference", "-", "one thread per element"},
     {2, "dw_pack16", "1", "16-byte packs, grid-stride (index division per pack)"},
     {3, "vjp_dw_2d_stream", "2", "x pack loaded once, walks rows, streaming stores; shipped"}},
    "cublas", [](const std::vector<long long>& d) -> const char* {
      return d[0] > 65535LL * 1024 ? "m too large for variant 1's grid (rows in gridDim.y)" : nullptr;
    }};

static Case make_case(int dt, const std::vector<long long>& dims, Context& ctx, const std::vector<int>& variants) {
  const long long m = dims[0], k = dims[1];
  auto v_h = std::make_shared<std::vector<unsigned char>>(random_input(m, dt, 2));
  auto x_h = std::make_shared<std::vector<unsigned char>>(random_input(k, dt, 3));
  void* v = to_device(*v_h);
  void* x = to_device(*x_h);
  void* dW = nullptr;
  cudaCheck(cudaMalloc(&dW, m * k * dtype_size(dt)));
  Case c;
  c.out = dW;
  c.out_bytes = m * k * dtype_size(dt);
  c.bytes = (double)(m * k + m + k) * dtype_size(dt);
  c.flops = (double)m * k;
  c.check = [v_h, x_h, dt, m, k](const std::vector<unsigned char>& out) {
    std::vector<double> xs(k);
    for (long long j = 0; j < k; ++j) xs[j] = host_value(x_h->data(), j, dt);
    ErrAcc e;
    for (long long i = 0; i < m; ++i) {
      double vi = host_value(v_h->data(), i, dt);
      for (long long j = 0; j < k; ++j) e.add(host_value(out.data(), i * k + j, dt), vi * xs[j]);
    }
    return e.done();
  };
  const int M = (int)m, K = (int)k;
  Cublas* b = &ctx.blas;
  c.arms.push_back(vendor_arm(ctx, [=](cudaStream_t) {
    const float one = 1.f, zero = 0.f;
    cudaDataType t = cuda_type(dt);
    // dW (row-major m x k) = column-major (k x m) = x (k x 1) * v^T (1 x m)
    cublas_check(b->gemm_ex(b->handle, Cublas::kOpN, Cublas::kOpT, K, M, 1, &one, x, t, K, v, t, M, &zero, dW, t, K,
                            Cublas::kCompute32F, Cublas::kGemmDefault), "cublasGemmEx");
  }));
  for (int var : variants) {
    Arm a;
    a.id = var;
    a.name = find_variant(kInfo, var)->name;
    if (var == 1) a.run = [=](cudaStream_t s) { dw1(dt, v, x, dW, m, k, s); };
    if (var == 2) a.run = [=](cudaStream_t s) { dw2(dt, v, x, dW, m, k, s); };
    if (var == 3) a.run = [=](cudaStream_t s) { dw3(dt, v, x, dW, m, k, s); };
    c.arms.push_back(a);
  }
  c.release = [=] {
    cudaFree(v);
    cudaFree(x);
    cudaFree(dW);
  };
  return c;
}

int main(int argc, char** argv) { return run_main(argc, argv, kInfo, make_case); }
