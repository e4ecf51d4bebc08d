// Shared by the Metal BLAS kernels (copy, gemv, vjp, gemm): kernel instantiation by dtype,
// MLX-style, so every kernel exists as <name>_float, <name>_half and <name>_bfloat.
#pragma once

#define GB_INSTANTIATE(name, func, T) template [[host_name(name)]] [[kernel]] decltype(func<T>) func<T>;
#define GB_INSTANTIATE_ALL(base, func)            \
  GB_INSTANTIATE(base "_float", func, float)      \
  GB_INSTANTIATE(base "_half", func, half)        \
  GB_INSTANTIATE(base "_bfloat", func, bfloat)
