// Opening a vendor library at run time (cuBLAS, NCCL): gapbench builds and runs where the library
// is absent, and says why. One loop for every loader: try each candidate path in turn, bind the
// symbols the loader needs, keep the first library that has them all.
#pragma once
#include <dlfcn.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gb::dl {

template <class F>
void bind(void* lib, const char* name, F& fn, std::string* missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) *missing += std::string(missing->empty() ? "" : ", ") + name;
}

// The first of `tries` that dlopen accepts and in which `bind_all(lib, &missing)` finds every
// symbol: its handle, with its path in *path. nullptr when none does; *errors then says, per path,
// why (dlerror's text, or the missing symbols).
template <class BindAll>
void* open_first(const std::vector<std::string>& tries, BindAll bind_all, std::string* path, std::string* errors) {
  for (const auto& p : tries) {
    void* lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      *errors += "\n  " + p + ": " + (e ? e : "not found");
      continue;
    }
    std::string missing;
    bind_all(lib, &missing);
    if (!missing.empty()) {
      *errors += "\n  " + p + ": missing symbols " + missing;
      dlclose(lib);
      continue;
    }
    *path = p;
    return lib;
  }
  return nullptr;
}

// A loaded library's state (one per loader): its bound API, handle, path, and the error to report
// while it is not loaded. load() opens the first candidate that binds; api() throws the error.
template <class Api>
struct Library {
  Api api_;
  void* lib = nullptr;
  std::string path, error;

  explicit Library(std::string not_loaded) : error(std::move(not_loaded)) {}

  template <class BindAll>
  std::string load(const std::vector<std::string>& tries, BindAll bind_all, const std::string& not_found,
                   std::string* why) {
    if (lib) return path;
    std::string errors, found;
    Api a;
    void* l = open_first(tries, [&](void* h, std::string* missing) { bind_all(a, h, missing); }, &found, &errors);
    if (l) {
      api_ = a;
      lib = l;
      path = found;
      error.clear();
      return path;
    }
    error = not_found + errors;
    if (why) *why = error;
    return "";
  }

  const Api& api() const {
    if (!lib) throw std::runtime_error(error);
    return api_;
  }
};

}  // namespace gb::dl
