// cuda/lab/ptx.cuh: the PTX wrappers (wgmma, TMA, mbarrier, cp.async, cache-hinted loads) and the
// driver's tensor-map encoder that the lab's Hopper variants use (gemm.cu v6-v8, vjp_dx.cu v9 and
// the ws experiment) are the library's own: cuda/ptx.cuh and cuda/tensor_map.h, header-only, named
// here as lab::ptx and lab::tensor_map_encoder. The library's kernels themselves come from
// cuda/ops/<op>.cuh, which each lab file includes.
#pragma once
#include "../ptx.cuh"
#include "../tensor_map.h"

namespace lab {
namespace ptx = gb::ptx;
using gb::blas::tensor_map_encoder;
}  // namespace lab
