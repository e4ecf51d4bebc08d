// Peer-to-peer copy probe: see p2p.h.
#include "p2p.h"

#include <stdexcept>
#include <string>

#include "cuda_check.h"

namespace gb::cuda::p2p {

namespace {
// 16-byte vectors while aligned and whole, then bytes for the tail.
__global__ void copy_kernel(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst, size_t n) {
  size_t nv = n / 16, stride = size_t(gridDim.x) * blockDim.x, t = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  const uint4* s4 = reinterpret_cast<const uint4*>(src);
  uint4* d4 = reinterpret_cast<uint4*>(dst);
  for (size_t i = t; i < nv; i += stride) d4[i] = s4[i];
  for (size_t i = nv * 16 + t; i < n; i += stride) dst[i] = src[i];
}
__device__ inline unsigned char pattern(size_t i) { return (unsigned char)((i * 131u + (i >> 12)) & 0xFF); }
__global__ void fill_kernel(unsigned char* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = pattern(i);
}
__global__ void verify_kernel(const unsigned char* p, size_t n, unsigned long long* wrong) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    if (p[i] != pattern(i)) atomicAdd(wrong, 1ull);
}
int blocks_for(int device) {
  int sms = 0;
  GB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms * 4;
}
}  // namespace

bool can_access_peer(int src, int dst) {
  int ok = 0;
  GB_CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, dst, src));
  int ok2 = 0;
  GB_CUDA_CHECK(cudaDeviceCanAccessPeer(&ok2, src, dst));
  return ok && ok2;
}

static void enable_peer(int from, int to) {
  GB_CUDA_CHECK(cudaSetDevice(from));
  cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
  else GB_CUDA_CHECK(e);
}

PeerCopy::PeerCopy(int src, int dst, size_t bytes) : src_(src), dst_(dst), bytes_(bytes) {
  if (bytes == 0) throw std::invalid_argument("bytes must be > 0");
  if (src == dst) throw std::invalid_argument("source and destination GPU must differ");
  peer_ = can_access_peer(src, dst);
  if (peer_) {
    enable_peer(src, dst);
    enable_peer(dst, src);
  }
  GB_CUDA_CHECK(cudaSetDevice(src));
  GB_CUDA_CHECK(cudaMalloc(&a_, bytes));
  GB_CUDA_CHECK(cudaStreamCreateWithFlags(&s_src_, cudaStreamNonBlocking));
  GB_CUDA_CHECK(cudaEventCreate(&e0_src_));
  GB_CUDA_CHECK(cudaEventCreate(&e1_src_));
  blocks_src_ = blocks_for(src);
  fill_kernel<<<1024, 256, 0, s_src_>>>(static_cast<unsigned char*>(a_), bytes);
  GB_CUDA_CHECK_LAUNCH();
  GB_CUDA_CHECK(cudaStreamSynchronize(s_src_));
  GB_CUDA_CHECK(cudaSetDevice(dst));
  GB_CUDA_CHECK(cudaMalloc(&b_, bytes));
  GB_CUDA_CHECK(cudaMalloc(&wrong_, sizeof(unsigned long long)));
  GB_CUDA_CHECK(cudaStreamCreateWithFlags(&s_dst_, cudaStreamNonBlocking));
  GB_CUDA_CHECK(cudaEventCreate(&e0_dst_));
  GB_CUDA_CHECK(cudaEventCreate(&e1_dst_));
  blocks_dst_ = blocks_for(dst);
}

PeerCopy::~PeerCopy() {
  cudaSetDevice(src_);
  cudaFree(a_);
  if (s_src_) cudaStreamDestroy(s_src_);
  if (e0_src_) cudaEventDestroy(e0_src_);
  if (e1_src_) cudaEventDestroy(e1_src_);
  cudaSetDevice(dst_);
  cudaFree(b_);
  cudaFree(wrong_);
  if (s_dst_) cudaStreamDestroy(s_dst_);
  if (e0_dst_) cudaEventDestroy(e0_dst_);
  if (e1_dst_) cudaEventDestroy(e1_dst_);
}

void PeerCopy::launch(Method m, cudaStream_t s) {
  auto* src = static_cast<const unsigned char*>(a_);
  auto* dst = static_cast<unsigned char*>(b_);
  if (m == Method::memcpy_peer) {
    GB_CUDA_CHECK(cudaMemcpyPeerAsync(b_, dst_, a_, src_, bytes_, s));
    return;
  }
  if (!peer_) throw std::runtime_error("GPU " + std::to_string(src_) + " and GPU " + std::to_string(dst_) +
                                       " have no peer access: the copy kernels need it");
  copy_kernel<<<m == Method::kernel_pull ? blocks_dst_ : blocks_src_, 512, 0, s>>>(src, dst, bytes_);
  GB_CUDA_CHECK_LAUNCH();
}

unsigned long long PeerCopy::check(Method m) {
  GB_CUDA_CHECK(cudaSetDevice(dst_));
  GB_CUDA_CHECK(cudaMemsetAsync(b_, 0xFF, bytes_, s_dst_));
  GB_CUDA_CHECK(cudaStreamSynchronize(s_dst_));
  bool on_src = m != Method::kernel_pull;
  GB_CUDA_CHECK(cudaSetDevice(on_src ? src_ : dst_));
  launch(m, on_src ? s_src_ : s_dst_);
  GB_CUDA_CHECK(cudaStreamSynchronize(on_src ? s_src_ : s_dst_));
  return verify();
}

unsigned long long PeerCopy::verify() {
  GB_CUDA_CHECK(cudaSetDevice(dst_));
  GB_CUDA_CHECK(cudaMemsetAsync(wrong_, 0, sizeof(unsigned long long), s_dst_));
  verify_kernel<<<1024, 256, 0, s_dst_>>>(static_cast<const unsigned char*>(b_), bytes_, wrong_);
  GB_CUDA_CHECK_LAUNCH();
  unsigned long long w = 0;
  GB_CUDA_CHECK(cudaMemcpyAsync(&w, wrong_, sizeof(w), cudaMemcpyDeviceToHost, s_dst_));
  GB_CUDA_CHECK(cudaStreamSynchronize(s_dst_));
  return w;
}

std::vector<double> PeerCopy::time(Method m, int iters, int samples, int warmup) {
  if (iters < 1 || samples < 1 || warmup < 0) throw std::invalid_argument("iters and samples must be >= 1");
  bool on_src = m != Method::kernel_pull;
  int dev = on_src ? src_ : dst_;
  cudaStream_t s = on_src ? s_src_ : s_dst_;
  cudaEvent_t e0 = on_src ? e0_src_ : e0_dst_, e1 = on_src ? e1_src_ : e1_dst_;
  GB_CUDA_CHECK(cudaSetDevice(dev));
  for (int i = 0; i < warmup; ++i) launch(m, s);
  GB_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> out;
  out.reserve(samples);
  for (int k = 0; k < samples; ++k) {
    GB_CUDA_CHECK(cudaEventRecord(e0, s));
    for (int i = 0; i < iters; ++i) launch(m, s);
    GB_CUDA_CHECK(cudaEventRecord(e1, s));
    GB_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    GB_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    out.push_back(ms * 1e-3);
  }
  return out;
}

}  // namespace gb::cuda::p2p
