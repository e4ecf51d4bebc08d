// Registration hooks of the parts of gapbench._native; each part registers a submodule.
#pragma once
#include <pybind11/numpy.h>
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
// buffer (numpy arrays) as raw bytes; run_once(impl) returns the poisoned-then-computed output bytes and
// last_output() those of the last timed run, each as a numpy uint8 array.
// The case's output bytes as a new numpy uint8 array, filled by fill(pointer) with the GIL released:
// the device copies straight into it (no zeroed staging vector, no bytes object copied again).
template <class Case, class Fill>
pybind11::array_t<std::uint8_t> read_output(Case& self, Fill&& fill) {
  pybind11::array_t<std::uint8_t> out(static_cast<pybind11::ssize_t>(self.output_bytes()));
  void* host = out.mutable_data();
  {
    pybind11::gil_scoped_release r;
    fill(host);
  }
  return out;
}

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
        return read_output(self, [&](void* host) { self.run_once(impl, host); });
      }, py::arg("impl"));
  cls.def("last_output", [](Case& self) {
        return read_output(self, [&](void* host) { self.last_output(host); });
      });
}

}  // namespace gb
