// cuda/ops/copy.cuh: the copy kernels (csrc/ops.def), shared by the library (its part at the end of this file) and
// the lab (cuda/lab/copy.cu). Device-memory copy, the measured bandwidth roofline (bytes = read +
// write). copy_reference: element by element, grid-stride (also the library's tail for bytes past
// the last 16-byte pack). copy_vec16: 16-byte packs with a grid-stride loop (the form that reaches
// the memory system's peak).
#pragma once
#include "dtype.cuh"

namespace gb::blas {

template <class T>
__global__ void copy_reference(const T* __restrict__ src, T* __restrict__ dst, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

__global__ void copy_vec16(const uint4* __restrict__ src, uint4* __restrict__ dst, long long packs) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < packs; i += (long long)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

}  // namespace gb::blas

// ---------------------------------------------------------------- the library's part
// The op's launcher, dispatcher rule, workspace and vendor call (cuda/kernels.h), compiled once into
// the library: the build compiles this header with GB_OPS_LIBRARY defined (CMakeLists.txt); the
// lab includes the kernels above only.
#ifdef GB_OPS_LIBRARY
#include "cuda_check.h"
#include "kernels.h"

namespace gb::blas::ops::copy {

static int grid_for(long long work, int block) {
  long long g = (work + block - 1) / block;
  return static_cast<int>(g < 65535 * 16 ? (g > 0 ? g : 1) : 65535 * 16);
}

void launch(Kernel kern, const Problem& p, const Gpu&, const Buffers& buf, cudaStream_t s) {
  const long long n = p.n;
  if (kern == Kernel::copy_reference) {
    dispatch_dtype(p.dt, [&]<class T>() {
      copy_reference<T><<<grid_for(n, 256), 256, 0, s>>>(static_cast<const T*>(buf.a), static_cast<T*>(buf.out), n);
    });
    return;
  }
  long long bytes = n * dtype_size((int)p.dt), packs = bytes / 16;
  if (packs > 0)
    copy_vec16<<<grid_for(packs, 256), 256, 0, s>>>(static_cast<const uint4*>(buf.a), static_cast<uint4*>(buf.out),
                                                   packs);
  if (long long tail = bytes - packs * 16) {
    const char* sb = static_cast<const char*>(buf.a) + packs * 16;
    char* db = static_cast<char*>(buf.out) + packs * 16;
    copy_reference<char><<<1, 32, 0, s>>>(sb, db, tail);
  }
}

// The dispatcher's rule: one kernel for every dtype and size.
Kernel rule(const Problem&, const Gpu&) { return Kernel::copy_vec16; }

long long work_floats(const Problem&, const Gpu&) { return 0; }

// Vendor row: cudaMemcpyAsync device-to-device (no cuBLAS).
void vendor(const Vendor& v) {
  GB_CUDA_CHECK(cudaMemcpyAsync(v.buf.out, v.buf.a, v.out_bytes, cudaMemcpyDeviceToDevice, v.stream));
}

}  // namespace gb::blas::ops::copy
#endif  // GB_OPS_LIBRARY
