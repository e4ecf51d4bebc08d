// Registration hooks of the parts of gapbench._native; each part registers a submodule.
#pragma once
#include <pybind11/pybind11.h>

namespace gb {
void register_cpu(pybind11::module_& m);
void register_cuda(pybind11::module_& m);
void register_metal(pybind11::module_& m);
}  // namespace gb
