// cuda/ops/gemv.cu: the gemv op's launchers, dispatch rule, workspace and vendor call (kernels:
// gemv.cuh).
#include "cublas_loader.h"
#include "kernels.h"
#include "ops/gemv.cuh"

namespace gb::blas::ops::gemv {

static constexpr int kGemvV4Packs = 4, kGemvV4Rows = 2, kGemvV4BlocksPerSm = 4, kGemvV4MaxRows = 512;

// Warps per block: as many (up to 8) as the row's packs keep busy, so a narrow k does not leave
// warps holding nothing but zeros.
template <class T>
static void launch_x_stationary(const T* A, const T* x, T* y, float* accum, unsigned* counters, long long m,
                              long long k, int sms, cudaStream_t s) {
  constexpr int P = kGemvV4Packs, R = kGemvV4Rows;
  long long kp = k / Pack<T>::N;
  auto go = [&]<int WARPS>() {
    long long slices = (kp + 32LL * P * WARPS - 1) / (32LL * P * WARPS);
    long long want = ((long long)kGemvV4BlocksPerSm * sms + slices - 1) / slices;  // row runs wanted
    long long rpb = (m + want - 1) / want;
    rpb = (rpb + R - 1) / R * R;
    if (rpb > kGemvV4MaxRows) rpb = kGemvV4MaxRows;
    long long runs = (m + rpb - 1) / rpb;
    gemv_x_stationary<T, P, R, WARPS><<<dim3((unsigned)runs, (unsigned)slices), WARPS * 32,
                                 sizeof(float) * WARPS * rpb, s>>>(A, x, y, accum, counters, m, k, (int)rpb);
  };
  long long busy = (kp + 32LL * P - 1) / (32LL * P);  // warps the row can keep busy
  if (busy >= 8) go.template operator()<8>();
  else if (busy >= 4) go.template operator()<4>();
  else if (busy >= 2) go.template operator()<2>();
  else go.template operator()<1>();
}

static long long gemv_split_slices(long long m, long long k, int pack, int sms) {
  long long want = (64LL * sms + m - 1) / m;                 // about 64 warps per SM in all
  long long max_slices = k / (32LL * pack * 8) > 0 ? k / (32LL * pack * 8) : 1;  // >= one full unrolled pass
  return want < 1 ? 1 : (want > max_slices ? max_slices : want);
}

// Workspace (floats): [gemv_split_k's partials: slices x m] [gemv_x_stationary's accumulator: m]
// [its counters: one per run of rows, at most m]. The x-stationary part starts zeroed (the case
// clears the workspace once) and clears itself.
static long long gemv_partials_floats(long long m, long long k, int sms) {
  return (gemv_split_slices(m, k, 4, sms) * m + 3) / 4 * 4;  // the fp32 pack allows the most slices
}

long long work_floats(const Problem& p, const Gpu& g) { return gemv_partials_floats(p.m, p.k, g.sms) + 2 * p.m; }

void launch(Kernel kern, const Problem& p, const Gpu& g, const Buffers& buf, cudaStream_t s) {
  const long long m = p.m, k = p.k;
  const int sms = g.sms;
  float* work = buf.work;
  if (kern == Kernel::gemv_x_stationary && k % 8 != 0)
    throw gb::NotApplicable("gemv_x_stationary needs k % 8 == 0 (16-byte rows)");
  dispatch_dtype(p.dt, [&]<class T>() {
    auto a = static_cast<const T*>(buf.a);
    auto xv = static_cast<const T*>(buf.b);
    auto yv = static_cast<T*>(buf.out);
    constexpr int warps = 8;
    switch (kern) {
      case Kernel::gemv_reference:
        gemv_reference<T><<<(unsigned)((m + 127) / 128), 128, 0, s>>>(a, xv, yv, m, k);
        return;
      case Kernel::gemv_x_stationary: {
        float* accum = work + gemv_partials_floats(m, k, sms);
        launch_x_stationary<T>(a, xv, yv, accum, reinterpret_cast<unsigned*>(accum + m), m, k, sms, s);
        return;
      }
      case Kernel::gemv_split_k:
        if (k % Pack<T>::N == 0) {
          long long slices = gemv_split_slices(m, k, Pack<T>::N, sms);
          long long per = (k + slices - 1) / slices;
          per = (per + Pack<T>::N - 1) / Pack<T>::N * Pack<T>::N;
          slices = (k + per - 1) / per;
          dim3 grid((unsigned)((m + warps - 1) / warps), (unsigned)slices);
          gemv_split_k<T, 8><<<grid, warps * 32, 0, s>>>(a, xv, work, yv, m, k, per);
          if (slices > 1) gemv_split_k_reduce<T><<<(unsigned)((m + 255) / 256), 256, 0, s>>>(work, yv, m, (int)slices);
          return;
        }
        [[fallthrough]];  // rows not 16-byte aligned: the warp-per-row form handles any k
      default:
        gemv_warp_rows<T, 4><<<(unsigned)((m + warps - 1) / warps), warps * 32, 0, s>>>(a, xv, yv, m, k);
    }
  });
}

// The dispatcher's rule, gemv's rows of the table (evidence: H200 paired sweeps, gemv-v4 at da1a708):
//   fp32       k % 8 == 0                    gemv_x_stationary (v4): 102-127% of cuBLAS
//   fp16/bf16  m < 4096                      gemv_split_k (v3): short m fills the GPU
//   fp16/bf16  m >= 4096                     gemv_warp_rows (v2): no split needed
//   any        k % 8 != 0 (no 16-byte rows)  gemv_warp_rows (v2, scalar loads)
Kernel rule(const Problem& p, const Gpu&) {
  if (p.k % 8 != 0) return Kernel::gemv_warp_rows;
  if (p.dt == DType::fp32) return Kernel::gemv_x_stationary;
  return p.m < 4096 ? Kernel::gemv_split_k : Kernel::gemv_warp_rows;
}

// Vendor row: cuBLAS, y = A x as column-major A^T (k x m), op T: sgemv for fp32, GemmEx with n = 1
// for fp16/bf16.
void vendor(const Vendor& v) {
  const auto& api = gb::cuda::cublas::api();
  const float one = 1.f, zero = 0.f;
  const int M = (int)v.p.m, K = (int)v.p.k;
  if (v.p.dt == DType::fp32)
    check_cublas(api.sgemv(v.handle, gb::cuda::cublas::kOpT, K, M, &one, (const float*)v.buf.a, K, (const float*)v.buf.b, 1,
                           &zero, (float*)v.buf.out, 1), "cublasSgemv");
  else
    check_cublas(api.gemm_ex(v.handle, gb::cuda::cublas::kOpT, gb::cuda::cublas::kOpN, M, 1, K, &one, v.buf.a, v.type, K, v.buf.b, v.type,
                             K, &zero, v.buf.out, v.type, M, v.compute, gb::cuda::cublas::kGemmDefault), "cublasGemmEx(gemv)");
}

}  // namespace gb::blas::ops::gemv
