// dlopen of libcublas: see cublas_loader.h.
#include "cublas_loader.h"

#include <dlfcn.h>

#include <stdexcept>

namespace gb::cuda::cublas {

static Api g_api;
static void* g_lib = nullptr;
static std::string g_path, g_error = "cuBLAS not loaded yet";

template <class F>
static bool bind(void* lib, const char* name, F& fn, std::string* missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return fn != nullptr;
}

std::string load(const std::vector<std::string>& candidates, std::string* why) {
  if (g_lib) return g_path;
  std::vector<std::string> tries = candidates;
  tries.push_back("libcublas.so.13");
  tries.push_back("libcublas.so.12");
  tries.push_back("libcublas.so");
  std::string errors;
  for (const auto& p : tries) {
    void* lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      errors += "\n  " + p + ": " + (e ? e : "not found");
      continue;
    }
    Api a;
    std::string missing;
    bind(lib, "cublasCreate_v2", a.create, &missing);
    bind(lib, "cublasDestroy_v2", a.destroy, &missing);
    bind(lib, "cublasSetStream_v2", a.set_stream, &missing);
    bind(lib, "cublasGetVersion_v2", a.get_version, &missing);
    bind(lib, "cublasSgemv_v2", a.sgemv, &missing);
    bind(lib, "cublasGemmEx", a.gemm_ex, &missing);
    bind(lib, "cublasGemmStridedBatchedEx", a.gemm_strided_batched_ex, &missing);
    if (!missing.empty()) {
      errors += "\n  " + p + ": missing symbols " + missing;
      dlclose(lib);
      continue;
    }
    g_api = a;
    g_lib = lib;
    g_path = p;
    g_error.clear();
    return p;
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
