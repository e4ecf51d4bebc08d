// cuda/lab/common.h: what every lab file shares, and nothing op-specific.
//   - error checks (exit with a one-line message), element types (fp32/fp16/bf16; conversions,
//     16-byte packs and warp sums are the library's, cuda/dtype.cuh);
//   - inputs: uniform in [-1, 1) from a splitmix64 hash, rounded to the dtype on the host so the
//     float64 reference sees exactly what the GPU reads;
//   - cuBLAS opened at run time (dlopen): --cublas PATH (file or folder, e.g. the nvidia-cublas
//     wheel's lib/), else $GAPBENCH_CUBLAS, else the usual sonames; no cuBLAS -> variants are still
//     verified and timed, their ratios are left out and the reason is printed;
//   - timing: a host-released gate kernel holds the stream while the host queues L2 scrub, start
//     event, the run and the stop event, so the events time the op and not the host's submission
//     gap; cold modes scrub L2 before each run (read: 2x-L2 read pass, L2 left clean; write: 2x-L2
//     memset, L2 left dirty; none: nothing, L2 keeps what the previous run left);
//   - the paired sweep: every arm (vendor first, then the variants) runs once per round in a
//     shuffled order; per arm the median time, per variant the median over rounds of
//     vendor_time / variant_time with a distribution-free 95% interval (binomial order statistics);
//   - verification: every arm's output is poisoned (all-ones bytes: NaN in every float format),
//     run once and checked before it is timed; the last round poisons again and checks each arm's
//     last timed output too;
//   - a table on stdout and, with --json FILE, records written atomically (schema in README.md).
// One op file = the library's kernels of the op (cuda/ops/<op>.cuh, included), the variants that do
// not ship, its CPU reference and `int main(...) { return lab::run_main(...); }`.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>
#include <library_types.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dtype.cuh"
#include "l2_scrub.cuh"

namespace lab {

// ------------------------------------------------------------------ errors
[[noreturn]] inline void die(int code, const std::string& msg) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::exit(code);
}
inline void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess)
    die(1, std::string("[CUDA ERROR] ") + what + " at " + file + ":" + std::to_string(line) + ": " +
               cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}
#define cudaCheck(call) lab::cuda_check((call), #call, __FILE__, __LINE__)

// ------------------------------------------------------------------ element types
enum DType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };
inline const char* dtype_name(int dt) { return dt == kF32 ? "fp32" : (dt == kF16 ? "fp16" : "bf16"); }
inline int dtype_size(int dt) { return dt == kF32 ? 4 : 2; }

// Element conversions, 16-byte packs, warp sums and the dtype switch are the library's
// (cuda/dtype.cuh), so the library kernels the lab runs and its own variants share them.
using gb::blas::dispatch_dtype;
using gb::blas::from_f;
using gb::blas::Pack;
using gb::blas::to_f;
using gb::blas::warp_sum;

// Element i of a host buffer of dtype dt, as a double.
inline double host_value(const void* p, long long i, int dt) {
  if (dt == kF32) return static_cast<const float*>(p)[i];
  if (dt == kF16) return to_f(static_cast<const __half*>(p)[i]);
  return to_f(static_cast<const __nv_bfloat16*>(p)[i]);
}

// ------------------------------------------------------------------ inputs
// Host buffer of `count` elements of dtype dt, uniform in [-1, 1) (24 random bits), rounded to dt.
inline std::vector<unsigned char> random_input(long long count, int dt, unsigned long long stream) {
  std::vector<unsigned char> out((size_t)count * dtype_size(dt));
  for (long long i = 0; i < count; ++i) {
    unsigned long long z = (unsigned long long)i + 0x9E3779B97F4A7C15ull * (stream + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float v = (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
    if (dt == kF32) reinterpret_cast<float*>(out.data())[i] = v;
    else if (dt == kF16) reinterpret_cast<__half*>(out.data())[i] = from_f<__half>(v);
    else reinterpret_cast<__nv_bfloat16*>(out.data())[i] = from_f<__nv_bfloat16>(v);
  }
  return out;
}

inline void* to_device(const std::vector<unsigned char>& h) {
  void* d = nullptr;
  cudaCheck(cudaMalloc(&d, h.size()));
  cudaCheck(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice));
  cudaCheck(cudaDeviceSynchronize());  // pageable copies return before their DMA is done
  return d;
}

// ------------------------------------------------------------------ checking
// Norm-wise relative error of a GPU result against a float64 reference, and whether every value
// was finite (a NaN means an element the kernel never wrote: the poison survived).
struct Check {
  double rel_err = INFINITY;
  bool finite = false;
  long long checked = 0;  // elements compared
};
// Bound on the norm-wise relative error: fp32 accumulation of inputs already in the dtype, then
// one rounding of the output to the dtype (fp16 2^-11, bf16 2^-8 per element).
inline double error_bound(int dt) { return dt == kF32 ? 1e-4 : (dt == kF16 ? 5e-3 : 3e-2); }

// Accumulates (gpu - ref)^2 and ref^2 element by element.
struct ErrAcc {
  double num = 0, den = 0;
  bool finite = true;
  long long n = 0;
  void add(double gpu, double ref) {
    finite = finite && std::isfinite(gpu);
    num += (gpu - ref) * (gpu - ref);
    den += ref * ref;
    ++n;
  }
  Check done() const {
    Check c;
    c.finite = finite;
    c.checked = n;
    c.rel_err = !finite ? INFINITY : (den > 0 ? std::sqrt(num / den) : std::sqrt(num));
    return c;
  }
};

// ------------------------------------------------------------------ cuBLAS, opened at run time
struct Cublas {
  using Handle = void*;
  int (*create)(Handle*) = nullptr;
  int (*destroy)(Handle) = nullptr;
  int (*set_stream)(Handle, cudaStream_t) = nullptr;
  int (*get_version)(Handle, int*) = nullptr;
  int (*sgemv)(Handle, int, int, int, const float*, const float*, int, const float*, int, const float*, float*,
               int) = nullptr;
  int (*gemm_ex)(Handle, int, int, int, int, int, const void*, const void*, cudaDataType, int, const void*,
                 cudaDataType, int, const void*, void*, cudaDataType, int, int, int) = nullptr;
  int (*gemm_strided_batched_ex)(Handle, int, int, int, int, int, const void*, const void*, cudaDataType, int,
                                 long long, const void*, cudaDataType, int, long long, const void*, void*,
                                 cudaDataType, int, long long, int, int, int) = nullptr;
  Handle handle = nullptr;
  std::string path, why = "cuBLAS not searched";
  int version = 0;
  bool ok() const { return handle != nullptr; }
  static constexpr int kOpN = 0, kOpT = 1, kCompute32F = 68, kGemmDefault = -1;
};

inline cudaDataType cuda_type(int dt) { return dt == kF32 ? CUDA_R_32F : (dt == kF16 ? CUDA_R_16F : CUDA_R_16BF); }

// `where`: a libcublas file or a folder holding one (or lib/ below it); empty: the sonames only.
inline std::vector<std::string> cublas_candidates(const std::string& where) {
  std::vector<std::string> out;
  auto folder = [&](const std::string& d) {
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
      out.push_back(d + "/" + name);
      out.push_back(d + "/lib/" + name);
    }
  };
  for (const std::string& w : {where, std::string(std::getenv("GAPBENCH_CUBLAS") ? std::getenv("GAPBENCH_CUBLAS") : "")}) {
    if (w.empty()) continue;
    if (w.find(".so") != std::string::npos) out.push_back(w);
    else folder(w);
  }
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) out.push_back(name);
  return out;
}

// Loads cuBLAS and creates a handle on `stream`; on failure `why` says what was tried.
inline void cublas_open(Cublas& c, const std::string& where, cudaStream_t stream) {
  std::string tried;
  for (const auto& p : cublas_candidates(where)) {
    void* lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      if (p.find('/') != std::string::npos && tried.find(p) == std::string::npos) {
        const char* e = dlerror();
        if (std::getenv("GAPBENCH_LAB_VERBOSE")) tried += "\n  " + p + ": " + (e ? e : "not found");
      }
      continue;
    }
    auto sym = [&](const char* n) { return dlsym(lib, n); };
    c.create = reinterpret_cast<decltype(c.create)>(sym("cublasCreate_v2"));
    c.destroy = reinterpret_cast<decltype(c.destroy)>(sym("cublasDestroy_v2"));
    c.set_stream = reinterpret_cast<decltype(c.set_stream)>(sym("cublasSetStream_v2"));
    c.get_version = reinterpret_cast<decltype(c.get_version)>(sym("cublasGetVersion_v2"));
    c.sgemv = reinterpret_cast<decltype(c.sgemv)>(sym("cublasSgemv_v2"));
    c.gemm_ex = reinterpret_cast<decltype(c.gemm_ex)>(sym("cublasGemmEx"));
    c.gemm_strided_batched_ex = reinterpret_cast<decltype(c.gemm_strided_batched_ex)>(sym("cublasGemmStridedBatchedEx"));
    if (!c.create || !c.destroy || !c.set_stream || !c.get_version || !c.sgemv || !c.gemm_ex ||
        !c.gemm_strided_batched_ex) {
      tried += "\n  " + p + ": missing symbols";
      dlclose(lib);
      continue;
    }
    int st = c.create(&c.handle);
    if (st != 0) {
      c.handle = nullptr;
      c.why = p + ": cublasCreate failed with status " + std::to_string(st);
      return;
    }
    c.set_stream(c.handle, stream);
    c.get_version(c.handle, &c.version);
    c.path = p;
    c.why.clear();
    return;
  }
  c.why = "cuBLAS not found (give --cublas PATH to libcublas.so* or its folder, or set GAPBENCH_CUBLAS)" + tried;
}

inline void cublas_check(int status, const char* what) {
  if (status != 0) die(1, std::string(what) + " failed with cublasStatus " + std::to_string(status));
}

// ------------------------------------------------------------------ device context
struct Device {
  cudaDeviceProp prop{};
  int sms = 1, cc = 0, driver = 0, runtime = 0;
  cudaStream_t stream = nullptr;
};

// The first CUDA call: a machine without a driver or GPU gets one clear line and exit status 3.
inline void open_device(Device& d) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    die(3, std::string("no CUDA device/driver: ") +
               (e != cudaSuccess ? std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e) : "no device found") +
               " (the lab needs an NVIDIA GPU and its driver)");
  cudaCheck(cudaSetDevice(0));
  cudaCheck(cudaGetDeviceProperties(&d.prop, 0));
  d.sms = d.prop.multiProcessorCount;
  d.cc = d.prop.major * 10 + d.prop.minor;
  cudaDriverGetVersion(&d.driver);
  cudaRuntimeGetVersion(&d.runtime);
  cudaCheck(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
}

// ------------------------------------------------------------------ L2 scrub and the gate
// The library's scrub (cuda/l2_scrub.cuh): the lab's cold modes are its modes, device 0.
enum Cold : int { kColdNone = gb::cache::kHot, kColdRead = gb::cache::kColdClean, kColdWrite = gb::cache::kColdDirty };

struct Scrub : gb::cache::L2Scrub {
  void alloc(const Device&) { cudaCheck(gb::cache::L2Scrub::alloc(0)); }
  void run(int mode, int round, cudaStream_t s) const { cudaCheck(gb::cache::L2Scrub::run(mode, round, s)); }
};

// Spins until the host sets *flag (mapped host memory) or `timeout` SM clocks pass; a timeout
// marks the sample invalid (the host was too slow to queue the timed work behind it).
static __global__ void gate_kernel(volatile int* flag, long long timeout, int* timed_out) {
  long long t0 = clock64();
  while (*flag == 0) {
    if (clock64() - t0 > timeout) {
      *timed_out = 1;
      return;
    }
  }
}

struct Gate {
  int* host = nullptr;  // [0] release flag, [1] timed out
  int* dev = nullptr;
  long long timeout = 0;
  void alloc(const Device& d) {
    cudaCheck(cudaHostAlloc(&host, 2 * sizeof(int), cudaHostAllocMapped));
    cudaCheck(cudaHostGetDevicePointer((void**)&dev, host, 0));
    int khz = 0;
    cudaCheck(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    timeout = (long long)khz * 1000;  // ~1 s of SM clocks
  }
  void hold(cudaStream_t s) {
    reinterpret_cast<volatile int*>(host)[0] = 0;
    reinterpret_cast<volatile int*>(host)[1] = 0;
    gate_kernel<<<1, 1, 0, s>>>(dev, timeout, dev + 1);
    cudaCheck(cudaGetLastError());
  }
  void release() {
    __sync_synchronize();
    reinterpret_cast<volatile int*>(host)[0] = 1;
  }
  bool timed_out() const { return reinterpret_cast<volatile int*>(host)[1] != 0; }
};

// ------------------------------------------------------------------ statistics
inline double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Distribution-free interval for the median of n values: sorted ranks [j, n-1-j] (0-based) with j
// the largest such that P(j <= B <= n-1-j) >= level for B ~ Binomial(n, 1/2). Exact (log-space
// binomial), so it holds for any continuous distribution; below n = 6 no j > 0 reaches 95% and
// the interval is the whole range (coverage reported).
struct Interval {
  double lo = NAN, hi = NAN, coverage = 0;
};
inline Interval median_interval(std::vector<double> v, double level = 0.95) {
  Interval r;
  size_t n = v.size();
  if (n == 0) return r;
  std::sort(v.begin(), v.end());
  std::vector<double> cdf(n + 1);
  double acc = 0;
  for (size_t i = 0; i <= n; ++i) {
    acc += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) - n * std::log(2.0));
    cdf[i] = acc;
  }
  size_t j = 0;
  double cover = 1.0 - 0.0;  // j = 0: [min, max] covers 1 - 2 P(B = n) ... reported below
  for (size_t c = 1; 2 * c < n; ++c) {
    double cov = 1.0 - 2.0 * cdf[c - 1];  // P(c <= B <= n - c)
    if (cov < level) break;
    j = c;
    cover = cov;
  }
  if (j == 0) cover = 1.0 - 2.0 * std::pow(0.5, (double)n);
  r.lo = v[j];
  r.hi = v[n - 1 - j];
  r.coverage = cover;
  return r;
}

// ------------------------------------------------------------------ arguments
struct Args {
  std::vector<int> variants;  // empty: all
  std::vector<int> dtypes;
  std::vector<std::vector<long long>> shapes;
  int rounds = 50, warmup = 5;
  double budget_s = 2.0;  // timed seconds per arm and case; an arm stops being timed past it (>= 5 samples)
  int cold = kColdRead;
  std::string json, cublas;
  std::vector<std::string> configs;  // tuning families to add beside the variants (op files that have them)
  unsigned seed = 0;
};

// What an op file declares about itself.
struct VariantInfo {
  int id;
  const char* name;    // strategy name
  const char* parent;  // "-" for the first
  const char* change;  // one line: what it changes against its parent
};
struct OpInfo {
  const char* op;           // "vjp_dx"
  const char* shape_help;   // "MxK" / "N" / "BxMxNxK"
  int dims;                 // numbers in a shape
  const char* default_shapes;
  std::vector<VariantInfo> variants;
  const char* vendor;       // "cublas" / "memcpy"
  // extra shape rule (e.g. k % 8): nullptr if fine, else why not
  std::function<const char*(const std::vector<long long>&)> shape_rule;
  // tuning families --configs accepts (empty: the flag is refused); each adds configurations of a
  // variant's kernel as extra arms, named by their parameters
  std::vector<std::string> config_families = {};
};

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t at = 0;
  while (true) {
    size_t c = s.find(sep, at);
    out.push_back(s.substr(at, c == std::string::npos ? std::string::npos : c - at));
    if (c == std::string::npos) break;
    at = c + 1;
  }
  return out;
}

inline bool parse_ll(const std::string& s, long long* v) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  *v = std::strtoll(s.c_str(), nullptr, 10);
  return true;
}

inline std::vector<std::vector<long long>> parse_shapes(const OpInfo& info, const std::string& text) {
  std::vector<std::vector<long long>> out;
  for (const auto& item : split(text, ',')) {
    auto parts = split(item, 'x');
    std::vector<long long> dims;
    bool ok = (int)parts.size() == info.dims;
    for (const auto& p : parts) {
      long long v = 0;
      ok = ok && parse_ll(p, &v) && v >= 1;
      dims.push_back(v);
    }
    if (!ok)
      die(2, std::string("bad shape '") + item + "' for " + info.op + ": want " + info.shape_help +
                 " with positive whole numbers, comma-separated (e.g. " + split(info.default_shapes, ',')[0] + ")");
    if (info.shape_rule)
      if (const char* why = info.shape_rule(dims))
        die(2, std::string("bad shape '") + item + "' for " + info.op + ": " + why);
    out.push_back(dims);
  }
  return out;
}

inline void usage(const OpInfo& info, FILE* f) {
  std::fprintf(f,
               "usage: %s [--variants all|N,N,..] [--dtypes fp16,bf16,fp32] [--shapes %s,...] [--rounds N]\n"
               "          [--warmup N] [--budget SECONDS] [--cold read|write|none] [--json FILE] [--cublas PATH]\n"
               "          [--seed N] [--list]%s\n"
               "Verifies each %s variant against a float64 CPU reference, then times it against %s in\n"
               "interleaved rounds (default shapes %s). Exit: 0 ok, 1 a variant failed verification or a\n"
               "CUDA error, 2 bad arguments, 3 no CUDA device/driver.\n",
               info.op, info.shape_help, info.config_families.empty() ? "" : " [--configs all|FAMILY,..]", info.op,
               info.vendor, info.default_shapes);
  if (!info.config_families.empty()) {
    std::fprintf(f, "--configs adds tuning configurations of:");
    for (const auto& c : info.config_families) std::fprintf(f, " %s", c.c_str());
    std::fprintf(f, "\n");
  }
}

inline Args parse_args(int argc, char** argv, const OpInfo& info) {
  Args a;
  a.dtypes = {kF16, kBF16, kF32};
  std::string shapes = info.default_shapes;
  auto need = [&](int& i) -> std::string {
    if (i + 1 >= argc) die(2, std::string(argv[i]) + " needs a value (see --help)");
    return argv[++i];
  };
  auto whole = [&](const std::string& flag, const std::string& v, long long lo) {
    long long x = 0;
    if (!parse_ll(v, &x) || x < lo)
      die(2, "bad " + flag + " '" + v + "': want a whole number >= " + std::to_string(lo));
    return x;
  };
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "--help" || f == "-h") {
      usage(info, stdout);
      std::exit(0);
    } else if (f == "--list") {
      std::printf("%s variants (vendor: %s)\n", info.op, info.vendor);
      for (const auto& v : info.variants)
        std::printf("  %2d %-26s parent %-3s %s\n", v.id, v.name, v.parent, v.change);
      std::exit(0);
    } else if (f == "--variants") {
      std::string v = need(i);
      if (v == "all") continue;
      for (const auto& t : split(v, ',')) {
        long long id = 0;
        bool known = parse_ll(t, &id) && std::any_of(info.variants.begin(), info.variants.end(),
                                                     [&](const VariantInfo& x) { return x.id == id; });
        if (!known) {
          std::string have;
          for (const auto& x : info.variants) have += (have.empty() ? "" : ",") + std::to_string(x.id);
          die(2, "bad variant '" + t + "' for " + info.op + ": want all or a comma list of " + have);
        }
        a.variants.push_back((int)id);
      }
    } else if (f == "--dtypes") {
      a.dtypes.clear();
      for (const auto& t : split(need(i), ',')) {
        if (t == "fp32") a.dtypes.push_back(kF32);
        else if (t == "fp16") a.dtypes.push_back(kF16);
        else if (t == "bf16") a.dtypes.push_back(kBF16);
        else die(2, "bad dtype '" + t + "': want a comma list of fp16, bf16, fp32");
      }
    } else if (f == "--shapes") {
      shapes = need(i);
    } else if (f == "--rounds") {
      a.rounds = (int)whole(f, need(i), 1);
    } else if (f == "--warmup") {
      a.warmup = (int)whole(f, need(i), 0);
    } else if (f == "--budget") {
      std::string v = need(i);
      char* end = nullptr;
      a.budget_s = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(a.budget_s > 0)) die(2, "bad --budget '" + v + "': want seconds > 0");
    } else if (f == "--cold") {
      std::string v = need(i);
      if (v == "read") a.cold = kColdRead;
      else if (v == "write") a.cold = kColdWrite;
      else if (v == "none") a.cold = kColdNone;
      else die(2, "bad --cold '" + v + "': want read (2x-L2 read pass), write (2x-L2 memset) or none");
    } else if (f == "--configs" && !info.config_families.empty()) {
      std::string v = need(i);
      for (const auto& t : split(v, ',')) {
        bool known = t == "all" || std::find(info.config_families.begin(), info.config_families.end(), t) !=
                                       info.config_families.end();
        if (!known) {
          std::string have;
          for (const auto& x : info.config_families) have += (have.empty() ? "" : ",") + x;
          die(2, "bad config family '" + t + "' for " + info.op + ": want all or a comma list of " + have);
        }
        if (t == "all") a.configs = info.config_families;
        else a.configs.push_back(t);
      }
    } else if (f == "--json") {
      a.json = need(i);
    } else if (f == "--cublas") {
      a.cublas = need(i);
    } else if (f == "--seed") {
      a.seed = (unsigned)whole(f, need(i), 0);
    } else {
      die(2, "unknown argument '" + f + "' (see --help)");
    }
  }
  a.shapes = parse_shapes(info, shapes);
  return a;
}

// ------------------------------------------------------------------ one case and the sweep
// An arm: the vendor (id 0) or a variant. `na` non-empty: not applicable here, with why.
struct Arm {
  int id = 0;               // 0 vendor, N variant N (a tuning configuration: the variant it tunes, -1 none)
  std::string name, na;
  std::string config;       // non-empty: a tuning configuration, not the variant as numbered
  std::function<void(cudaStream_t)> run;
  // filled by the sweep
  Check first, last;
  bool verified = false, timed = false;
  std::string status = "ok", reason;
  std::vector<double> samples;  // per round; NaN where not timed or invalid (gate timeout)
  double spent = 0, last_s = 0;
};

// What an op file builds for one (dtype, shape): inputs on the device, arms, the output buffer
// and how to check it. `release` frees everything.
struct Case {
  std::vector<Arm> arms;
  void* out = nullptr;
  size_t out_bytes = 0;
  std::function<Check(const std::vector<unsigned char>&)> check;  // host copy of out -> error
  bool exact = false;      // check must give rel_err 0 (copy)
  double bytes = 0, flops = 0;  // per run, for the rates
  std::function<void()> release;
};

inline std::string shape_text(const std::vector<long long>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s;
}

inline std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else if ((unsigned char)c < 0x20) o += ' ';
    else o += c;
  }
  return o + "\"";
}
inline std::string json_num(double x) {
  if (!std::isfinite(x)) return "null";
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", x);
  return b;
}

struct Context {
  Device dev;
  Cublas blas;
  Args args;
};

using MakeCase = std::function<Case(int dt, const std::vector<long long>& dims, Context& ctx,
                                    const std::vector<int>& variants)>;

inline Check fetch_and_check(const Case& c) {
  std::vector<unsigned char> host(c.out_bytes);
  cudaCheck(cudaMemcpy(host.data(), c.out, c.out_bytes, cudaMemcpyDeviceToHost));
  return c.check(host);
}

inline bool passes(const Case& c, const Check& k, int dt) {
  return k.finite && (c.exact ? k.rel_err == 0 : k.rel_err <= error_bound(dt));
}

// Runs one case: verify each arm, then interleaved timed rounds; returns JSON records.
inline std::vector<std::string> sweep_case(const OpInfo& info, Context& ctx, int dt, const std::vector<long long>& dims,
                                           Case& c, bool* all_ok) {
  const Args& a = ctx.args;
  cudaStream_t s = ctx.dev.stream;
  Scrub scrub;
  scrub.alloc(ctx.dev);
  Gate gate;
  gate.alloc(ctx.dev);
  // Correct before fast: poison, run once, compare with the float64 reference.
  for (auto& arm : c.arms) {
    if (!arm.na.empty()) {
      arm.status = "n/a";
      arm.reason = arm.na;
      continue;
    }
    cudaCheck(cudaMemsetAsync(c.out, 0xFF, c.out_bytes, s));
    arm.run(s);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) {
      arm.status = "error";
      arm.reason = std::string("launch failed: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
      *all_ok = false;
      if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
        die(1, arm.name + ": " + arm.reason + " (the CUDA context is lost; stopping)");
      continue;
    }
    arm.first = fetch_and_check(c);
    arm.verified = passes(c, arm.first, dt);
    if (!arm.verified) {
      arm.status = "failed";
      char b[160];
      std::snprintf(b, sizeof b, "verification failed: rel. error %.3e (bound %.1e), %s", arm.first.rel_err,
                    c.exact ? 0.0 : error_bound(dt), arm.first.finite ? "all finite" : "non-finite values");
      arm.reason = b;
      *all_ok = false;
    }
  }
  std::vector<Arm*> live;
  for (auto& arm : c.arms)
    if (arm.verified) live.push_back(&arm);
  cudaEvent_t e0, e1;
  cudaCheck(cudaEventCreate(&e0));
  cudaCheck(cudaEventCreate(&e1));
  std::mt19937 rng(a.seed * 7919u + (unsigned)dt * 131u + (unsigned)dims.size());
  const int total = a.warmup + a.rounds;
  for (auto* arm : live) arm->samples.assign(a.rounds, NAN);
  for (int r = 0; r < total; ++r) {
    const bool last = r == total - 1;
    std::shuffle(live.begin(), live.end(), rng);
    for (auto* arm : live) {
      const bool timed = r >= a.warmup;
      // past its budget an arm is no longer timed (it keeps at least 5 samples), except in the
      // last round, which verifies every arm's timed output
      int have = 0;
      for (double x : arm->samples) have += std::isfinite(x);
      if (timed && !last && have >= 5 && arm->spent >= a.budget_s) continue;
      // a slow arm (one run over a tenth of the budget) needs one warm-up run, not `warmup`
      if (!timed && r > 0 && arm->last_s > 0.1 * a.budget_s) continue;
      if (last) cudaCheck(cudaMemsetAsync(c.out, 0xFF, c.out_bytes, s));
      gate.hold(s);
      scrub.run(a.cold, r, s);
      cudaCheck(cudaEventRecord(e0, s));
      arm->run(s);
      cudaCheck(cudaEventRecord(e1, s));
      gate.release();
      cudaCheck(cudaEventSynchronize(e1));
      cudaCheck(cudaGetLastError());
      float ms = 0;
      cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
      arm->last_s = ms * 1e-3;
      if (timed && !gate.timed_out()) {
        arm->samples[r - a.warmup] = ms * 1e-3;
        arm->spent += ms * 1e-3;
      }
      if (last) {
        arm->last = fetch_and_check(c);
        if (!passes(c, arm->last, dt)) {
          arm->verified = false;
          arm->status = "failed";
          arm->reason = "the last timed run failed verification";
          *all_ok = false;
        }
      }
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFreeHost(gate.host);
  cudaFree(scrub.buf);

  // report
  const Arm* vendor = c.arms.empty() || c.arms[0].id != 0 || !c.arms[0].verified ? nullptr : &c.arms[0];
  std::vector<std::string> recs;
  std::printf("\n%s %s %s  (%.1f MB moved%s)  cold=%s\n", info.op, dtype_name(dt), shape_text(dims).c_str(),
              c.bytes / 1e6, c.flops > 0 ? (", " + std::to_string((long long)(c.flops / 1e9)) + " GFLOP").c_str() : "",
              a.cold == kColdRead ? "read" : (a.cold == kColdWrite ? "write" : "none"));
  std::printf("  %-4s %-30s %11s %9s %9s  %-28s %s\n", "id", "arm", "median us", "GB/s", "TFLOP/s",
              "speed vs vendor [95% CI]", "rel.err");
  for (auto& arm : c.arms) {
    std::vector<double> ok;
    for (double x : arm.samples)
      if (std::isfinite(x)) ok.push_back(x);
    double med = median(ok);
    double ratio = NAN;
    Interval ci;
    if (vendor && arm.id != 0 && !ok.empty()) {
      std::vector<double> rs;
      for (size_t i = 0; i < arm.samples.size() && i < vendor->samples.size(); ++i)
        if (std::isfinite(arm.samples[i]) && std::isfinite(vendor->samples[i])) rs.push_back(vendor->samples[i] / arm.samples[i]);
      ratio = median(rs);
      ci = median_interval(rs);
    }
    if (arm.status != "ok") {
      std::printf("  %-4d %-30s %s: %s\n", arm.id, arm.name.c_str(), arm.status.c_str(), arm.reason.c_str());
    } else {
      char rtext[64] = "-";
      if (std::isfinite(ratio))
        std::snprintf(rtext, sizeof rtext, "%6.1f%% [%.1f-%.1f]", 100 * ratio, 100 * ci.lo, 100 * ci.hi);
      std::printf("  %-4d %-30s %11.2f %9.1f %9.2f  %-28s %.2e\n", arm.id, arm.name.c_str(), med * 1e6,
                  c.bytes / med / 1e9, c.flops > 0 ? c.flops / med / 1e12 : 0.0, rtext, arm.first.rel_err);
    }
    std::string samples = "[";
    for (double x : ok) samples += (samples.size() > 1 ? "," : "") + json_num(x);
    samples += "]";
    std::string rec = "{\"op\":" + json_str(info.op) + ",\"dtype\":" + json_str(dtype_name(dt)) +
                      ",\"shape\":" + json_str(shape_text(dims)) + ",\"variant\":" + std::to_string(arm.id) +
                      ",\"name\":" + json_str(arm.name) + ",\"config\":" + json_str(arm.config) + ",\"status\":" + json_str(arm.status) +
                      ",\"reason\":" + json_str(arm.reason) + ",\"verified\":" + (arm.verified ? "true" : "false") +
                      ",\"rel_err\":" + json_num(arm.first.rel_err) + ",\"median_s\":" + json_num(med) +
                      ",\"ratio_vs_vendor\":" + json_num(ratio) + ",\"ci_lo\":" + json_num(ci.lo) +
                      ",\"ci_hi\":" + json_num(ci.hi) + ",\"ci_coverage\":" + json_num(ci.coverage) +
                      ",\"bytes\":" + json_num(c.bytes) + ",\"flops\":" + json_num(c.flops) +
                      ",\"samples_s\":" + samples + "}";
    recs.push_back(rec);
  }
  if (!vendor && !c.arms.empty() && c.arms[0].id == 0)
    std::printf("  (no vendor ratios: %s)\n", c.arms[0].reason.c_str());
  std::fflush(stdout);
  return recs;
}

inline void write_json_atomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp" + std::to_string((long long)getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) die(1, "cannot write " + tmp + ": " + std::strerror(errno));
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) die(1, "cannot rename " + tmp + " to " + path);
}

// The whole program: arguments (before any CUDA call), device, cuBLAS, every case, JSON.
inline int run_main(int argc, char** argv, const OpInfo& info, const MakeCase& make) {
  Context ctx;
  ctx.args = parse_args(argc, argv, info);
  std::vector<int> variants = ctx.args.variants;
  if (variants.empty())
    for (const auto& v : info.variants) variants.push_back(v.id);
  open_device(ctx.dev);
  if (std::string(info.vendor) == "cublas") cublas_open(ctx.blas, ctx.args.cublas, ctx.dev.stream);
  std::printf("%s lab: %s (sm_%d, %d SMs, L2 %d MB), driver %d, runtime %d, vendor %s%s\n", info.op,
              ctx.dev.prop.name, ctx.dev.cc, ctx.dev.sms, ctx.dev.prop.l2CacheSize >> 20, ctx.dev.driver,
              ctx.dev.runtime, info.vendor,
              std::string(info.vendor) != "cublas" ? "" : (ctx.blas.ok() ? (" " + ctx.blas.path).c_str() : " (absent)"));
  if (std::string(info.vendor) == "cublas" && !ctx.blas.ok())
    std::printf("cuBLAS: %s\n(variants are verified and timed; ratios need the vendor)\n", ctx.blas.why.c_str());
  bool all_ok = true;
  std::vector<std::string> recs;
  std::string head;
  auto flush_json = [&] {
    if (ctx.args.json.empty()) return;
    std::string text = "{\"schema\":\"gapbench.lab\",\"schema_version\":1,\"op\":" + json_str(info.op) +
                       ",\"device\":{\"name\":" + json_str(ctx.dev.prop.name) + ",\"cc\":" + std::to_string(ctx.dev.cc) +
                       ",\"sms\":" + std::to_string(ctx.dev.sms) + ",\"l2_bytes\":" + std::to_string(ctx.dev.prop.l2CacheSize) +
                       ",\"driver\":" + std::to_string(ctx.dev.driver) + ",\"runtime\":" + std::to_string(ctx.dev.runtime) +
                       "},\"vendor\":" + json_str(info.vendor) + ",\"cublas\":" +
                       (ctx.blas.ok() ? json_str(ctx.blas.path) : "null") + ",\"cublas_version\":" +
                       std::to_string(ctx.blas.version) + ",\"cold\":" +
                       json_str(ctx.args.cold == kColdRead ? "read" : (ctx.args.cold == kColdWrite ? "write" : "none")) +
                       ",\"rounds\":" + std::to_string(ctx.args.rounds) + ",\"warmup\":" + std::to_string(ctx.args.warmup) +
                       ",\"seed\":" + std::to_string(ctx.args.seed) + ",\"records\":[\n";
    for (size_t i = 0; i < recs.size(); ++i) text += recs[i] + (i + 1 < recs.size() ? ",\n" : "\n");
    text += "]}\n";
    write_json_atomic(ctx.args.json, text);
  };
  for (const auto& dims : ctx.args.shapes)
    for (int dt : ctx.args.dtypes) {
      Case c = make(dt, dims, ctx, variants);
      auto r = sweep_case(info, ctx, dt, dims, c, &all_ok);
      recs.insert(recs.end(), r.begin(), r.end());
      if (c.release) c.release();
      flush_json();  // after every case: an interrupted sweep keeps what it measured
    }
  if (ctx.blas.ok()) ctx.blas.destroy(ctx.blas.handle);
  return all_ok ? 0 : 1;
}

// The vendor arm for a case: cuBLAS if it loaded, else a not-applicable arm saying why.
inline Arm vendor_arm(Context& ctx, std::function<void(cudaStream_t)> run) {
  Arm a;
  a.id = 0;
  a.name = "cublas";
  if (!ctx.blas.ok()) a.na = ctx.blas.why;
  a.run = std::move(run);
  return a;
}

inline const VariantInfo* find_variant(const OpInfo& info, int id) {
  for (const auto& v : info.variants)
    if (v.id == id) return &v;
  return nullptr;
}

}  // namespace lab
