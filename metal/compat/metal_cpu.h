// metal_cpu.h: compile gapbench's .metal kernels as ordinary C++ and run them on the CPU,
// so Linux CI checks the kernels' arithmetic and indexing against numpy without a Mac.
//
// Use: c++ -std=c++17 -Wno-attributes -I metal/compat -include metal_cpu.h driver.cpp
//      where driver.cpp #includes the .metal file and calls its kernels.
// The driver calls a kernel function once per thread position (see gapbench.metal_cpu).
//
// Supported subset of the Metal Shading Language (kernels must stay inside it):
//   - address-space qualifiers device / constant / thread (erased; threadgroup is not supported)
//   - [[buffer(i)]], [[thread_position_in_grid]] attributes (ignored; the driver passes args)
//   - scalar types uint, ushort, half (as _Float16 where the compiler has it), float, bfloat
//     (a 16-bit struct here: convert to float for arithmetic, as the kernels do anyway)
//   - kernel templates instantiated with [[host_name]] / [[kernel]] attributes (ignored here)
//   - atomic_uint / atomic_int with atomic_{load,store,fetch_add}_explicit, memory_order_relaxed
//   - no threadgroup memory, barriers, simdgroup functions or textures: a kernel using them
//     fails to compile here, which is the signal to extend this header first.
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>

#define kernel
#define device
#define constant
#define thread

namespace metal {
using uint = std::uint32_t;
using ushort = std::uint16_t;
#if defined(__FLT16_MAX__)
using half = _Float16;
#endif
// A distinct type, not std::atomic itself: otherwise argument-dependent lookup also finds
// std::atomic_fetch_add_explicit and the MSL-style calls become ambiguous.
template <class T>
struct atomic {
  std::atomic<T> v;
  atomic(T x = T()) : v(x) {}
  T load() const { return v.load(); }
};
// MSL's bfloat (Metal 3.1+): storage only here; conversion rounds to nearest even like the GPU.
struct bfloat {
  std::uint16_t bits = 0;
  bfloat() = default;
  explicit bfloat(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    bits = static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
  explicit operator float() const {
    std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};
struct uint3 {
  std::uint32_t x = 0, y = 0, z = 0;
};
using atomic_uint = atomic<std::uint32_t>;
using atomic_int = atomic<std::int32_t>;
using memory_order = std::memory_order;
constexpr std::memory_order memory_order_relaxed = std::memory_order_relaxed;

template <class T, class U>
inline T atomic_fetch_add_explicit(atomic<T>* obj, U v, memory_order o) {
  return obj->v.fetch_add(static_cast<T>(v), o);
}
template <class T>
inline T atomic_load_explicit(const atomic<T>* obj, memory_order o) {
  return obj->v.load(o);
}
template <class T, class U>
inline void atomic_store_explicit(atomic<T>* obj, U v, memory_order o) {
  obj->v.store(static_cast<T>(v), o);
}
using std::fma;
using std::max;
using std::min;
}  // namespace metal

// MSL has `uint` in the global namespace too.
using metal::bfloat;
using metal::uint3;
using metal::uint;
using metal::ushort;
