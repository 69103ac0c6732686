// kernel-hub ops org/repo [...]: runs kernel-hub-torch, the part of kernel-hub that links
// LibTorch (built with the LibTorch bridge), beside this executable; kernel-hub itself never
// loads LibTorch.
#include <backplane/error.hpp>

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "command.hpp"

namespace kernel_hub {

int run_ops(const std::vector<std::string>& args) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path tool = self.parent_path() / "kernel-hub-torch";
  if (ec || !std::filesystem::is_regular_file(tool, ec)) {
    throw backplane::Error(
        "kernel-hub ops needs kernel-hub-torch beside kernel-hub (" + tool.string() +
        "), which is built with the LibTorch bridge: configure with the torch wheel "
        "(BACKPLANE_PYTHON) or libtorch-dev, with the kernel hub");
  }
  std::vector<std::string> words{tool.string(), "ops"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  ::execv(tool.c_str(), argv.data());
  throw backplane::Error("cannot run " + tool.string() + ": " +
                         std::error_code(errno, std::generic_category()).message());
}

}  // namespace kernel_hub
