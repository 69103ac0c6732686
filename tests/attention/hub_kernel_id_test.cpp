// HubKernelId: transformers' is_kernel() pattern and the split of load_and_register_attn_kernel.
#include <backplane/error.hpp>
#include <backplane/rules/attention.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace {

using backplane::HubKernelId;

struct ParseRow {
  const char* text;
  const char* repo;
  std::optional<std::string> revision;
  std::optional<std::string> function;
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const ParseRow& x, std::ostream* os) {
  *os << x.text;
}

class HubKernelIdParse : public testing::TestWithParam<ParseRow> {};

TEST_P(HubKernelIdParse, SplitsAndPrintsBack) {
  const ParseRow& row = GetParam();
  EXPECT_TRUE(HubKernelId::matches(row.text));
  const HubKernelId id = HubKernelId::parse(row.text);
  EXPECT_EQ(id.repo, row.repo);
  EXPECT_EQ(id.revision, row.revision);
  EXPECT_EQ(id.function, row.function);
  EXPECT_EQ(id.str(), row.text);
}

INSTANTIATE_TEST_SUITE_P(
    Ids, HubKernelIdParse,
    testing::Values(
        ParseRow{"kernels-community/flash-attn2", "kernels-community/flash-attn2", {}, {}},
        ParseRow{"kernels-community/vllm-flash-attn3@v1",
                 "kernels-community/vllm-flash-attn3",
                 "v1",
                 {}},
        ParseRow{"acme/attn:flash_attn_func", "acme/attn", {}, "flash_attn_func"},
        ParseRow{"acme/attn@main:fwd", "acme/attn", "main", "fwd"},
        ParseRow{"acme/attn@v1@x", "acme/attn", "v1@x", {}}));  // the first '@' splits

struct BadRow {
  const char* text;
  bool matches;  // transformers' is_kernel() answer
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const BadRow& x, std::ostream* os) {
  *os << x.text;
}

class HubKernelIdRefuses : public testing::TestWithParam<BadRow> {};

TEST_P(HubKernelIdRefuses, NamesTheTextAndTheForm) {
  const BadRow& row = GetParam();
  EXPECT_EQ(HubKernelId::matches(row.text), row.matches);
  try {
    HubKernelId::parse(row.text);
    ADD_FAILURE() << "parsed " << row.text;
  } catch (const backplane::InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'" + std::string(row.text) + "' is not a Hub kernel id"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("org/repo[@revision][:function]"), std::string::npos) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Texts, HubKernelIdRefuses,
                         testing::Values(BadRow{"sdpa", false}, BadRow{"", false},
                                         BadRow{"/repo", false}, BadRow{"org/", false},
                                         BadRow{"org/repo/extra", false},
                                         BadRow{"org/repo:", false}, BadRow{"org/repo:a:b", false},
                                         BadRow{"org:x/repo", false},
                                         BadRow{"org/repo@", true},  // is_kernel() says yes
                                         BadRow{"org/@v1", true}));

}  // namespace
