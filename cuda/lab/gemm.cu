/*
Batched GEMM, C[b] = A[b] B[b] (row-major; A m x k, B k x n), fp32 accumulation. Compute-bound
at the paper's size (8 x 2000^3): the target is the vendor GEMM's FLOP rate. Vendor: cuBLAS
GemmStridedBatchedEx (fp32 compute; no TF32).

Build (or: cmake -S . -B build-lab -DGAPBENCH_LAB=ON && cmake --build build-lab):
  nvcc -O3 -std=c++20 -arch=sm_90a cuda/lab/gemm.cu -o gemm -ldl

version 1, gemm_reference: one thread per output element, operands straight from global memory.
version 2, gemm_smem_tiles (parent 1): 32x32 tiles staged in shared memory.
version 3, gemm_reg_tiles (parent 2): 128x128 block tiles, 8x8 register tile per thread (SIMT fp32).
version 4, gemm_wmma (parent 3, fp16/bf16, sm_80+): tensor cores through WMMA fragments,
  single-buffered.
version 5, gemm_simt_tiles (parent 3): variant 3 double-buffered, conflict-free 16-byte shared
  reads. The library ships it for fp32.
version 6, gemm_mma_async (parent 4, fp16/bf16, sm_80+): mma.sync + ldmatrix with a 4-stage
  cp.async ring. Shipped for fp16/bf16 off Hopper.
version 7, gemm_wgmma_tma128 (parent 6, fp16/bf16, sm_90a): TMA + wgmma, producer warpgroup and
  an mbarrier ring, 128x128 tiles.
version 8, gemm_wgmma_tma256 (parent 7): 128x256 tiles. Shipped (7-8 family) for fp16/bf16 on
  sm_90.

Verification: a float64 reference of every output element when b*m*n*k <= 2^31, else of 8192
sampled elements (the corners of every matrix among them): the CPU cannot do 8 x 4096^3 in time.

Sweep: ./gemm [--variants all|1,2,..] [--dtypes fp16,bf16,fp32] [--shapes BxMxNxK,...] [--rounds N]
              [--cold read|write|none] [--json FILE] [--cublas PATH]
*/
#include <cudaTypedefs.h>
#include <mma.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include "common.h"
#include "ops/gemm.cuh"  // the library's kernels of the op (reference and shipped)

// The library's kernels this file runs (cuda/ops/gemm.cuh), by their strategy names.
using gb::blas::gemm_reference;
using gb::blas::launch_gemm_mma_async;
using gb::blas::launch_gemm_simt_tiles;
using gb::blas::launch_gemm_wgmma_tma;
#include "ptx.cuh"

using namespace lab;

// ----------------------------------------------------------------------------
// CPU reference: C[b,i,j] = sum_p A[b,i,p] B[b,p,j] in float64 for the chosen elements.

struct GemmRef {
  std::vector<long long> idx;  // flat indices into C
  std::vector<double> val;
};

static GemmRef gemm_cpu(const void* A, const void* B, long long batch, long long m, long long n, long long k, int dt) {
  GemmRef r;
  const long long total = batch * m * n;
  if ((double)batch * m * n * k <= 2147483648.0) {
    for (long long i = 0; i < total; ++i) r.idx.push_back(i);
  } else {
    std::mt19937_64 rng(12345);
    for (long long b = 0; b < batch; ++b)
      for (long long i : {0LL, m - 1})
        for (long long j : {0LL, n - 1}) r.idx.push_back(b * m * n + i * n + j);
    while ((long long)r.idx.size() < 8192 && (long long)r.idx.size() < total) r.idx.push_back((long long)(rng() % total));
  }
  r.val.resize(r.idx.size());
  for (size_t t = 0; t < r.idx.size(); ++t) {
    long long b = r.idx[t] / (m * n), i = (r.idx[t] / n) % m, j = r.idx[t] % n;
    double acc = 0;
    for (long long p = 0; p < k; ++p)
      acc += host_value(A, b * m * k + i * k + p, dt) * host_value(B, b * k * n + p * n + j, dt);
    r.val[t] = acc;
  }
  return r;
}

// ----------------------------------------------------------------------------
// GPU kernels

// version 1

// version 2: 32x32 tiles staged in shared memory
template <class T, int TILE>
__global__ void gemm_smem(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, long long m,
                          long long n, long long k) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];  // +1: no bank conflicts on the column reads
  long long b = blockIdx.z;
  long long row = blockIdx.y * (long long)TILE + threadIdx.y;
  long long col = blockIdx.x * (long long)TILE + threadIdx.x;
  const T* a = A + b * m * k;
  const T* bb = B + b * k * n;
  float acc = 0.f;
  for (long long t = 0; t < k; t += TILE) {
    As[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? to_f(a[row * k + t + threadIdx.x]) : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (t + threadIdx.y < k && col < n) ? to_f(bb[(t + threadIdx.y) * n + col]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int p = 0; p < TILE; ++p) acc += As[threadIdx.y][p] * Bs[p][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) C[b * m * n + row * n + col] = from_f<T>(acc);
}

// version 3: each block computes a 128x128 tile of C with 256 threads, each thread an 8x8
// sub-tile held in registers: per k-step a thread reads 8 A and 8 B values from shared memory
// and does 64 FMAs, so shared-memory traffic per FMA falls 8x against variant 2. A is stored
// transposed in shared memory so both operand reads are contiguous. Bounds-checked loads and
// stores: any m, n, k (the paper's 2000 is not a multiple of 128).
template <class T>
__global__ void __launch_bounds__(256) gemm_reg(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                                                long long m, long long n, long long k) {
  constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
  __shared__ __align__(16) float As[BK][BM];
  __shared__ __align__(16) float Bs[BK][BN];
  long long bz = blockIdx.z;
  const T* a = A + bz * m * k;
  const T* b = B + bz * k * n;
  T* c = C + bz * m * n;
  long long row0 = blockIdx.y * (long long)BM, col0 = blockIdx.x * (long long)BN;
  int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  int ar = tid / 2, ac = (tid % 2) * 4;   // A tile 128 x 8: 4 consecutive k of one row
  int br = tid / 32, bc = (tid % 32) * 4; // B tile 8 x 128: 4 consecutive columns of one row
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  for (long long t0 = 0; t0 < k; t0 += BK) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      long long gr = row0 + ar, gk = t0 + ac + q;
      As[ac + q][ar] = (gr < m && gk < k) ? to_f(a[gr * k + gk]) : 0.f;
      long long hk = t0 + br, hc = col0 + bc + q;
      Bs[br][bc + q] = (hk < k && hc < n) ? to_f(b[hk * n + hc]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float ra[TM], rb[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) ra[i] = As[kk][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) rb[j] = Bs[kk][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    long long r = row0 + ty * TM + i;
    if (r >= m) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      long long col = col0 + tx * TN + j;
      if (col < n) c[r * n + col] = from_f<T>(acc[i][j]);
    }
  }
}

// version 4 (fp16/bf16): tensor cores through WMMA. 128x128 block tile, 8 warps each owning a
// 64x32 slab (4x2 fragments of 16x16x16, fp32 accumulators), K staged 32 at a time in padded
// shared memory (+8 elements per row: no bank conflicts on fragment loads), 16-byte global loads
// where aligned. Single-buffered: the next steps are cp.async pipelining and Hopper wgmma.
template <class T>
__global__ void __launch_bounds__(256) gemm_wmma(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                                                 long long m, long long n, long long k) {
#if __CUDA_ARCH__ >= 800
  using namespace nvcuda;
  constexpr int BM = 128, BN = 128, BK = 32, PAD = 8, N = Pack<T>::N;
  __shared__ __align__(32) T As[BM][BK + PAD];
  __shared__ __align__(32) T Bs[BK][BN + PAD];
  __shared__ __align__(32) float Cs[8][16][16];
  long long bz = blockIdx.z;
  const T* a = A + bz * m * k;
  const T* b = B + bz * k * n;
  T* c = C + bz * m * n;
  long long row0 = blockIdx.y * (long long)BM, col0 = blockIdx.x * (long long)BN;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int wr = warp / 4, wc = warp % 4;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  const T zero = from_f<T>(0.f);
  bool a_vec = k % N == 0, b_vec = n % N == 0;
  for (long long t0 = 0; t0 < k; t0 += BK) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      int p = threadIdx.x + q * 256;
      int r = p / (BK / N), cc = (p % (BK / N)) * N;  // A: 128 rows x 4 packs
      long long gr = row0 + r, gk = t0 + cc;
      if (a_vec && gr < m && gk + N <= k) {
        *reinterpret_cast<Pack<T>*>(&As[r][cc]) = *reinterpret_cast<const Pack<T>*>(a + gr * k + gk);
      } else {
#pragma unroll
        for (int e = 0; e < N; ++e) As[r][cc + e] = (gr < m && gk + e < k) ? a[gr * k + gk + e] : zero;
      }
      int rb = p / (BN / N), cb = (p % (BN / N)) * N;  // B: 32 rows x 16 packs
      long long hk = t0 + rb, hc = col0 + cb;
      if (b_vec && hk < k && hc + N <= n) {
        *reinterpret_cast<Pack<T>*>(&Bs[rb][cb]) = *reinterpret_cast<const Pack<T>*>(b + hk * n + hc);
      } else {
#pragma unroll
        for (int e = 0; e < N; ++e) Bs[rb][cb + e] = (hk < k && hc + e < n) ? b[hk * n + hc + e] : zero;
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(fa[i], &As[wr * 64 + i * 16][kk], BK + PAD);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &Bs[kk][wc * 32 + j * 16], BN + PAD);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
  // Epilogue through a per-warp 16x16 fp32 staging tile: bounds-checked, converted to T.
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(&Cs[warp][0][0], acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        int idx = lane * 8 + e, r = idx / 16, cc = idx % 16;
        long long gr = row0 + wr * 64 + i * 16 + r, gc = col0 + wc * 32 + j * 16 + cc;
        if (gr < m && gc < n) c[gr * n + gc] = from_f<T>(Cs[warp][r][cc]);
      }
      __syncwarp();
    }
#endif
}

// version 5: variant 3 made latency-tolerant. Two shared-memory buffers: the next K-slice's
// global loads are issued into registers before the current slice's 512 FMAs and stored to the
// other buffer after them (one barrier per slice). Each thread's 8x8 tile is two 4x4 halves 64
// rows/columns apart, so its shared-memory reads are 16-byte loads from consecutive addresses
// across the warp: no bank conflicts. fp32 operands come in as 16-byte loads where aligned.

template <class T>
struct alignas(4) Pair {
  T x, y;
};

// version 6 (fp16/bf16, sm_80+): variant 4's tile (128x128, 8 warps of 64x32) on the raw
// tensor-core instructions. K-slices of 32 stream through a 4-stage ring of shared-memory
// buffers filled by cp.async, so three slices' loads are in flight while the warps compute on
// the fourth: HBM latency is hidden by the pipeline, not by occupancy. Operands reach registers
// through ldmatrix (4 8x8 fragments per instruction; .trans turns row-major B into the
// column-major fragment mma wants). Rows are padded by 16 bytes so the 8 addresses of each
// ldmatrix phase hit 8 different 4-bank groups. Needs k and n multiples of 8 (16-byte chunks).

// versions 7 and 8 (fp16/bf16, sm_90a): the Hopper pipeline. Warpgroup 0 is the producer: one
// thread issues TMA copies of 128x64 A tiles and 64xBN B tiles (128-byte swizzled, zero-filled
// past the edges, so no bounds logic in the main loop) into a ring of STAGES buffers, each
// guarded by a "full" mbarrier (TMA byte count) and an "empty" one (consumer release).
// Warpgroups 1 and 2 each own 64 rows of the tile and issue wgmma m64nBNk16 straight from
// shared memory: no ldmatrix, no register staging, so the tensor cores are fed at the rate only
// wgmma reaches on H100/H200. One wgmma group stays in flight while the previous slice's buffer
// is released. A is K-major (row-major m x k); B is row-major k x n, i.e. N-major: imm-trans-b.

[[noreturn]] static void refuse(int variant, const std::string& why) {
  die(1, "gemm variant " + std::to_string(variant) + " cannot run here: " + why);
}


// ----------------------------------------------------------------------------
// launchers

static const char* gemm_not_applicable(int variant, int dt, long long m, long long n, long long k, int cc) {
  if ((variant == 4 || variant >= 6) && dt == kF32) return "tensor-core variant: fp16/bf16 operands only";
  if ((variant == 4 || variant == 6) && cc < 80) return "needs sm_80 or newer (bf16 WMMA, cp.async, mma.sync)";
  if (variant >= 6 && (k % 8 || n % 8)) return "needs k and n multiples of 8 (16-byte rows for cp.async/TMA)";
  if (variant >= 7 && cc != 90) return "wgmma needs an sm_90 GPU (H100/H200)";
  if (variant >= 7 && (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)) return "dimensions must fit in 32 bits";
  return nullptr;
}

static void gemm_variant(int variant, int dt, const void* A, const void* B, void* C, long long batch, long long m,
                         long long n, long long k, cudaStream_t s) {
  dim3 g128((unsigned)((n + 127) / 128), (unsigned)((m + 127) / 128), (unsigned)batch);
  dispatch_dtype(dt, [&]<class T>() {
    auto a = static_cast<const T*>(A);
    auto b = static_cast<const T*>(B);
    auto c = static_cast<T*>(C);
    if (variant == 1) {
      dim3 block(32, 8), grid((unsigned)((n + 31) / 32), (unsigned)((m + 7) / 8), (unsigned)batch);
      gemm_reference<T><<<grid, block, 0, s>>>(a, b, c, m, n, k);
    } else if (variant == 2) {
      constexpr int TILE = 32;
      dim3 block(TILE, TILE), grid((unsigned)((n + TILE - 1) / TILE), (unsigned)((m + TILE - 1) / TILE), (unsigned)batch);
      gemm_smem<T, TILE><<<grid, block, 0, s>>>(a, b, c, m, n, k);
    } else if (variant == 3) {
      gemm_reg<T><<<g128, 256, 0, s>>>(a, b, c, m, n, k);
    } else if (variant == 5) {
      launch_gemm_simt_tiles<T>(a, b, c, batch, m, n, k, s);
    } else if constexpr (sizeof(T) == 2) {
      if (variant == 4) {
        gemm_wmma<T><<<g128, 256, 0, s>>>(a, b, c, m, n, k);
      } else if (variant == 6) {
        launch_gemm_mma_async<T>(a, b, c, batch, m, n, k, s);
      } else if (variant == 7 || variant == 8) {
        std::string why = variant == 7 ? launch_gemm_wgmma_tma<T, 128>(a, b, c, batch, m, n, k, s)
                                       : launch_gemm_wgmma_tma<T, 256>(a, b, c, batch, m, n, k, s);
        if (!why.empty()) refuse(variant, why);
      }
    }
  });
}

// ----------------------------------------------------------------------------
// the lab's case

static const OpInfo kInfo = {
    "gemm", "BxMxNxK", 4, "8x2000x2000x2000,8x4096x4096x4096",
    {{1, "gemm_reference", "-", "one thread per output, operands from global memory"},
     {2, "gemm_smem_tiles", "1", "32x32 shared-memory tiles"},
     {3, "gemm_reg_tiles", "2", "128x128 block tiles, 8x8 outputs per thread (SIMT fp32)"},
     {4, "gemm_wmma", "3", "tensor cores via WMMA, single-buffered (fp16/bf16)"},
     {5, "gemm_simt_tiles", "3", "double-buffered, conflict-free 16-byte shared reads; shipped (fp32)"},
     {6, "gemm_mma_async", "4", "mma.sync + ldmatrix, 4-stage cp.async ring (fp16/bf16, sm_80+); shipped off sm_90"},
     {7, "gemm_wgmma_tma128", "6", "TMA + wgmma, producer warpgroup, 128x128 tiles (sm_90a); shipped"},
     {8, "gemm_wgmma_tma256", "7", "128x256 tiles (sm_90a); shipped"}},
    "cublas", nullptr};

static Case make_case(int dt, const std::vector<long long>& dims, Context& ctx, const std::vector<int>& variants) {
  const long long batch = dims[0], m = dims[1], n = dims[2], k = dims[3];
  const int cc = ctx.dev.cc;
  auto A_h = random_input(batch * m * k, dt, 1);
  auto B_h = random_input(batch * k * n, dt, 2);
  auto ref = std::make_shared<GemmRef>(gemm_cpu(A_h.data(), B_h.data(), batch, m, n, k, dt));
  void* A = to_device(A_h);
  void* B = to_device(B_h);
  A_h = {};
  B_h = {};
  void* C = nullptr;
  cudaCheck(cudaMalloc(&C, batch * m * n * dtype_size(dt)));
  Case c;
  c.out = C;
  c.out_bytes = batch * m * n * dtype_size(dt);
  c.bytes = (double)batch * (m * k + k * n + m * n) * dtype_size(dt);
  c.flops = 2.0 * batch * m * n * k;
  c.check = [ref, dt](const std::vector<unsigned char>& out) {
    ErrAcc e;
    for (size_t t = 0; t < ref->idx.size(); ++t) e.add(host_value(out.data(), ref->idx[t], dt), ref->val[t]);
    // every element must have been written: no poison left anywhere
    const size_t es = dtype_size(dt), total = out.size() / es;
    for (size_t i = 0; i < total && e.finite; ++i) e.finite = std::isfinite(host_value(out.data(), (long long)i, dt));
    return e.done();
  };
  const int M = (int)m, N = (int)n, K = (int)k;
  Cublas* bl = &ctx.blas;
  c.arms.push_back(vendor_arm(ctx, [=](cudaStream_t) {
    const float one = 1.f, zero = 0.f;
    cudaDataType t = cuda_type(dt);
    // C = A B row-major  <=>  C^T = B^T A^T column-major
    cublas_check(bl->gemm_strided_batched_ex(bl->handle, Cublas::kOpN, Cublas::kOpN, N, M, K, &one, B, t, N,
                                             (long long)K * N, A, t, K, (long long)M * K, &zero, C, t, N,
                                             (long long)M * N, (int)batch, Cublas::kCompute32F, Cublas::kGemmDefault),
                 "cublasGemmStridedBatchedEx");
  }));
  for (int var : variants) {
    Arm a;
    a.id = var;
    a.name = find_variant(kInfo, var)->name;
    if (const char* why = gemm_not_applicable(var, dt, m, n, k, cc)) a.na = why;
    a.run = [=](cudaStream_t s) { gemm_variant(var, dt, A, B, C, batch, m, n, k, s); };
    c.arms.push_back(a);
  }
  c.release = [=] {
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
  };
  return c;
}

int main(int argc, char** argv) { return run_main(argc, argv, kInfo, make_case); }
