// The expressions of architecture descriptors (core/src/model/descriptor_expression.hpp): each
// case's expected value is what Python's eval gives for the same text and names.
#include <backplane/error.hpp>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>

#include "model/descriptor_expression.hpp"

namespace {

using backplane::model_detail::Expression;
using nlohmann::json;

const json& names() {
  static const json kNames = {
      {"hidden_size", 4096},    {"num_attention_heads", 32},
      {"head_dim", nullptr},    {"step", 2},
      {"negative", -7},         {"flag", true},
      {"layers", {0, 3}},       {"kinds", {"full_attention", "sliding_attention"}},
      {"empty", json::array()}, {"i", 1},
  };
  return kNames;
}

json evaluate(const std::string& text) {
  const auto lookup = [](const std::string& name) -> const json* {
    const auto it = names().find(name);
    return it == names().end() ? nullptr : &*it;
  };
  const auto call = [](const std::string& function, const json& argument) {
    return json(function + "(" + argument.dump() + ")");
  };
  return Expression::parse(text).evaluate(lookup, call);
}

struct Case {
  std::string text;
  json expected;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.text;
}

class DescriptorExpression : public testing::TestWithParam<Case> {};

TEST_P(DescriptorExpression, EvaluatesAsPythonDoes) {
  EXPECT_EQ(evaluate(GetParam().text), GetParam().expected) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(
    Table, DescriptorExpression,
    testing::Values(
        Case{"hidden_size", 4096}, Case{"2 * hidden_size", 8192},
        Case{"hidden_size // num_attention_heads * 8", 1024},
        Case{"hidden_size * 8 // num_attention_heads", 1024}, Case{"(hidden_size + 1) * 2", 8194},
        Case{"hidden_size - 96", 4000},
        // Python floors // and %: -7 // 2 is -4 and -7 % 2 is 1.
        Case{"negative // step", -4}, Case{"negative % step", 1}, Case{"-negative", 7},
        Case{"(head_dim if head_dim is not None else hidden_size // num_attention_heads)", 128},
        Case{"head_dim is None", true}, Case{"hidden_size is not None", true},
        Case{"(i + 1) % step == 0", true}, Case{"i % step == 0", false}, Case{"i in layers", false},
        Case{"i not in layers", true}, Case{"3 in layers", true},
        Case{"kinds[i] == \"sliding_attention\"", true},
        Case{"kinds[-2] == 'full_attention'", true}, Case{"not flag", false},
        Case{"flag and i >= step", false},
        Case{"flag and i < step and num_attention_heads > 0", true},
        Case{"empty or layers", json({0, 3})}, Case{"flag and hidden_size", 4096},
        Case{"empty and hidden_size", json::array()}, Case{"True", true}, Case{"None", nullptr},
        Case{"rope(hidden_size // num_attention_heads)", "rope(128)"}));

struct Refusal {
  std::string text;
  std::string message;
};

void PrintTo(const Refusal& c, std::ostream* os) {
  *os << c.text;
}

class DescriptorExpressionRefusal : public testing::TestWithParam<Refusal> {};

TEST_P(DescriptorExpressionRefusal, NamesTheExpressionAndTheProblem) {
  try {
    evaluate(GetParam().text);
    FAIL() << GetParam().text;
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(GetParam().text), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, DescriptorExpressionRefusal,
    testing::Values(Refusal{"hidden_size // (step - 2)", "divides by zero"},
                    Refusal{"intermediate_size",
                            "names 'intermediate_size', which the config does not have"},
                    Refusal{"head_dim * 2", "needs an integer, got null"},
                    Refusal{"kinds[5]", "index 5 is outside the list of 2"},
                    Refusal{"hidden_size in step", "not a list"},
                    Refusal{"hidden_size +", "the expression ends early"},
                    Refusal{"hidden_size ** 2", "at character 14"},
                    Refusal{"hidden_size / 2", "an unexpected '/'"},
                    Refusal{"(hidden_size", "expected ')'"},
                    Refusal{"'open", "a string that does not end"},
                    Refusal{"hidden_size * 9223372036854775807", "overflows"}));

}  // namespace
