// Hand-written BLAS kernels, numbered variants behind one launcher per op (simplest first).
// Each launcher returns false when `variant` does not exist. Matrices are row-major.
#pragma once
#include <cuda_runtime.h>

namespace gb::blas {

// copy: dst = src, n elements.        1 scalar, 2 16-byte packs
bool launch_copy(int variant, int dt, const void* src, void* dst, long long n, cudaStream_t s);
// gemv: y[m] = A[m,k] x[k].            1 thread per row, 2 warp per row with 16-byte packs,
//                                      3 split-k warps (fp32 partials in `work`),
//                                      4 x-stationary blocks, k-slices added atomically (`work`
//                                        must be zeroed once when allocated)
bool launch_gemv(int variant, int dt, const void* A, const void* x, void* y, long long m, long long k, cudaStream_t s,
                 float* work, int sms);
long long gemv_work_floats(long long m, long long k, int sms);
// vjp of y = W x, W[m,k]:
//   dx[k] = W^T v[m]                    1 thread per column, 2 row-split packs + reduction,
//                                       3 as 2 with 4 rows' loads in flight and more slices,
//                                       4 8 rows' loads in flight, 4x fewer slices,
//                                       5 as 4 in one launch (last slice block reduces); `work`
//                                         must be zeroed once when allocated (self-resetting counters)
//                                       6 as 4, the reduce a programmatic dependent launch (sm_90+)
//                                       7 rows split among a block's warps, one partial row a block
//                                       8 as 7 in one launch, partial rows added atomically in L2
//                                       9 TMA ring, equal work per resident block (sm_90+)
bool launch_vjp_dx(int variant, int dt, const void* W, const void* v, void* dx, float* work, long long m,
                   long long k, int sms, cudaStream_t s);
long long vjp_dx_work_floats(long long m, long long k, int sms);
//   dW[m,k] = v[m] x[k]^T               1 thread per element, 2 16-byte packs, 3 2-D grid with
//                                       streaming stores
bool launch_vjp_dw(int variant, int dt, const void* v, const void* x, void* dW, long long m, long long k,
                   cudaStream_t s);
// gemm: C[b,m,n] = A[b,m,k] B[b,k,n]   1 thread per output, 2 shared-memory tiles,
//                                      3 128x128 tiles, 8x8 outputs per thread (SIMT fp32 math),
//                                      4 tensor cores via WMMA (fp16/bf16 only; false for fp32),
//                                      5 as 3, double-buffered, conflict-free shared-memory reads,
//                                      6 mma.sync + ldmatrix, 4-stage cp.async ring (fp16/bf16, sm_80+),
//                                      7/8 TMA + wgmma, 128x128 / 128x256 tiles (fp16/bf16, sm_90a)
// Variants that cannot run here (dtype, GPU, shape) throw std::invalid_argument("no variant ...: why").
bool launch_gemm(int variant, int dt, const void* A, const void* B, void* C, long long batch, long long m,
                 long long n, long long k, cudaStream_t s);

}  // namespace gb::blas
