// The helpers every kernel-hub command shares (command.hpp), apart from the command list: also
// linked into kernel-hub-torch.
#include <backplane/error.hpp>

#include "command.hpp"

namespace po = boost::program_options;

namespace kernel_hub {

void add_common_options(po::options_description& description, CommonOptions& common) {
  description.add_options()("json", po::bool_switch(&common.json), "print JSON instead of text")(
      // Not bound: parse_command_or_help reads it from the parsed words.
      "help,h", po::bool_switch(), "show this help");
}

backplane::hub::Store open_store(bool with_local_kernels) {
  return backplane::hub::Store(backplane::hub::default_store_root(),
                               with_local_kernels ? backplane::hub::LocalKernels::from_environment()
                                                  : backplane::hub::LocalKernels{},
                               {backplane::hub::default_hf_cache()});
}

backplane::hub::LoadOptions trusted_load_options(const std::string& lock_file,
                                                 std::optional<backplane::hub::LockFile>& lock) {
  backplane::hub::LoadOptions options;
  options.trust = backplane::hub::TrustPolicy::from_environment();
  if (!lock_file.empty()) {
    lock = backplane::hub::LockFile::read(lock_file);
    options.lock = &*lock;
    options.lock_source = lock_file;
  }
  return options;
}

std::string single_word(const po::variables_map& vm, const char* what) {
  const std::vector<std::string> words = positional_words(vm, "words");
  if (words.size() != 1) {
    throw backplane::InvalidArgument("expected one " + std::string(what) + ", got " +
                                     std::to_string(words.size()) + " words");
  }
  return words.front();
}

}  // namespace kernel_hub
