// metal_cpu.h: compile gapbench's .metal kernels as ordinary C++ and run them on the CPU,
// so Linux CI checks the kernels' arithmetic and indexing against numpy without a Mac.
//
// Use: c++ -std=c++20 -pthread -Wno-attributes -I metal/compat -include metal_cpu.h driver.cpp
//      where driver.cpp #includes the .metal file and calls its kernels.
// The driver calls a kernel function once per thread position (see gapbench.metal_cpu), or, for
// kernels that use threadgroup memory and barriers, through gb_cpu::dispatch_threadgroups: one
// threadgroup at a time, its threads as real OS threads meeting at a std::barrier.
//
// Supported subset of the Metal Shading Language (kernels must stay inside it):
//   - address-space qualifiers device / constant / thread (erased; threadgroup is not supported)
//   - [[buffer(i)]], [[thread_position_in_grid]] attributes (ignored; the driver passes args)
//   - scalar types uint, ushort, half (as _Float16 where the compiler has it), float, bfloat
//     (a 16-bit struct here: convert to float for arithmetic, as the kernels do anyway)
//   - kernel templates instantiated with [[host_name]] / [[kernel]] attributes (ignored here)
//   - atomic_uint / atomic_int with atomic_{load,store,fetch_add}_explicit, memory_order_relaxed
//   - threadgroup arrays declared at kernel scope (`threadgroup float t[32][32];`): emulated as
//     function statics, shared by the threads of the one threadgroup that runs at a time. Do not
//     use `threadgroup` on pointers or scalars here (they would become statics too).
//   - threadgroup_barrier(mem_flags::...) (a std::barrier over the threadgroup's threads)
//   - simdgroup_float8x8 with make_filled_simdgroup_matrix, simdgroup_load (row stride, no
//     transpose), simdgroup_store and simdgroup_multiply_accumulate: each emulated lane computes
//     the whole 8x8 product (same values as the 32 cooperating lanes of the GPU), and only lane 0
//     stores, so a barrier is needed before other threads read what was stored (as on the GPU).
//   - fma, min, max, sqrt and rsqrt on float
//   - no textures or other simd_* functions: a kernel using them fails to compile here, which
//     is the signal to extend this header first.
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

// Named before `thread` becomes an (erased) address-space keyword below.
namespace gb_cpu {
using os_thread = std::thread;
}

#define kernel
#define device
#define constant
#define thread
#define threadgroup static

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
// MSL's float math the kernels use (fp32 here, correctly rounded: the GPU's are within its ulps).
inline float sqrt(float x) { return std::sqrt(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }

enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2 };
}  // namespace metal

// The CPU dispatcher's per-thread state (set by gb_cpu::dispatch_threadgroups).
namespace gb_cpu {
inline std::barrier<>*& current_barrier() {
  static std::barrier<>* b = nullptr;
  return b;
}
inline unsigned& lane() {
  static thread_local unsigned l = 0;
  return l;
}
// Runs fn(threadgroup_position, thread_index_in_threadgroup, simdgroup_index, lane) for every
// thread of a groups.x * groups.y * groups.z grid of threadgroups of `threads` threads: one
// threadgroup at a time (so `threadgroup` statics are that group's memory), its threads
// concurrent so barriers and cooperative loads behave as on the GPU. SIMD width 32 (Apple GPUs).
template <class F>
void dispatch_threadgroups(metal::uint3 groups, unsigned threads, F fn) {
  for (unsigned z = 0; z < groups.z; ++z)
    for (unsigned y = 0; y < groups.y; ++y)
      for (unsigned x = 0; x < groups.x; ++x) {
        std::barrier<> bar(static_cast<std::ptrdiff_t>(threads));
        current_barrier() = &bar;
        std::vector<os_thread> pool;
        pool.reserve(threads);
        for (unsigned t = 0; t < threads; ++t)
          pool.emplace_back([&, t] {
            lane() = t % 32;
            metal::uint3 tg;
            tg.x = x;
            tg.y = y;
            tg.z = z;
            fn(tg, t, t / 32, t % 32);
          });
        for (auto& th : pool) th.join();
        current_barrier() = nullptr;
      }
}
}  // namespace gb_cpu

namespace metal {
inline void threadgroup_barrier(mem_flags) { gb_cpu::current_barrier()->arrive_and_wait(); }

template <class T, int R, int C>
struct simdgroup_matrix {
  T v[R][C];
};
using simdgroup_float8x8 = simdgroup_matrix<float, 8, 8>;
template <class T, int R, int C>
inline simdgroup_matrix<T, R, C> make_filled_simdgroup_matrix(T x) {
  simdgroup_matrix<T, R, C> m;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) m.v[i][j] = x;
  return m;
}
template <class T, int R, int C>
inline void simdgroup_load(simdgroup_matrix<T, R, C>& m, const T* src, unsigned long elements_per_row) {
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) m.v[i][j] = src[i * elements_per_row + j];
}
template <class T, int R, int C>
inline void simdgroup_store(const simdgroup_matrix<T, R, C>& m, T* dst, unsigned long elements_per_row) {
  if (gb_cpu::lane() != 0) return;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) dst[i * elements_per_row + j] = m.v[i][j];
}
template <class T, int M, int N, int K>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<T, M, N>& d, const simdgroup_matrix<T, M, K>& a,
                                          const simdgroup_matrix<T, K, N>& b, const simdgroup_matrix<T, M, N>& c) {
  simdgroup_matrix<T, M, N> r;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      T acc = c.v[i][j];
      for (int p = 0; p < K; ++p) acc += a.v[i][p] * b.v[p][j];
      r.v[i][j] = acc;
    }
  d = r;
}
}  // namespace metal

// MSL has `uint` in the global namespace too.
using metal::bfloat;
using metal::uint3;
using metal::uint;
using metal::ushort;
