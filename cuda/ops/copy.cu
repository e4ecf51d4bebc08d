// cuda/ops/copy.cu: the copy op's launcher, dispatch rule and vendor call (kernels: copy.cuh).
#include "cuda_check.h"
#include "kernels.h"
#include "ops/copy.cuh"

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
