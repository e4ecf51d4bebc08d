// tune/vjp_dx_sweep.cu: how vjp_dx variants 7, 8, 10 and 11 got their configuration (variant 9's TMA ring was
// swept over warps x tile rows x stages by this file's version in commit 349853d). Measures, in one process
// and interleaved round by round, cuBLAS (the vendor floor), the library's dx variants 4, 6-14,
// and variant 7/8/10/11's kernels over rows-in-flight R x warps per block x blocks per SM
// on the shapes where dx is bandwidth-bound. Every configuration is checked against a float64
// host reference (output poisoned with NaN first) before it is timed; one that fails is reported
// and not timed. Timing as the harness's cold modes: L2 is scrubbed before each call (`read`: a
// 2x-L2 read pass, L2 left clean; `write`: a 2x-L2 memset, L2 left dirty, the only mode of the
// sweeps recorded before the read pass was added), which also holds the device while the host queues the start
// event and the call; device events, warm-up, then median and p10/p90. Cold, because the
// matrices are larger than L2 and configurations are interleaved: a hot L2 would hold the tail of
// whichever configuration ran before, and a kernel that happens to start where its predecessor
// ended would win by order. `hot` (a spin kernel instead of a scrub) exists to show what the
// scrubs evict, on shapes that fit in L2.
// Not part of `pip install .` (a tuning tool). Build and run on the GPU machine:
//   nvcc -O3 -std=c++20 -arch=sm_90 -Icuda cuda/tune/vjp_dx_sweep.cu cuda/cublas_loader.cpp -o /tmp/dx_sweep
//   /tmp/dx_sweep LIBCUBLAS [samples] [families] [shapes] [read|write|hot] > sweep.txt
// families: "all" (default) or any of pdl (variant 7's kernel), atomic (8's), persistent (10's),
// strips (11's), loads (11's rule with each load policy for W), ws (an experiment: cuBLAS's
// warp-specialized TMA structure), none (the library variants only);
// shapes: MxK,MxK,... (default 16384x16384,8192x8192,4096x16384,16384x4096).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "../l2_scrub.cuh"
#include "../plain/cublas_or_exit.h"
#include "../spin.cuh"
#include "../plain/fill.cuh"
#include "../plain/plain_check.h"
#include "../vjp.cu"
#include "cublas_loader.h"

using namespace gb::blas;

struct Config {
  std::string name;
  std::function<void()> run;
  std::vector<double> samples;
  double err = 0;
  bool ok = false;
};

static double host_value(const void* p, long long i, int dt) {
  if (dt == kF32) return static_cast<const float*>(p)[i];
  unsigned short h = static_cast<const unsigned short*>(p)[i];
  if (dt == kBF16) {
    unsigned u = (unsigned)h << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  __half_raw r;
  r.x = h;
  return __half2float(__half(r));
}

static double pct(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * (v.size() - 1);
  size_t lo = (size_t)pos;
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

// Speed relative to cuBLAS from paired rounds (each round times every configuration once, back to
// back): the median of cuBLAS_i / config_i and a distribution-free 95% interval for that median
// (ranks n/2 -+ 0.98 sqrt(n) of the sorted ratios: the binomial(n, 1/2) in normal approximation).
// Pairing cancels the clock and thermal drift a round shares; the interval covers this run's
// round-to-round noise only, not what changes between runs (clocks, where the allocator put W).
struct Paired {
  double med, lo, hi;
};
static Paired paired(const std::vector<double>& ref, const std::vector<double>& x) {
  size_t n = std::min(ref.size(), x.size());
  if (n == 0) return {NAN, NAN, NAN};
  std::vector<double> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = ref[i] / x[i];
  std::sort(r.begin(), r.end());
  double h = 0.98 * std::sqrt((double)n);
  long lo = std::max(0L, (long)std::floor(n / 2.0 - h) - 1), hi = std::min((long)n - 1, (long)std::ceil(n / 2.0 + 1 + h) - 1);
  return {pct(r, 0.5), r[lo], r[hi]};
}

// Experiment (family "ws"; not in the library): cuBLAS's structure for dx as profiled on the H200
// (docs/results/cublas-dx-kernels-h200-2026-11-22.txt): a block per 256-byte column strip walking
// all m rows; one producer warp streams 256 B x TR-row tiles by TMA into an S-stage ring with a
// full and an empty mbarrier per stage; C consumer warps multiply out of shared memory and free a
// stage by arriving on its empty barrier, so no block-wide barrier sits in the loop (variant 9 had
// one per tile). One block per SM (the ring is most of the shared memory); more strips than SMs
// run as a second wave, so this is only a contender at k*bytes ~ SMs * 256 B. VB = 1: the tile's
// v slice comes with it by a bulk copy on the same barrier (first version: v from global memory,
// an L2 round trip per tile in every consumer warp's path).
template <class T, int C, int TR, int S, int VB>
__global__ void __launch_bounds__((C + 1) * 32)
    dx_ws(const __grid_constant__ CUtensorMap map, const T* __restrict__ v, T* __restrict__ dx, long long m,
          long long k) {
#if __CUDA_ARCH__ >= 900
  constexpr int N = Pack<T>::N, RPW = TR / C;  // rows of a tile per consumer warp
  static_assert(TR % C == 0 && RPW % 2 == 0, "a consumer warp reads whole row pairs");
  extern __shared__ unsigned char ws_dyn[];
  Pack<T>* tiles = reinterpret_cast<Pack<T>*>(ws_dyn + ((128 - (gb::ptx::smem_addr(ws_dyn) & 127)) & 127));
  __shared__ __align__(8) uint64_t full[S], empty[S];
  __shared__ __align__(16) T vstage[VB ? S : 1][TR];  // VB: the tile's v slice arrives with its W tile
  __shared__ float red[C][16 * N];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long col_base = blockIdx.x * 16LL * N;
  const int ntiles = (int)((m + TR - 1) / TR);
  if (threadIdx.x == 0) {
    for (int st = 0; st < S; ++st) {
      gb::ptx::mbar_init(&full[st], 1);
      gb::ptx::mbar_init(&empty[st], C);
    }
    gb::ptx::mbar_fence_init();
  }
  __syncthreads();
  if (warp == C) {  // producer
    if (lane == 0)
      for (int t = 0; t < ntiles; ++t) {
        const int st = t % S;
        if (t >= S) gb::ptx::mbar_wait(&empty[st], ((t / S) - 1) & 1);
        const unsigned vbytes = VB ? (unsigned)(((m - (long long)t * TR < TR ? m - (long long)t * TR : TR) * sizeof(T) + 15) / 16 * 16) : 0u;
        gb::ptx::mbar_arrive_expect_tx(&full[st], TR * 256 + vbytes);
        gb::ptx::tma_load_2d(gb::ptx::smem_addr(tiles + st * TR * 16), &map, &full[st], (int)col_base, t * TR);
        if (VB)
          asm volatile(
              "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                  gb::ptx::smem_addr(&vstage[VB ? st : 0][0])),
              "l"(v + (long long)t * TR), "r"(vbytes), "r"(gb::ptx::smem_addr(&full[st]))
              : "memory");
      }
    return;
  }
  const int sub = lane >> 4, cl = lane & 15;  // a row is 16 lanes x 16 B: a warp load covers 2 rows
  float acc[N];
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] = 0.f;
  for (int t = 0; t < ntiles; ++t) {
    const int st = t % S;
    float vi[RPW / 2];
    if (!VB) {
#pragma unroll
      for (int j = 0; j < RPW / 2; ++j) {
        long long r = (long long)t * TR + warp * RPW + 2 * j + sub;
        vi[j] = r < m ? to_f(v[r]) : 0.f;
      }
    }
    gb::ptx::mbar_wait(&full[st], (t / S) & 1);
    if (VB) {
#pragma unroll
      for (int j = 0; j < RPW / 2; ++j) {
        long long r = (long long)t * TR + warp * RPW + 2 * j + sub;
        vi[j] = r < m ? to_f(vstage[VB ? st : 0][warp * RPW + 2 * j + sub]) : 0.f;
      }
    }
#pragma unroll
    for (int j = 0; j < RPW / 2; ++j) {
      Pack<T> w = tiles[st * TR * 16 + (warp * RPW + 2 * j + sub) * 16 + cl];
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] += to_f(w.v[e]) * vi[j];
    }
    __syncwarp();
    if (lane == 0) gb::ptx::mbar_arrive(&empty[st]);
  }
#pragma unroll
  for (int e = 0; e < N; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], 16);
  if (sub == 0)
#pragma unroll
    for (int e = 0; e < N; ++e) red[warp][cl * N + e] = acc[e];
  asm volatile("bar.sync 1, %0;" ::"n"(C * 32) : "memory");  // the consumer warps only
  for (int c = threadIdx.x; c < 16 * N; c += C * 32) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < C; ++w) sum += red[w][c];
    if (col_base + c < k) dx[col_base + c] = from_f<T>(sum);
  }
#endif
}

template <class T, int C, int TR, int S, int VB>
static void launch_dx_ws(const T* W, const T* v, T* dx, long long m, long long k) {
  constexpr int SMEM = S * TR * 256 + 128;
  static CUtensorMap map;
  static const void* mapped = nullptr;
  static long long mm = -1, mk = -1;
  if (mapped != W || mm != m || mk != k) {
    auto encode = tensor_map_encoder();
    constexpr CUtensorMapDataType type = std::is_same_v<T, float>    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                         : std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                     : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)m};
    cuuint64_t strides[1] = {(cuuint64_t)(k * sizeof(T))};
    cuuint32_t box[2] = {(cuuint32_t)(16 * Pack<T>::N), (cuuint32_t)TR}, estr[2] = {1, 1};
    if (!encode || encode(&map, type, 2, const_cast<T*>(W), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                          CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      std::fprintf(stderr, "tensor map encode failed\n");
      std::exit(4);
    }
    cudaFuncSetAttribute(dx_ws<T, C, TR, S, VB>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
    mapped = W, mm = m, mk = k;
  }
  long long strips = (k + 16LL * Pack<T>::N - 1) / (16LL * Pack<T>::N);
  dx_ws<T, C, TR, S, VB><<<(unsigned)strips, (C + 1) * 32, SMEM>>>(map, v, dx, m, k);
}

// Variant 7/8's kernels (families "pdl" and "atomic") and variant 10's (family "persistent") over
// rows in flight R x warps per block x blocks per SM, and variant 11's (family "strips") over
// lanes per strip row L x R x warps x blocks per SM, for the families named in `want`.
template <class T>
static void add_warp_rows(std::vector<Config>& cfgs, const std::string& want, const void* W, const void* v,
                          void* dx, float* big, float* work, long long m, long long k, int sms) {
  auto wanted = [&](const char* family) { return want == "all" || want.find(family) != std::string::npos; };
  auto add = [&]<int R, int WARPS>() {
    for (int bps : {4, 8, 16}) {
      if (bps * WARPS * 32 > 2048) continue;  // more than an SM's resident threads
      for (int mode = 0; mode < 3; ++mode) {
        const char* family = mode == 0 ? "pdl" : (mode == 1 ? "atomic" : "persistent");
        if (!wanted(family) || (mode < 2 && bps == 16)) continue;
        char name[96];
        std::snprintf(name, sizeof name, "%s R%d W%d bps%d", family, R, WARPS, bps);
        if (mode == 2) {
          cfgs.push_back({name, [=] {
                            launch_dx_persistent<T, R, WARPS>(static_cast<const T*>(W), static_cast<const T*>(v),
                                                              static_cast<T*>(dx), work, m, k, sms, bps, 0);
                          }});
          continue;
        }
        bool atomic = mode == 1;
        float* buf = atomic ? work : big;
        cfgs.push_back({name, [=] {
                          launch_dx_warp_rows<T, R, WARPS>(atomic, static_cast<const T*>(W), static_cast<const T*>(v),
                                                           static_cast<T*>(dx), buf, m, k, sms, bps, true, 0);
                        }});
      }
    }
  };
  add.template operator()<4, 8>();
  add.template operator()<8, 4>();
  add.template operator()<8, 8>();
  add.template operator()<16, 4>();
  auto strips = [&]<int L, int R, int WARPS>() {
    for (int bps : {1, 2, 4}) {
      if (bps * WARPS * 32 > 2048) continue;
      char name[96];
      std::snprintf(name, sizeof name, "strips L%d R%d W%d bps%d", L, R, WARPS, bps);
      cfgs.push_back({name, [=] {
                        launch_dx_strips<T, L, R, WARPS>(static_cast<const T*>(W), static_cast<const T*>(v),
                                                         static_cast<T*>(dx), work, m, k, sms, bps, 0);
                      }});
    }
  };
  if (wanted("strips")) {
    strips.template operator()<8, 8, 16>();
    strips.template operator()<8, 4, 16>();
    strips.template operator()<8, 8, 8>();
    strips.template operator()<8, 16, 8>();
    strips.template operator()<16, 8, 16>();
    strips.template operator()<16, 8, 8>();
    strips.template operator()<8, 8, 32>();
    strips.template operator()<8, 4, 32>();
    strips.template operator()<16, 8, 32>();
    // small blocks: many strips over few rows (e.g. 1024x16384 fp32) in one wave
    strips.template operator()<8, 8, 4>();
    strips.template operator()<8, 4, 4>();
    strips.template operator()<16, 8, 4>();
    strips.template operator()<16, 4, 8>();
  }
  if (wanted("ws")) {
    auto ws = [&]<int C, int TR, int S, int VB>() {
      char name[96];
      std::snprintf(name, sizeof name, "ws C%d TR%d S%d%s", C, TR, S, VB ? " vTMA" : "");
      cfgs.push_back({name, [=] {
                        launch_dx_ws<T, C, TR, S, VB>(static_cast<const T*>(W), static_cast<const T*>(v),
                                                      static_cast<T*>(dx), m, k);
                      }});
    };
    ws.template operator()<8, 64, 12, 0>();
    ws.template operator()<8, 64, 8, 0>();
    ws.template operator()<8, 64, 12, 1>();
    ws.template operator()<8, 64, 8, 1>();
    ws.template operator()<4, 64, 12, 1>();
  }
  if (!wanted("loads")) return;
  // variant 11's block-size rule (as the library) with each load policy
  auto loads = [&]<int LD>() {
    char name[96];
    std::snprintf(name, sizeof name, "strips v11 LD%d", LD);
    cfgs.push_back({name, [=] {
                      auto w = static_cast<const T*>(W);
                      auto vv = static_cast<const T*>(v);
                      auto out = static_cast<T*>(dx);
                      if ((k + 8 * Pack<T>::N - 1) / (8 * Pack<T>::N) > sms)
                        launch_dx_strips<T, 8, 8, 16, LD>(w, vv, out, work, m, k, sms, 2, 0);
                      else
                        launch_dx_strips<T, 8, 8, 32, LD>(w, vv, out, work, m, k, sms, 1, 0);
                    }});
  };
  loads.template operator()<0>();
  loads.template operator()<1>();
  loads.template operator()<2>();
  // variant 13's small-m rule (one wave of 128-byte-strip blocks) with each load policy
  auto loads13 = [&]<int LD>() {
    char name[96];
    std::snprintf(name, sizeof name, "strips v13 LD%d", LD);
    cfgs.push_back({name, [=] {
                      auto w = static_cast<const T*>(W);
                      auto vv = static_cast<const T*>(v);
                      auto out = static_cast<T*>(dx);
                      long long strips = (k + 8 * Pack<T>::N - 1) / (8 * Pack<T>::N);
                      if (strips <= 1LL * sms) launch_dx_strips<T, 8, 8, 32, LD>(w, vv, out, work, m, k, sms, 1, 0);
                      else if (strips <= 2LL * sms) launch_dx_strips<T, 8, 8, 16, LD>(w, vv, out, work, m, k, sms, 2, 0);
                      else if (strips <= 4LL * sms) launch_dx_strips<T, 8, 8, 8, LD>(w, vv, out, work, m, k, sms, 4, 0);
                      else launch_dx_strips<T, 8, 8, 4, LD>(w, vv, out, work, m, k, sms, 8, 0);
                    }});
  };
  loads13.template operator()<0>();
  loads13.template operator()<1>();
  loads13.template operator()<2>();
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LIBCUBLAS [samples] [families: all | none | any of pdl,atomic,persistent,strips,loads,ws] [shapes: MxK,...] [scrub: read | write | hot]\n", argv[0]);
    return 1;
  }
  // Arguments first, so a typo is reported before any library or device is touched.
  int samples = argc > 2 ? std::atoi(argv[2]) : 100, warmup = 10;
  if (samples < 1) {
    std::fprintf(stderr, "bad samples '%s': want a whole number >= 1\n", argv[2]);
    return 1;
  }
  std::string families = argc > 3 ? argv[3] : "all";
  for (size_t at = 0; at <= families.size();) {
    size_t comma = families.find(',', at);
    std::string f = families.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    static const char* known[] = {"all", "none", "pdl", "atomic", "persistent", "strips", "loads", "ws"};
    if (std::none_of(std::begin(known), std::end(known), [&](const char* n) { return f == n; })) {
      std::fprintf(stderr, "bad family '%s': want all, none or a comma list of pdl,atomic,persistent,strips,loads,ws\n",
                   f.c_str());
      return 1;
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  std::string scrub_name = argc > 5 ? argv[5] : "read";
  int scrub_mode = scrub_name == "read" ? gb::cache::kColdClean
                   : scrub_name == "write" ? gb::cache::kColdDirty
                   : scrub_name == "hot"   ? gb::cache::kHot
                                           : -1;
  if (scrub_mode < 0) {
    std::fprintf(stderr, "bad scrub '%s': want read (2x-L2 read pass), write (2x-L2 memset) or hot (no scrub)\n", argv[5]);
    return 1;
  }
  struct Shape {
    long long m, k;
  };
  std::vector<Shape> shapes = {{16384, 16384}, {8192, 8192}, {4096, 16384}, {16384, 4096}};
  if (argc > 4) {
    shapes.clear();
    for (const char* p = argv[4]; *p;) {
      char* end;
      long long m = std::strtoll(p, &end, 10), k = *end == 'x' ? std::strtoll(end + 1, &end, 10) : 0;
      if (m < 1 || k < 1 || k % 8 != 0) {
        std::fprintf(stderr, "bad shape list '%s': want MxK,MxK,... with K a multiple of 8\n", argv[4]);
        return 1;
      }
      shapes.push_back({m, k});
      if (*end != ',' && *end != 0) {
        std::fprintf(stderr, "bad shape list '%s': want MxK,MxK,... with K a multiple of 8\n", argv[4]);
        return 1;
      }
      p = *end == ',' ? end + 1 : end;
    }
  }
  std::string lib = gb::plain::load_cublas_or_exit(argv[1]);
  const auto& api = gb::cuda::cublas::api();
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  int sms = prop.multiProcessorCount;
  const char* scrub_text = scrub_mode == gb::cache::kColdClean ? "cold L2 (2x-L2 read pass before each call: clean)"
                           : scrub_mode == gb::cache::kColdDirty ? "cold L2 (2x-L2 memset before each call: dirty)"
                                                                 : "hot L2 (spin kernel before each call, no scrub)";
  std::printf("%s; device %s, %d SMs, driver API %d, runtime %d, cuBLAS %s, %d samples after %d warm-up\n", scrub_text, prop.name,
              sms, drv, rt, lib.c_str(), samples, warmup);
  gb::cuda::cublas::Handle h;
  if (api.create(&h) != 0) return 3;
  gb::cache::L2Scrub scrub;
  CHECK(scrub.alloc(0));
  int khz = 0;
  CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  long long hold = (long long)(khz / 1000) * 50;  // hot: ~50 us of SM clocks

  for (Shape sh : shapes) {
    for (int dt : {kF16, kBF16, kF32}) {
      long long m = sh.m, k = sh.k;
      size_t es = dt == kF32 ? 4 : 2;
      void *W, *v, *dx;
      float *big, *work;
      long long big_floats = (m / 32 + 1) * k, work_floats = vjp_dx_work_floats(m, k, sms);
      CHECK(cudaMalloc(&W, m * k * es));
      CHECK(cudaMalloc(&v, m * es));
      CHECK(cudaMalloc(&dx, k * es));
      CHECK(cudaMalloc(&big, big_floats * 4));
      CHECK(cudaMalloc(&work, work_floats * 4));
      CHECK(cudaMemset(work, 0, work_floats * 4));  // variant 5/8 counters and accumulator start at zero
      gb::plain::fill<<<(unsigned)((m * k + 255) / 256), 256>>>(W, m * k, dt, 1);
      gb::plain::fill<<<(unsigned)((m + 255) / 256), 256>>>(v, m, dt, 2);
      CHECK(cudaDeviceSynchronize());
      std::vector<unsigned char> hW(m * k * es), hv(m * es), hdx(k * es);
      CHECK(cudaMemcpy(hW.data(), W, hW.size(), cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(hv.data(), v, hv.size(), cudaMemcpyDeviceToHost));
      std::vector<double> ref(k, 0.0);
      for (long long i = 0; i < m; ++i) {
        double vi = host_value(hv.data(), i, dt);
        for (long long j = 0; j < k; ++j) ref[j] += host_value(hW.data(), i * k + j, dt) * vi;
      }
      double rn = 0;
      for (double r : ref) rn += r * r;
      rn = std::sqrt(rn);

      std::vector<Config> cfgs;
      cudaDataType t = dt == kF32 ? CUDA_R_32F : (dt == kF16 ? CUDA_R_16F : CUDA_R_16BF);
      int K = (int)k, M = (int)m;
      const float one = 1.f, zero = 0.f;
      cfgs.push_back({"cuBLAS", [=, &api] {
                        if (dt == kF32)
                          api.sgemv(h, 0, K, M, &one, (const float*)W, K, (const float*)v, 1, &zero, (float*)dx, 1);
                        else
                          api.gemm_ex(h, 0, 0, K, 1, M, &one, W, t, K, v, t, M, &zero, dx, t, K, 68, -1);
                      }});
      for (int var : {4, 6, 7, 8, 9, 10, 11, 12, 13, 14}) {
        char name[32];
        std::snprintf(name, sizeof name, "library v%d", var);
        cfgs.push_back({name, [=] { launch_vjp_dx(var, dt, W, v, dx, work, m, k, sms, 0); }});
      }
      dispatch_dtype(dt, [&]<class T>() {
        add_warp_rows<T>(cfgs, families, W, v, dx, big, work, m, k, sms);
      });

      // Correct before fast: poison, run once, compare with the float64 reference.
      for (auto& c : cfgs) {
        CHECK(cudaMemset(dx, 0xFF, k * es));
        c.run();
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(hdx.data(), dx, hdx.size(), cudaMemcpyDeviceToHost));
        double en = 0;
        bool finite = true;
        for (long long j = 0; j < k; ++j) {
          double o = host_value(hdx.data(), j, dt);
          finite = finite && std::isfinite(o);
          en += (o - ref[j]) * (o - ref[j]);
        }
        c.err = finite ? std::sqrt(en) / rn : INFINITY;
        double bound = dt == kF32 ? 1e-4 : (dt == kF16 ? 5e-3 : 3e-2);
        c.ok = c.err <= bound;
      }
      cudaEvent_t e0, e1;
      CHECK(cudaEventCreate(&e0));
      CHECK(cudaEventCreate(&e1));
      // Interleaved: each round times every configuration once, so clock or thermal drift lands
      // on all of them alike.
      for (int it = 0; it < warmup + samples; ++it) {
        for (auto& c : cfgs) {
          if (!c.ok) continue;
          if (scrub_mode == gb::cache::kHot)
            gb::launch::spin_kernel<<<1, 1>>>(hold);
          else
            CHECK(scrub.run(scrub_mode, it, 0));
          CHECK(cudaEventRecord(e0));
          c.run();
          CHECK(cudaEventRecord(e1));
          CHECK(cudaEventSynchronize(e1));
          float ms;
          CHECK(cudaEventElapsedTime(&ms, e0, e1));
          if (it >= warmup) c.samples.push_back(ms * 1e-3);
        }
      }
      CHECK(cudaGetLastError());
      double bytes = (double)(m * k + m + k) * es;
      double cub = cfgs[0].ok ? pct(cfgs[0].samples, 0.5) : NAN;  // failed cuBLAS: its row says so, ratios nan
      std::printf("\nvjp_dx %lldx%lld %s (%.1f MB moved)\n", m, k, dt == kF32 ? "fp32" : (dt == kF16 ? "fp16" : "bf16"),
                  bytes / 1e6);
      std::printf("  %-22s %10s %10s %10s %8s %12s %10s  %s\n", "config", "median us", "p10", "p90", "TB/s", "speed/cuBLAS",
                  "rel.err", "paired speed/cuBLAS [95% CI]");
      for (auto& c : cfgs) {
        if (!c.ok) {
          std::printf("  %-22s FAILED verification: rel. error %.3e\n", c.name.c_str(), c.err);
          continue;
        }
        double med = pct(c.samples, 0.5);
        Paired pr = paired(cfgs[0].samples, c.samples);
        std::printf("  %-22s %10.2f %10.2f %10.2f %8.3f %11.1f%% %10.2e  %.1f%% [%.1f-%.1f]\n", c.name.c_str(), med * 1e6,
                    pct(c.samples, 0.1) * 1e6, pct(c.samples, 0.9) * 1e6, bytes / med / 1e12, 100.0 * cub / med,
                    c.err, 100 * pr.med, 100 * pr.lo, 100 * pr.hi);
      }
      std::fflush(stdout);
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      cudaFree(W);
      cudaFree(v);
      cudaFree(dx);
      cudaFree(big);
      cudaFree(work);
    }
  }
  scrub.release();
  api.destroy(h);
  return 0;
}
