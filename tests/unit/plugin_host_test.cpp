// The host side of the plugin ABI that the core and the hub share (core/src/plugin_host/):
// statuses, bp_host_api and the registrar's common checks, driven as a library would.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "plugin_host/host_api.hpp"
#include "plugin_host/registrar.hpp"
#include "plugin_host/status.hpp"

namespace {

using backplane::LogLevel;
using namespace backplane::detail;

TEST(PluginHostStatus, ItsMessageIsTakenAndTheStatusFreed) {
  EXPECT_EQ(take_status_message(nullptr), "");
  EXPECT_EQ(take_status_message(make_status(BP_INTERNAL, "boom")), "boom");
  EXPECT_STREQ(status_code_name(BP_UNAVAILABLE), "unavailable");
}

// Each library that links plugin_host has its own static out-of-memory status; the flag in the
// object, not its address, tells any of them not to delete it (ASan reports the delete).
TEST(PluginHostStatus, AStatusNotOnTheHeapIsNotDeleted) {
  bp_status stack_status{BP_OUT_OF_MEMORY, "out of memory", false};
  StatusDeleter()(&stack_status);
  EXPECT_EQ(stack_status.message, "out of memory");
}

TEST(PluginHostApi, LogsWithTheLabelAboveTheLevelAndAnswersSettings) {
  std::vector<std::string> lines;
  bp_host_context context{
      "kernel package 'acme/scale@v1'",
      Logger(LogLevel::kInfo, [&](LogLevel, const std::string& line) { lines.push_back(line); }),
      {{"mode", "fast"}}};
  const bp_host_api api = make_host_api(&context);
  EXPECT_EQ(api.abi_major, static_cast<uint32_t>(BP_ABI_VERSION_MAJOR));
  api.log(api.context, BP_LOG_INFO, "ready");
  api.log(api.context, BP_LOG_DEBUG, "dropped below the level");
  EXPECT_EQ(lines, std::vector<std::string>{"kernel package 'acme/scale@v1': ready"});
  EXPECT_EQ(api.status_new(api.context, BP_OK, "ignored"), nullptr);
  bp_status* status = api.status_new(api.context, BP_NOT_FOUND, "no such op");
  EXPECT_STREQ(api.status_message(api.context, status), "no such op");
  api.status_free(api.context, status);
  EXPECT_STREQ(api.setting(api.context, "mode"), "fast");
  EXPECT_EQ(api.setting(api.context, "other"), nullptr);
}

// Takes kernels on one device type; a device refusal and a throwing add_device.
class Handler : public RegistrationHandler {
 public:
  std::string add_device_type(const bp_device_type_desc&) override { return "no device types"; }
  std::string add_device(const bp_device_desc&) override { throw std::runtime_error("boom"); }
  std::string check_kernel(const backplane::KernelInfo& kernel) override {
    return kernel.device_type == "cpu" ? "" : "only cpu, not '" + kernel.device_type + "'";
  }
  std::string add_layer_kernel(const bp_layer_kernel_desc&) override { return {}; }
};

void kernel_function() {}

bp_kernel_desc kernel(const char* op, const char* implementation, const char* device_type) {
  bp_kernel_desc d{};
  d.struct_size = sizeof d;
  d.op = op;
  d.implementation = implementation;
  d.device_type = device_type;
  d.function = &kernel_function;
  d.min_compute_capability_major = -1;
  return d;
}

TEST(PluginHostRegistrar, MakesTheCommonChecksAndKeepsTheFirstRefusal) {
  Handler handler;
  bp_registrar_context context;
  context.owner = "acme/scale@v1";
  context.handler = &handler;
  const bp_registrar registrar = make_registrar(&context);
  struct Case {
    bp_kernel_desc desc;
    std::string refusal;  // empty: kept
  };
  bp_kernel_desc no_function = kernel("scale", "scale_f32", "cpu");
  no_function.function = nullptr;
  bp_kernel_desc null_dtypes = kernel("scale", "scale_bf16", "cpu");
  null_dtypes.dtype_count = 1;
  null_dtypes.dtypes = nullptr;
  const std::vector<Case> cases = {
      {kernel("scale", "scale_f32", "cpu"), ""},
      {kernel("scale", "scale_f32", "cpu"), "kernel scale/scale_f32 registered twice for cpu"},
      {kernel("Scale", "scale_f32", "cpu"),
       "kernel Scale/scale_f32: op and implementation must be 1-64 characters"},
      {kernel("scale", "scale_f32", "cuda"), "only cpu, not 'cuda'"},
      {no_function, "kernel scale/scale_f32: function is NULL"},
      {null_dtypes, "kernel scale/scale_bf16: dtypes is NULL"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.refusal);
    const std::string message =
        take_status_message(registrar.add_kernel(registrar.context, &c.desc));
    if (c.refusal.empty()) {
      EXPECT_EQ(message, "");
    } else {
      EXPECT_NE(message.find(c.refusal), std::string::npos) << message;
    }
  }
  ASSERT_EQ(context.kernels.size(), 1u);
  EXPECT_EQ(context.kernels[0].info.plugin, "acme/scale@v1");
  EXPECT_EQ(context.first_error, "kernel scale/scale_f32 registered twice for cpu");

  EXPECT_NE(take_status_message(registrar.add_kernel(registrar.context, nullptr))
                .find("add_kernel: descriptor is NULL or smaller than ABI 1.3's"),
            std::string::npos);
  bp_device_type_desc type{};
  type.struct_size = sizeof type;
  EXPECT_EQ(take_status_message(registrar.add_device_type(registrar.context, &type)),
            "no device types");
  bp_device_desc device{};
  device.struct_size = sizeof device;
  bp_status* thrown = registrar.add_device(registrar.context, &device);
  ASSERT_NE(thrown, nullptr);
  EXPECT_EQ(thrown->code, BP_INTERNAL);
  EXPECT_EQ(take_status_message(thrown), "add_device: boom");
}

}  // namespace
