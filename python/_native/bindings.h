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
// The case's output bytes, filled by fill(pointer) with the GIL released: the device copies
// straight into a new numpy uint8 array, or, given `out` (a writable C-contiguous byte buffer at
// least output_bytes long, such as a reused page-locked one), into it, returned as a view of its
// first output_bytes.
template <class Case, class Fill>
pybind11::array_t<std::uint8_t> read_output(Case& self, const pybind11::object& out, Fill&& fill) {
  namespace py = pybind11;
  const auto n = static_cast<py::ssize_t>(self.output_bytes());
  if (out.is_none()) {
    py::array_t<std::uint8_t> fresh(n);
    void* host = fresh.mutable_data();
    py::gil_scoped_release r;
    fill(host);
    return fresh;
  }
  py::buffer_info info = py::reinterpret_borrow<py::buffer>(out).request();
  const bool contiguous = info.ndim == 1 && (info.shape[0] <= 1 || info.strides[0] == info.itemsize);
  if (info.readonly || info.itemsize != 1 || !contiguous || info.size < n)
    throw std::invalid_argument("out must be a writable, contiguous 1-D byte buffer (numpy uint8) of at least " +
                                std::to_string(n) + " bytes");
  {
    py::gil_scoped_release r;
    fill(info.ptr);
  }
  return py::array_t<std::uint8_t>({n}, {static_cast<py::ssize_t>(1)}, static_cast<std::uint8_t*>(info.ptr), out);
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
  cls.def("run_once", [](Case& self, Impl impl, const py::object& out) {
        return read_output(self, out, [&](void* host) { self.run_once(impl, host); });
      }, py::arg("impl"), py::arg("out") = py::none());
  cls.def("last_output", [](Case& self, const py::object& out) {
        return read_output(self, out, [&](void* host) { self.last_output(host); });
      }, py::arg("out") = py::none());
}

}  // namespace gb
