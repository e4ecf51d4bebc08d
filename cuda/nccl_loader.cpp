// dlopen of libnccl.so.2: see nccl_loader.h.
#include "nccl_loader.h"

#include "dl_loader.h"

#include <stdexcept>

namespace gb::cuda::nccl {

static Api g_api;
static void* g_lib = nullptr;
static std::string g_path, g_error = "NCCL not loaded yet";

std::string load(const std::vector<std::string>& candidates, std::string* why) {
  if (g_lib) return g_path;
  std::vector<std::string> tries = candidates;
  tries.push_back("libnccl.so.2");
  tries.push_back("libnccl.so");
  std::string errors, path;
  Api a;
  void* lib = gb::dl::open_first(tries, [&a](void* l, std::string* missing) {
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
  }, &path, &errors);
  if (lib) {
    g_api = a;
    g_lib = lib;
    g_path = path;
    g_error.clear();
    return path;
  }
  g_error = "NCCL (libnccl.so.2) not found; pip install nvidia-nccl-cu13 (torch's CUDA wheels bring it) "
            "or put it on LD_LIBRARY_PATH; tried:" + errors;
  if (why) *why = g_error;
  return "";
}

bool loaded() { return g_lib != nullptr; }
std::string load_error() { return g_error; }
std::string loaded_path() { return g_path; }

const Api& api() {
  if (!g_lib) throw std::runtime_error(g_error);
  return g_api;
}

int version() {
  int v = 0;
  check(api().get_version(&v), "ncclGetVersion");
  return v;
}

void check(Result r, const char* what) {
  if (r == kSuccess) return;
  const char* s = g_lib && g_api.get_error_string ? g_api.get_error_string(r) : "unknown";
  throw std::runtime_error(std::string(what) + " failed: NCCL error " + std::to_string(r) + " (" + s + ")");
}

}  // namespace gb::cuda::nccl
