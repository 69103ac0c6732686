// An owned dlopen() handle, closed with dlclose() when its owner goes. Vendor runtimes are
// opened at init, never linked, so that the plugin loads on machines without them.
#pragma once

#include <dlfcn.h>

#include <memory>
#include <string>

namespace backplane::backends {

class DynamicLibrary {
 public:
  DynamicLibrary() = default;

  // dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE). RTLD_NODELETE: our dlclose() balances our
  // dlopen(), but the code stays mapped, because a GPU runtime leaves threads and atexit
  // handlers behind that must not outlive their code. On failure the result is empty and
  // `error` holds dlerror().
  static DynamicLibrary open(const std::string& name, std::string& error) {
    DynamicLibrary library;
    library.handle_.reset(dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE));
    if (!library.handle_) {
      const char* message = dlerror();
      error = message != nullptr ? message : "dlopen failed";
    }
    return library;
  }

  explicit operator bool() const { return handle_ != nullptr; }

  // The symbol as a function pointer of type Fn; nullptr when it is missing.
  template <class Fn>
  Fn function(const char* name) const {
    return reinterpret_cast<Fn>(dlsym(handle_.get(), name));
  }

 private:
  struct Closer {
    void operator()(void* handle) const { dlclose(handle); }
  };
  std::unique_ptr<void, Closer> handle_;
};

}  // namespace backplane::backends
