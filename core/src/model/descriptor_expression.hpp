// The expressions of architecture descriptors (core/src/model/architectures/): a subset of
// Python, evaluated with Python's meaning, over a config's fields. Written by
// tests/python/architecture_descriptors.py, which checks them with Python's own eval.
//
//   names, integers, floats, 'strings' and "strings", True False None
//   + - * // %  (integers; // and % floor as Python's do)   unary -
//   == != < <= > >=  in  not in  is None  is not None
//   and or not  (returning an operand, as Python does)   A if C else B
//   x[i] (lists; dicts by key)   x.split(sep)   d.get(key, default)   len(x)   int(x)
//   of_kind(x, 'list'), all_of_kind(xs, 'int float') (isinstance, of one value or of each)
//   + - * of floats (as Python: a float when either side is)
//   rope(dim) (the caller's function: the rotary embedding's inv_freq length)
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace backplane::model_detail {

struct ExpressionNode;

class Expression {
 public:
  // Throws InvalidArgument naming `text` and the position of what it cannot read.
  static Expression parse(std::string_view text);

  // Names resolve through `lookup` (nullptr: the name is unknown, an error naming it);
  // `call` evaluates the one function descriptors use, rope(dim).
  using Lookup = std::function<const nlohmann::json*(const std::string& name)>;
  using Call = std::function<nlohmann::json(const std::string& function, const nlohmann::json&)>;
  nlohmann::json evaluate(const Lookup& lookup, const Call& call) const;

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::shared_ptr<const ExpressionNode> root_;
};

// Python's truth value of a JSON value (None, False, 0, "", [] and {} are false).
bool truthy(const nlohmann::json& value);

// Python's str() and repr() of a JSON value (None, True, 1.0, 'text', [1, 2], {'k': 1}), as
// transformers' f-string messages print config values.
std::string python_str(const nlohmann::json& value);
std::string python_repr(const nlohmann::json& value);

}  // namespace backplane::model_detail
