// CUDA device discovery, in plain C++ types so the pybind11 binding never sees CUDA headers.
#pragma once
#include <cstddef>
#include <string>

namespace gb::cuda {

struct DeviceStatus {
  bool available = false;
  std::string reason;          // why not, when unavailable (no driver, no device, ...)
  int device_count = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int driver_version = 0;      // CUDA version the driver supports, e.g. 13000
  int runtime_version = 0;     // cudart this module was linked with
  int sm_count = 0;
  int clock_khz = 0;
  int l2_bytes = 0;            // L2 cache size
  std::size_t total_memory = 0;
  std::string pci_bus_id;
};

// Never throws: an unusable CUDA stack is reported through `available` and `reason`.
DeviceStatus device_status(int device = 0);

// Seconds for cudaSetDevice + cudaFree(0): the primary context creation of a fresh process.
double context_create_seconds(int device = 0);

// Page-locked host memory (cudaHostAlloc): a device-to-host copy into it is one DMA, where a copy
// into pageable memory goes through the driver's staging buffer. For read-back buffers the
// harness reuses (gapbench.core.native.Staging). Throws on failure; free with pinned_free.
void* pinned_alloc(std::size_t bytes);
void pinned_free(void* p) noexcept;

}  // namespace gb::cuda
