// Metal device/queue creation and run-time kernel compilation (metal-cpp, no Objective-C).
// metal-cpp's implementation is instantiated in this one translation unit.
#define NS_PRIVATE_IMPLEMENTATION
#define MTL_PRIVATE_IMPLEMENTATION
#include <Foundation/Foundation.hpp>
#include <Metal/Metal.hpp>

#include "metal_context.h"

#include <chrono>
#include <stdexcept>

namespace gb::metal {

static std::string ns_error_text(NS::Error* err) {
  if (err == nullptr || err->localizedDescription() == nullptr) return "unknown Metal error";
  return err->localizedDescription()->utf8String();
}

DeviceStatus device_status() {
  DeviceStatus s;
  NS::AutoreleasePool* pool = NS::AutoreleasePool::alloc()->init();
  MTL::Device* dev = MTL::CreateSystemDefaultDevice();
  if (dev == nullptr) {
    s.reason = "no Metal device (MTLCreateSystemDefaultDevice returned nil)";
  } else {
    s.available = true;
    s.name = dev->name()->utf8String();
    s.unified_memory = dev->hasUnifiedMemory();
    s.recommended_working_set = static_cast<std::size_t>(dev->recommendedMaxWorkingSetSize());
    s.max_buffer_length = static_cast<std::size_t>(dev->maxBufferLength());
    dev->release();
  }
  pool->release();
  return s;
}

Context& context() {
  static Context ctx;
  if (ctx.device == nullptr) {
    auto t0 = std::chrono::steady_clock::now();
    ctx.device = MTL::CreateSystemDefaultDevice();
    if (ctx.device == nullptr) throw std::runtime_error("no Metal device available");
    ctx.queue = ctx.device->newCommandQueue();
    if (ctx.queue == nullptr) throw std::runtime_error("Metal: newCommandQueue failed");
    ctx.create_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return ctx;
}

MTL::Library* compile_library(const std::string& source, double* seconds) {
  Context& ctx = context();
  NS::AutoreleasePool* pool = NS::AutoreleasePool::alloc()->init();
  auto t0 = std::chrono::steady_clock::now();
  NS::Error* err = nullptr;
  MTL::CompileOptions* opts = MTL::CompileOptions::alloc()->init();
  MTL::Library* lib = ctx.device->newLibrary(
      NS::String::string(source.c_str(), NS::UTF8StringEncoding), opts, &err);
  opts->release();
  if (seconds) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string msg = lib == nullptr ? ns_error_text(err) : std::string();
  pool->release();
  if (lib == nullptr) throw std::runtime_error("Metal library compile failed: " + msg);
  return lib;
}

MTL::ComputePipelineState* make_pipeline(MTL::Library* lib, const char* name, double* seconds) {
  Context& ctx = context();
  NS::AutoreleasePool* pool = NS::AutoreleasePool::alloc()->init();
  auto t0 = std::chrono::steady_clock::now();
  MTL::Function* fn = lib->newFunction(NS::String::string(name, NS::UTF8StringEncoding));
  if (fn == nullptr) {
    pool->release();
    throw std::runtime_error(std::string("Metal kernel not found in library: ") + name);
  }
  NS::Error* err = nullptr;
  MTL::ComputePipelineState* pso = ctx.device->newComputePipelineState(fn, &err);
  fn->release();
  if (seconds) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string msg = pso == nullptr ? ns_error_text(err) : std::string();
  pool->release();
  if (pso == nullptr) throw std::runtime_error("Metal pipeline creation failed: " + msg);
  return pso;
}

}  // namespace gb::metal
