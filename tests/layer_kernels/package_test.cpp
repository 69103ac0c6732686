// The in-tree kernel packages (hub-packages/backplane/{rmsnorm,activation,rotary}, cpu variant)
// loaded as the hub loads any package: metadata checked against what the library registers,
// each kernel called through the plugin ABI and compared with the library called directly;
// bad arguments come back as the kernel's status message.
#include <gtest/gtest.h>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/package.hpp>
#include <backplane/hub/store.hpp>

#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "activation/activation.hpp"
#include "in_tree_package.hpp"
#include "owned_tensor.hpp"
#include "rmsnorm/rmsnorm.hpp"
#include "rotary/rotary.hpp"

namespace backplane {
namespace {

hub::LoadedPackage load(const std::string& name) {
  return testing::load_in_tree_package(PACKAGES_DIR, CPU_VARIANT, name);
}

// Values -1, -1 + step, ... repeating every 13 elements.
testing::OwnedTensor stepped(std::vector<int64_t> dims, float step) {
  return testing::OwnedTensor(
      std::move(dims), [step](int64_t i) { return static_cast<float>(i % 13) * step - 1.0f; });
}

// A store in a fresh temporary folder, removed with it.
class TemporaryStore {
 public:
  TemporaryStore() {
    std::string pattern = (std::filesystem::temp_directory_path() / "bp-store-XXXXXX").string();
    root_ = ::mkdtemp(pattern.data());
  }
  ~TemporaryStore() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
};

TEST(KernelPackages, LoadWithoutALockAsThisBuildMadeThemAndNotUnderAnotherName) {
  TemporaryStore temporary;
  const hub::Store store(temporary.root() / "store");
  store.install(std::string(PACKAGES_DIR) + "/backplane/rmsnorm");
  const hub::SystemFacts host = hub::SystemFacts::host();
  EXPECT_EQ(store.load(hub::RepoId{"backplane", "rmsnorm"}, host).kernels().size(), 2u);

  // The same package copied with another name in the trusted org, installed from elsewhere.
  const std::filesystem::path copy = temporary.root() / "copy";
  std::filesystem::copy(std::string(PACKAGES_DIR) + "/backplane/rmsnorm", copy,
                        std::filesystem::copy_options::recursive);
  const std::filesystem::path metadata = copy / "build" / CPU_VARIANT / "metadata.json";
  std::string text;
  {
    std::ifstream in(metadata);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string from = "\"repo_id\": \"backplane/rmsnorm\"";
  ASSERT_NE(text.find(from), std::string::npos) << text;
  text.replace(text.find(from), from.size(), "\"repo_id\": \"backplane/evil\"");
  std::ofstream(metadata) << text;
  for (const auto& entry : std::filesystem::directory_iterator(copy / "build")) {
    if (entry.path().filename() != CPU_VARIANT) std::filesystem::remove_all(entry.path());
  }
  store.install(copy);  // only the cpu variant is left
  try {
    store.load(hub::RepoId{"backplane", "evil"}, host);
    ADD_FAILURE() << "backplane/evil loaded without a lock";
  } catch (const hub::PackageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("kernel package backplane/evil@main (" + std::string(CPU_VARIANT) +
                        ") claims the publisher 'backplane', which is trusted only for the "
                        "packages this build produced"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("backplane/rmsnorm"), std::string::npos) << what;
  }
}

TEST(KernelPackages, RegisterWhatTheirMetadataDeclares) {
  const struct {
    const char* package;
    std::vector<std::string> ops;
  } expected[] = {{"rmsnorm", {"rms_norm", "rms_norm_backward"}},
                  {"activation",
                   {"silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul", "silu_and_mul_backward",
                    "gelu_and_mul_backward", "gelu_tanh_and_mul_backward"}},
                  {"rotary", {"rotary_embedding", "rotary_embedding_backward"}}};
  for (const auto& e : expected) {
    SCOPED_TRACE(e.package);
    const hub::LoadedPackage p = load(e.package);
    ASSERT_EQ(p.kernels().size(), e.ops.size());
    // Every layer of the cpu variants trains: its backward is one of the functions.
    for (const hub::PackageLayer& layer : p.metadata().layers) {
      EXPECT_TRUE(layer.has_backward) << layer.name;
      const auto& functions = p.metadata().functions;
      EXPECT_TRUE(std::any_of(
          functions.begin(), functions.end(),
          [&](const hub::PackageFunction& f) { return f.name == layer.backward_function; }))
          << layer.name;
    }
    for (const std::string& op : e.ops) {
      const hub::PackageKernel* k = p.find(op, op);
      ASSERT_NE(k, nullptr) << op;
      EXPECT_EQ(k->info.device_type, "cpu");
      EXPECT_EQ(k->info.dtypes, (std::vector<std::string>{"float32", "bfloat16", "float16"}));
    }
  }
}

TEST(KernelPackages, RmsNormThroughTheAbiEqualsTheLibrary) {
  const hub::LoadedPackage p = load("rmsnorm");
  const auto fn = reinterpret_cast<bp_rms_norm_fn>(p.find("rms_norm", "rms_norm")->function);
  void* context = p.find("rms_norm", "rms_norm")->context;
  auto x = stepped({3, 37}, 0.25f), w = stepped({37}, 0.1f), out = stepped({3, 37}, 0.0f),
       direct = stepped({3, 37}, 0.0f);
  bp_rms_norm_args args{};
  args.struct_size = sizeof args;
  args.input = &x.dl;
  args.weight = &w.dl;
  args.output = &out.dl;
  args.epsilon = 1e-5;
  EXPECT_EQ(hub::LoadedPackage::take_status(fn(context, &args)), "");
  ASSERT_TRUE(rmsnorm::forward_cpu({&x.dl, &w.dl, nullptr, &direct.dl}, 1e-5).ok());
  EXPECT_EQ(out.data, direct.data);

  args.epsilon = -1;
  EXPECT_NE(hub::LoadedPackage::take_status(fn(context, &args)).find("rms_norm: epsilon"),
            std::string::npos);
  args.struct_size = 8;
  EXPECT_NE(hub::LoadedPackage::take_status(fn(context, &args)).find("smaller than ABI 1.4"),
            std::string::npos);
}

TEST(KernelPackages, ActivationsThroughTheAbiEqualTheLibrary) {
  const hub::LoadedPackage p = load("activation");
  const activation::Activation all[] = {activation::Activation::kSilu,
                                        activation::Activation::kGelu,
                                        activation::Activation::kGeluTanh};
  for (activation::Activation a : all) {
    const char* op = activation::op_name(a);
    SCOPED_TRACE(op);
    const hub::PackageKernel* k = p.find(op, op);
    ASSERT_NE(k, nullptr);
    auto x = stepped({5, 42}, 0.3f), out = stepped({5, 21}, 0.0f), direct = stepped({5, 21}, 0.0f);
    bp_gated_activation_args args{};
    args.struct_size = sizeof args;
    args.input = &x.dl;
    args.output = &out.dl;
    EXPECT_EQ(hub::LoadedPackage::take_status(
                  reinterpret_cast<bp_gated_activation_fn>(k->function)(k->context, &args)),
              "");
    ASSERT_TRUE(activation::forward_cpu(a, &x.dl, &direct.dl).ok());
    EXPECT_EQ(out.data, direct.data);
  }
}

TEST(KernelPackages, RotaryThroughTheAbiEqualsTheLibrary) {
  const hub::LoadedPackage p = load("rotary");
  const hub::PackageKernel* k = p.find("rotary_embedding", "rotary_embedding");
  ASSERT_NE(k, nullptr);
  for (int style : {BP_ROTARY_NEOX, BP_ROTARY_INTERLEAVED}) {
    auto q = stepped({1, 2, 3, 8}, 0.2f), q_direct = stepped({1, 2, 3, 8}, 0.2f);
    auto cos = stepped({3, 4}, 0.05f), sin = stepped({3, 4}, 0.07f);
    bp_rotary_embedding_args args{};
    args.struct_size = sizeof args;
    args.query = &q.dl;
    args.cos = &cos.dl;
    args.sin = &sin.dl;
    args.style = style;
    EXPECT_EQ(hub::LoadedPackage::take_status(
                  reinterpret_cast<bp_rotary_embedding_fn>(k->function)(k->context, &args)),
              "");
    ASSERT_TRUE(rotary::forward_cpu({&q_direct.dl, nullptr, &cos.dl, &sin.dl},
                                    static_cast<rotary::Style>(style))
                    .ok());
    EXPECT_EQ(q.data, q_direct.data) << "style " << style;
  }
}

// The backward ops through the ABI give the library's bits, and refuse an args struct older
// than ABI 1.6.
TEST(KernelPackages, BackwardOpsThroughTheAbiEqualTheLibrary) {
  {
    const hub::LoadedPackage p = load("rmsnorm");
    const hub::PackageKernel* k = p.find("rms_norm_backward", "rms_norm_backward");
    ASSERT_NE(k, nullptr);
    auto g = stepped({3, 37}, 0.2f), x = stepped({3, 37}, 0.25f), w = stepped({37}, 0.1f);
    auto gx = stepped({3, 37}, 0.0f), gw = stepped({37}, 0.0f);
    auto gx_direct = stepped({3, 37}, 0.0f), gw_direct = stepped({37}, 0.0f);
    bp_rms_norm_backward_args args{};
    args.struct_size = sizeof args;
    args.grad_output = &g.dl;
    args.input = &x.dl;
    args.weight = &w.dl;
    args.grad_input = &gx.dl;
    args.grad_weight = &gw.dl;
    args.epsilon = 1e-5;
    const auto fn = reinterpret_cast<bp_rms_norm_backward_fn>(k->function);
    EXPECT_EQ(hub::LoadedPackage::take_status(fn(k->context, &args)), "");
    ASSERT_TRUE(
        rmsnorm::backward_cpu({&g.dl, &x.dl, &w.dl, nullptr, &gx_direct.dl, &gw_direct.dl}, 1e-5)
            .ok());
    EXPECT_EQ(gx.data, gx_direct.data);
    EXPECT_EQ(gw.data, gw_direct.data);
    args.struct_size = BP_RMS_NORM_BACKWARD_ARGS_SIZE_1_6 - 1;
    EXPECT_NE(hub::LoadedPackage::take_status(fn(k->context, &args)).find("smaller than ABI 1.6"),
              std::string::npos);
  }
  {
    const hub::LoadedPackage p = load("activation");
    for (activation::Activation a : {activation::Activation::kSilu, activation::Activation::kGelu,
                                     activation::Activation::kGeluTanh}) {
      const char* op = activation::backward_op_name(a);
      SCOPED_TRACE(op);
      const hub::PackageKernel* k = p.find(op, op);
      ASSERT_NE(k, nullptr);
      auto g = stepped({5, 21}, 0.2f), x = stepped({5, 42}, 0.3f);
      auto gx = stepped({5, 42}, 0.0f), direct = stepped({5, 42}, 0.0f);
      bp_gated_activation_backward_args args{};
      args.struct_size = sizeof args;
      args.grad_output = &g.dl;
      args.input = &x.dl;
      args.grad_input = &gx.dl;
      EXPECT_EQ(hub::LoadedPackage::take_status(reinterpret_cast<bp_gated_activation_backward_fn>(
                    k->function)(k->context, &args)),
                "");
      ASSERT_TRUE(activation::backward_cpu(a, &g.dl, &x.dl, &direct.dl).ok());
      EXPECT_EQ(gx.data, direct.data);
    }
  }
  {
    const hub::LoadedPackage p = load("rotary");
    const hub::PackageKernel* k = p.find("rotary_embedding_backward", "rotary_embedding_backward");
    ASSERT_NE(k, nullptr);
    auto gq = stepped({1, 2, 3, 8}, 0.2f), direct = stepped({1, 2, 3, 8}, 0.2f);
    auto cos = stepped({3, 4}, 0.05f), sin = stepped({3, 4}, 0.07f);
    bp_rotary_embedding_args args{};
    args.struct_size = sizeof args;
    args.query = &gq.dl;
    args.cos = &cos.dl;
    args.sin = &sin.dl;
    args.style = BP_ROTARY_NEOX;
    EXPECT_EQ(hub::LoadedPackage::take_status(
                  reinterpret_cast<bp_rotary_embedding_fn>(k->function)(k->context, &args)),
              "");
    ASSERT_TRUE(
        rotary::backward_cpu({&direct.dl, nullptr, &cos.dl, &sin.dl}, rotary::Style::kNeox).ok());
    EXPECT_EQ(gq.data, direct.data);
  }
}

}  // namespace
}  // namespace backplane
