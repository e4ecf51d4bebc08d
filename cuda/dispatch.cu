// dispatch.cu: the library's names and reference kernels, and the entry points the case runner
// calls (dispatch, work_floats, launch, vendor), each handing the op to its cuda/ops/<op>.cuh: all
// generated from csrc/ops.def, so nothing here names an op.
#include "cuda_check.h"
#include "kernels.h"

namespace gb::blas {

const char* kernel_name(Kernel k) {
  switch (k) {
#define GB_KERNEL_NAME(kn) \
  case Kernel::kn: return #kn;
#define GB_OP(name, index, form, inputs, output, scalar, kernels, ...) GB_EACH(GB_KERNEL_NAME, kernels)
#include "ops.def"
#undef GB_OP
#define GB_LAB(op, kernels) GB_EACH(GB_KERNEL_NAME, kernels)
#include "lab.def"
#undef GB_LAB
#undef GB_KERNEL_NAME
  }
  return "?";
}

Op kernel_op(Kernel k) {
  switch (k) {
#define GB_KERNEL_CASE(kn) case Kernel::kn:
#define GB_OP(name, index, form, inputs, output, scalar, kernels, ...) \
  GB_EACH(GB_KERNEL_CASE, kernels) return Op::name;
#include "ops.def"
#undef GB_OP
#define GB_LAB(op, kernels) GB_EACH(GB_KERNEL_CASE, kernels) return Op::op;
#include "lab.def"
#undef GB_LAB
#undef GB_KERNEL_CASE
  }
  throw std::invalid_argument("unknown kernel " + std::to_string((int)k));
}

Gpu query_gpu(int device) {
  Gpu g;
  int major = 0, minor = 0, l2 = 0;
  GB_CUDA_CHECK(cudaDeviceGetAttribute(&g.sms, cudaDevAttrMultiProcessorCount, device));
  GB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  GB_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  GB_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  g.cc = major * 10 + minor;
  g.l2_bytes = l2 > 0 ? (std::size_t)l2 : 0;
  return g;
}

Kernel reference_kernel(Op op) {
  switch (op) {
#define GB_OP(name, index, form, inputs, output, scalar, kernels, ...) \
  case Op::name: return Kernel::GB_FIRST(kernels);
#include "ops.def"
#undef GB_OP
  }
  throw std::invalid_argument("unknown op " + std::to_string((int)op));
}

#define GB_OP(name, ...) \
  case Op::name: return ops::name::CALL;

Kernel dispatch(const Problem& p, const Gpu& g) {
  switch (p.op) {
#define CALL rule(p, g)
#include "ops.def"
#undef CALL
  }
  throw std::invalid_argument("unknown op " + std::to_string((int)p.op));
}

// The op's own workspace (cuda/ops/<op>.cuh); the lab's part, if any, follows it.
static long long library_work_floats(const Problem& p, const Gpu& g) {
  switch (p.op) {
#define CALL work_floats(p, g)
#include "ops.def"
#undef CALL
  }
  throw std::invalid_argument("unknown op " + std::to_string((int)p.op));
}
#undef GB_OP

long long work_floats(const Problem& p, const Gpu& g) {
  long long lib = library_work_floats(p, g), lab = lab_work_floats(p, g);
  return lab ? (lib + 3) / 4 * 4 + lab : lib;  // the lab's part 16-byte aligned
}

bool is_lab_kernel(Kernel k) {
  switch (k) {
#define GB_LAB_CASE(kn) case Kernel::kn:
#define GB_LAB(op, kernels) GB_EACH(GB_LAB_CASE, kernels) return true;
#include "lab.def"
#undef GB_LAB
#undef GB_LAB_CASE
    default: return false;
  }
}

#ifndef GAPBENCH_WITH_LAB
long long lab_work_floats(const Problem&, const Gpu&) { return 0; }
void launch_lab(Kernel kern, const Problem&, const Gpu&, const Buffers&, cudaStream_t) {
  throw gb::NotApplicable(std::string(kernel_name(kern)) + " is a kernel of the lab (csrc/lab.def): build with "
                          "pip install . -Ccmake.define.GAPBENCH_LAB=ON to run it");
}
#endif

void launch(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s) {
  if (kernel_op(kern) != p.op)
    throw std::invalid_argument(std::string(kernel_name(kern)) + " is not a kernel of " + op_name(p.op));
  if (is_lab_kernel(kern)) {
    // the lab's own part of the workspace: after the library's, whose self-resetting counters
    // and accumulators the lab's kernels must not touch
    Buffers lab = buf;
    if (long long lw = lab_work_floats(p, g)) lab.work = buf.work ? buf.work + (work_floats(p, g) - lw) : nullptr;
    launch_lab(kern, p, g, lab, s);
    GB_CUDA_CHECK_LAUNCH();
    return;
  }
  switch (p.op) {
#define GB_OP(name, ...)                    \
  case Op::name:                            \
    ops::name::launch(kern, p, g, buf, s);  \
    break;
#include "ops.def"
#undef GB_OP
  }
  GB_CUDA_CHECK_LAUNCH();
}

void vendor(const Vendor& v) {
#define GB_VENDOR_CALL_vendor(...) OPNAME::vendor(v); return;
#define GB_VENDOR_CALL_vendor_tf32(...) OPNAME::vendor(v); return;
#define GB_VENDOR_CALL_none(why) throw gb::NotApplicable(why);
  switch (v.p.op) {
#define GB_OP(name, index, form, inputs, output, scalar, kernels, vendor_decl, ...) \
  case Op::name: {                                                                  \
    namespace OPNAME = ops::name;                                                   \
    GB_CAT(GB_VENDOR_CALL_, vendor_decl)                                            \
  }
#include "ops.def"
#undef GB_OP
  }
#undef GB_VENDOR_CALL_vendor
#undef GB_VENDOR_CALL_vendor_tf32
#undef GB_VENDOR_CALL_none
  throw std::invalid_argument("unknown op " + std::to_string((int)v.p.op));
}

}  // namespace gb::blas
