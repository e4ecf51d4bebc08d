/*
Device-memory copy, dst = src (n elements): the measured bandwidth roofline. Bytes moved = read +
write. Vendor: cudaMemcpyAsync device-to-device. Checked bit for bit against the input.

Build (or: cmake -S . -B build-lab -DGAPBENCH_LAB=ON && cmake --build build-lab):
  nvcc -O3 -std=c++20 -arch=sm_90a cuda/lab/copy.cu -o copy

version 1, copy_reference: one element per thread, grid-stride loop (the baseline).
  ./copy --variants 1
version 2, copy_vec16 (parent 1): 16-byte packs per thread (one LDG.128/STG.128), grid-stride;
  the form that reaches the memory system's peak. The library ships this one.
  ./copy --variants 2

Sweep: ./copy [--variants all] [--dtypes fp16,bf16,fp32] [--shapes N,...] [--cold read|write|none]
              [--rounds N] [--json FILE]
*/
#include "common.h"
#include "ops/copy.cuh"  // the library's kernels of the op (reference and shipped)

// The library's kernels this file runs (cuda/ops/copy.cuh), by their strategy names.
using gb::blas::copy_reference;
using gb::blas::copy_vec16;

using namespace lab;

// ----------------------------------------------------------------------------
// CPU reference: the input itself (a copy is exact), compared byte for byte.

// ----------------------------------------------------------------------------
// GPU kernels

// version 1: one element per thread

// version 2: 16-byte packs

// ----------------------------------------------------------------------------
// launchers

static int grid_for(long long work, int block) {
  long long g = (work + block - 1) / block;
  return static_cast<int>(g < 65535 * 16 ? (g > 0 ? g : 1) : 65535 * 16);
}

static void copy1(int dt, const void* src, void* dst, long long n, cudaStream_t s) {
  dispatch_dtype(dt, [&]<class T>() {
    copy_reference<T><<<grid_for(n, 256), 256, 0, s>>>(static_cast<const T*>(src), static_cast<T*>(dst), n);
  });
}

static void copy2(int dt, const void* src, void* dst, long long n, cudaStream_t s) {
  long long bytes = n * dtype_size(dt), packs = bytes / 16;
  copy_vec16<<<grid_for(packs, 256), 256, 0, s>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), packs);
  if (long long tail = bytes - packs * 16) {  // a length no pack divides: the last bytes one by one
    copy_reference<char><<<1, 32, 0, s>>>(static_cast<const char*>(src) + packs * 16,
                                        static_cast<char*>(dst) + packs * 16, tail);
  }
}

// ----------------------------------------------------------------------------
// the lab's case

static const OpInfo kInfo = {
    "copy", "N", 1, "16777216,268435456",
    {{1, "copy_reference", "-", "one element per thread, grid-stride"},
     {2, "copy_vec16", "1", "16-byte packs per thread (LDG.128/STG.128); shipped"}},
    "memcpy", nullptr};

static Case make_case(int dt, const std::vector<long long>& dims, Context& ctx, const std::vector<int>& variants) {
  const long long n = dims[0];
  auto src_h = std::make_shared<std::vector<unsigned char>>(random_input(n, dt, 1));
  void* src = to_device(*src_h);
  void* dst = nullptr;
  const size_t bytes = src_h->size();
  cudaCheck(cudaMalloc(&dst, bytes));
  Case c;
  c.out = dst;
  c.out_bytes = bytes;
  c.exact = true;
  c.bytes = 2.0 * bytes;
  c.check = [src_h](const std::vector<unsigned char>& out) {
    Check k;
    long long bad = 0;
    for (size_t i = 0; i < out.size(); ++i) bad += out[i] != (*src_h)[i];
    k.finite = true;
    k.checked = (long long)out.size();
    k.rel_err = out.empty() ? 0 : (double)bad / out.size();  // fraction of bytes that differ
    return k;
  };
  Arm vendor;
  vendor.id = 0;
  vendor.name = "memcpy";
  vendor.run = [=](cudaStream_t s) { cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s)); };
  c.arms.push_back(vendor);
  for (int v : variants) {
    Arm a;
    a.id = v;
    a.name = find_variant(kInfo, v)->name;
    if (v == 1) a.run = [=](cudaStream_t s) { copy1(dt, src, dst, n, s); };
    if (v == 2) a.run = [=](cudaStream_t s) { copy2(dt, src, dst, n, s); };
    c.arms.push_back(a);
  }
  c.release = [=] {
    cudaFree(src);
    cudaFree(dst);
  };
  (void)ctx;
  return c;
}

int main(int argc, char** argv) { return run_main(argc, argv, kInfo, make_case); }
