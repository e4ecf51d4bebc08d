// blas.cpp: BLAS cases on Metal (host side of metal/{copy,gemv,vjp,gemm}.metal), metal-cpp.
// Impls: vendor (blit copy / MPS, metal/mps.cpp), reference (each op's first kernel), dispatch
// (gemm_simd for gemm, the reference kernel elsewhere).
// Run: python -m bench.blas --backends native-metal   (macOS on Apple Silicon; not yet run on one)
#include <Foundation/Foundation.hpp>
#include <Metal/Metal.hpp>

#include "blas.h"
#include "metal_context.h"
#include "mps.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

namespace gb::metal::blas {

static const char* dtype_suffix(DType dt) {
  return dt == DType::fp32 ? "float" : (dt == DType::fp16 ? "half" : "bfloat");
}

// The kernel of metal/<op>.metal each hand-written Impl runs (the library table of this backend).
static const char* kernel_base(Op op, Impl impl) {
  if (impl == Impl::dispatch && op == Op::gemm) return "gemm_simd";
  switch (op) {
    case Op::copy: return "copy_elem";
    case Op::gemv: return "gemv_row";
    case Op::vjp_dx: return "vjp_dx_col";
    case Op::vjp_dw: return "vjp_dw_elem";
    case Op::gemm: return "gemm_naive";
  }
  return nullptr;
}

[[noreturn]] static void no_tf32() {
  throw gb::NotApplicable("vendor_tf32 does not exist on Metal (Apple GPUs have no TF32 path)");
}

struct Case::State {
  Op op = Op::copy;
  DType dt = DType::fp32;
  std::uint32_t batch = 1, m = 1, n = 1, k = 1;
  std::vector<std::size_t> in_bytes;
  std::size_t out_bytes = 0;
  std::vector<MTL::Buffer*> in;
  MTL::Buffer* out = nullptr;
  MTL::Library* lib = nullptr;
  double compile_s = 0;
  std::map<std::string, MTL::ComputePipelineState*> pipelines;  // by kernel name
  std::unique_ptr<mps::Op> vendor;  // Impl::vendor (not copy): made at first use

  MTL::ComputePipelineState* pipeline(Impl impl) {
    std::string name = std::string(kernel_base(op, impl)) + "_" + dtype_suffix(dt);
    auto it = pipelines.find(name);
    if (it != pipelines.end()) return it->second;
    MTL::ComputePipelineState* p = make_pipeline(lib, name.c_str(), nullptr);
    pipelines[name] = p;
    return p;
  }

  // One dispatch of the op, encoded into `enc`: argument order is each kernel's [[buffer(i)]].
  void encode(MTL::ComputeCommandEncoder* enc, MTL::ComputePipelineState* p, Impl impl) {
    enc->setComputePipelineState(p);
    for (std::size_t i = 0; i < in.size(); ++i) enc->setBuffer(in[i], 0, i);
    NS::UInteger next = in.size();
    enc->setBuffer(out, 0, next++);
    NS::UInteger tg = p->maxTotalThreadsPerThreadgroup();
    switch (op) {
      case Op::copy: {
        std::uint32_t count = n;
        enc->setBytes(&count, sizeof count, next);
        enc->dispatchThreads(MTL::Size(count, 1, 1), MTL::Size(std::min<NS::UInteger>(tg, count), 1, 1));
        break;
      }
      case Op::gemv:
      case Op::vjp_dx:
      case Op::vjp_dw: {
        enc->setBytes(&m, sizeof m, next);
        enc->setBytes(&k, sizeof k, next + 1);
        NS::UInteger threads = op == Op::gemv ? m : (op == Op::vjp_dx ? k : (NS::UInteger)m * k);
        enc->dispatchThreads(MTL::Size(threads, 1, 1), MTL::Size(std::min<NS::UInteger>(tg, threads), 1, 1));
        break;
      }
      case Op::gemm: {
        enc->setBytes(&m, sizeof m, next);
        enc->setBytes(&n, sizeof n, next + 1);
        enc->setBytes(&k, sizeof k, next + 2);
        if (std::strcmp(kernel_base(op, impl), "gemm_simd") == 0) {  // 32x32 tiles, 4 simdgroups of 32 threads
          enc->dispatchThreadgroups(MTL::Size((n + 31) / 32, (m + 31) / 32, batch), MTL::Size(128, 1, 1));
          break;
        }
        NS::UInteger side = tg >= 256 ? 16 : 8;
        enc->dispatchThreads(MTL::Size(n, m, batch), MTL::Size(std::min<NS::UInteger>(side, n),
                                                               std::min<NS::UInteger>(side, m), 1));
        break;
      }
    }
  }

  // Impl::vendor is the blit encoder for copy (as cudaMemcpy on CUDA), MPS for the rest; reference
  // and dispatch are the hand-written kernels.
  MTL::CommandBuffer* submit(Impl impl) {
    MTL::CommandBuffer* cb = nullptr;
    if (impl == Impl::vendor_tf32) no_tf32();
    if (impl == Impl::vendor) {
      if (op != Op::copy && !vendor)
        vendor = std::make_unique<mps::Op>(context().device, op, dt, in, out, batch, m, n, k);
      cb = context().queue->commandBuffer();
      if (op == Op::copy) {
        MTL::BlitCommandEncoder* blit = cb->blitCommandEncoder();
        blit->copyFromBuffer(in[0], 0, out, 0, out_bytes);
        blit->endEncoding();
      } else {
        vendor->encode(cb);
      }
    } else {
      MTL::ComputePipelineState* p = pipeline(impl);
      cb = context().queue->commandBuffer();
      MTL::ComputeCommandEncoder* enc = cb->computeCommandEncoder();
      encode(enc, p, impl);
      enc->endEncoding();
    }
    cb->commit();
    cb->waitUntilCompleted();
    if (cb->status() == MTL::CommandBufferStatusError) {
      NS::Error* e = cb->error();
      throw std::runtime_error(std::string("Metal command buffer failed: ") +
                               ((e && e->localizedDescription()) ? e->localizedDescription()->utf8String() : "?"));
    }
    return cb;
  }
};

Case::Case(Op op, DType dtype, long long batch, long long m, long long n, long long k, const std::string& source)
    : impl_(new State) {
  auto& s = *impl_;
  gb::check_enums(op, dtype);
  for (long long d : {batch, m, n, k})
    if (d < 1 || d > 0xFFFFFFFFLL) throw std::invalid_argument("Metal kernels index with 32-bit uint: dims must be 1..2^32-1");
  s.op = op;
  s.dt = dtype;
  s.batch = (std::uint32_t)batch;
  s.m = (std::uint32_t)m;
  s.n = (std::uint32_t)n;
  s.k = (std::uint32_t)k;
  gb::blas_ops::Io io = gb::blas_ops::io_bytes(op, gb::dtype_bytes(dtype), batch, m, n, k);
  s.in_bytes = io.in;
  s.out_bytes = io.out;
  Context& ctx = context();
  s.lib = compile_library(source, &s.compile_s);
  // Shared storage: on unified memory the CPU writes inputs and reads outputs in place.
  for (auto b : s.in_bytes) {
    MTL::Buffer* buf = ctx.device->newBuffer(b, MTL::ResourceStorageModeShared);
    if (!buf) throw std::runtime_error("Metal: newBuffer failed (" + std::to_string(b) + " bytes)");
    s.in.push_back(buf);
  }
  s.out = ctx.device->newBuffer(s.out_bytes, MTL::ResourceStorageModeShared);
  if (!s.out) throw std::runtime_error("Metal: newBuffer failed for the output");
}

Case::~Case() {
  if (!impl_) return;
  auto& s = *impl_;
  for (auto& kv : s.pipelines) kv.second->release();
  for (auto* b : s.in) b->release();
  if (s.out) s.out->release();
  if (s.lib) s.lib->release();
}

int Case::n_inputs() const { return (int)impl_->in_bytes.size(); }
std::size_t Case::input_bytes(int i) const { return impl_->in_bytes.at(i); }
std::size_t Case::output_bytes() const { return impl_->out_bytes; }
double Case::library_compile_seconds() const { return impl_->compile_s; }

void Case::set_input(int i, const void* data, std::size_t bytes) {
  auto& s = *impl_;
  if (i < 0 || i >= n_inputs()) throw std::out_of_range("input index");
  if (bytes != s.in_bytes[i])
    throw std::invalid_argument("input " + std::to_string(i) + ": expected " + std::to_string(s.in_bytes[i]) +
                                " bytes, got " + std::to_string(bytes));
  std::memcpy(s.in[i]->contents(), data, bytes);
}

std::string Case::strategy(Impl impl) const {
  auto& s = *impl_;
  if (impl == Impl::vendor_tf32) no_tf32();
  if (impl == Impl::vendor) return s.op == Op::copy ? "blit" : "mps";
  return kernel_base(s.op, impl);
}

std::vector<std::uint8_t> Case::run_once(Impl impl) {
  auto& s = *impl_;
  NS::AutoreleasePool* pool = NS::AutoreleasePool::alloc()->init();
  std::memset(s.out->contents(), 0xFF, s.out_bytes);
  try {
    s.submit(impl);
  } catch (...) {
    pool->release();
    throw;
  }
  pool->release();
  std::vector<std::uint8_t> host(s.out_bytes);
  std::memcpy(host.data(), s.out->contents(), s.out_bytes);
  return host;
}

std::vector<double> Case::time(Impl impl, int samples, int warmup) {
  auto& s = *impl_;
  if (samples < 1 || warmup < 0) throw std::invalid_argument("samples must be >= 1 and warmup >= 0");
  std::vector<double> out;
  out.reserve(samples);
  for (int i = 0; i < warmup + samples; ++i) {
    if (i == warmup + samples - 1) std::memset(s.out->contents(), 0xFF, s.out_bytes);  // see last_output()
    NS::AutoreleasePool* pool = NS::AutoreleasePool::alloc()->init();
    double dt = 0;
    try {
      MTL::CommandBuffer* cb = s.submit(impl);
      dt = cb->GPUEndTime() - cb->GPUStartTime();
    } catch (...) {
      pool->release();
      throw;
    }
    pool->release();
    if (i >= warmup) out.push_back(dt);
  }
  return out;
}

std::vector<std::uint8_t> Case::last_output() {
  auto& s = *impl_;
  std::vector<std::uint8_t> host(s.out_bytes);
  std::memcpy(host.data(), s.out->contents(), s.out_bytes);
  return host;
}

}  // namespace gb::metal::blas
