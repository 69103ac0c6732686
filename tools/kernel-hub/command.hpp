// What every kernel-hub command shares: the common options, argument parsing, the
// store. Each command lives in its own <name>_command.cpp.
#pragma once

#include <backplane/hub.hpp>

#include <boost/program_options.hpp>

#include <optional>
#include <string>
#include <vector>

#include "command_line.hpp"

namespace kernel_hub {

// Exit codes, Command and parse_command_or_help: shared with the other tools
// (tools/common/command_line.hpp).
using namespace backplane::tools;

// --json and --help: taken by every command.
struct CommonOptions {
  bool json = false;
};

void add_common_options(boost::program_options::options_description& description,
                        CommonOptions& common);

// The store of BACKPLANE_HUB_CACHE (or the default) with BACKPLANE_LOCAL_KERNELS; lock and
// verify use it without the local folders (a lock records installed packages).
backplane::hub::Store open_store(bool with_local_kernels = true);

// Load options with the trust of BACKPLANE_TRUSTED_KERNELS and, when `lock_file` is given, that
// lock (read into `lock`, which must outlive the options).
backplane::hub::LoadOptions trusted_load_options(const std::string& lock_file,
                                                 std::optional<backplane::hub::LockFile>& lock);

// Exactly one positional word, or a usage error naming what was expected.
std::string single_word(const boost::program_options::variables_map& vm, const char* what);

// The commands, in the order `kernel-hub --help` lists them.
const std::vector<Command>& commands();

int run_install(const std::vector<std::string>& args);
int run_list(const std::vector<std::string>& args);
int run_show(const std::vector<std::string>& args);
int run_resolve(const std::vector<std::string>& args);
int run_lock(const std::vector<std::string>& args);
int run_verify(const std::vector<std::string>& args);
int run_ops(const std::vector<std::string>& args);
int run_remove(const std::vector<std::string>& args);

}  // namespace kernel_hub
