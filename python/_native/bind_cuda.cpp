// Binding of the CUDA part. Built with GAPBENCH_WITH_CUDA when the toolkit was found; the
// submodule exists either way, so Python can always ask it why CUDA is (un)available.
#include <pybind11/stl.h>

#include "bindings.h"
#include "contract.h"

#ifdef GAPBENCH_WITH_CUDA
#include "cuda/blas.h"
#include "cuda/device.h"
#include "cuda/gate.h"
#include "cuda/launch.h"
#endif

namespace py = pybind11;

namespace gb {

void register_cuda(py::module_& m) {
  auto c = m.def_submodule("cuda", "CUDA part: hand-written kernels, cudart linked statically");
#ifdef GAPBENCH_WITH_CUDA
  c.attr("built") = true;
  c.def("status", [](int device) {
        auto s = gb::cuda::device_status(device);
        py::dict d;
        d["available"] = s.available;
        d["reason"] = s.reason;
        d["device_count"] = s.device_count;
        d["name"] = s.name;
        d["compute_capability"] = std::to_string(s.cc_major) + "." + std::to_string(s.cc_minor);
        d["driver_version"] = s.driver_version;
        d["runtime_version"] = s.runtime_version;
        d["sm_count"] = s.sm_count;
        d["clock_khz"] = s.clock_khz;
        d["l2_bytes"] = s.l2_bytes;
        d["total_memory"] = s.total_memory;
        d["pci_bus_id"] = s.pci_bus_id;
        return d;
      }, py::arg("device") = 0);
  c.def("pinned_bytes", [](std::size_t n) {
        void* p = nullptr;
        {
          py::gil_scoped_release r;
          p = gb::cuda::pinned_alloc(n);
        }
        py::capsule owner(p, [](void* q) { gb::cuda::pinned_free(q); });
        return py::array_t<std::uint8_t>({static_cast<py::ssize_t>(n)}, {static_cast<py::ssize_t>(1)},
                                         static_cast<std::uint8_t*>(p), owner);
      }, py::arg("nbytes"),
      "n bytes of page-locked host memory (cudaHostAlloc) as a numpy uint8 array, freed with it: a read-back "
      "into it is one DMA");
  c.def("context_create_seconds", &gb::cuda::context_create_seconds, py::arg("device") = 0,
        py::call_guard<py::gil_scoped_release>());
  using gb::cuda::launch::Probe;
  using rel = py::call_guard<py::gil_scoped_release>;
  py::class_<Probe>(c, "LaunchProbe")
      .def(py::init([](LaunchKernel kernel, int n, int device) {
             py::gil_scoped_release r;
             return new Probe((int)kernel, n, device);
           }), py::arg("kernel"), py::arg("n") = 1, py::arg("device") = 0)
      .def_property_readonly("kernel", [](const Probe& p) { return (LaunchKernel)p.variant(); })
      .def_property_readonly("invalid_samples", &Probe::invalid_samples)
      .def("timed_launch_sync", &Probe::timed_launch_sync, rel())
      .def("submit", &Probe::submit, py::arg("samples"), py::arg("inner"), py::arg("warmup"), rel())
      .def("roundtrip", &Probe::roundtrip, py::arg("samples"), py::arg("warmup"), rel())
      .def("stream_b2b", &Probe::stream_b2b, py::arg("samples"), py::arg("inner"), py::arg("warmup"), rel())
      .def("device_kernel", &Probe::device_kernel, py::arg("samples"), py::arg("inner"), py::arg("warmup"), rel())
      .def("graph_replay", &Probe::graph_replay, py::arg("samples"), py::arg("inner"), py::arg("warmup"), rel())
      .def("count_launches", &Probe::count_launches, py::arg("k"), rel())
      .def("run_add", &Probe::run_add, py::arg("a"), py::arg("b"), rel());

  using gb::cuda::blas::Case;
  auto blas_case = py::class_<Case>(c, "BlasCase");
  bind_case_io(blas_case);
  blas_case
      .def(py::init<Op, DType, long long, long long, long long, long long, int>(), py::arg("op"), py::arg("dtype"),
           py::arg("batch"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("device") = 0, rel())
      .def_property_readonly("n_inputs", &Case::n_inputs)
      .def_property_readonly("output_bytes", &Case::output_bytes)
      .def_property_readonly("rotations", &Case::rotations)
      .def_property_readonly("l2_resident", &Case::l2_resident)
      .def_property_readonly("streams", &Case::streams)
      .def("use_stream", &Case::use_stream, py::arg("i"))
      .def("use_stream_handle", &Case::use_stream_handle, py::arg("stream"))
      .def_property_readonly("invalid_samples", &Case::invalid_samples)
      .def_property("parity_pads", &Case::parity_pads, &Case::set_parity_pads,
                    "Each timed run held with one or two empty kernels after the gate, in turn (gate.h)")
      .def("input_bytes", &Case::input_bytes, py::arg("i"))
      .def("strategy", py::overload_cast<Impl>(&Case::strategy, py::const_), py::arg("impl"))
      .def("time", py::overload_cast<Impl, int, int, Cache>(&Case::time), py::arg("impl"), py::arg("samples"),
           py::arg("warmup"), py::arg("cache") = Cache::hot, rel())
      // One kernel of the op by strategy (gb::Kernel), timed by the same path (bench.blas --variants all)
      .def("strategy", py::overload_cast<gb::Kernel>(&Case::strategy, py::const_), py::arg("impl"))
      .def("run_once", [](Case& self, gb::Kernel kernel, const py::object& out) {
             return read_output(self, out, [&](void* host) { self.run_once(kernel, host); });
           }, py::arg("impl"), py::arg("out") = py::none())
      .def("time", py::overload_cast<gb::Kernel, int, int, Cache>(&Case::time), py::arg("impl"), py::arg("samples"),
           py::arg("warmup"), py::arg("cache") = Cache::hot, rel())
      .def("time_empty", &Case::time_empty, py::arg("samples"), py::arg("warmup") = 0, rel(),
           "Device seconds of an empty kernel, timed as time() times a run, on the stream in use: the "
           "stream's launch floor beside the case's rows.");

  using gb::cuda::Gate;
  py::class_<Gate>(c, "Gate", "Release gate: hold(stream) enqueues a kernel that waits for release() (or the "
                              "timeout); timed_out() says whether the last hold ended by timeout.")
      .def(py::init<int, double>(), py::arg("device") = 0, py::arg("timeout_s") = 1.0, rel())
      .def("hold", &Gate::hold, py::arg("stream"), rel())
      .def("release", &Gate::release)
      .def("timed_out", &Gate::timed_out, rel())
      .def("scrub", [](Gate& g, std::uintptr_t stream, Cache cache) {
             if (cache == Cache::hot) return;  // nothing to evict: the hot mode rotates sets instead
             g.scrub(stream, (int)cache);     // Cache::cold_clean = 1, cold_dirty = 2: l2_scrub.cuh's modes
           }, py::arg("stream"), py::arg("cache"), rel())
      .def_property("parity_pads", &Gate::parity_pads, &Gate::set_parity_pads,
                    "Each hold followed by one or two empty kernels, in turn: every four consecutive holds "
                    "of one op time it twice at each launch parity of the stream (gate.h)")
      .def_property_readonly("timeout_s", &Gate::timeout_s)
      .def_property_readonly("device", &Gate::device);
  using gb::cuda::Streams;
  py::class_<Streams>(c, "Streams", "Blocking CUDA streams a framework's rows time on, one a paired round in turn "
                                    "(handle(i): the cudaStream_t as an int, for torch.cuda.ExternalStream or "
                                    "cupy.cuda.ExternalStream); destroyed with the object.")
      .def(py::init<int, int>(), py::arg("device") = 0, py::arg("count") = gb::cuda::blas::kTimingStreams, rel())
      .def("__len__", &Streams::size)
      .def("handle", &Streams::handle, py::arg("i"))
      .def_property_readonly("device", &Streams::device);
  c.attr("TIMING_STREAMS") = gb::cuda::blas::kTimingStreams;
  c.def("cublas_load", &gb::cuda::blas::cublas_load, py::arg("candidates"), rel());
  c.def("cublas_error", &gb::cuda::blas::cublas_error);
#else
  c.attr("built") = false;
  c.def("status", [](int) {
        py::dict d;
        d["available"] = false;
        d["reason"] = "CUDA part not built: no CUDA toolkit (nvcc) was found when gapbench was installed";
        return d;
      }, py::arg("device") = 0);
#endif
}

}  // namespace gb
