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

#include "contract.h"

namespace MTL {
class Buffer;
class CommandBuffer;
class Device;
}  // namespace MTL

namespace gb::metal::mps {

// One op's MPS objects (kernel, matrix and vector views of the case's buffers), made once.
class Op {
 public:
  // Throws gb::NotApplicable when MPS cannot do this op/dtype.
  Op(MTL::Device* device, gb::Op op, gb::DType dtype, const std::vector<MTL::Buffer*>& in, MTL::Buffer* out,
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
