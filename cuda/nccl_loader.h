// NCCL loaded at run time (dlopen of libnccl.so.2), as cuBLAS is: gapbench builds without NCCL's
// headers or library, imports where NCCL is absent, and says why the direct-NCCL rung is missing.
// Only the entry points the collective runner and the plain loop call are declared; the types
// and enum values are NCCL's public ABI (nccl.h, stable since NCCL 2.0; bfloat16 since 2.10).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

namespace gb::cuda::nccl {

struct CommOpaque;
using Comm = CommOpaque*;
using Result = int;  // ncclResult_t: 0 ncclSuccess, 7 ncclInProgress
constexpr Result kSuccess = 0;
constexpr int kUniqueIdBytes = 128;
struct UniqueId {
  char internal[kUniqueIdBytes];
};
enum DataType : int { kFloat16 = 6, kFloat32 = 7, kBfloat16 = 9 };
enum RedOp : int { kSum = 0 };

struct Api {
  Result (*get_version)(int*) = nullptr;
  Result (*get_unique_id)(UniqueId*) = nullptr;
  Result (*comm_init_rank)(Comm*, int, UniqueId, int) = nullptr;
  Result (*comm_destroy)(Comm) = nullptr;
  Result (*comm_abort)(Comm) = nullptr;
  Result (*comm_get_async_error)(Comm, Result*) = nullptr;
  const char* (*get_error_string)(Result) = nullptr;
  Result (*all_reduce)(const void*, void*, size_t, int, int, Comm, cudaStream_t) = nullptr;
  Result (*all_gather)(const void*, void*, size_t, int, Comm, cudaStream_t) = nullptr;
  Result (*reduce_scatter)(const void*, void*, size_t, int, int, Comm, cudaStream_t) = nullptr;
  Result (*broadcast)(const void*, void*, size_t, int, int, Comm, cudaStream_t) = nullptr;
  Result (*send)(const void*, size_t, int, int, Comm, cudaStream_t) = nullptr;
  Result (*recv)(void*, size_t, int, int, Comm, cudaStream_t) = nullptr;
  Result (*group_start)() = nullptr;
  Result (*group_end)() = nullptr;
};

// Tries each path in turn, then the plain sonames. Returns the path loaded, or "" with `why`.
std::string load(const std::vector<std::string>& candidates, std::string* why);
bool loaded();
const Api& api();          // throws std::runtime_error when not loaded
std::string load_error();  // why the last load failed
std::string loaded_path();
int version();  // e.g. 22809 for 2.28.9; throws when not loaded

// Throws std::runtime_error naming the call and NCCL's error string when r is not success.
void check(Result r, const char* what);

}  // namespace gb::cuda::nccl

#define GB_NCCL_CHECK(call) gb::cuda::nccl::check((call), #call)
