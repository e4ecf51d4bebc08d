// gapbench._native: the native probes. Submodules cpu (always), cuda and metal (each built
// when its toolchain is found; otherwise present with built=False and the reason).
#include <pybind11/pybind11.h>

#include "bindings.h"

namespace py = pybind11;

PYBIND11_MODULE(_native, m) {
  m.doc() = "gapbench native probes (raw samples only; statistics live in Python)";
  py::dict info;
  info["parts"] = GAPBENCH_BUILT_PARTS;
  info["cuda_archs"] = GAPBENCH_CUDA_ARCHS;
  info["git_sha"] = GAPBENCH_GIT_SHA;
  info["cxx_compiler"] = GAPBENCH_CXX_COMPILER;
  info["cuda_compiler"] = GAPBENCH_CUDA_COMPILER;
  info["pybind11"] = PYBIND11_VERSION_MAJOR * 10000 + PYBIND11_VERSION_MINOR * 100 + PYBIND11_VERSION_PATCH;
  m.attr("build_info") = info;
  gb::register_cpu(m);
  gb::register_cuda(m);
  gb::register_metal(m);
  gb::register_dist(m);
}
