// copy.cu: device-memory copy, the measured bandwidth roofline of this machine.
// Bytes moved = read + write. Variant 1 copies element by element; variant 2 moves 16-byte packs
// with a grid-stride loop (the form that reaches the memory system's peak). Vendor row:
// cudaMemcpyAsync device-to-device.  Run: python -m bench.blas --ops copy
#include "blas_kernels.h"
#include "dtype.cuh"

namespace gb::blas {

template <class T>
__global__ void copy_scalar(const T* __restrict__ src, T* __restrict__ dst, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

__global__ void copy_pack(const uint4* __restrict__ src, uint4* __restrict__ dst, long long packs) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < packs; i += (long long)gridDim.x * blockDim.x)
    dst[i] = src[i];
}

static int grid_for(long long work, int block) {
  long long g = (work + block - 1) / block;
  return static_cast<int>(g < 65535 * 16 ? (g > 0 ? g : 1) : 65535 * 16);
}

bool launch_copy(int variant, int dt, const void* src, void* dst, long long n, cudaStream_t s) {
  long long bytes = n * dtype_size(dt);
  if (variant == 1) {
    return dispatch_dtype(dt, [&]<class T>() {
      copy_scalar<T><<<grid_for(n, 256), 256, 0, s>>>(static_cast<const T*>(src), static_cast<T*>(dst), n);
    });
  }
  if (variant == 2) {
    long long packs = bytes / 16;
    copy_pack<<<grid_for(packs, 256), 256, 0, s>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), packs);
    long long tail = bytes - packs * 16;  // shapes here keep this 0; copied by the scalar form otherwise
    if (tail) {
      const char* sb = static_cast<const char*>(src) + packs * 16;
      char* db = static_cast<char*>(dst) + packs * 16;
      copy_scalar<char><<<1, 32, 0, s>>>(sb, db, tail);
    }
    return true;
  }
  return false;
}

}  // namespace gb::blas
