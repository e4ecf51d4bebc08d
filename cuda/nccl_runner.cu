// The direct-NCCL collective runner: see nccl_runner.h.
#include "nccl_runner.h"

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "cuda_check.h"
#include "dist_pattern.cuh"

namespace gb::cuda::dist {

namespace {
int nccl_type(DType t) {
  return t == DType::fp32 ? nccl::kFloat32 : t == DType::fp16 ? nccl::kFloat16 : nccl::kBfloat16;
}
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::string unique_id() {
  nccl::UniqueId id;
  GB_NCCL_CHECK(nccl::api().get_unique_id(&id));
  return std::string(id.internal, nccl::kUniqueIdBytes);
}

bool supports(Op op, bool inplace) { return !(inplace && (op == Op::all_to_all || op == Op::sendrecv)); }

Runner::Runner(const std::string& uid, int rank, int world, int device, double timeout_s)
    : rank_(rank), world_(world), device_(device), timeout_s_(timeout_s) {
  if (uid.size() != size_t(nccl::kUniqueIdBytes))
    throw std::invalid_argument("the NCCL unique id must be 128 bytes, got " + std::to_string(uid.size()));
  if (world < 1 || rank < 0 || rank >= world) throw std::invalid_argument("rank must be in [0, world)");
  const auto& a = nccl::api();
  GB_CUDA_CHECK(cudaSetDevice(device));
  GB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  GB_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(float)));
  GB_CUDA_CHECK(cudaMalloc(&counts_, 2 * sizeof(unsigned long long)));
  nccl::UniqueId id;
  std::memcpy(id.internal, uid.data(), nccl::kUniqueIdBytes);
  GB_NCCL_CHECK(a.comm_init_rank(&comm_, world, id, rank));
}

Runner::~Runner() {
  cudaSetDevice(device_);
  if (comm_) {
    if (cudaStreamQuery(stream_) == cudaSuccess) nccl::api().comm_destroy(comm_);
    else nccl::api().comm_abort(comm_);
  }
  cudaFree(send_);
  cudaFree(recv_);
  cudaFree(scratch_);
  cudaFree(counts_);
  if (stream_) cudaStreamDestroy(stream_);
}

void Runner::abort() {
  if (comm_) nccl::api().comm_abort(comm_);
  comm_ = nullptr;
}

void Runner::ensure(size_t bytes) {
  if (bytes <= cap_) return;
  cudaFree(send_);
  cudaFree(recv_);
  send_ = recv_ = nullptr;
  cap_ = 0;
  GB_CUDA_CHECK(cudaMalloc(&send_, bytes));
  GB_CUDA_CHECK(cudaMalloc(&recv_, bytes));
  cap_ = bytes;
}

void Runner::wait(const char* what) {
  double t0 = now_s();
  for (long spins = 0;; ++spins) {
    cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) GB_CUDA_CHECK(e);
    if ((spins & 1023) == 1023) {
      nccl::Result ar = nccl::kSuccess;
      nccl::api().comm_get_async_error(comm_, &ar);
      if (ar != nccl::kSuccess && ar != 7 /* ncclInProgress */) {
        abort();
        nccl::check(ar, what);
      }
      if (now_s() - t0 > timeout_s_) {
        abort();
        throw std::runtime_error(std::string(what) + ": timed out after " + std::to_string(timeout_s_) +
                                 " s (a peer rank died or hangs); communicator aborted");
      }
      std::this_thread::yield();
    }
  }
}

size_t Runner::out_count(Op op, size_t count) const {
  return op == Op::reduce_scatter ? count / world_ : count;
}

void* Runner::out_ptr(Op op, DType t, size_t count, bool inplace) const {
  size_t es = dtype_size(t);
  if (op == Op::reduce_scatter && inplace) return static_cast<char*>(send_) + size_t(rank_) * (count / world_) * es;
  return recv_;
}

void Runner::enqueue(Op op, DType t, size_t count, bool inplace, int root) {
  if (!comm_) throw std::runtime_error("the NCCL communicator was aborted after an earlier failure");
  const auto& a = nccl::api();
  int nt = nccl_type(t);
  size_t es = dtype_size(t), chunk = count / world_;
  switch (op) {
    case Op::all_reduce:
      GB_NCCL_CHECK(a.all_reduce(inplace ? recv_ : send_, recv_, count, nt, nccl::kSum, comm_, stream_));
      break;
    case Op::all_gather: {
      const void* src = inplace ? static_cast<const char*>(recv_) + size_t(rank_) * chunk * es : send_;
      GB_NCCL_CHECK(a.all_gather(src, recv_, chunk, nt, comm_, stream_));
      break;
    }
    case Op::reduce_scatter:
      GB_NCCL_CHECK(a.reduce_scatter(send_, out_ptr(op, t, count, inplace), chunk, nt, nccl::kSum, comm_, stream_));
      break;
    case Op::broadcast:
      GB_NCCL_CHECK(a.broadcast(inplace ? recv_ : send_, recv_, count, nt, root, comm_, stream_));
      break;
    case Op::all_to_all:
      GB_NCCL_CHECK(a.group_start());
      for (int p = 0; p < world_; ++p) {
        GB_NCCL_CHECK(a.send(static_cast<const char*>(send_) + size_t(p) * chunk * es, chunk, nt, p, comm_, stream_));
        GB_NCCL_CHECK(a.recv(static_cast<char*>(recv_) + size_t(p) * chunk * es, chunk, nt, p, comm_, stream_));
      }
      GB_NCCL_CHECK(a.group_end());
      break;
    case Op::sendrecv:
      GB_NCCL_CHECK(a.group_start());
      GB_NCCL_CHECK(a.send(send_, count, nt, (rank_ + 1) % world_, comm_, stream_));
      GB_NCCL_CHECK(a.recv(recv_, count, nt, (rank_ - 1 + world_) % world_, comm_, stream_));
      GB_NCCL_CHECK(a.group_end());
      break;
  }
}

Check Runner::check(Op op, DType t, size_t count, bool inplace, int root) {
  if (!supports(op, inplace)) throw std::invalid_argument("this op has no in-place form");
  size_t es = dtype_size(t), chunk = count / world_;
  if (chunk == 0 || count % world_) throw std::invalid_argument("count must be a positive multiple of the world size");
  GB_CUDA_CHECK(cudaSetDevice(device_));
  ensure(count * es);
  GB_CUDA_CHECK(cudaMemsetAsync(send_, 0xFF, count * es, stream_));
  GB_CUDA_CHECK(cudaMemsetAsync(recv_, 0xFF, count * es, stream_));
  switch (op) {
    case Op::all_gather:
      if (inplace) fill(static_cast<char*>(recv_) + size_t(rank_) * chunk * es, chunk, t, op, rank_, root, chunk, 0, stream_);
      else fill(send_, chunk, t, op, rank_, root, chunk, 0, stream_);
      break;
    case Op::broadcast:
      if (rank_ == root) fill(inplace ? recv_ : send_, count, t, op, rank_, root, chunk, 0, stream_);
      break;
    case Op::all_reduce:
      fill(inplace ? recv_ : send_, count, t, op, rank_, root, chunk, 0, stream_);
      break;
    default:  // reduce_scatter (in place: the input holds the output), all_to_all, sendrecv
      fill(send_, count, t, op, rank_, root, chunk, 0, stream_);
  }
  GB_CUDA_CHECK_LAUNCH();
  enqueue(op, t, count, inplace, root);
  wait("collective (check)");
  return verify_output(op, t, count, inplace, root);
}

Check Runner::verify_output(Op op, DType t, size_t count, bool inplace, int root) {
  GB_CUDA_CHECK(cudaSetDevice(device_));
  size_t n = out_count(op, count);
  unsigned long long init[2] = {0ull, ~0ull};
  GB_CUDA_CHECK(cudaMemcpyAsync(counts_, init, sizeof(init), cudaMemcpyHostToDevice, stream_));
  verify(out_ptr(op, t, count, inplace), n, t, op, rank_, world_, root, count / world_, counts_, stream_);
  GB_CUDA_CHECK_LAUNCH();
  unsigned long long got[2];
  GB_CUDA_CHECK(cudaMemcpyAsync(got, counts_, sizeof(got), cudaMemcpyDeviceToHost, stream_));
  GB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  Check c;
  c.wrong = got[0];
  c.first_wrong = got[0] ? got[1] : 0;
  c.checked = n;
  c.ok = got[0] == 0;
  return c;
}

void Runner::barrier() {
  if (!comm_) throw std::runtime_error("the NCCL communicator was aborted after an earlier failure");
  GB_CUDA_CHECK(cudaSetDevice(device_));
  GB_NCCL_CHECK(nccl::api().all_reduce(scratch_, scratch_, 1, nccl::kFloat32, nccl::kSum, comm_, stream_));
  wait("barrier");
}

std::vector<double> Runner::time(Op op, DType t, size_t count, bool inplace, int root, int iters, int samples,
                                 int warmup) {
  if (iters < 1 || samples < 1 || warmup < 0) throw std::invalid_argument("iters and samples must be >= 1");
  GB_CUDA_CHECK(cudaSetDevice(device_));
  ensure(count * dtype_size(t));
  for (int i = 0; i < warmup; ++i) enqueue(op, t, count, inplace, root);
  wait("collective (warmup)");
  std::vector<double> out;
  out.reserve(samples);
  for (int s = 0; s < samples; ++s) {
    barrier();
    double t0 = now_s();
    for (int i = 0; i < iters; ++i) enqueue(op, t, count, inplace, root);
    wait("collective (timed)");
    out.push_back(now_s() - t0);
  }
  return out;
}

}  // namespace gb::cuda::dist
