// The one way backplane opens shared libraries: the core its plugins, the hub its kernel
// packages, the plugins their vendor runtimes (opened at init, never linked, so that a plugin
// loads on machines without them) and kernel modules. An owned dlopen() handle, closed with
// dlclose() when its owner goes. Internal: not installed, no compatibility promise.
#pragma once

#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // dladdr, dlinfo
#endif
#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <memory>
#include <string>

namespace backplane::internal {

class DynamicLibrary {
 public:
  // What closing the handle does. kStaysMapped (RTLD_NODELETE): our dlclose() balances our
  // dlopen(), but the code stays mapped, because a GPU runtime leaves threads and atexit
  // handlers behind that must not outlive their code. kUnloads: the last close unloads it (a
  // plugin or kernel package the host is done with).
  enum class OnClose { kStaysMapped, kUnloads };

  DynamicLibrary() = default;

  // dlopen(name, RTLD_NOW | RTLD_LOCAL [| RTLD_NODELETE]): RTLD_LOCAL keeps one library's
  // symbols from resolving another's; RTLD_NOW reports a missing dependency here rather than as
  // a crash at the first call. On failure the result is empty and `error` holds dlerror().
  static DynamicLibrary open(const std::string& name, std::string& error,
                             OnClose on_close = OnClose::kStaysMapped) {
    DynamicLibrary library;
    const int keep = on_close == OnClose::kStaysMapped ? RTLD_NODELETE : 0;
    library.handle_.reset(dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | keep));
    if (!library.handle_) {
      const char* message = dlerror();
      error = message != nullptr ? message : "dlopen failed";
    }
    return library;
  }

  explicit operator bool() const { return handle_ != nullptr; }

  // The symbol's address; nullptr when it is missing.
  void* symbol(const char* name) const { return dlsym(handle_.get(), name); }

  // The symbol as a function pointer of type Fn; nullptr when it is missing.
  template <class Fn>
  Fn function(const char* name) const {
    return reinterpret_cast<Fn>(symbol(name));
  }

  // `out` = the function `name`; whether it exists.
  template <class Fn>
  bool resolve(const char* name, Fn& out) const {
    out = function<Fn>(name);
    return out != nullptr;
  }

  // The file the loader opened (after its search path), or "" when it cannot say.
  std::string path() const {
    link_map* map = nullptr;
    if (!handle_ || dlinfo(handle_.get(), RTLD_DI_LINKMAP, &map) != 0 || map == nullptr ||
        map->l_name == nullptr) {
      return "";
    }
    return map->l_name;
  }

  // From now on the library stays mapped for the life of the process, whoever closes it (a
  // runtime that cannot be shut down once initialized, such as the CUDA driver after cuInit).
  void keep_mapped(const std::string& name) const {
    if (void* pin = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD | RTLD_NODELETE)) {
      dlclose(pin);
    }
  }

 private:
  struct Closer {
    void operator()(void* handle) const { dlclose(handle); }
  };
  std::unique_ptr<void, Closer> handle_;
};

// The shared library (or executable) whose code holds `address`, or "" when the loader cannot
// say: how a library finds the folders shipped beside it.
inline std::filesystem::path library_holding(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return {};
  return info.dli_fname;
}

}  // namespace backplane::internal
