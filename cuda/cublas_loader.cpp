// dlopen of libcublas: see cublas_loader.h.
#include "cublas_loader.h"

#include "dl_loader.h"

#include <stdexcept>

namespace gb::cuda::cublas {

static Api g_api;
static void* g_lib = nullptr;
static std::string g_path, g_error = "cuBLAS not loaded yet";

std::string load(const std::vector<std::string>& candidates, std::string* why) {
  if (g_lib) return g_path;
  std::vector<std::string> tries = candidates;
  tries.push_back("libcublas.so.13");
  tries.push_back("libcublas.so.12");
  tries.push_back("libcublas.so");
  std::string errors, path;
  Api a;
  void* lib = gb::dl::open_first(tries, [&a](void* l, std::string* missing) {
    gb::dl::bind(l, "cublasCreate_v2", a.create, missing);
    gb::dl::bind(l, "cublasDestroy_v2", a.destroy, missing);
    gb::dl::bind(l, "cublasSetStream_v2", a.set_stream, missing);
    gb::dl::bind(l, "cublasGetVersion_v2", a.get_version, missing);
    gb::dl::bind(l, "cublasSgemv_v2", a.sgemv, missing);
    gb::dl::bind(l, "cublasGemmEx", a.gemm_ex, missing);
    gb::dl::bind(l, "cublasGemmStridedBatchedEx", a.gemm_strided_batched_ex, missing);
  }, &path, &errors);
  if (lib) {
    g_api = a;
    g_lib = lib;
    g_path = path;
    g_error.clear();
    return path;
  }
  g_error = "cuBLAS not found; tried:" + errors;
  if (why) *why = g_error;
  return "";
}

bool loaded() { return g_lib != nullptr; }
std::string load_error() { return g_error; }
std::string loaded_path() { return g_path; }

const Api& api() {
  if (!g_lib) throw std::runtime_error(g_error);
  return g_api;
}

}  // namespace gb::cuda::cublas
