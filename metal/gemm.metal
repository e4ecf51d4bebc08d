// gemm.metal: batched C = A B (row-major) on Apple GPUs, fp32 accumulation.
// v1 gemm_naive_<dtype>: one thread per output element, operands straight from device memory.
// v2 gemm_simd_<dtype>: 32x32 output tiles per threadgroup of 4 simdgroups; K-slices of 16
//   staged in threadgroup memory (as float), each simdgroup multiplies 8x8 fragments with
//   simdgroup_multiply_accumulate, the Apple GPU's matrix instructions (M1 and later).
// Host: metal/blas.cpp (variants 1, 2; 0 is MPS). Run: python -m bench.blas --ops gemm
//   --backends native-metal. Checked on the CPU by tests/test_metal_ops.py; never run on a Mac.
#include <metal_simdgroup_matrix>
#include <metal_stdlib>
using namespace metal;
#include "blas_common.h"

template <typename T>
[[kernel]] void gemm_naive(device const T* A [[buffer(0)]], device const T* B [[buffer(1)]], device T* C [[buffer(2)]],
                           constant uint& m [[buffer(3)]], constant uint& n [[buffer(4)]], constant uint& k [[buffer(5)]],
                           uint3 pos [[thread_position_in_grid]]) {
  uint col = pos.x, row = pos.y, b = pos.z;
  if (row >= m || col >= n) return;
  device const T* a = A + b * m * k + row * k;
  device const T* bb = B + b * k * n + col;
  float acc = 0.0f;
  for (uint p = 0; p < k; ++p) acc += static_cast<float>(a[p]) * static_cast<float>(bb[p * n]);
  C[b * m * n + row * n + col] = static_cast<T>(acc);
}

GB_INSTANTIATE_ALL("gemm_naive", gemm_naive)

// v2: threadgroup = 128 threads = 4 simdgroups in a 2x2 layout, each owning a 16x16 quarter of the
// 32x32 tile as 2x2 accumulators of 8x8. Staging converts T to float once per element, so the
// matrix unit always multiplies float fragments (one kernel body for float, half and bfloat).
// Edges: loads outside the matrix stage zeros, stores are bounds-checked, so any m, n, k.
static constant constexpr const uint kSimdTile = 32, kSimdK = 16, kSimdThreads = 128;

template <typename T>
[[kernel]] void gemm_simd(device const T* A [[buffer(0)]], device const T* B [[buffer(1)]], device T* C [[buffer(2)]],
                          constant uint& m [[buffer(3)]], constant uint& n [[buffer(4)]], constant uint& k [[buffer(5)]],
                          uint3 group [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                          uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float As[kSimdTile][kSimdK];
  threadgroup float Bs[kSimdK][kSimdTile];
  threadgroup float Cs[kSimdTile][kSimdTile];
  uint row0 = group.y * kSimdTile, col0 = group.x * kSimdTile, b = group.z;
  device const T* a = A + b * m * k;
  device const T* bb = B + b * k * n;
  uint sr = sg / 2, sc = sg % 2;
  simdgroup_float8x8 acc[2][2];
  for (uint i = 0; i < 2; ++i)
    for (uint j = 0; j < 2; ++j) acc[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  for (uint k0 = 0; k0 < k; k0 += kSimdK) {
    for (uint e = tid; e < kSimdTile * kSimdK; e += kSimdThreads) {
      uint r = e / kSimdK, c = e % kSimdK;  // A tile: 32 rows x 16
      As[r][c] = (row0 + r < m && k0 + c < k) ? static_cast<float>(a[(row0 + r) * k + k0 + c]) : 0.0f;
      uint rb = e / kSimdTile, cb = e % kSimdTile;  // B tile: 16 rows x 32
      Bs[rb][cb] = (k0 + rb < k && col0 + cb < n) ? static_cast<float>(bb[(k0 + rb) * n + col0 + cb]) : 0.0f;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint kk = 0; kk < kSimdK; kk += 8) {
      simdgroup_float8x8 fa[2], fb[2];
      for (uint i = 0; i < 2; ++i) simdgroup_load(fa[i], &As[sr * 16 + i * 8][kk], kSimdK);
      for (uint j = 0; j < 2; ++j) simdgroup_load(fb[j], &Bs[kk][sc * 16 + j * 8], kSimdTile);
      for (uint i = 0; i < 2; ++i)
        for (uint j = 0; j < 2; ++j) simdgroup_multiply_accumulate(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  for (uint i = 0; i < 2; ++i)
    for (uint j = 0; j < 2; ++j) simdgroup_store(acc[i][j], &Cs[sr * 16 + i * 8][sc * 16 + j * 8], kSimdTile);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  device T* c = C + b * m * n;
  for (uint e = tid; e < kSimdTile * kSimdTile; e += kSimdThreads) {
    uint r = e / kSimdTile, cc = e % kSimdTile;
    if (row0 + r < m && col0 + cc < n) c[(row0 + r) * n + col0 + cc] = static_cast<T>(Cs[r][cc]);
  }
}

GB_INSTANTIATE_ALL("gemm_simd", gemm_simd)
