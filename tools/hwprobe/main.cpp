// hwprobe: what backplane finds on this machine, and why.
//   hwprobe [--json]                 backends, devices, plugins
//   hwprobe parse STRING... [--json] device strings -> type and index
//   hwprobe plugins [--json]         the search path and what became of each manifest
// Exit codes: 0 success, 2 bad usage or bad input (message on stderr), 1 any other failure.
#include <backplane/backplane.hpp>

#include <boost/program_options.hpp>

#include <iostream>
#include <string>
#include <vector>

#include <cstdlib>

#include "json_report.hpp"
#include "text_report.hpp"
#include "topology_option.hpp"

namespace po = boost::program_options;

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

const char* const kUsage =
    "Usage: hwprobe [COMMAND] [ARGS...] [OPTIONS]\n"
    "\n"
    "Commands:\n"
    "  (none)            backends, devices and plugins found on this machine\n"
    "  parse STRING...   parse device strings (\"cuda:0\", \"cpu\") into type and index\n"
    "  plugins           the plugin search path and what became of each manifest\n"
    "\n"
    "Options";

struct Invocation {
  std::string command;
  std::vector<std::string> args;
  bool json = false;
  bool explain = false;
  std::string log_level;
  std::string sim;  // --sim NAME|FILE
};

// Throws po::error for bad usage.
Invocation parse_command_line(int argc, char** argv, const po::options_description& options,
                              bool& help, bool& version) {
  po::options_description hidden;
  hidden.add_options()("command", po::value<std::string>())("args",
                                                            po::value<std::vector<std::string>>());
  po::options_description all;
  all.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("command", 1).add("args", -1);

  po::variables_map vm;
  po::store(
      po::command_line_parser(argc, argv)
          .options(all)
          .positional(positional)
          .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
          .run(),
      vm);
  po::notify(vm);

  Invocation inv;
  help = vm.count("help") > 0;
  version = vm.count("version") > 0;
  inv.json = vm.count("json") > 0;
  inv.explain = vm.count("explain") > 0;
  if (vm.count("sim")) inv.sim = vm["sim"].as<std::string>();
  if (vm.count("log")) inv.log_level = vm["log"].as<std::string>();
  if (vm.count("command")) inv.command = vm["command"].as<std::string>();
  if (vm.count("args")) inv.args = vm["args"].as<std::vector<std::string>>();
  return inv;
}

backplane::Runtime open_runtime(const Invocation& inv) {
  if (!inv.sim.empty()) {
    // The sim plugin reads its topology from the environment, as it does for every host app.
    const std::string topology = hwprobe::resolve_topology(inv.sim).string();
    ::setenv("BACKPLANE_SIM_TOPOLOGY", topology.c_str(), 1);
  }
  backplane::RuntimeOptions options = backplane::RuntimeOptions::from_environment();
  if (!inv.log_level.empty())
    options.log_level = backplane::parse_log_level(inv.log_level, "--log");
  return backplane::Runtime::open(options);
}

int run_parse(const Invocation& inv) {
  if (inv.args.empty()) {
    std::cerr << "hwprobe parse: give at least one device string, e.g. hwprobe parse cuda:0\n";
    return kExitUsage;
  }
  const backplane::Runtime runtime = open_runtime(inv);
  int status = kExitOk;
  nlohmann::json results = nlohmann::json::array();
  for (const std::string& text : inv.args) {
    try {
      const backplane::Device device = runtime.parse_device(text);
      const nlohmann::json index = device.index() ? nlohmann::json(*device.index()) : nullptr;
      results.push_back({{"input", text}, {"type", device.type()}, {"index", index}});
      if (!inv.json) {
        std::cout << text << "\ttype=" << device.type()
                  << " index=" << (device.index() ? std::to_string(*device.index()) : "none")
                  << "\n";
      }
    } catch (const backplane::InvalidArgument& e) {
      std::cerr << "hwprobe: " << e.what() << "\n";
      results.push_back({{"input", text}, {"error", e.what()}});
      status = kExitUsage;
    }
  }
  if (inv.json) std::cout << results.dump(2) << "\n";
  return status;
}

int run(const Invocation& inv) {
  if (inv.command == "parse") return run_parse(inv);
  if (!inv.args.empty()) {
    std::cerr << "hwprobe: unexpected argument '" << inv.args.front() << "'\n";
    return kExitUsage;
  }
  if (inv.command.empty()) {
    const backplane::Runtime runtime = open_runtime(inv);
    if (inv.json) {
      std::cout << hwprobe::runtime_json(runtime).dump(2) << "\n";
    } else if (inv.explain) {
      hwprobe::print_explanation(std::cout, runtime);
    } else {
      hwprobe::print_runtime(std::cout, runtime);
    }
    return kExitOk;
  }
  if (inv.command == "plugins") {
    const backplane::Runtime runtime = open_runtime(inv);
    if (inv.json) {
      std::cout << hwprobe::plugins_json(runtime).dump(2) << "\n";
    } else {
      hwprobe::print_plugins(std::cout, runtime);
    }
    return kExitOk;
  }
  std::cerr << "hwprobe: unknown command '" << inv.command
            << "'; expected one of: parse, plugins (or none)\n";
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  po::options_description options(kUsage);
  options.add_options()("help,h", "show this help")("version", "show the version")(
      "json", "print JSON instead of tables")(
      "explain", "say in words how each device was found and mapped to its index")(
      "sim", po::value<std::string>()->value_name("NAME|FILE"),
      "simulate a topology: a shipped one by name (h100x8, mi300x8, ...) or a JSON file; "
      "sets BACKPLANE_SIM_TOPOLOGY")(
      "log", po::value<std::string>()->value_name("LEVEL"),
      "error|warn|info|debug: why each plugin was taken or skipped (overrides BACKPLANE_LOG)");
  try {
    bool help = false, version = false;
    const Invocation inv = parse_command_line(argc, argv, options, help, version);
    if (help) {
      std::cout << options << "\n";
      return kExitOk;
    }
    if (version) {
      std::cout << "hwprobe " << BACKPLANE_VERSION_STRING << "\n";
      return kExitOk;
    }
    return run(inv);
  } catch (const po::error& e) {
    std::cerr << "hwprobe: " << e.what() << "\nTry 'hwprobe --help'.\n";
    return kExitUsage;
  } catch (const backplane::InvalidArgument& e) {
    std::cerr << "hwprobe: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "hwprobe: " << e.what() << "\n";
    return kExitFailure;
  }
}
