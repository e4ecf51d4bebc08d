// cuda/ops/gemm.cuh: the gemm kernels (csrc/ops.def), shared by the library (its part at the end of this file) and
// the lab (cuda/lab/gemm.cuh, whose unshipped variants include it). Batched C = A B (row-major, A m x k, B k x n, per batch), fp32 accumulation.
// Compute-bound at the paper's size (8 x 2000^3): the target is the vendor GEMM's FLOP rate.
//   gemm_reference: one thread per output element, operands straight from global memory.
//   gemm_simt_tiles (was variant 5): 128x128 block tiles, 8x8 register tiles per thread (SIMT fp32
//     math), double-buffered shared memory with conflict-free 16-byte reads. Any dtype and shape.
//   gemm_mma_async (was 6; fp16/bf16, sm_80+): mma.sync + ldmatrix fed by a 4-stage cp.async ring.
//   gemm_wgmma_tma (gemm_wgmma_tma128/256, were 7/8; the BN = 128/256 instantiations; fp16/bf16, sm_90a only): Hopper's TMA + wgmma with a producer
//     warpgroup and an mbarrier ring; 128x128 and 128x256 block tiles.
// Which one runs: the rule at the end of this file. The other numbered variants: cuda/lab/.
#pragma once
#include <cudaTypedefs.h>
#include <mma.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>

#include "dtype.cuh"
#include "ptx.cuh"
#include "tensor_map.h"

namespace gb::blas {


template <class T>
__global__ void gemm_reference(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, long long m,
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

// gemm_simt_tiles: 128x128 block tiles with 8x8 register tiles per thread, made latency-tolerant. Two shared-memory buffers: the next K-slice's
// global loads are issued into registers before the current slice's 512 FMAs and stored to the
// other buffer after them (one barrier per slice). Each thread's 8x8 tile is two 4x4 halves 64
// rows/columns apart, so its shared-memory reads are 16-byte loads from consecutive addresses
// across the warp: no bank conflicts. fp32 operands come in as 16-byte loads where aligned.
template <class T>
__global__ void __launch_bounds__(256) gemm_simt_tiles(const T* __restrict__ A, const T* __restrict__ B,
                                                   T* __restrict__ C, long long m, long long n, long long k) {
  constexpr int BM = 128, BN = 128, BK = 8;
  __shared__ __align__(16) float As[2][BK][BM];
  __shared__ __align__(16) float Bs[2][BK][BN];
  long long bz = blockIdx.z;
  const T* a = A + bz * m * k;
  const T* b = B + bz * k * n;
  T* c = C + bz * m * n;
  long long row0 = blockIdx.y * (long long)BM, col0 = blockIdx.x * (long long)BN;
  int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  int ar = tid / 2, ac = (tid % 2) * 4;
  int br = tid / 32, bc = (tid % 32) * 4;
  float pa[4], pb[4];
  auto load = [&](long long t0) {
    long long gr = row0 + ar, gk = t0 + ac;
    if constexpr (sizeof(T) == 4) {
      if (gr < m && gk + 4 <= k && k % 4 == 0) {
        float4 v = *reinterpret_cast<const float4*>(a + gr * k + gk);
        pa[0] = v.x; pa[1] = v.y; pa[2] = v.z; pa[3] = v.w;
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) pa[q] = (gr < m && gk + q < k) ? to_f(a[gr * k + gk + q]) : 0.f;
      }
    } else {
#pragma unroll
      for (int q = 0; q < 4; ++q) pa[q] = (gr < m && gk + q < k) ? to_f(a[gr * k + gk + q]) : 0.f;
    }
    long long hk = t0 + br, hc = col0 + bc;
    if constexpr (sizeof(T) == 4) {
      if (hk < k && hc + 4 <= n && n % 4 == 0) {
        float4 v = *reinterpret_cast<const float4*>(b + hk * n + hc);
        pb[0] = v.x; pb[1] = v.y; pb[2] = v.z; pb[3] = v.w;
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) pb[q] = (hk < k && hc + q < n) ? to_f(b[hk * n + hc + q]) : 0.f;
      }
    } else {
#pragma unroll
      for (int q = 0; q < 4; ++q) pb[q] = (hk < k && hc + q < n) ? to_f(b[hk * n + hc + q]) : 0.f;
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int q = 0; q < 4; ++q) As[buf][ac + q][ar] = pa[q];
    *reinterpret_cast<float4*>(&Bs[buf][br][bc]) = make_float4(pb[0], pb[1], pb[2], pb[3]);
  };
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
  load(0);
  store(0);
  __syncthreads();
  int buf = 0;
  for (long long t0 = 0; t0 < k; t0 += BK) {
    bool more = t0 + BK < k;
    if (more) load(t0 + BK);
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float4 a0 = *reinterpret_cast<const float4*>(&As[buf][kk][ty * 4]);
      float4 a1 = *reinterpret_cast<const float4*>(&As[buf][kk][64 + ty * 4]);
      float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][kk][tx * 4]);
      float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][kk][64 + tx * 4]);
      float ra[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      float rb[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += ra[i] * rb[j];
    }
    if (more) store(buf ^ 1);
    __syncthreads();
    buf ^= 1;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    long long r = row0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
    if (r >= m) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      long long col = col0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
      if (col < n) c[r * n + col] = from_f<T>(acc[i][j]);
    }
  }
}


template <class T>
struct alignas(4) Pair {
  T x, y;
};

// gemm_mma_async (fp16/bf16, sm_80+): a 128x128 tile (8 warps of 64x32) on the raw
// tensor-core instructions. K-slices of 32 stream through a 4-stage ring of shared-memory
// buffers filled by cp.async, so three slices' loads are in flight while the warps compute on
// the fourth: HBM latency is hidden by the pipeline, not by occupancy. Operands reach registers
// through ldmatrix (4 8x8 fragments per instruction; .trans turns row-major B into the
// column-major fragment mma wants). Rows are padded by 16 bytes so the 8 addresses of each
// ldmatrix phase hit 8 different 4-bank groups. Needs k and n multiples of 8 (16-byte chunks).
template <class T>
__global__ void __launch_bounds__(256) gemm_mma_async(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                                                long long m, long long n, long long k) {
#if __CUDA_ARCH__ >= 800
  using namespace gb::ptx;
  constexpr int BM = 128, BN = 128, BK = 32, S = 4, AST = BK + 8, BST = BN + 8;
  extern __shared__ __align__(16) unsigned char gemm_mma_smem[];
  T* As = reinterpret_cast<T*>(gemm_mma_smem);  // [S][BM][AST]
  T* Bs = As + S * BM * AST;                     // [S][BK][BST]
  long long bz = blockIdx.z;
  const T* a = A + bz * m * k;
  const T* b = B + bz * k * n;
  T* c = C + bz * m * n;
  long long row0 = blockIdx.y * (long long)BM, col0 = blockIdx.x * (long long)BN;
  int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wr = warp / 4, wc = warp % 4;
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
  int kt = (int)((k + BK - 1) / BK);
  auto load = [&](int stage, int t) {
    long long k0 = (long long)t * BK;
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      int p = tid + q * 256;
      int r = p / 4, cc = (p % 4) * 8;  // A tile: 128 rows x 4 chunks of 8
      long long gr = row0 + r, gk = k0 + cc;
      bool ok = gr < m && gk < k;
      cp_async16(smem_addr(As + (stage * BM + r) * AST + cc), ok ? a + gr * k + gk : a, ok);
      int rb = p / 16, cb = (p % 16) * 8;  // B tile: 32 rows x 16 chunks of 8
      long long hk = k0 + rb, hc = col0 + cb;
      bool okb = hk < k && hc < n;
      cp_async16(smem_addr(Bs + (stage * BK + rb) * BST + cb), okb ? b + hk * n + hc : b, okb);
    }
  };
#pragma unroll
  for (int st = 0; st < S - 1; ++st) {
    if (st < kt) load(st, st);
    cp_async_commit();
  }
  for (int t = 0; t < kt; ++t) {
    cp_async_wait<S - 2>();  // slice t has landed (per thread) ...
    __syncthreads();         // ... for every thread, and slice t-1's buffer is free to refill
    if (t + S - 1 < kt) load((t + S - 1) % S, t + S - 1);
    cp_async_commit();
    const T* as = As + (t % S) * BM * AST;
    const T* bs = Bs + (t % S) * BK * BST;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[4][4], bf[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        ldmatrix_x4(af[i], smem_addr(as + (wr * 64 + i * 16 + lane % 16) * AST + kk + (lane / 16) * 8));
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        uint32_t r4[4];
        ldmatrix_x4_trans(r4, smem_addr(bs + (kk + lane % 8 + ((lane / 8) % 2) * 8) * BST + wc * 32 + jj * 16 +
                                        (lane / 16) * 8));
        bf[2 * jj][0] = r4[0];
        bf[2 * jj][1] = r4[1];
        bf[2 * jj + 1][0] = r4[2];
        bf[2 * jj + 1][1] = r4[3];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_16816<T>(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  }
  cp_async_wait<0>();
  // Accumulator layout of m16n8: lane holds (row lane/4, cols 2*(lane%4)+{0,1}) and row+8.
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      long long r = row0 + wr * 64 + i * 16 + lane / 4, cc = col0 + wc * 32 + j * 8 + (lane % 4) * 2;
      if (cc >= n) continue;
      if (r < m) *reinterpret_cast<Pair<T>*>(c + r * n + cc) = {from_f<T>(acc[i][j][0]), from_f<T>(acc[i][j][1])};
      if (r + 8 < m)
        *reinterpret_cast<Pair<T>*>(c + (r + 8) * n + cc) = {from_f<T>(acc[i][j][2]), from_f<T>(acc[i][j][3])};
    }
#endif
}

// gemm_wgmma_tma128/256 (fp16/bf16, sm_90a): the Hopper pipeline. Warpgroup 0 is the producer: one
// thread issues TMA copies of 128x64 A tiles and 64xBN B tiles (128-byte swizzled, zero-filled
// past the edges, so no bounds logic in the main loop) into a ring of STAGES buffers, each
// guarded by a "full" mbarrier (TMA byte count) and an "empty" one (consumer release).
// Warpgroups 1 and 2 each own 64 rows of the tile and issue wgmma m64nBNk16 straight from
// shared memory: no ldmatrix, no register staging, so the tensor cores are fed at the rate only
// wgmma reaches on H100/H200. One wgmma group stays in flight while the previous slice's buffer
// is released. A is K-major (row-major m x k); B is row-major k x n, i.e. N-major: imm-trans-b.
template <class T, int BN>
__global__ void __launch_bounds__(384, 1) gemm_wgmma_tma(const __grid_constant__ CUtensorMap tmA,
                                                     const __grid_constant__ CUtensorMap tmB, T* __restrict__ C,
                                                     int m, int n, int k) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace gb::ptx;
  constexpr int BM = 128, BK = 64, STAGES = BN == 128 ? 5 : 4;
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = BK * BN * 2, STAGE_BYTES = A_BYTES + B_BYTES;
  extern __shared__ __align__(1024) unsigned char gemm_wgmma_smem[];
  // 128-byte swizzle repeats every 1024 bytes: tiles must start on a 1024-byte boundary.
  unsigned char* smem = gemm_wgmma_smem + ((1024 - (smem_addr(gemm_wgmma_smem) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + STAGES * STAGE_BYTES);
  uint64_t* empty = full + STAGES;
  int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  int bz = blockIdx.z, m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  int kt = (k + BK - 1) / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 8);  // one arrival per consumer warp
    }
    mbar_fence_init();
  }
  __syncthreads();
  if (wg == 0) {
    if (tid == 0) {
      for (int t = 0; t < kt; ++t) {
        int s = t % STAGES;
        if (t >= STAGES) mbar_wait(&empty[s], ((t / STAGES) + 1) & 1);
        mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
        uint32_t sa = smem_addr(smem + s * STAGE_BYTES);
        tma_load_3d(sa, &tmA, &full[s], t * BK, m0, bz);
#pragma unroll
        for (int j = 0; j < BN / 64; ++j)
          tma_load_3d(sa + A_BYTES + j * BK * 128, &tmB, &full[s], n0 + j * 64, t * BK, bz);
      }
    }
    return;
  }
  int cw = wg - 1;
  float d[BN / 2];  // no zero fill: the first product overwrites (scale-d 0)
  for (int t = 0; t < kt; ++t) {
    int s = t % STAGES;
    mbar_wait(&full[s], (t / STAGES) & 1);
    uint32_t sa = smem_addr(smem + s * STAGE_BYTES), sb = sa + A_BYTES;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      // A: this warpgroup's 64 rows, K-major; +32 bytes per k16 step inside the swizzled row.
      uint64_t da = wgmma_desc_sw128(sa + cw * 64 * 128 + kk * 32, 16, 1024);
      // B: N-major; 64-column chunks are BK*128 bytes apart (LBO), 8-row K groups 1024 (SBO).
      uint64_t db = wgmma_desc_sw128(sb + kk * 16 * 128, BK * 128, 1024);
      if constexpr (BN == 128) {
        if constexpr (std::is_same_v<T, __half>) wgmma_m64n128k16_f16(d, da, db, t | kk);
        else wgmma_m64n128k16_bf16(d, da, db, t | kk);
      } else {
        if constexpr (std::is_same_v<T, __half>) wgmma_m64n256k16_f16(d, da, db, t | kk);
        else wgmma_m64n256k16_bf16(d, da, db, t | kk);
      }
    }
    wgmma_commit();
    wgmma_wait<1>();  // slice t-1's products are done: its buffer can be refilled
    if (t > 0 && tid % 32 == 0) mbar_arrive(&empty[(t - 1) % STAGES]);
  }
  wgmma_wait<0>();
  fence_regs(d);  // only now may ordinary instructions touch the accumulators
  if (kt == 0)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
  // Accumulator layout of m64nN: warp w of the group holds rows 16w + lane/4 (+8), and for each
  // 8-column chunk j the columns 8j + 2*(lane%4) + {0,1}.
  int w = tid / 32, lane = tid % 32;
  long long r = m0 + cw * 64 + w * 16 + lane / 4;
  T* c = C + (long long)bz * m * n;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    long long cc = n0 + j * 8 + (lane % 4) * 2;
    if (cc >= n) continue;
    if (r < m) *reinterpret_cast<Pair<T>*>(c + r * n + cc) = {from_f<T>(d[4 * j]), from_f<T>(d[4 * j + 1])};
    if (r + 8 < m)
      *reinterpret_cast<Pair<T>*>(c + (r + 8) * n + cc) = {from_f<T>(d[4 * j + 2]), from_f<T>(d[4 * j + 3])};
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built without sm_90a code: launch_gemm refuses before this can run
#endif
}

// The shipped wgmma configurations by strategy name: 128x128 and 128x256 block tiles.
template <class T>
constexpr auto gemm_wgmma_tma128 = gemm_wgmma_tma<T, 128>;
template <class T>
constexpr auto gemm_wgmma_tma256 = gemm_wgmma_tma<T, 256>;

// ---------------------------------------------------------------- host launchers
// Used by the library's part below.

constexpr int kMmaSmem = 4 * (128 * 40 + 32 * 136) * 2;  // gemm_mma_async: 4 stages of A and B tiles

inline dim3 gemm_tiles128(long long batch, long long m, long long n) {
  return dim3((unsigned)((n + 127) / 128), (unsigned)((m + 127) / 128), (unsigned)batch);
}

template <class T>
void launch_gemm_simt_tiles(const T* A, const T* B, T* C, long long batch, long long m, long long n, long long k,
                            cudaStream_t s) {
  gemm_simt_tiles<T><<<gemm_tiles128(batch, m, n), 256, 0, s>>>(A, B, C, m, n, k);
}

template <class T>
void launch_gemm_mma_async(const T* A, const T* B, T* C, long long batch, long long m, long long n, long long k,
                           cudaStream_t s) {
  static bool set = [] {
    return cudaFuncSetAttribute(gemm_mma_async<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kMmaSmem) == cudaSuccess;
  }();
  (void)set;
  gemm_mma_async<T><<<gemm_tiles128(batch, m, n), 256, kMmaSmem, s>>>(A, B, C, m, n, k);
}

template <class T, int BN>
constexpr int gemm_wgmma_smem() {
  return (BN == 128 ? 5 : 4) * (128 * 64 * 2 + 64 * BN * 2) + 1024 + 2 * (BN == 128 ? 5 : 4) * 8;
}

// Sets the kernel's shared-memory size once; the binary version says whether sm_90a code is here
// (an sm_90a cubin is what runs on sm_90 when the build included "90a": CMakeLists maps 90 to it).
template <class T, int BN>
int gemm_wgmma_binary() {
  static int binary = [] {
    cudaFuncAttributes fa{};
    if (cudaFuncGetAttributes(&fa, gemm_wgmma_tma<T, BN>) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    if (cudaFuncSetAttribute(gemm_wgmma_tma<T, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             gemm_wgmma_smem<T, BN>()) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return fa.binaryVersion;
  }();
  return binary;
}

// A 3-D (inner, outer, batch) map over a row-major batch of 16-bit matrices, 128-byte swizzled boxes.
template <class T>
CUtensorMap gemm_tile_map(PFN_cuTensorMapEncodeTiled_v12000 encode, const T* base, long long inner, long long outer,
                          long long batch, int box_inner, int box_outer) {
  CUtensorMap map{};
  cuuint64_t dims[3] = {(cuuint64_t)inner, (cuuint64_t)outer, (cuuint64_t)batch};
  cuuint64_t strides[2] = {(cuuint64_t)(inner * 2), (cuuint64_t)(inner * outer * 2)};
  cuuint32_t box[3] = {(cuuint32_t)box_inner, (cuuint32_t)box_outer, 1}, estr[3] = {1, 1, 1};
  constexpr auto type = std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  CUresult rc = encode(&map, type, 3, const_cast<T*>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                       CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (rc != CUDA_SUCCESS) throw std::runtime_error("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(rc));
  return map;
}

// Launches gemm_wgmma_tma<T, BN> (fp16/bf16); returns why it cannot run here, "" once launched.
// The tensor maps are cached per buffer (the hot-cache mode rotates through many input sets).
template <class T, int BN>
std::string launch_gemm_wgmma_tma(const T* A, const T* B, T* C, long long batch, long long m, long long n, long long k,
                                  cudaStream_t s) {
  if (int bin = gemm_wgmma_binary<T, BN>(); bin != 90)
    return "this build has no sm_90a code for the wgmma kernel (binary sm_" + std::to_string(bin) + ")";
  auto encode = tensor_map_encoder();
  if (!encode) return "cuTensorMapEncodeTiled is not available from this driver";
  static std::mutex mu;
  static std::map<std::tuple<const void*, const void*, long long, long long, long long, long long>,
                  std::pair<CUtensorMap, CUtensorMap>> cache;
  std::pair<CUtensorMap, CUtensorMap> maps;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto key = std::make_tuple((const void*)A, (const void*)B, batch, m, n, k);
    auto it = cache.find(key);
    if (it == cache.end()) {
      if (cache.size() > 4096) cache.clear();
      it = cache.emplace(key, std::make_pair(gemm_tile_map(encode, A, k, m, batch, 64, 128),
                                             gemm_tile_map(encode, B, n, k, batch, 64, 64))).first;
    }
    maps = it->second;
  }
  dim3 grid((unsigned)((n + BN - 1) / BN), (unsigned)((m + 127) / 128), (unsigned)batch);
  gemm_wgmma_tma<T, BN><<<grid, 384, gemm_wgmma_smem<T, BN>(), s>>>(maps.first, maps.second, C, (int)m, (int)n, (int)k);
  return "";
}

}  // namespace gb::blas

// ---------------------------------------------------------------- the library's part
// The op's launcher, dispatcher rule, workspace and vendor call (cuda/kernels.h), compiled once into
// the library: the build compiles this header with GB_OPS_LIBRARY defined (CMakeLists.txt); the
// lab includes the kernels and launchers above only.
#ifdef GB_OPS_LIBRARY
#include "cublas_loader.h"
#include "kernels.h"

namespace gb::blas::ops::gemm {

namespace {

[[noreturn]] void refuse(Kernel kern, const std::string& why) {
  throw gb::NotApplicable(std::string(kernel_name(kern)) + " cannot run here: " + why);
}

}  // namespace

// This build holds sm_90a code for the wgmma kernels (needs a CUDA context).
static bool wgmma_built() { return gemm_wgmma_binary<__half, 256>() == 90 && gemm_wgmma_binary<__half, 128>() == 90; }

void launch(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s) {
  const long long batch = p.batch, m = p.m, n = p.n, k = p.k;
  const bool tensor = kern == Kernel::gemm_mma_async || kern == Kernel::gemm_wgmma_tma128 ||
                      kern == Kernel::gemm_wgmma_tma256;
  if (tensor) {
    if (p.dt == DType::fp32) refuse(kern, "tensor-core kernel: fp16/bf16 operands only");
    if (k % 8 || n % 8) refuse(kern, "needs k and n multiples of 8 (16-byte rows for cp.async/TMA)");
    if (kern == Kernel::gemm_mma_async && g.cc < 80) refuse(kern, "needs sm_80 or newer (cp.async, bf16 mma)");
    if (kern != Kernel::gemm_mma_async) {
      if (g.cc / 10 != 9) refuse(kern, "wgmma needs an sm_90 GPU (H100/H200); this one is sm_" + std::to_string(g.cc));
      if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) refuse(kern, "dimensions must fit in 32 bits");
    }
  }
  dispatch_dtype(p.dt, [&]<class T>() {
    auto a = static_cast<const T*>(buf.a);
    auto b = static_cast<const T*>(buf.b);
    auto c = static_cast<T*>(buf.out);
    if constexpr (sizeof(T) == 2) {
      std::string why;
      if (kern == Kernel::gemm_mma_async) return launch_gemm_mma_async<T>(a, b, c, batch, m, n, k, s);
      if (kern == Kernel::gemm_wgmma_tma128) why = launch_gemm_wgmma_tma<T, 128>(a, b, c, batch, m, n, k, s);
      if (kern == Kernel::gemm_wgmma_tma256) why = launch_gemm_wgmma_tma<T, 256>(a, b, c, batch, m, n, k, s);
      if (!why.empty()) refuse(kern, why);
      if (kern == Kernel::gemm_wgmma_tma128 || kern == Kernel::gemm_wgmma_tma256) return;
    }
    if (kern == Kernel::gemm_reference) {
      dim3 block(32, 8), grid((unsigned)((n + 31) / 32), (unsigned)((m + 7) / 8), (unsigned)batch);
      gemm_reference<T><<<grid, block, 0, s>>>(a, b, c, m, n, k);
      return;
    }
    launch_gemm_simt_tiles<T>(a, b, c, batch, m, n, k, s);
  });
}

// The dispatcher's rule, gemm's rows of the table (evidence: gemm run 4 at da1a708):
//   fp32       -                                           gemm_simt_tiles (v5)
//   fp16/bf16  sm_90 + sm_90a code, k,n % 8 == 0, n > 128  gemm_wgmma_tma256 (v8)
//   fp16/bf16  as above, n <= 128                          gemm_wgmma_tma128 (v7)
//   fp16/bf16  sm_80+, k,n % 8 == 0                        gemm_mma_async (v6)
//   fp16/bf16  otherwise                                   gemm_simt_tiles (v5)
Kernel rule(const Problem& p, const Gpu& g) {
  const bool half = p.dt != DType::fp32;
  const bool aligned = p.k % 8 == 0 && p.n % 8 == 0;
  if (!half || !aligned) return Kernel::gemm_simt_tiles;
  const bool fits32 = p.m <= INT32_MAX && p.n <= INT32_MAX && p.k <= INT32_MAX;
  const bool wgmma = g.cc / 10 == 9 && wgmma_built();  // an sm_90 GPU and sm_90a code in this build
  if (wgmma && fits32) return p.n > 128 ? Kernel::gemm_wgmma_tma256 : Kernel::gemm_wgmma_tma128;
  return g.cc >= 80 ? Kernel::gemm_mma_async : Kernel::gemm_simt_tiles;
}

long long work_floats(const Problem&, const Gpu&) { return 0; }

// Vendor row: cuBLAS, C = A B row-major  <=>  C^T = B^T A^T column-major, strided-batched; with
// Impl.vendor_tf32 the compute type allows TF32 tensor cores (fp32).
void vendor(const Vendor& v) {
  const auto& api = gb::cuda::cublas::api();
  const float one = 1.f, zero = 0.f;
  const int M = (int)v.p.m, N = (int)v.p.n, K = (int)v.p.k;
  check_cublas(api.gemm_strided_batched_ex(v.handle, gb::cuda::cublas::kOpN, gb::cuda::cublas::kOpN, N, M, K, &one, v.buf.b, v.type, N,
                                           (long long)K * N, v.buf.a, v.type, K, (long long)M * K, &zero, v.buf.out,
                                           v.type, N, (long long)M * N, (int)v.p.batch, v.compute,
                                           gb::cuda::cublas::kGemmDefault),
               "cublasGemmStridedBatchedEx");
}

}  // namespace gb::blas::ops::gemm
#endif  // GB_OPS_LIBRARY
