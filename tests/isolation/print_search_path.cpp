// Prints the runtime's plugin search path, one entry a line, as the BACKPLANE_* variables set
// it; the privileged-process test runs a setgid copy of it.
#include <backplane/runtime.hpp>

#include <iostream>

int main() {
  backplane::RuntimeOptions options = backplane::RuntimeOptions::from_environment();
  options.only_plugins = std::vector<std::string>{};  // the path is what matters: load nothing
  const backplane::Runtime runtime = backplane::Runtime::open(options);
  for (const auto& entry : runtime.search_path()) {
    std::cout << entry.string() << "\n";
  }
  return 0;
}
