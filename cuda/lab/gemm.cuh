// cuda/lab/gemm.cuh: gemm's lab variants that never shipped (csrc/lab.def), their kernels and
// launchers. Built into the extension with GAPBENCH_LAB=ON (cuda/lab_kernels.cu), where
// `bench.blas --variants all` times each by name beside the library's kernels (cuda/ops/gemm.cuh:
// the reference, gemm_simt_tiles, gemm_mma_async and the wgmma/TMA kernels). LINEAGE.md gives each
// one's parent; the variant numbers in the comments are the lab's.
//   gemm_smem_tiles (v2)  32x32 tiles staged in shared memory
//   gemm_reg_tiles (v3)   128x128 block tiles, an 8x8 register tile per thread (SIMT fp32)
//   gemm_wmma (v4)        tensor cores through WMMA fragments, single-buffered (fp16/bf16, sm_80+)
#pragma once
#include <mma.h>

#include <string>

#include "contract.h"
#include "dtype.cuh"

namespace gb::blas::lab_kernels {

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

// The launchers: batch on the grid's z (at most 65535 matrices).
template <class T>
void launch_gemm_smem_tiles(const T* a, const T* b, T* c, long long batch, long long m, long long n, long long k,
                            cudaStream_t s) {
  constexpr int TILE = 32;
  dim3 block(TILE, TILE), grid((unsigned)((n + TILE - 1) / TILE), (unsigned)((m + TILE - 1) / TILE), (unsigned)batch);
  gemm_smem<T, TILE><<<grid, block, 0, s>>>(a, b, c, m, n, k);
}

template <class T>
void launch_gemm_reg_tiles(const T* a, const T* b, T* c, long long batch, long long m, long long n, long long k,
                           cudaStream_t s) {
  dim3 grid((unsigned)((n + 127) / 128), (unsigned)((m + 127) / 128), (unsigned)batch);
  gemm_reg<T><<<grid, 256, 0, s>>>(a, b, c, m, n, k);
}

// fp16/bf16 only (tensor cores), sm_80 or newer (bf16 WMMA).
template <class T>
void launch_gemm_wmma(const T* a, const T* b, T* c, long long batch, long long m, long long n, long long k, int cc,
                      cudaStream_t s) {
  if constexpr (sizeof(T) != 2) {
    throw gb::NotApplicable("gemm_wmma is a tensor-core kernel: fp16/bf16 operands only");
  } else {
    if (cc < 80) throw gb::NotApplicable("gemm_wmma needs sm_80 or newer (bf16 WMMA)");
    dim3 grid((unsigned)((n + 127) / 128), (unsigned)((m + 127) / 128), (unsigned)batch);
    gemm_wmma<T><<<grid, 256, 0, s>>>(a, b, c, m, n, k);
  }
}

}  // namespace gb::blas::lab_kernels
