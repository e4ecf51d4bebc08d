// Binding of the Metal part (macOS on Apple Silicon). Elsewhere the submodule exists with
// built=False and says why, so every platform can list the backend as a row with a reason.
#include <pybind11/stl.h>

#include "bindings.h"
#include "contract.h"

#ifdef GAPBENCH_WITH_METAL
#include "metal/blas.h"
#include "metal/launch.h"
#include "metal/metal_context.h"
#endif

namespace py = pybind11;

namespace gb {

void register_metal(py::module_& m) {
  auto c = m.def_submodule("metal", "Metal part: metal-cpp host code, kernels compiled at run time");
#ifdef GAPBENCH_WITH_METAL
  c.attr("built") = true;
  c.def("status", []() {
    auto s = gb::metal::device_status();
    py::dict d;
    d["available"] = s.available;
    d["reason"] = s.reason;
    d["name"] = s.name;
    d["unified_memory"] = s.unified_memory;
    d["recommended_working_set"] = s.recommended_working_set;
    d["max_buffer_length"] = s.max_buffer_length;
    return d;
  });
  c.def("context_create_seconds", &gb::metal::launch::context_create_seconds,
        py::call_guard<py::gil_scoped_release>());
  using gb::metal::launch::Probe;
  using rel = py::call_guard<py::gil_scoped_release>;
  py::class_<Probe>(c, "LaunchProbe")
      .def(py::init([](LaunchKernel kernel, int n, const std::string& source) {
             py::gil_scoped_release r;
             return new Probe((int)kernel, n, source);
           }), py::arg("kernel"), py::arg("n"), py::arg("source"))
      .def_property_readonly("library_compile_seconds", &Probe::library_compile_seconds)
      .def_property_readonly("pipeline_create_seconds", &Probe::pipeline_create_seconds)
      .def("timed_launch_sync", &Probe::timed_launch_sync, rel())
      .def("submit", &Probe::submit, py::arg("samples"), py::arg("inner"), py::arg("warmup"), rel())
      .def("roundtrip", &Probe::roundtrip, py::arg("samples"), py::arg("warmup"), rel())
      .def("stream_b2b", &Probe::stream_b2b, py::arg("samples"), py::arg("inner"), py::arg("warmup"), rel())
      .def("device_kernel", &Probe::device_kernel, py::arg("samples"), py::arg("inner"), py::arg("warmup"), rel())
      .def("count_launches", &Probe::count_launches, py::arg("k"), rel())
      .def("run_add", &Probe::run_add, py::arg("a"), py::arg("b"), rel());

  using gb::metal::blas::Case;
  auto blas_case = py::class_<Case>(c, "BlasCase");
  bind_case_io(blas_case);
  blas_case
      .def(py::init<Op, DType, long long, long long, long long, long long, const std::string&>(), py::arg("op"),
           py::arg("dtype"), py::arg("batch"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("source"), rel())
      .def_property_readonly("n_inputs", &Case::n_inputs)
      .def_property_readonly("output_bytes", &Case::output_bytes)
      .def_property_readonly("library_compile_seconds", &Case::library_compile_seconds)
      .def("input_bytes", &Case::input_bytes, py::arg("i"))
      .def("strategy", &Case::strategy, py::arg("impl"))
      .def("time", &Case::time, py::arg("impl"), py::arg("samples"), py::arg("warmup"), rel());
#else
  c.attr("built") = false;
  c.def("status", []() {
    py::dict d;
    d["available"] = false;
#ifdef __APPLE__
    d["reason"] = "Metal part not built: metal-cpp headers not found at install (pip install mlx-metal, then reinstall)";
#else
    d["reason"] = "Metal needs macOS on Apple Silicon (this build is not for macOS)";
#endif
    return d;
  });
#endif
}

}  // namespace gb
