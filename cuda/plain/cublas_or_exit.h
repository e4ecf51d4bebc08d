// The standalone loops' cuBLAS (cuda/plain/blas.cu, cuda/tune/): loaded at run time from the path
// given (then the usual sonames); without it the loop prints why and exits with status 4, which
// the harness reports as the reason.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cublas_loader.h"

namespace gb::plain {

inline std::string load_cublas_or_exit(const char* path) {
  std::string why;
  std::string lib = gb::cuda::cublas::load({path}, &why);
  if (lib.empty()) {
    std::fprintf(stderr, "%s\n", why.c_str());
    std::exit(4);
  }
  return lib;
}

}  // namespace gb::plain
