// CUDA device discovery and context creation timing (used by every CUDA probe).
#include "device.h"
#include "cuda_check.h"

#include <chrono>

namespace gb::cuda {

DeviceStatus device_status(int device) {
  DeviceStatus s;
  cudaRuntimeGetVersion(&s.runtime_version);
  // With no driver installed this returns cudaErrorInsufficientDriver; the static cudart
  // loads libcuda lazily, so this is where a GPU-less machine finds out.
  cudaError_t e = cudaDriverGetVersion(&s.driver_version);
  if (e != cudaSuccess) {
    s.reason = "CUDA driver unusable (" + cuda_error_text(e) + ")";
    return s;
  }
  if (s.driver_version == 0) {
    // No libcuda at all: every runtime call returns cudaErrorInsufficientDriver. Ask once so
    // the reason carries the runtime's own words.
    cudaError_t c = cudaGetDeviceCount(&s.device_count);
    cudaGetLastError();
    s.device_count = 0;
    s.reason = "no CUDA driver on this machine (" +
               (c != cudaSuccess ? cuda_error_text(c) : std::string("cudaDriverGetVersion reports 0")) + ")";
    return s;
  }
  e = cudaGetDeviceCount(&s.device_count);
  if (e != cudaSuccess) {
    s.reason = "no usable CUDA device (" + cuda_error_text(e) + ")";
    cudaGetLastError();
    return s;
  }
  if (s.device_count <= device) {
    s.reason = "CUDA device " + std::to_string(device) + " not present (" +
               std::to_string(s.device_count) + " visible)";
    return s;
  }
  cudaDeviceProp p{};
  e = cudaGetDeviceProperties(&p, device);
  if (e != cudaSuccess) {
    s.reason = "cudaGetDeviceProperties failed (" + cuda_error_text(e) + ")";
    cudaGetLastError();
    return s;
  }
  s.name = p.name;
  s.cc_major = p.major;
  s.cc_minor = p.minor;
  s.sm_count = p.multiProcessorCount;
  s.total_memory = p.totalGlobalMem;
  cudaDeviceGetAttribute(&s.clock_khz, cudaDevAttrClockRate, device);
  cudaDeviceGetAttribute(&s.l2_bytes, cudaDevAttrL2CacheSize, device);
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) == cudaSuccess) s.pci_bus_id = bus;
  s.available = true;
  return s;
}

double context_create_seconds(int device) {
  auto t0 = std::chrono::steady_clock::now();
  GB_CUDA_CHECK(cudaSetDevice(device));
  GB_CUDA_CHECK(cudaFree(nullptr));  // forces primary-context creation
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(t1 - t0).count();
}

void* pinned_alloc(std::size_t bytes) {
  void* p = nullptr;
  GB_CUDA_CHECK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable));  // pinned for every context
  return p;
}

void pinned_free(void* p) noexcept { cudaFreeHost(p); }

}  // namespace gb::cuda
