// Binding of the distributed part (gapbench._native.dist): the direct-NCCL runner, NCCL's
// run-time loader and the peer-to-peer copy probe. Built with the CUDA part; the submodule
// exists either way (built=False) so Python can say why the rungs are missing.
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>

#include "bindings.h"
#include "contract.h"

#ifdef GAPBENCH_WITH_CUDA
#include "cuda/nccl_loader.h"
#include "cuda/nccl_runner.h"
#include "cuda/p2p.h"
#endif

namespace py = pybind11;

namespace gb {

#ifdef GAPBENCH_WITH_CUDA
namespace {
// The shared contract's DType (csrc/contract.h) to the NCCL runner's own element type.
gb::cuda::dist::DType to_dist(gb::DType t) {
  switch (t) {
    case gb::DType::fp32: return gb::cuda::dist::DType::fp32;
    case gb::DType::fp16: return gb::cuda::dist::DType::fp16;
    case gb::DType::bf16: return gb::cuda::dist::DType::bf16;
  }
  throw std::invalid_argument("unknown dtype " + std::to_string((int)t));
}
py::dict check_dict(const gb::cuda::dist::Check& c) {
  py::dict d;
  d["ok"] = c.ok;
  d["wrong"] = c.wrong;
  d["first_wrong"] = c.first_wrong;
  d["checked"] = c.checked;
  return d;
}
}  // namespace
#endif

void register_dist(py::module_& m) {
  auto d = m.def_submodule("dist", "collectives through NCCL called directly, and the peer-to-peer copy probe");
#ifdef GAPBENCH_WITH_CUDA
  // The collective operations, in the order of python/gapbench/dist/config.py's OPS.
  using gb::cuda::dist::Op;
  py::enum_<Op>(d, "CollOp")
      .value("all_reduce", Op::all_reduce)
      .value("all_gather", Op::all_gather)
      .value("reduce_scatter", Op::reduce_scatter)
      .value("broadcast", Op::broadcast)
      .value("all_to_all", Op::all_to_all)
      .value("sendrecv", Op::sendrecv);
  using gb::cuda::p2p::Method;
  py::enum_<Method>(d, "CopyMethod")
      .value("memcpy_peer", Method::memcpy_peer)
      .value("kernel_pull", Method::kernel_pull)
      .value("kernel_push", Method::kernel_push);
  d.attr("built") = true;
  d.attr("reason") = "";
  using rel = py::call_guard<py::gil_scoped_release>;
  d.def("nccl_load", [](const std::vector<std::string>& candidates) {
        std::string why;
        std::string p = gb::cuda::nccl::load(candidates, &why);
        if (p.empty()) throw std::runtime_error(why);
        return p;
      }, py::arg("candidates"));
  d.def("nccl_loaded_path", &gb::cuda::nccl::loaded_path);
  d.def("nccl_version", &gb::cuda::nccl::version);
  d.def("nccl_unique_id", []() { return py::bytes(gb::cuda::dist::unique_id()); });
  d.def("supports", &gb::cuda::dist::supports, py::arg("op"), py::arg("inplace"));
  using gb::cuda::dist::Runner;
  py::class_<Runner>(d, "NcclRunner")
      .def(py::init([](py::bytes uid, int rank, int world, int device, double timeout_s) {
             std::string u = uid;
             py::gil_scoped_release r;
             return new Runner(u, rank, world, device, timeout_s);
           }), py::arg("unique_id"), py::arg("rank"), py::arg("world"), py::arg("device"), py::arg("timeout_s") = 60.0)
      .def_property_readonly("rank", &Runner::rank)
      .def_property_readonly("world", &Runner::world)
      .def("check", [](Runner& s, Op op, gb::DType dt, size_t count, bool inplace, int root) {
             auto t = to_dist(dt);
             gb::cuda::dist::Check c;
             {
               py::gil_scoped_release r;
               c = s.check(op, t, count, inplace, root);
             }
             return check_dict(c);
           }, py::arg("op"), py::arg("dtype"), py::arg("count"), py::arg("inplace"), py::arg("root") = 0)
      .def("verify_output", [](Runner& s, Op op, gb::DType dt, size_t count, bool inplace, int root) {
             auto t = to_dist(dt);
             gb::cuda::dist::Check c;
             {
               py::gil_scoped_release r;
               c = s.verify_output(op, t, count, inplace, root);
             }
             return check_dict(c);
           }, py::arg("op"), py::arg("dtype"), py::arg("count"), py::arg("inplace"), py::arg("root") = 0)
      .def("time", [](Runner& s, Op op, gb::DType dt, size_t count, bool inplace, int root, int iters,
                      int samples, int warmup) {
             auto t = to_dist(dt);
             py::gil_scoped_release r;
             return s.time(op, t, count, inplace, root, iters, samples, warmup);
           }, py::arg("op"), py::arg("dtype"), py::arg("count"), py::arg("inplace"), py::arg("root"),
           py::arg("iters"), py::arg("samples"), py::arg("warmup"))
      .def("barrier", &Runner::barrier, rel())
      .def("abort", &Runner::abort, rel());
  d.def("can_access_peer", &gb::cuda::p2p::can_access_peer, py::arg("src"), py::arg("dst"), rel());
  using gb::cuda::p2p::PeerCopy;
  py::class_<PeerCopy>(d, "PeerCopy")
      .def(py::init<int, int, size_t>(), py::arg("src"), py::arg("dst"), py::arg("bytes"), rel())
      .def_property_readonly("peer_access", &PeerCopy::peer_access)
      .def_property_readonly("bytes", &PeerCopy::bytes)
      .def("check", &PeerCopy::check, py::arg("method"), rel())
      .def("verify", &PeerCopy::verify, rel())
      .def("time", &PeerCopy::time, py::arg("method"), py::arg("iters"), py::arg("samples"), py::arg("warmup"), rel());
#else
  d.attr("built") = false;
  d.attr("reason") = "CUDA part not built: no CUDA toolkit (nvcc) was found when gapbench was installed";
#endif
}

}  // namespace gb
