// gemm.cu: batched C = A B (row-major, A m x k, B k x n, per batch), fp32 accumulation.
// Compute-bound at the paper's size (8 x 2000^3): the target is the vendor GEMM's FLOP rate.
// Variant 1: one thread per output element, operands straight from global memory (each element
// of A and B is re-read n or m times: L2/L1 bandwidth bound). Variant 2: 32x32 tiles staged in
// shared memory, so each global element is read m/32 + n/32 times instead of m + n.
// Faster variants (register blocking, tensor cores: mma.sync / Hopper wgmma) come next.
// Run: python -m bench.blas --ops gemm
#include "blas_kernels.h"
#include "dtype.cuh"

namespace gb::blas {

template <class T>
__global__ void gemm_naive(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, long long m,
                           long long n, long long k) {
  long long col = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long row = blockIdx.y * (long long)blockDim.y + threadIdx.y;
  long long b = blockIdx.z;
  if (row >= m || col >= n) return;
  const T* a = A + b * m * k + row * k;
  const T* bb = B + b * k * n + col;
  float acc = 0.f;
  for (long long p = 0; p < k; ++p) acc += to_f(a[p]) * to_f(bb[p * n]);
  C[b * m * n + row * n + col] = from_f<T>(acc);
}

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

bool launch_gemm(int variant, int dt, const void* A, const void* B, void* C, long long batch, long long m,
                 long long n, long long k, cudaStream_t s) {
  if (variant != 1 && variant != 2) return false;
  return dispatch_dtype(dt, [&]<class T>() {
    auto a = static_cast<const T*>(A);
    auto b = static_cast<const T*>(B);
    auto c = static_cast<T*>(C);
    if (variant == 1) {
      dim3 block(32, 8), grid((unsigned)((n + 31) / 32), (unsigned)((m + 7) / 8), (unsigned)batch);
      gemm_naive<T><<<grid, block, 0, s>>>(a, b, c, m, n, k);
    } else {
      constexpr int TILE = 32;
      dim3 block(TILE, TILE), grid((unsigned)((n + TILE - 1) / TILE), (unsigned)((m + TILE - 1) / TILE), (unsigned)batch);
      gemm_smem<T, TILE><<<grid, block, 0, s>>>(a, b, c, m, n, k);
    }
  });
}

}  // namespace gb::blas
