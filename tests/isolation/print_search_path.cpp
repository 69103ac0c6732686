// Prints the runtime's plugin search path, one entry a line, as the BACKPLANE_* variables set
// it; the privileged-process test runs a setgid copy of it.
#include <backplane/runtime/runtime.hpp>

#include <iostream>

// A setgid process is not dumpable, so LeakSanitizer cannot inspect it and aborts it at exit,
// and ASan cannot read ASAN_OPTIONS there (/proc/self/environ): an ASan build of this program
// checks no leaks. Builds without ASan never call this.
extern "C" __attribute__((visibility("default"))) const char* __asan_default_options() {
  return "detect_leaks=0";
}

int main() {
  backplane::RuntimeOptions options = backplane::RuntimeOptions::from_environment();
  options.only_plugins = std::vector<std::string>{};  // the path is what matters: load nothing
  const backplane::Runtime runtime = backplane::Runtime::open(options);
  for (const auto& entry : runtime.search_path()) {
    std::cout << entry.string() << "\n";
  }
  return 0;
}
