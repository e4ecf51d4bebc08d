// CPU part of gapbench._native: the Python-to-native binding floor and a monotonic clock.
// noop() does nothing on purpose: calling it from Python measures what any native probe or
// framework op pays just to cross the binding, the bottom rung of the overhead ladder.
#include <chrono>
#include <cstdint>

#include "bindings.h"

namespace py = pybind11;

namespace gb {

void register_cpu(py::module_& m) {
  auto c = m.def_submodule("cpu", "CPU part: binding floor and clock");
  c.attr("built") = true;
  c.def("noop", []() {}, "Empty native call: the binding floor.");
  c.def("noop_args", [](py::object, py::object, py::object) {},
        "Empty native call with three arguments (the shape of a binary op call).");
  c.def("now_ns", []() -> std::int64_t {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch()).count();
      }, "std::chrono::steady_clock in nanoseconds (monotonic).");
}

}  // namespace gb
