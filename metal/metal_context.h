// Metal device, queue and run-time kernel compilation shared by the Metal probes.
// Plain C++ interface (no metal-cpp types) so the pybind11 binding stays framework-free.
#pragma once
#include <cstddef>
#include <string>

namespace MTL {
class Device;
class CommandQueue;
class Library;
class ComputePipelineState;
}  // namespace MTL

namespace gb::metal {

struct DeviceStatus {
  bool available = false;
  std::string reason;
  std::string name;
  bool unified_memory = false;
  std::size_t recommended_working_set = 0;
  std::size_t max_buffer_length = 0;
};

// Never throws.
DeviceStatus device_status();

// The process-wide device and command queue; creating them is the Metal "context" cost.
struct Context {
  MTL::Device* device = nullptr;
  MTL::CommandQueue* queue = nullptr;
  double create_seconds = 0.0;
};
Context& context();  // throws std::runtime_error when no Metal device exists

// newLibraryWithSource: compile MSL text at run time. Times the compile.
MTL::Library* compile_library(const std::string& source, double* seconds);
// newComputePipelineState for one kernel of a library. Times the pipeline creation.
MTL::ComputePipelineState* make_pipeline(MTL::Library* lib, const char* name, double* seconds);

}  // namespace gb::metal
