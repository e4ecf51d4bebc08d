// The preprocessor tools that expand csrc/ops.def's declarations (see there), shared by every
// place that generates code from it: csrc/contract.h, csrc/blas_ops.h, python/_native/module.cpp,
// cuda/kernels.h, cuda/dispatch.cu, metal/blas.cpp.
#pragma once

#define GB_UNPAREN(...) __VA_ARGS__
#define GB_CAT_(a, b) a##b
#define GB_CAT(a, b) GB_CAT_(a, b)
// The same, for use inside an expansion of GB_CAT (a macro does not expand inside itself).
#define GB_CAT2_(a, b) a##b
#define GB_CAT2(a, b) GB_CAT2_(a, b)
#define GB_CAT3_(a, b) a##b
#define GB_CAT3(a, b) GB_CAT3_(a, b)
#define GB_APPLY(m, ...) m(__VA_ARGS__)
#define GB_CALL(m, args) m args
// The first element of a parenthesised list: GB_FIRST((a, b, c)) -> a.
#define GB_FIRST_(a, ...) a
#define GB_FIRST(list) GB_CALL(GB_FIRST_, list)
// f(x) for each x of a parenthesised list of up to 12 elements: GB_EACH(f, (a, b)) -> f(a) f(b).
#define GB_NARGS_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, N, ...) N
#define GB_NARGS(...) GB_NARGS_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define GB_EACH_1(f, x) f(x)
#define GB_EACH_2(f, x, ...) f(x) GB_EACH_1(f, __VA_ARGS__)
#define GB_EACH_3(f, x, ...) f(x) GB_EACH_2(f, __VA_ARGS__)
#define GB_EACH_4(f, x, ...) f(x) GB_EACH_3(f, __VA_ARGS__)
#define GB_EACH_5(f, x, ...) f(x) GB_EACH_4(f, __VA_ARGS__)
#define GB_EACH_6(f, x, ...) f(x) GB_EACH_5(f, __VA_ARGS__)
#define GB_EACH_7(f, x, ...) f(x) GB_EACH_6(f, __VA_ARGS__)
#define GB_EACH_8(f, x, ...) f(x) GB_EACH_7(f, __VA_ARGS__)
#define GB_EACH_9(f, x, ...) f(x) GB_EACH_8(f, __VA_ARGS__)
#define GB_EACH_10(f, x, ...) f(x) GB_EACH_9(f, __VA_ARGS__)
#define GB_EACH_11(f, x, ...) f(x) GB_EACH_10(f, __VA_ARGS__)
#define GB_EACH_12(f, x, ...) f(x) GB_EACH_11(f, __VA_ARGS__)
#define GB_EACH_CAT_(a, b) a##b
#define GB_EACH_CAT(a, b) GB_EACH_CAT_(a, b)
#define GB_EACH(f, list) GB_APPLY(GB_EACH_CAT(GB_EACH_, GB_CALL(GB_NARGS, list)), f, GB_UNPAREN list)

// A declaration's expressions (products of dims) see the dims by these names, unused or not.
#define GB_DIMS_USED (void)batch, (void)m, (void)n, (void)k
