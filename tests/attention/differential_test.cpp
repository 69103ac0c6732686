// resolve_attention against transformers 5.24 itself: tests/python/attention_oracle.py runs
// transformers' own resolution for every row of cases.json and ctest hands its output over in
// BACKPLANE_ATTENTION_ORACLE. A row with "differs" is a deliberate difference: our outcome must
// be its "ours", and transformers' must not be, so a change on either side shows up here.
#include <backplane/error.hpp>
#include <backplane/rules/attention.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "case_machine.hpp"

namespace {

using Json = nlohmann::json;

Json load(const char* variable) {
  const char* path = std::getenv(variable);
  if (path == nullptr) return Json();
  std::ifstream in(path);
  if (!in) return Json();
  return Json::parse(in);
}

// Our outcome in the oracle's terms: InvalidArgument is transformers' ValueError, Unavailable
// its ImportError.
Json our_outcome(const Json& row) {
  const attention_test::CaseMachine m = attention_test::case_machine(row);
  std::optional<std::string> requested;
  if (!row.at("requested").is_null()) requested = row["requested"].get<std::string>();
  try {
    const backplane::AttentionResolution r =
        backplane::resolve_attention(m.device, m.kernels, requested, m.env);
    return {{"implementation", r.implementation}, {"warnings", r.warnings}};
  } catch (const backplane::InvalidArgument& e) {
    return {{"error", {{"type", "ValueError"}, {"message", e.what()}}},
            {"warnings", Json::array()}};
  } catch (const backplane::Unavailable& e) {
    return {{"error", {{"type", "ImportError"}, {"message", e.what()}}},
            {"warnings", Json::array()}};
  }
}

// Warnings transformers logs before it raises are not part of an error outcome.
Json comparable(Json outcome) {
  if (outcome.contains("error")) outcome["warnings"] = Json::array();
  return outcome;
}

TEST(AttentionDifferential, EveryCaseMatchesTransformersOrDiffersAsDocumented) {
  const Json cases = load("BACKPLANE_ATTENTION_CASES");
  const Json oracle = load("BACKPLANE_ATTENTION_ORACLE");
  if (cases.is_null() || oracle.is_null()) {
    GTEST_SKIP() << "BACKPLANE_ATTENTION_CASES and BACKPLANE_ATTENTION_ORACLE are not set";
  }
  EXPECT_EQ(oracle.at("versions").at("transformers"), "5.24.0");
  int same = 0, differs = 0;
  for (const Json& row : cases.at("cases")) {
    const std::string name = row.at("name");
    SCOPED_TRACE(name);
    ASSERT_TRUE(oracle.at("results").contains(name));
    const Json theirs = comparable(oracle["results"][name]);
    const Json ours = comparable(our_outcome(row));
    if (row.contains("differs")) {
      ++differs;
      const Json expected = comparable(row["differs"].at("ours"));
      EXPECT_EQ(ours, expected) << row["differs"].at("why");
      EXPECT_NE(theirs, expected) << "transformers now agrees; drop the difference";
    } else {
      ++same;
      EXPECT_EQ(ours, theirs);
    }
  }
  EXPECT_GT(same, 50);
  std::cout << same << " cases as transformers, " << differs << " deliberate differences\n";
}

}  // namespace
