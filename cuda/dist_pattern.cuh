// The known per-rank data every collective is checked with (shared by the direct-NCCL runner and
// the plain loop; python/gapbench/dist/pattern.py writes the same formulas for the frameworks).
// Values are small integers, exact in fp32, fp16 and bf16, and so are their sums over ranks:
//   reductions (all_reduce, reduce_scatter): s(r, i) = ((i + r) mod 3) - 1
//   data movement (the others):              m(r, i) = ((i + 7 r) mod 61) - 30
// Outputs are poisoned with all-ones bytes first (NaN in all three types), so an element that
// was never written is counted wrong.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "dist_types.h"

namespace gb::cuda::dist {

__host__ __device__ inline float pat_sum(long long r, size_t i) { return float(int((i + size_t(r)) % 3) - 1); }
__host__ __device__ inline float pat_move(long long r, size_t i) { return float(int((i + 7 * size_t(r)) % 61) - 30); }

template <class T> __device__ inline T from_f(float v);
template <> __device__ inline float from_f<float>(float v) { return v; }
template <> __device__ inline __half from_f<__half>(float v) { return __float2half(v); }
template <> __device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
__device__ inline float to_f(float v) { return v; }
__device__ inline float to_f(__half v) { return __half2float(v); }
__device__ inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }

// Input element i (0 <= i < n) of the send buffer of `rank` for `op`.
__device__ inline float input_value(Op op, int rank, int root, size_t chunk, size_t i) {
  switch (op) {
    case Op::all_reduce:
    case Op::reduce_scatter: return pat_sum(rank, i);
    case Op::all_gather: return pat_move(rank, i);  // i indexes the rank's own chunk
    case Op::broadcast: return pat_move(root, i);
    default: return pat_move(rank, i);  // all_to_all (global send index), sendrecv
  }
}

// Expected output element i (0 <= i < n) of `rank`'s receive buffer.
__device__ inline float expected_value(Op op, int rank, int world, int root, size_t chunk, size_t i) {
  switch (op) {
    case Op::all_reduce: {
      float s = 0;
      for (int q = 0; q < world; ++q) s += pat_sum(q, i);
      return s;
    }
    case Op::reduce_scatter: {
      float s = 0;
      for (int q = 0; q < world; ++q) s += pat_sum(q, size_t(rank) * chunk + i);
      return s;
    }
    case Op::all_gather: return pat_move((long long)(i / chunk), i % chunk);
    case Op::broadcast: return pat_move(root, i);
    case Op::all_to_all: return pat_move((long long)(i / chunk), size_t(rank) * chunk + i % chunk);
    default: return pat_move((rank - 1 + world) % world, i);  // sendrecv: from the previous rank
  }
}

template <class T>
__global__ void fill_kernel(T* p, size_t n, Op op, int rank, int root, size_t chunk, size_t offset) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = from_f<T>(input_value(op, rank, root, chunk, offset + i));
}

// Counts elements that differ from the expected value; remembers the first wrong index.
template <class T>
__global__ void verify_kernel(const T* p, size_t n, Op op, int rank, int world, int root, size_t chunk,
                              unsigned long long* wrong, unsigned long long* first) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float got = to_f(p[i]);
    if (!(got == expected_value(op, rank, world, root, chunk, i))) {
      atomicAdd(wrong, 1ull);
      atomicMin(first, (unsigned long long)i);
    }
  }
}

inline unsigned grid_for(size_t n) {
  size_t g = (n + 255) / 256;
  return unsigned(g < 4096 ? (g ? g : 1) : 4096);
}

// Host launchers (by dtype). `offset` shifts the input index (a rank's chunk of a global index).
inline void fill(void* p, size_t n, DType t, Op op, int rank, int root, size_t chunk, size_t offset, cudaStream_t s) {
  if (n == 0) return;
  if (t == DType::fp32) fill_kernel<<<grid_for(n), 256, 0, s>>>(static_cast<float*>(p), n, op, rank, root, chunk, offset);
  else if (t == DType::fp16) fill_kernel<<<grid_for(n), 256, 0, s>>>(static_cast<__half*>(p), n, op, rank, root, chunk, offset);
  else fill_kernel<<<grid_for(n), 256, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, op, rank, root, chunk, offset);
}

inline void verify(const void* p, size_t n, DType t, Op op, int rank, int world, int root, size_t chunk,
                   unsigned long long* d_counts, cudaStream_t s) {
  if (n == 0) return;
  auto* w = d_counts;
  auto* f = d_counts + 1;
  if (t == DType::fp32) verify_kernel<<<grid_for(n), 256, 0, s>>>(static_cast<const float*>(p), n, op, rank, world, root, chunk, w, f);
  else if (t == DType::fp16) verify_kernel<<<grid_for(n), 256, 0, s>>>(static_cast<const __half*>(p), n, op, rank, world, root, chunk, w, f);
  else verify_kernel<<<grid_for(n), 256, 0, s>>>(static_cast<const __nv_bfloat16*>(p), n, op, rank, world, root, chunk, w, f);
}

}  // namespace gb::cuda::dist
