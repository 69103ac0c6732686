// backplane::torch::TorchExtension on the kernel-builder packages this build publishes
// (kernels/kernel_builder, which the real `kernels` library loads in kernel_builder_test): the
// ops come back through the dispatcher with their schemas and equal LibTorch's composites;
// arguments are checked against the schema; and every broken build is refused before anything
// opens, naming the file and why, with the process going on.
#include <backplane/backplane.hpp>
#include <backplane/error.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/use_kernels.hpp>
#include <backplane/torch/extension.hpp>
#include <backplane/torch/layers.hpp>

#include <ATen/ATen.h>
#include <torch/version.h>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <fstream>

#include "loader/temp_folder.hpp"

namespace backplane::torch {
namespace {

namespace fs = std::filesystem;
using backplane::testing::TempFolder;

fs::path package(const std::string& name) {
  return fs::path(KB_PACKAGES) / name / "build" / KB_VARIANT;
}

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// A copy of a published variant under `name` in `tmp`, its digest rewritten for what it holds
// after `change` ran on it.
fs::path resealed_copy(const std::string& package_name, const TempFolder& tmp,
                       const std::string& name,
                       const std::function<void(const fs::path&)>& change) {
  const fs::path copy = tmp.path() / name;
  fs::copy(package(package_name), copy, fs::copy_options::recursive);
  change(copy);
  nlohmann::json metadata = nlohmann::json::parse(std::ifstream(copy / "metadata.json"));
  const hub::KernelBuilderDigest digest = hub::hash_kernel_builder_variant(copy, "sha256", copy);
  metadata["digest"]["files"] = digest.files;
  std::ofstream(copy / "metadata.json") << metadata.dump();
  return copy;
}

TEST(TorchExtension, LoadsAPublishedPackageAndListsItsSchemas) {
  const auto ext = TorchExtension::load(package("activation"));
  EXPECT_EQ(ext->metadata().name, "activation");
  const std::string ns = ext->metadata().id;
  EXPECT_EQ(ns.rfind("_activation_cpu_", 0), 0u) << ns;
  const std::vector<std::string>& schemas = ext->schemas();
  std::string listed;
  for (const std::string& schema : schemas) listed += "\n  " + schema;
  SCOPED_TRACE("schemas:" + listed);
  for (const char* op : {"silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"}) {
    SCOPED_TRACE(op);
    EXPECT_NE(std::find(schemas.begin(), schemas.end(),
                        ns + "::" + op + "(Tensor! out, Tensor input) -> ()"),
              schemas.end());
    EXPECT_TRUE(ext->has_op(op));
  }
  EXPECT_FALSE(ext->has_op("relu"));
  // Loading again is the same extension: its registrations happen once per process.
  EXPECT_EQ(TorchExtension::load(package("activation")).get(), ext.get());
  EXPECT_EQ(system_facts().torch_version->str(),
            std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR));
}

TEST(TorchExtension, OpsEqualTheLibTorchComposites) {
  const auto act = TorchExtension::load(package("activation"));
  const auto norm = TorchExtension::load(package("rmsnorm"));
  at::manual_seed(7);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const double tolerance = dtype == at::kFloat ? 1e-5 : 1e-2;
    const at::Tensor x = at::randn({3, 5, 64}, at::dtype(dtype));
    const at::Tensor gate = x.slice(-1, 0, 32).to(at::kFloat), up = x.slice(-1, 32).to(at::kFloat);
    const std::pair<const char*, at::Tensor> cases[] = {
        {"silu_and_mul", at::silu(gate) * up},
        {"gelu_and_mul", at::gelu(gate) * up},
        {"gelu_tanh_and_mul", at::gelu(gate, "tanh") * up}};
    for (const auto& [op, expected] : cases) {
      SCOPED_TRACE(op);
      at::Tensor out = at::empty({3, 5, 32}, at::dtype(dtype));
      act->call(op, {out, x});
      EXPECT_TRUE(at::allclose(out.to(at::kFloat), expected, tolerance, tolerance));
    }
    const at::Tensor weight = at::randn({64}, at::dtype(dtype));
    at::Tensor out = at::empty_like(x);
    norm->call("rms_norm", {out, x, weight, 1e-6});
    const at::Tensor x32 = x.to(at::kFloat);
    const at::Tensor expected =
        x32 * at::rsqrt(x32.pow(2).mean(-1, true) + 1e-6) * weight.to(at::kFloat);
    EXPECT_TRUE(at::allclose(out.to(at::kFloat), expected, tolerance, tolerance));
  }
}

TEST(TorchExtension, ArgumentsAreCheckedAgainstTheSchema) {
  const auto act = TorchExtension::load(package("activation"));
  const std::string op = act->metadata().id + "::silu_and_mul";
  const at::Tensor x = at::randn({4, 16});
  at::Tensor out = at::empty({4, 8});
  EXPECT_NE(error_of([&] {
              act->call("silu_and_mul", {out});
            }).find(op + ": argument 2 (input) is missing"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              act->call("silu_and_mul", {out, 2.0});
            }).find(op + ": argument 2 (input): expected Tensor, got float"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              act->call("silu_and_mul", {out, x, x});
            }).find(op + ": takes 2 arguments, got 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              act->call("relu", {out, x});
            }).find("::relu: no such op"),
            std::string::npos);
  // A dtype the kernel does not take: the op's own message, after the op's name.
  at::Tensor ints = at::zeros({4, 16}, at::kInt), int_out = at::zeros({4, 8}, at::kInt);
  const std::string dtype_error = error_of([&] { act->call("silu_and_mul", {int_out, ints}); });
  EXPECT_EQ(dtype_error.rfind(op + ": ", 0), 0u) << dtype_error;
  EXPECT_NE(dtype_error.find("int32"), std::string::npos) << dtype_error;
  // The process goes on: the op still works.
  act->call("silu_and_mul", {out, x});
}

TEST(TorchExtension, RefusesBrokenBuildsBeforeOpeningThem) {
  const TempFolder tmp;
  struct Case {
    const char* name;
    std::function<fs::path()> make;
    ExtensionLoadOptions options;
    std::vector<std::string> says;
  };
  const std::string torch_now =
      std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
  const std::string other_torch = "torch" + std::to_string(TORCH_VERSION_MAJOR) +
                                  std::to_string(TORCH_VERSION_MINOR - 1) +
                                  "-cxx11-cpu-x86_64-linux";
  auto library_of = [](const fs::path& folder) { return hub::kernel_builder_extension(folder); };
  ExtensionLoadOptions unchecked;
  unchecked.verify_digest = false;
  const std::vector<Case> cases = {
      {"a changed file",
       [&] {
         const fs::path copy = tmp.path() / "changed";
         fs::copy(package("activation"), copy, fs::copy_options::recursive);
         std::ofstream(copy / "__init__.py", std::ios::app) << "import os\n";
         std::ofstream(copy / "extra.py") << "";
         return copy;
       },
       {},
       {"do not match metadata.json's sha256 digest", "hash mismatch __init__.py",
        "unknown file extra.py"}},
      {"another LibTorch",
       [&] { return resealed_copy("activation", tmp, other_torch, [](const fs::path&) {}); },
       {},
       {"built for another LibTorch than this program's " + torch_now,
        "Torch version (" + std::to_string(TORCH_VERSION_MAJOR) + "." +
            std::to_string(TORCH_VERSION_MINOR - 1) +
            ") does not match the host's Torch version (" + torch_now + ")"}},
      {"a Python-only build",
       [&] {
         return resealed_copy("activation", tmp, "torch-cpu",
                              [&](const fs::path& c) { fs::remove(library_of(c)); });
       },
       {},
       {"is a Python-only build"}},
      {"no extension library",
       [&] {
         return resealed_copy("activation", tmp, "no-library",
                              [&](const fs::path& c) { fs::remove(library_of(c)); });
       },
       {},
       {"no extension library (*.so)"}},
      {"a truncated library",
       [&] {
         return resealed_copy("activation", tmp, "truncated", [&](const fs::path& c) {
           const fs::path so = library_of(c);
           fs::resize_file(so, fs::file_size(so) / 3);
         });
       },
       {},
       {"truncated: its headers reach byte"}},
      {"not an ELF file",
       [&] {
         return resealed_copy("activation", tmp, "text", [&](const fs::path& c) {
           std::ofstream(library_of(c)) << "not a library";
         });
       },
       unchecked,
       {"not an ELF file"}},
      {"metadata.json without name",
       [&] {
         const fs::path copy = resealed_copy("activation", tmp, "old", [](const fs::path&) {});
         nlohmann::json m = nlohmann::json::parse(std::ifstream(copy / "metadata.json"));
         m.erase("name");
         std::ofstream(copy / "metadata.json") << m.dump();
         return copy;
       },
       {},
       {"name: is missing: this metadata.json was written by a kernel-builder from before 2026"}},
      {"a link out of the variant",
       [&] {
         std::ofstream(tmp.path() / "outside.py") << "print('outside')\n";
         const fs::path copy = tmp.path() / "linked";
         fs::copy(package("activation"), copy, fs::copy_options::recursive);
         fs::remove(copy / "layers.py");
         fs::create_symlink(tmp.path() / "outside.py", copy / "layers.py");
         return copy;
       },
       {},
       {"layers.py: a link out of"}},
      {"an extension that registers no op",
       [&] {
         return resealed_copy("activation", tmp, "no-ops", [&](const fs::path& c) {
           fs::copy_file(NO_OPS_EXTENSION, library_of(c), fs::copy_options::overwrite_existing);
         });
       },
       {},
       {"registers no operator under its namespace"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    fs::path folder;
    ASSERT_EQ(error_of([&] { folder = c.make(); }), "");
    const std::string error = error_of([&] { TorchExtension::load(folder, c.options); });
    ASSERT_FALSE(error.empty()) << "accepted";
    EXPECT_NE(error.find(folder.string()), std::string::npos) << error;
    for (const std::string& part : c.says) {
      EXPECT_NE(error.find(part), std::string::npos) << error;
    }
  }
  // Everything refused, the published package still loads and runs.
  const auto act = TorchExtension::load(package("activation"));
  at::Tensor out = at::empty({2, 4});
  act->call("silu_and_mul", {out, at::ones({2, 8})});
  EXPECT_NEAR(out[0][0].item<float>(), 0.7310586f, 1e-6);
  // A copy of a loaded package cannot be loaded beside it (its namespace is taken).
  const fs::path copy = resealed_copy("activation", tmp, "second-copy", [](const fs::path&) {});
  EXPECT_NE(
      error_of([&] { TorchExtension::load(copy); }).find("is already registered in this process"),
      std::string::npos);
}

// use_kernels binds kernel-builder layers like in-tree ones: a user mapping to the published
// packages (local folders), the bridge's facts for the variant, and the layers call the ops.
TEST(TorchExtensionLayers, UseKernelsBindsKernelBuilderLayers) {
  RuntimeOptions runtime_options;
  runtime_options.plugin_path = std::vector<fs::path>{PLUGIN_BUILD_DIR};
  runtime_options.only_plugins = std::vector<std::string>{"cpu"};
  runtime_options.log_sink = [](LogLevel, const std::string&) {};
  const Runtime runtime = Runtime::open(runtime_options);
  const std::string root = fs::path(KB_PACKAGES).string();
  const nlohmann::json config = {{"RMSNorm", root + "/rmsnorm:RMSNorm"},
                                 {"SiluAndMul", root + "/activation:SiluAndMul"},
                                 {"GeluTanhAndMul", root + "/activation:GeluTanhAndMul"},
                                 {"RotaryEmbedding", root + "/rotary:RotaryEmbedding"}};
  hub::UseKernelsOptions options;
  options.user_mapping = parse_kernel_config(config, {"cpu"});
  options.inherit_mapping = false;
  options.system = system_facts();  // this LibTorch: the torch215-... variants qualify
  std::vector<std::string> warnings;
  options.on_warning = [&](const std::string& w) { warnings.push_back(w); };
  const hub::Store store(fs::temp_directory_path() / "backplane-unused-store");
  auto kernels = std::make_shared<hub::LayerKernels>(
      hub::LayerKernels::use_kernels(runtime, Device("cpu"), store, options));
  for (const char* layer : {"RMSNorm", "SiluAndMul", "GeluTanhAndMul", "RotaryEmbedding"}) {
    SCOPED_TRACE(layer);
    const hub::BoundLayerKernel* bound = kernels->find(layer);
    ASSERT_NE(bound, nullptr) << kernels->reason(layer);
    EXPECT_FALSE(bound->torch_extension.empty());
    EXPECT_EQ(bound->variant, KB_VARIANT);
  }
  at::manual_seed(3);
  const at::Tensor x = at::randn({2, 7, 96}), w = 1 + 0.1 * at::randn({96});
  const RMSNorm norm(w, 1e-6, kernels), plain_norm(w, 1e-6);
  EXPECT_TRUE(at::allclose(norm(x), plain_norm(x), 1e-5, 1e-5));
  // The op really runs: a weight of the wrong size is refused by the extension, by name.
  const std::string refused = error_of([&] { RMSNorm(w.narrow(0, 0, 5), 1e-6, kernels)(x); });
  EXPECT_NE(refused.find("::rms_norm: "), std::string::npos) << refused;
  EXPECT_TRUE(at::allclose(SiluAndMul(kernels)(x), SiluAndMul()(x), 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(GeluTanhAndMul(kernels)(x), GeluTanhAndMul()(x), 1e-5, 1e-5));
  const auto [cos, sin] = RotaryEmbedding::tables(7, 32);
  at::Tensor q = at::randn({1, 4, 7, 32}), k = at::randn({1, 2, 7, 32});
  at::Tensor q2 = q.clone(), k2 = k.clone();
  RotaryEmbedding(false, kernels)(q, k, cos, sin);
  RotaryEmbedding(false)(q2, k2, cos, sin);
  EXPECT_TRUE(at::allclose(q, q2, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(k, k2, 1e-5, 1e-5));

  // Training: no layer of these builds has a backward op, so each keeps its own forward, saying
  // so (RMSNorm's table row names rms_norm_backward, which the build does not register).
  kernels->set_mode(KernelMode::training());
  EXPECT_EQ(kernels->find("SiluAndMul"), nullptr);
  EXPECT_NE(kernels->reason("SiluAndMul").find("has no backward"), std::string::npos);
  ASSERT_NE(kernels->find("RMSNorm"), nullptr);  // bound; the bridge finds no backward op
  EXPECT_TRUE(at::allclose(RMSNorm(w, 1e-6, kernels)(x), plain_norm(x), 1e-5, 1e-5));
  const std::string composite = error_of([&] { RMSNorm(w.narrow(0, 0, 5), 1e-6, kernels)(x); });
  EXPECT_EQ(composite.find("::rms_norm: "), std::string::npos) << composite;
}

// Training mode binds a kernel-builder layer whose build registers its backward op (the layer
// table's rms_norm_backward): the layer's forward runs the build's rms_norm.
TEST(TorchExtensionLayers, TrainingBindsALayerWhoseBuildHasItsBackwardOp) {
  const TempFolder tmp;
  const fs::path variant = tmp.path() / "pkg" / "build" / KB_VARIANT;
  fs::create_directories(variant);
  const std::string id = "_rmsnorm_backward_test_0000000";
  fs::copy_file(BACKWARD_EXTENSION, variant / (id + ".abi3.so"));
  std::ofstream(variant / "__init__.py") << "# a C++ test's build\n";
  const hub::KernelBuilderDigest digest =
      hub::hash_kernel_builder_variant(variant, "sha256", variant);
  std::ofstream(variant / "metadata.json")
      << nlohmann::json{{"name", "rmsnorm-backward-test"},
                        {"id", id},
                        {"version", 1},
                        {"license", "MIT"},
                        {"backend", {{"type", "cpu"}}},
                        {"python-depends", nlohmann::json::array()},
                        {"digest", {{"algorithm", "sha256"}, {"files", digest.files}}}}
             .dump();

  RuntimeOptions runtime_options;
  runtime_options.plugin_path = std::vector<fs::path>{PLUGIN_BUILD_DIR};
  runtime_options.only_plugins = std::vector<std::string>{"cpu"};
  runtime_options.log_sink = [](LogLevel, const std::string&) {};
  const Runtime runtime = Runtime::open(runtime_options);
  hub::UseKernelsOptions options;
  options.user_mapping = parse_kernel_config(
      nlohmann::json{{"RMSNorm", (tmp.path() / "pkg").string() + ":RMSNorm"}}, {"cpu"});
  options.inherit_mapping = false;
  options.mode = KernelMode::training();
  options.system = system_facts();
  const hub::Store store(fs::temp_directory_path() / "backplane-unused-store");
  auto kernels = std::make_shared<hub::LayerKernels>(
      hub::LayerKernels::use_kernels(runtime, Device("cpu"), store, options));
  ASSERT_NE(kernels->find("RMSNorm"), nullptr) << kernels->reason("RMSNorm");

  const auto ext = TorchExtension::load(variant);
  ASSERT_TRUE(ext->has_op("rms_norm_backward"));
  const int64_t before = ext->call("calls", {}).front().toInt();
  const at::Tensor x = at::randn({3, 32}), w = 1 + 0.1 * at::randn({32});
  EXPECT_TRUE(at::allclose(RMSNorm(w, 1e-6, kernels)(x), RMSNorm(w, 1e-6)(x), 1e-5, 1e-5));
  EXPECT_EQ(ext->call("calls", {}).front().toInt(), before + 1);  // the build's op ran
}

}  // namespace
}  // namespace backplane::torch
