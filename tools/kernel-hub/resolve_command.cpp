// kernel-hub resolve org/repo [--device D] [--revision R] [--sim NAME|FILE]
//                   [--backend-version X.Y] [--torch-version X.Y] [--torch-cxx-abi cxx11|cxx98]
//                   [--load [--lock FILE]]
#include <backplane/backplane.hpp>
#include <backplane/runtime/sim_topology.hpp>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <iostream>

#include "command.hpp"

namespace po = boost::program_options;
using nlohmann::json;

namespace kernel_hub {
namespace {

json optional_version(const std::optional<backplane::hub::BackendVersion>& v) {
  return v ? json(v->str()) : json(nullptr);
}

}  // namespace

int run_resolve(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string device_text, revision, sim, backend_version, torch_version, torch_cxx_abi, lock_file;
  bool load = false;
  po::options_description description("Options");
  description.add_options()(
      "device", po::value(&device_text)->value_name("D"),
      "the device to resolve for (default: the one pipeline() would use: the first "
      "accelerator, else cpu)")("revision", po::value(&revision)->value_name("R"),
                                "the revision (default: main, or the only one installed)")(
      "sim", po::value(&sim)->value_name("NAME|FILE"),
      "simulate a topology, as hwprobe --sim (shipped name or JSON file)")(
      "backend-version", po::value(&backend_version)->value_name("X.Y"),
      "the backend version to match (CUDA: the newest the driver supports) instead of what "
      "the device reports")("torch-version", po::value(&torch_version)->value_name("X.Y"),
                            "the host's LibTorch version, for torch-tagged variants")(
      "torch-cxx-abi", po::value(&torch_cxx_abi)->value_name("cxx11|cxx98"),
      "that LibTorch's C++ ABI (default on Linux: this build's)")(
      "load", po::bool_switch(&load), "load the chosen variant and list the kernels it registers")(
      "lock", po::value(&lock_file)->value_name("FILE"),
      "with --load: the kernels.lock to verify against (else the publisher must be trusted)");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(
          args, description, "words",
          "kernel-hub resolve org/repo [--device D] [--revision R] [--sim NAME|FILE]\n"
          "                  [--backend-version X.Y] [--torch-version X.Y]\n"
          "                  [--torch-cxx-abi cxx11|cxx98] [--load [--lock FILE]] [--json]\n\n"
          "Which build variant the device would load, and why every other one was refused.\n"
          "Exit 1 when no variant fits.",
          vm)) {
    return kExitOk;
  }
  const auto repo = backplane::hub::RepoId::parse(single_word(vm, "org/repo"), "resolve");
  if (!lock_file.empty() && !load) {
    throw backplane::InvalidArgument("--lock is used only with --load");
  }
  backplane::RuntimeOptions runtime_options = backplane::RuntimeOptions::from_environment();
  if (!sim.empty()) {
    runtime_options.sim_topology = backplane::resolve_sim_topology(sim, "--sim").string();
  }
  const backplane::Runtime runtime = backplane::Runtime::open(runtime_options);
  const backplane::Device device = device_text.empty()
                                       ? backplane::select_pipeline_device(runtime, {}).device
                                       : runtime.parse_device(device_text);
  const backplane::DeviceInfo& info = runtime.device(device);
  const backplane::BackendInfo* backend = runtime.backend(info.device.type());
  backplane::hub::SystemFacts system =
      backplane::hub::system_facts(info, backend != nullptr ? backend->hub_key : "");
  if (!backend_version.empty()) {
    system.backend_version =
        backplane::hub::BackendVersion::parse(backend_version, "--backend-version");
    system.backend_version_note = "--backend-version " + backend_version;
  }
  if (!torch_version.empty()) {
    system.torch_version = backplane::hub::BackendVersion::parse(torch_version, "--torch-version");
  }
  if (!torch_cxx_abi.empty()) {
    if (torch_cxx_abi != "cxx11" && torch_cxx_abi != "cxx98") {
      throw backplane::InvalidArgument("--torch-cxx-abi: '" + torch_cxx_abi +
                                       "' is not a C++ ABI; expected cxx11 or cxx98");
    }
    system.torch_cxx_abi = torch_cxx_abi;
  }

  const backplane::hub::Store store = open_store();
  const std::optional<std::string> wanted =
      revision.empty() ? std::nullopt : std::optional<std::string>(revision);
  const backplane::hub::ResolvedVariant resolved = store.resolve(repo, wanted, system);

  std::optional<backplane::hub::LoadedPackage> loaded;
  std::optional<backplane::hub::LockFile> lock;
  if (load && resolved.variant) {
    backplane::hub::LoadOptions options = trusted_load_options(lock_file, lock);
    options.revision = resolved.package.revision;
    options.device = &info;
    loaded = store.load(repo, system, options);
  }

  json decisions = json::array();
  for (const auto& d : resolved.resolution.decisions) {
    json decision = {{"variant", d.variant}, {"accepted", d.accepted}, {"reason", d.reason}};
    if (!d.accepted) decision["refused_by"] = d.refused_by;
    decisions.push_back(std::move(decision));
  }
  json kernels = json::array();
  if (loaded) {
    for (const auto& k : loaded->kernels()) {
      kernels.push_back({{"op", k.info.op},
                         {"implementation", k.info.implementation},
                         {"device_type", k.info.device_type},
                         {"dtypes", k.info.dtypes}});
    }
  }
  if (common.json) {
    json out = {
        {"repo", repo.str()},
        {"revision", resolved.package.revision},
        {"folder", resolved.package.folder.string()},
        {"device", info.device.str()},
        {"system",
         {{"backend", system.backend},
          {"backend_version", optional_version(system.backend_version)},
          {"backend_version_note", system.backend_version_note},
          {"cpu", system.cpu},
          {"os", system.os},
          {"cxx_abi", system.cxx_abi},
          {"torch_version", optional_version(system.torch_version)},
          {"torch_cxx_abi", system.torch_cxx_abi ? json(*system.torch_cxx_abi) : json(nullptr)}}},
        {"variant", resolved.variant ? json(*resolved.variant) : json(nullptr)},
        {"decisions", decisions}};
    if (load) out["kernels"] = kernels;
    std::cout << out.dump(2) << "\n";
  } else if (resolved.variant) {
    std::cout << repo.str() << "@" << resolved.package.revision << " on " << info.device.str()
              << ": " << *resolved.variant << "\n";
    for (const auto& d : resolved.resolution.decisions) {
      std::cout << "  " << (d.accepted ? "+ " : "- ") << d.variant << ": " << d.reason << "\n";
    }
    if (loaded) {
      std::cout << "Kernels\n";
      for (const auto& k : loaded->kernels()) {
        std::cout << "  " << k.info.op << "/" << k.info.implementation << " on "
                  << k.info.device_type << "\n";
      }
    }
  }
  if (!resolved.variant) {
    std::cerr << backplane::hub::no_variant_message(repo.str(), resolved.package.revision,
                                                    resolved.resolution)
              << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace kernel_hub
