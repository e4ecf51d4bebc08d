// Registration hooks of the parts of gapbench._native; each part registers a submodule.
#pragma once
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "contract.h"

namespace gb {
void register_cpu(pybind11::module_& m);
void register_cuda(pybind11::module_& m);
void register_metal(pybind11::module_& m);
void register_dist(pybind11::module_& m);
}  // namespace gb

namespace gb {

// The buffer I/O every BLAS case class shares (CUDA and Metal): set_input takes any C-contiguous
// buffer (numpy arrays) as raw bytes; run_once(impl) returns the poisoned-then-computed output bytes.
template <class Case>
void bind_case_io(pybind11::class_<Case>& cls) {
  namespace py = pybind11;
  cls.def("set_input", [](Case& self, int i, py::buffer buf) {
        py::buffer_info info = buf.request();
        py::ssize_t expect = info.itemsize;  // C-contiguous: the only layout copied as raw bytes
        for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
          if (info.shape[d] > 1 && info.strides[d] != expect)
            throw std::invalid_argument("set_input needs a C-contiguous buffer (np.ascontiguousarray)");
          expect *= info.shape[d];
        }
        std::size_t bytes = static_cast<std::size_t>(info.size) * static_cast<std::size_t>(info.itemsize);
        py::gil_scoped_release r;
        self.set_input(i, info.ptr, bytes);
      }, py::arg("i"), py::arg("data"));
  cls.def("run_once", [](Case& self, Impl impl) {
        std::vector<std::uint8_t> out;
        {
          py::gil_scoped_release r;
          out = self.run_once(impl);
        }
        return py::bytes(reinterpret_cast<const char*>(out.data()), out.size());
      }, py::arg("impl"));
}

}  // namespace gb
