// dlopen of libcublas: see cublas_loader.h.
#include "cublas_loader.h"

#include "dl_loader.h"

#include <stdexcept>

namespace gb::cuda::cublas {

static gb::dl::Library<Api> g("cuBLAS not loaded yet");

std::string load(const std::vector<std::string>& candidates, std::string* why) {
  std::vector<std::string> tries = candidates;
  tries.push_back("libcublas.so.13");
  tries.push_back("libcublas.so.12");
  tries.push_back("libcublas.so");
  return g.load(tries, [](Api& a, void* l, std::string* missing) {
    gb::dl::bind(l, "cublasCreate_v2", a.create, missing);
    gb::dl::bind(l, "cublasDestroy_v2", a.destroy, missing);
    gb::dl::bind(l, "cublasSetStream_v2", a.set_stream, missing);
    gb::dl::bind(l, "cublasGetVersion_v2", a.get_version, missing);
    gb::dl::bind(l, "cublasSgemv_v2", a.sgemv, missing);
    gb::dl::bind(l, "cublasGemmEx", a.gemm_ex, missing);
    gb::dl::bind(l, "cublasGemmStridedBatchedEx", a.gemm_strided_batched_ex, missing);
  }, "cuBLAS not found; tried:", why);
}

bool loaded() { return g.lib != nullptr; }
std::string load_error() { return g.error; }
std::string loaded_path() { return g.path; }

const Api& api() { return g.api(); }

}  // namespace gb::cuda::cublas
