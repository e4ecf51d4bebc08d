// dlopen of libnccl.so.2: see nccl_loader.h.
#include "nccl_loader.h"

#include "dl_loader.h"

#include <stdexcept>

namespace gb::cuda::nccl {

static gb::dl::Library<Api> g("NCCL not loaded yet");

std::string load(const std::vector<std::string>& candidates, std::string* why) {
  std::vector<std::string> tries = candidates;
  tries.push_back("libnccl.so.2");
  tries.push_back("libnccl.so");
  return g.load(tries, [](Api& a, void* l, std::string* missing) {
    gb::dl::bind(l, "ncclGetVersion", a.get_version, missing);
    gb::dl::bind(l, "ncclGetUniqueId", a.get_unique_id, missing);
    gb::dl::bind(l, "ncclCommInitRank", a.comm_init_rank, missing);
    gb::dl::bind(l, "ncclCommDestroy", a.comm_destroy, missing);
    gb::dl::bind(l, "ncclCommAbort", a.comm_abort, missing);
    gb::dl::bind(l, "ncclCommGetAsyncError", a.comm_get_async_error, missing);
    gb::dl::bind(l, "ncclGetErrorString", a.get_error_string, missing);
    gb::dl::bind(l, "ncclAllReduce", a.all_reduce, missing);
    gb::dl::bind(l, "ncclAllGather", a.all_gather, missing);
    gb::dl::bind(l, "ncclReduceScatter", a.reduce_scatter, missing);
    gb::dl::bind(l, "ncclBroadcast", a.broadcast, missing);
    gb::dl::bind(l, "ncclSend", a.send, missing);
    gb::dl::bind(l, "ncclRecv", a.recv, missing);
    gb::dl::bind(l, "ncclGroupStart", a.group_start, missing);
    gb::dl::bind(l, "ncclGroupEnd", a.group_end, missing);
  }, "NCCL (libnccl.so.2) not found; pip install nvidia-nccl-cu13 (torch's CUDA wheels bring it) "
            "or put it on LD_LIBRARY_PATH; tried:", why);
}

bool loaded() { return g.lib != nullptr; }
std::string load_error() { return g.error; }
std::string loaded_path() { return g.path; }

const Api& api() { return g.api(); }

int version() {
  int v = 0;
  check(api().get_version(&v), "ncclGetVersion");
  return v;
}

void check(Result r, const char* what) {
  if (r == kSuccess) return;
  const char* s = g.lib && g.api_.get_error_string ? g.api_.get_error_string(r) : "unknown";
  throw std::runtime_error(std::string(what) + " failed: NCCL error " + std::to_string(r) + " (" + s + ")");
}

}  // namespace gb::cuda::nccl
