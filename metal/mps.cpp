// mps.cpp: see mps.h. Every Objective-C call goes through msg<R>(receiver, "selector:", args...),
// a typed cast of objc_msgSend (arm64 has one entry point for all return types). Objects made
// with alloc/init are owned here and released in ~Op.
#include "mps.h"

#include "blas_ops.h"

#include <objc/message.h>
#include <objc/runtime.h>

#include <stdexcept>
#include <string>

namespace gb::metal::mps {

using namespace gb::blas_ops;

namespace {

using Obj = void*;
using UInt = unsigned long;  // NSUInteger on 64-bit Apple platforms

template <class R, class... A>
R msg(const void* receiver, const char* selector, A... args) {
  using Fn = R (*)(const void*, SEL, A...);
  return reinterpret_cast<Fn>(objc_msgSend)(receiver, sel_registerName(selector), args...);
}

Obj cls(const char* name) {
  Obj c = reinterpret_cast<Obj>(objc_getClass(name));
  if (!c)
    throw gb::NotApplicable(std::string("MPS class ") + name +
                                " not found (is MetalPerformanceShaders linked?)");
  return c;
}

// MPSDataType codes (MPSCoreTypes.h): float bit | width in bits.
constexpr std::uint32_t kFloat32 = 0x10000000u | 32u, kFloat16 = 0x10000000u | 16u;

}  // namespace

struct Op::Impl {
  gb::Op op = gb::Op::copy;
  Obj kernel = nullptr;                // MPSMatrixMultiplication or MPSMatrixVectorMultiplication
  Obj left = nullptr, right = nullptr;  // MPSMatrix, or matrix + MPSVector for matrix-vector
  Obj result = nullptr;
  bool vector = false;

  static Obj matrix(MTL::Buffer* buf, UInt rows, UInt cols, UInt matrices, UInt es, std::uint32_t type) {
    Obj desc = msg<Obj>(cls("MPSMatrixDescriptor"), "matrixDescriptorWithRows:columns:matrices:rowBytes:matrixBytes:dataType:",
                        rows, cols, matrices, cols * es, rows * cols * es, type);
    return msg<Obj>(msg<Obj>(cls("MPSMatrix"), "alloc"), "initWithBuffer:descriptor:", (const void*)buf, desc);
  }
  static Obj vec(MTL::Buffer* buf, UInt length, std::uint32_t type) {
    Obj desc = msg<Obj>(cls("MPSVectorDescriptor"), "vectorDescriptorWithLength:dataType:", length, type);
    return msg<Obj>(msg<Obj>(cls("MPSVector"), "alloc"), "initWithBuffer:descriptor:", (const void*)buf, desc);
  }
};

Op::Op(MTL::Device* device, gb::Op op, gb::DType dtype, const std::vector<MTL::Buffer*>& in, MTL::Buffer* out,
       std::uint32_t batch, std::uint32_t m, std::uint32_t n, std::uint32_t k)
    : impl_(new Impl) {
  auto& s = *impl_;
  s.op = op;
  const VendorDecl decl = vendor_decl(op);  // csrc/ops.def
  if (decl.not_applicable) throw gb::NotApplicable(decl.not_applicable);
  if (std::string(decl.metal) != "mps")
    throw gb::NotApplicable(std::string(gb::op_name(op)) + "'s vendor path is " + decl.metal + ", not MPS");
  // MPS's matrix kernels document float32 and float16; bfloat16 is not attempted (an unsupported
  // type raises an Objective-C exception, which would end the process, not fail one row).
  if (dtype == gb::DType::bf16) throw gb::NotApplicable("MPS matrix kernels are used for fp32/fp16 only");
  std::uint32_t type = dtype == gb::DType::fp32 ? kFloat32 : kFloat16;
  UInt es = dtype == gb::DType::fp32 ? 4 : 2;
  const void* dev = device;
  const bool yes = true, no = false;  // BOOL is bool on arm64
  if (op == gb::Op::gemm || op == gb::Op::vjp_dw) {
    UInt rows = m, cols = op == gb::Op::gemm ? n : k, inner = op == gb::Op::gemm ? k : 1, mats = op == gb::Op::gemm ? batch : 1;
    s.left = Impl::matrix(in[0], rows, inner, mats, es, type);   // A (m x k) or v (m x 1)
    s.right = Impl::matrix(in[1], inner, cols, mats, es, type);  // B (k x n) or x^T (1 x k)
    s.result = Impl::matrix(out, rows, cols, mats, es, type);
    s.kernel = msg<Obj>(msg<Obj>(cls("MPSMatrixMultiplication"), "alloc"),
                        "initWithDevice:transposeLeft:transposeRight:resultRows:resultColumns:interiorColumns:alpha:beta:",
                        dev, no, no, rows, cols, inner, 1.0, 0.0);
    if (op == gb::Op::gemm) msg<void>(s.kernel, "setBatchSize:", (UInt)batch);
  } else {
    // y = op(W) x with W row-major m x k: GEMV uses W (rows m, columns k); dx = W^T v uses the
    // transpose (MPS's rows/columns describe op(W): k x m).
    bool t = op == gb::Op::vjp_dx;
    s.vector = true;
    s.left = Impl::matrix(in[0], m, k, 1, es, type);
    s.right = Impl::vec(in[1], t ? m : k, type);
    s.result = Impl::vec(out, t ? k : m, type);
    s.kernel = msg<Obj>(msg<Obj>(cls("MPSMatrixVectorMultiplication"), "alloc"),
                        "initWithDevice:transpose:rows:columns:alpha:beta:", dev, t ? yes : no, (UInt)(t ? k : m),
                        (UInt)(t ? m : k), 1.0, 0.0);
  }
  if (!s.kernel || !s.left || !s.right || !s.result) throw std::runtime_error("MPS: object creation failed");
}

Op::~Op() {
  if (!impl_) return;
  for (Obj o : {impl_->kernel, impl_->left, impl_->right, impl_->result})
    if (o) msg<void>(o, "release");
}

void Op::encode(MTL::CommandBuffer* cb) const {
  const auto& s = *impl_;
  const void* c = cb;
  if (s.vector)
    msg<void>(s.kernel, "encodeToCommandBuffer:inputMatrix:inputVector:resultVector:", c, s.left, s.right, s.result);
  else
    msg<void>(s.kernel, "encodeToCommandBuffer:leftMatrix:rightMatrix:resultMatrix:", c, s.left, s.right, s.result);
}

}  // namespace gb::metal::mps
