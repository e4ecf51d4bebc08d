// blas.cpp: BLAS cases on Metal (host side of metal/<op>.metal), metal-cpp, generic over
// csrc/ops.def: Impls vendor (the declared blit copy or MPS, metal/mps.cpp; gb::NotApplicable where
// none is declared), reference (the op's first declared kernel), dispatch (its last).
// Run: python -m bench.blas --backends native-metal   (macOS on Apple Silicon; not yet run on one)
#include <Foundation/Foundation.hpp>
#include <Metal/Metal.hpp>

#include "blas.h"
#include "metal_context.h"
#include "mps.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>
#include <memory>
#include <stdexcept>
#include <string>

namespace gb::metal::blas {

static const char* dtype_suffix(DType dt) {
  return dt == DType::fp32 ? "float" : (dt == DType::fp16 ? "half" : "bfloat");
}

// The kernels of metal/<op>.metal and their grids (csrc/ops.def's metal): the reference kernel
// first, the dispatched one last. A grid is threads (dispatchThreads over x[, y, z]) or groups
// (dispatchThreadgroups of `group` threads each), in terms of the case's dims.
struct Grid3 {
  long long x = 1, y = 1, z = 1;
};
using GridFn = Grid3 (*)(long long batch, long long m, long long n, long long k);
struct MetalKernel {
  const char* name;
  bool groups;  // dispatchThreadgroups (else dispatchThreads)
  int arity;    // threads: how many of x, y, z are declared; groups: threads per group
  GridFn grid;
};
struct MetalDecl {
  const char* args;  // the scalars after the buffers, e.g. "(m, k)": dims as uint, scalar as float
  std::vector<MetalKernel> kernels;
};

#define GB_MK_GRID_threads(...)                                                              \
  false, GB_NARGS(__VA_ARGS__), [](long long batch, long long m, long long n, long long k) { \
    GB_DIMS_USED;                                                                            \
    return Grid3{__VA_ARGS__};                                                               \
  }
#define GB_MK_GRID_groups(x, y, z, group)                                                    \
  true, group, [](long long batch, long long m, long long n, long long k) {                   \
    GB_DIMS_USED;                                                                            \
    return Grid3{x, y, z};                                                                   \
  }
#define GB_METAL_KERNEL_(kname, grid) MetalKernel{#kname, GB_CAT3(GB_MK_GRID_, grid)},
#define GB_METAL_KERNEL(entry) GB_CALL(GB_METAL_KERNEL_, entry)
#define GB_METAL_DECL_metal(args, ...) MetalDecl{#args, {GB_EACH(GB_METAL_KERNEL, (__VA_ARGS__))}}

static const MetalDecl& metal_decl(Op op) {
  static const std::vector<MetalDecl> table = {
#define GB_OP(name, index, form, inputs, output, scalar, kernels, vendor, metal) GB_CAT(GB_METAL_DECL_, metal),
#include "ops.def"
#undef GB_OP
  };
  return table.at((std::size_t)op);
}

// The kernel each hand-written Impl runs: the declaration's first (reference) or last (dispatch).
static const MetalKernel& kernel_of(Op op, Impl impl) {
  const auto& ks = metal_decl(op).kernels;
  return impl == Impl::dispatch ? ks.back() : ks.front();
}

// The declaration's scalar arguments, in order ("(m, k)" -> {"m", "k"}).
static std::vector<std::string> metal_args(Op op) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* c = metal_decl(op).args; *c; ++c) {
    if (*c == '(' || *c == ' ') continue;
    if (*c == ',' || *c == ')') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += *c;
    }
  }
  return out;
}

// The op's Metal vendor path is a blit copy (csrc/ops.def: vendor(..., blit)), not MPS.
static bool is_blit(Op op) {
  const gb::blas_ops::VendorDecl decl = gb::blas_ops::vendor_decl(op);
  if (decl.not_applicable) throw gb::NotApplicable(decl.not_applicable);
  return std::string(decl.metal) == "blit";
}

[[noreturn]] static void no_tf32() {
  throw gb::NotApplicable("vendor_tf32 does not exist on Metal (Apple GPUs have no TF32 path)");
}

struct Case::State {
  Op op = Op::copy;
  DType dt = DType::fp32;
  std::uint32_t batch = 1, m = 1, n = 1, k = 1;
  float scalar = 0.f;  // the op's parameter (csrc/ops.def)
  std::vector<std::size_t> in_bytes;
  std::size_t out_bytes = 0;
  std::vector<MTL::Buffer*> in;
  MTL::Buffer* out = nullptr;
  MTL::Library* lib = nullptr;
  double compile_s = 0;
  std::map<std::string, MTL::ComputePipelineState*> pipelines;  // by kernel name
  std::unique_ptr<mps::Op> vendor;  // Impl::vendor (not copy): made at first use

  MTL::ComputePipelineState* pipeline(Impl impl) {
    std::string name = std::string(kernel_of(op, impl).name) + "_" + dtype_suffix(dt);
    auto it = pipelines.find(name);
    if (it != pipelines.end()) return it->second;
    MTL::ComputePipelineState* p = make_pipeline(lib, name.c_str(), nullptr);
    pipelines[name] = p;
    return p;
  }

  // One dispatch of the op, encoded into `enc`: argument order is each kernel's [[buffer(i)]]:
  // the inputs, the output, then the declared scalars; the grid as declared.
  void encode(MTL::ComputeCommandEncoder* enc, MTL::ComputePipelineState* p, Impl impl) {
    enc->setComputePipelineState(p);
    for (std::size_t i = 0; i < in.size(); ++i) enc->setBuffer(in[i], 0, i);
    NS::UInteger next = in.size();
    enc->setBuffer(out, 0, next++);
    for (const std::string& a : metal_args(op)) {
      if (a == "scalar") {
        enc->setBytes(&scalar, sizeof scalar, next++);
        continue;
      }
      const std::uint32_t* d = a == "batch" ? &batch : a == "m" ? &m : a == "n" ? &n : a == "k" ? &k : nullptr;
      if (!d) throw std::logic_error("csrc/ops.def: unknown Metal argument " + a + " of " + op_name(op));
      enc->setBytes(d, sizeof *d, next++);
    }
    const MetalKernel& kern = kernel_of(op, impl);
    const Grid3 g = kern.grid(batch, m, n, k);
    if (kern.groups) {
      enc->dispatchThreadgroups(MTL::Size(g.x, g.y, g.z), MTL::Size(kern.arity, 1, 1));
      return;
    }
    NS::UInteger tg = p->maxTotalThreadsPerThreadgroup();
    if (kern.arity == 1) {
      enc->dispatchThreads(MTL::Size(g.x, 1, 1), MTL::Size(std::min<NS::UInteger>(tg, g.x), 1, 1));
      return;
    }
    NS::UInteger side = tg >= 256 ? 16 : 8;
    enc->dispatchThreads(MTL::Size(g.x, g.y, g.z), MTL::Size(std::min<NS::UInteger>(side, g.x),
                                                             std::min<NS::UInteger>(side, g.y), 1));
  }

  // Impl::vendor is the blit encoder for copy (as cudaMemcpy on CUDA), MPS for the rest; reference
  // and dispatch are the hand-written kernels.
  MTL::CommandBuffer* submit(Impl impl) {
    MTL::CommandBuffer* cb = nullptr;
    if (impl == Impl::vendor_tf32) no_tf32();
    if (impl == Impl::vendor) {
      const bool blit = is_blit(op);
      if (!blit && !vendor) vendor = std::make_unique<mps::Op>(context().device, op, dt, in, out, batch, m, n, k);
      cb = context().queue->commandBuffer();
      if (blit) {
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
  s.scalar = gb::op_scalar(op);
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
  gb::blas_ops::check_input(s.in_bytes, i, bytes);
  std::memcpy(s.in[i]->contents(), data, bytes);
}

std::string Case::strategy(Impl impl) const {
  auto& s = *impl_;
  if (impl == Impl::vendor_tf32) no_tf32();
  if (impl == Impl::vendor) {
    const gb::blas_ops::VendorDecl decl = gb::blas_ops::vendor_decl(s.op);
    if (decl.not_applicable) throw gb::NotApplicable(decl.not_applicable);
    return decl.metal;
  }
  return kernel_of(s.op, impl).name;
}

void Case::run_once(Impl impl, void* host) {
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
  std::memcpy(host, s.out->contents(), s.out_bytes);
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

void Case::last_output(void* host) {
  auto& s = *impl_;
  std::memcpy(host, s.out->contents(), s.out_bytes);
}

}  // namespace gb::metal::blas
