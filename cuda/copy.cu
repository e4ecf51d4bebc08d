// copy.cu: device-memory copy, the measured bandwidth roofline of this machine (bytes = read +
// write). copy_reference: element by element. copy_vec16: 16-byte packs with a grid-stride loop
// (the form that reaches the memory system's peak), any tail bytes by the element form.
// Vendor row: cudaMemcpyAsync device-to-device (cuda/blas.cu).
#include "dtype.cuh"
#include "kernels.h"

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

void launch_copy(Kernel kern, const Problem& p, const Buffers& buf, cudaStream_t s) {
  const long long n = p.n;
  if (kern == Kernel::copy_reference) {
    dispatch_dtype(p.dt, [&]<class T>() {
      copy_scalar<T><<<grid_for(n, 256), 256, 0, s>>>(static_cast<const T*>(buf.a), static_cast<T*>(buf.out), n);
    });
    return;
  }
  long long bytes = n * dtype_size((int)p.dt), packs = bytes / 16;
  if (packs > 0)
    copy_pack<<<grid_for(packs, 256), 256, 0, s>>>(static_cast<const uint4*>(buf.a), static_cast<uint4*>(buf.out),
                                                   packs);
  if (long long tail = bytes - packs * 16) {
    const char* sb = static_cast<const char*>(buf.a) + packs * 16;
    char* db = static_cast<char*>(buf.out) + packs * 16;
    copy_scalar<char><<<1, 32, 0, s>>>(sb, db, tail);
  }
}

}  // namespace gb::blas
