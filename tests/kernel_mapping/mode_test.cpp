#include <backplane/error.hpp>
#include <backplane/rules/kernel_mapping.hpp>

#include <gtest/gtest.h>

namespace {

using backplane::InvalidArgument;
using backplane::KernelMode;

struct ParseCase {
  const char* text;
  const char* canonical;  // nullptr: rejected
};

TEST(KernelMode, Parse) {
  const ParseCase cases[] = {
      {"inference", "inference"},
      {"training", "training"},
      {"fallback", "fallback"},
      {"inference|torch_compile", "inference|torch_compile"},
      {"torch_compile|training", "training|torch_compile"},
      {" Inference | TORCH_COMPILE ", "inference|torch_compile"},
      {"inference|training", nullptr},
      {"fallback|inference", nullptr},
      {"fallback|torch_compile", nullptr},
      {"torch_compile", nullptr},
      {"inference|inference", nullptr},
      {"", nullptr},
      {"eval", nullptr},
      {"inference|", nullptr},
  };
  for (const ParseCase& c : cases) {
    SCOPED_TRACE(c.text);
    if (c.canonical == nullptr) {
      try {
        KernelMode::parse(c.text);
        ADD_FAILURE() << "accepted";
      } catch (const InvalidArgument& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find(std::string("\"") + c.text + "\""), std::string::npos) << message;
        EXPECT_NE(message.find("accepted: inference, training"), std::string::npos) << message;
      }
    } else {
      EXPECT_EQ(KernelMode::parse(c.text).str(), c.canonical);
    }
  }
}

std::string order_of(const char* mode) {
  std::string out;
  for (KernelMode m : KernelMode::parse(mode).lookup_order()) {
    out += (out.empty() ? "" : ", ") + m.str();
  }
  return out;
}

// The kernels library's _MODE_FALLBACK_PRIORITY.
TEST(KernelMode, LookupOrder) {
  EXPECT_EQ(order_of("inference"),
            "inference, inference|torch_compile, training, training|torch_compile, fallback");
  EXPECT_EQ(order_of("training"), "training, training|torch_compile, fallback");
  EXPECT_EQ(order_of("inference|torch_compile"),
            "inference|torch_compile, training|torch_compile, fallback");
  EXPECT_EQ(order_of("training|torch_compile"), "training|torch_compile, fallback");
  EXPECT_THROW(KernelMode::fallback().lookup_order(), InvalidArgument);
}

TEST(KernelMode, WithTorchCompile) {
  EXPECT_EQ(KernelMode::inference().with_torch_compile(),
            KernelMode::parse("inference|torch_compile"));
  EXPECT_EQ(KernelMode::training().with_torch_compile().with_torch_compile().str(),
            "training|torch_compile");
  EXPECT_THROW(KernelMode::fallback().with_torch_compile(), InvalidArgument);
}

}  // namespace
