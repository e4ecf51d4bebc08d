// gapbench._native: the native probes. The typed contract first (contract.h: enums and the
// NotApplicable exception, shared by every part), then the submodules cpu (always), cuda and metal
// (each built when its toolchain is found; otherwise present with built=False and the reason).
#include <pybind11/pybind11.h>
#if PYBIND11_VERSION_MAJOR >= 3
#include <pybind11/native_enum.h>
#endif

#include <initializer_list>
#include <utility>

#include "bindings.h"
#include "contract.h"

namespace py = pybind11;

namespace {

// A Python enum.Enum (pybind11 >= 3: native_enum, so Op["vjp_dx"] and iteration work as for any
// Enum); older pybind11 gets py::enum_ (members by attribute: getattr(Op, "vjp_dx")).
template <class E>
void bind_enum(py::module_& m, const char* name, const char* doc,
               std::initializer_list<std::pair<const char*, E>> items) {
#if PYBIND11_VERSION_MAJOR >= 3
  py::native_enum<E> e(m, name, "enum.Enum", doc);
  for (const auto& it : items) e.value(it.first, it.second);
  e.finalize();
#else
  py::enum_<E> e(m, name, doc);
  for (const auto& it : items) e.value(it.first, it.second);
#endif
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "gapbench native probes (raw samples only; statistics live in Python)";
  using gb::Cache, gb::DType, gb::Impl, gb::LaunchKernel, gb::Op;
  bind_enum<Op>(m, "Op", "The ops of BlasCase (csrc/ops.def).", {
#define GB_OP(name, ...) {#name, Op::name},
#include "ops.def"
#undef GB_OP
                                                                 });
  bind_enum<DType>(m, "DType", "Element types (accumulation is fp32 for all).",
                   {{"fp32", DType::fp32}, {"fp16", DType::fp16}, {"bf16", DType::bf16}});
  bind_enum<Cache>(m, "Cache", "L2 state before each timed run: hot (rotating sets), cold_clean (2x-L2 read "
                   "pass), cold_dirty (2x-L2 memset).",
                   {{"hot", Cache::hot}, {"cold_clean", Cache::cold_clean}, {"cold_dirty", Cache::cold_dirty}});
  bind_enum<Impl>(m, "Impl", "What runs a BlasCase: the library's reference kernel, its dispatcher, the vendor "
                  "library, or the vendor library with TF32 (fp32 gemm only).",
                  {{"reference", Impl::reference}, {"dispatch", Impl::dispatch}, {"vendor", Impl::vendor},
                   {"vendor_tf32", Impl::vendor_tf32}});
  bind_enum<gb::Kernel>(m, "Kernel", "Every CUDA kernel of every op, by strategy name (csrc/ops.def; then the lab's "
                        "unshipped ones, csrc/lab.def): a CUDA BlasCase runs any kernel of its op by name, besides "
                        "Impl's reference and dispatcher.", {
#define GB_KERNEL_ITEM(kn) {#kn, gb::Kernel::kn},
#define GB_OP(name, index, form, inputs, output, scalar, kernels, ...) GB_EACH(GB_KERNEL_ITEM, kernels)
#include "ops.def"
#undef GB_OP
#define GB_LAB(op, kernels) GB_EACH(GB_KERNEL_ITEM, kernels)
#include "lab.def"
#undef GB_LAB
#undef GB_KERNEL_ITEM
                       });
  bind_enum<LaunchKernel>(m, "LaunchKernel", "Kernels of the launch probe: null (empty) and add1 (n-element add).",
                          {{"null", LaunchKernel::null}, {"add1", LaunchKernel::add1}});
  py::register_exception<gb::NotApplicable>(m, "NotApplicable", PyExc_ValueError);

  py::dict info;
  info["parts"] = GAPBENCH_BUILT_PARTS;
  info["cuda_archs"] = GAPBENCH_CUDA_ARCHS;
  info["git_sha"] = GAPBENCH_GIT_SHA;
  info["source_commit"] = GAPBENCH_SOURCE_COMMIT;
  info["source_hash"] = GAPBENCH_SOURCE_HASH;
  info["dirty"] = GAPBENCH_SOURCE_DIRTY != 0;
  info["cxx_compiler"] = GAPBENCH_CXX_COMPILER;
  info["cuda_compiler"] = GAPBENCH_CUDA_COMPILER;
  info["pybind11"] = PYBIND11_VERSION_MAJOR * 10000 + PYBIND11_VERSION_MINOR * 100 + PYBIND11_VERSION_PATCH;
  m.attr("build_info") = info;
  gb::register_cpu(m);
  gb::register_cuda(m);
  gb::register_metal(m);
  gb::register_dist(m);
}
