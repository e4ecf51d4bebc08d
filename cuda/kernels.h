// The CUDA kernel library: per op a reference kernel (the simplest correct one) and the kernels
// the dispatcher ships, named by strategy. Every numbered variant they came from, and all the
// others, live in cuda/lab/ (see cuda/lab/LINEAGE.md; the library as of commit da1a708 held them).
// Matrices are row-major, accumulation is fp32 for every dtype.
//
// The dispatcher's rule (dispatch()); evidence: H200 paired sweeps and harness runs, README.md and
// docs/results/ at da1a708 (gemv-v4, dx sweep v14, gemm run 4):
//
//   op      dtype      condition                                   kernel (was)
//   copy    any        -                                           copy_vec16 (v2)
//   gemv    fp32       k % 8 == 0                                  gemv_x_stationary (v4): 102-127% of cuBLAS
//   gemv    fp16/bf16  m < 4096                                    gemv_split_k (v3): short m fills the GPU
//   gemv    fp16/bf16  m >= 4096                                   gemv_warp_rows (v2): no split needed
//   gemv    any        k % 8 != 0 (no 16-byte rows)                gemv_warp_rows (v2, scalar loads)
//   vjp_dx  any        k % 8 != 0                                  vjp_dx_row_slices (v2)
//   vjp_dx  any        m >= 4096, 256-byte strips fill 3/4 of SMs  vjp_dx_strips256 (v12)
//   vjp_dx  any        m >= 4096, otherwise                        vjp_dx_strips128 (v12)
//   vjp_dx  any        m < 4096, W < L2/4                          vjp_dx_strips128_wave (v13)
//   vjp_dx  any        m < 4096, W >= L2/4                         vjp_dx_strips128_wave_ef (v14)
//   vjp_dw  any        -                                           vjp_dw_2d_stream (v3)
//   gemm    fp32       -                                           gemm_simt_tiles (v5)
//   gemm    fp16/bf16  sm_90 + sm_90a code, k,n % 8 == 0, n > 128  gemm_wgmma_tma256 (v8)
//   gemm    fp16/bf16  as above, n <= 128                          gemm_wgmma_tma128 (v7)
//   gemm    fp16/bf16  sm_80+, k,n % 8 == 0                        gemm_mma_async (v6)
//   gemm    fp16/bf16  otherwise                                   gemm_simt_tiles (v5)
//
// Why the dx row: v14's evict-first loads of W only pay where W is large against L2 (with dirty
// L2 lines they took 512-2048 x 16384 fp32 from 88-94% to 101-104% of cuBLAS); on a W far below L2
// they cost (1024x1024 fp16: v14 84.6% of cuBLAS, v13 108.8%), so v14 applies from W >= L2/4.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "contract.h"

namespace gb::blas {

enum class Kernel : int {
  copy_reference, copy_vec16,
  gemv_reference, gemv_warp_rows, gemv_split_k, gemv_x_stationary,
  vjp_dx_reference, vjp_dx_row_slices, vjp_dx_strips256, vjp_dx_strips128, vjp_dx_strips128_wave,
  vjp_dx_strips128_wave_ef,
  vjp_dw_reference, vjp_dw_2d_stream,
  gemm_reference, gemm_simt_tiles, gemm_mma_async, gemm_wgmma_tma128, gemm_wgmma_tma256,
};

const char* kernel_name(Kernel k);

// What the rule needs to know about the GPU (queried once per case).
struct Gpu {
  int sms = 1;
  int cc = 0;                   // compute capability, e.g. 90
  std::size_t l2_bytes = 0;
  bool wgmma = false;           // sm_90 GPU and this build has sm_90a code for the wgmma kernel
};
Gpu query_gpu(int device);

struct Problem {
  Op op;
  DType dt;
  long long batch = 1, m = 1, n = 1, k = 1;
};

// Device buffers of one run: inputs in blas_ops::io_bytes order, the output, and the op's
// workspace (work_floats() floats, zeroed once when allocated: kernels that count leave it zeroed).
struct Buffers {
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  float* work = nullptr;
};

Kernel reference_kernel(Op op);
Kernel dispatch(const Problem& p, const Gpu& g);  // the rule above
long long work_floats(const Problem& p, const Gpu& g);
// Launches one kernel of p.op's library. Throws gb::NotApplicable if it cannot run here.
void launch(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s);

// Per-op launchers (cuda/<op>.cu), called by launch().
void launch_copy(Kernel kern, const Problem& p, const Buffers& buf, cudaStream_t s);
void launch_gemv(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s);
long long gemv_work_floats(long long m, long long k, int sms);
Kernel vjp_dx_rule(const Problem& p, const Gpu& g);  // dx's rows of the table (vjp.cu)
void launch_vjp_dx(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s);
long long vjp_dx_work_floats(long long m, long long k, int sms);
void launch_vjp_dw(Kernel kern, const Problem& p, const Buffers& buf, cudaStream_t s);
void launch_gemm(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s);
bool gemm_wgmma_built();  // this build holds sm_90a code for the wgmma kernel (needs a CUDA context)

}  // namespace gb::blas
