// dlopen of libnccl.so.2: see nccl_loader.h.
#include "nccl_loader.h"

#include <dlfcn.h>

#include <stdexcept>

namespace gb::cuda::nccl {

static Api g_api;
static void* g_lib = nullptr;
static std::string g_path, g_error = "NCCL not loaded yet";

template <class F>
static void bind(void* lib, const char* name, F& fn, std::string* missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) *missing += std::string(missing->empty() ? "" : ", ") + name;
}

std::string load(const std::vector<std::string>& candidates, std::string* why) {
  if (g_lib) return g_path;
  std::vector<std::string> tries = candidates;
  tries.push_back("libnccl.so.2");
  tries.push_back("libnccl.so");
  std::string errors;
  for (const auto& p : tries) {
    void* lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      errors += "\n  " + p + ": " + (e ? e : "not found");
      continue;
    }
    Api a;
    std::string missing;
    bind(lib, "ncclGetVersion", a.get_version, &missing);
    bind(lib, "ncclGetUniqueId", a.get_unique_id, &missing);
    bind(lib, "ncclCommInitRank", a.comm_init_rank, &missing);
    bind(lib, "ncclCommDestroy", a.comm_destroy, &missing);
    bind(lib, "ncclCommAbort", a.comm_abort, &missing);
    bind(lib, "ncclCommGetAsyncError", a.comm_get_async_error, &missing);
    bind(lib, "ncclGetErrorString", a.get_error_string, &missing);
    bind(lib, "ncclAllReduce", a.all_reduce, &missing);
    bind(lib, "ncclAllGather", a.all_gather, &missing);
    bind(lib, "ncclReduceScatter", a.reduce_scatter, &missing);
    bind(lib, "ncclBroadcast", a.broadcast, &missing);
    bind(lib, "ncclSend", a.send, &missing);
    bind(lib, "ncclRecv", a.recv, &missing);
    bind(lib, "ncclGroupStart", a.group_start, &missing);
    bind(lib, "ncclGroupEnd", a.group_end, &missing);
    if (!missing.empty()) {
      errors += "\n  " + p + ": missing symbols " + missing;
      dlclose(lib);
      continue;
    }
    g_api = a;
    g_lib = lib;
    g_path = p;
    g_error.clear();
    return p;
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
