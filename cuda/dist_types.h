// Operation and element types of bench.dist's collectives (host code and kernels share them).
#pragma once
#include <cstddef>

namespace gb::cuda::dist {

enum class Op : int { all_reduce = 0, all_gather = 1, reduce_scatter = 2, broadcast = 3, all_to_all = 4, sendrecv = 5 };
enum class DType : int { fp32 = 0, fp16 = 1, bf16 = 2 };

inline size_t dtype_size(DType t) { return t == DType::fp32 ? 4 : 2; }

}  // namespace gb::cuda::dist
