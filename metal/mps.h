// The vendor floor on Apple GPUs: Metal Performance Shaders' matrix kernels (MPSMatrix-
// Multiplication, MPSMatrixVectorMultiplication) encoded into a command buffer, like cuBLAS on the
// CUDA side. MPS has no C++ API; mps.cpp calls it through the Objective-C runtime (objc_msgSend),
// as metal-cpp does for Metal, so it is plain C++ that Linux CI can type-check for macOS.
// Never run on a Mac (none reachable): see README.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace MTL {
class Buffer;
class CommandBuffer;
class Device;
}  // namespace MTL

namespace gb::metal::mps {

// One op's MPS objects (kernel, matrix and vector views of the case's buffers), made once.
class Op {
 public:
  // op/dtype codes as gb::blas_ops::Op and the dtype codes (0 fp32, 1 fp16, 2 bf16). Throws
  // std::invalid_argument("no variant 0 here: <why>") when MPS cannot do this op/dtype.
  Op(MTL::Device* device, int op, int dtype, const std::vector<MTL::Buffer*>& in, MTL::Buffer* out,
     std::uint32_t batch, std::uint32_t m, std::uint32_t n, std::uint32_t k);
  ~Op();
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;
  void encode(MTL::CommandBuffer* cb) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gb::metal::mps
