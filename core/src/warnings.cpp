#include <backplane/warnings.hpp>

#include <iostream>
#include <mutex>
#include <set>

namespace backplane {

void tell_warning(const WarningHandler& handler, const std::string& warning) {
  if (handler) {
    handler(warning);
    return;
  }
  static std::mutex mutex;
  static std::set<std::string> told;
  std::lock_guard<std::mutex> lock(mutex);
  if (told.insert(warning).second) std::cerr << "backplane: warn: " << warning << "\n";
}

}  // namespace backplane
