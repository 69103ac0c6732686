#include "descriptor_expression.hpp"

#include <backplane/error.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace backplane::model_detail {

using Json = nlohmann::json;

enum class Op {
  kLiteral,
  kName,
  kIndex,
  kCall,
  kMethod,  // operands: the object, then the arguments
  kNegate,
  kNot,
  kAnd,
  kOr,
  kAdd,
  kSubtract,
  kMultiply,
  kFloorDivide,
  kModulo,
  kEqual,
  kNotEqual,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual,
  kIn,
  kNotIn,
  kIs,
  kIsNot,
  kConditional,  // operands: value if true, condition, value if false
};

struct ExpressionNode {
  Op op;
  Json literal;      // kLiteral
  std::string name;  // kName, kCall, kMethod
  std::vector<std::shared_ptr<const ExpressionNode>> operands;
};

namespace {

using NodePtr = std::shared_ptr<const ExpressionNode>;

struct Token {
  enum Kind { kName, kNumber, kString, kSymbol, kEnd } kind;
  std::string text;
  size_t position;
};

[[noreturn]] void refuse(std::string_view text, size_t position, const std::string& what) {
  throw InvalidArgument("descriptor expression '" + std::string(text) + "': " + what +
                        " at character " + std::to_string(position + 1));
}

std::vector<Token> tokenize(std::string_view text) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ') {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = i;
      while (end < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) {
        ++end;
      }
      tokens.push_back({Token::kName, std::string(text.substr(i, end - i)), i});
      i = end;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t end = i;
      while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) ||
                                   text[end] == '.' || text[end] == 'e' || text[end] == 'E')) {
        ++end;
      }
      tokens.push_back({Token::kNumber, std::string(text.substr(i, end - i)), i});
      i = end;
    } else if (c == '"' || c == '\'') {
      const size_t end = text.find(c, i + 1);
      if (end == std::string_view::npos) refuse(text, i, "a string that does not end");
      tokens.push_back({Token::kString, std::string(text.substr(i + 1, end - i - 1)), i});
      i = end + 1;
    } else {
      static constexpr std::string_view kTwo[] = {"//", "==", "!=", "<=", ">="};
      std::string symbol(1, c);
      for (std::string_view two : kTwo) {
        if (text.substr(i, 2) == two) symbol = std::string(two);
      }
      if (std::string_view("+-*%<>()[],.").find(symbol[0]) == std::string_view::npos &&
          symbol.size() == 1) {
        refuse(text, i, std::string("an unexpected '") + c + "'");
      }
      tokens.push_back({Token::kSymbol, symbol, i});
      i += symbol.size();
    }
  }
  tokens.push_back({Token::kEnd, "", text.size()});
  return tokens;
}

NodePtr make(Op op, std::vector<NodePtr> operands) {
  auto node = std::make_shared<ExpressionNode>();
  node->op = op;
  node->operands = std::move(operands);
  return node;
}

// Recursive descent in Python's precedence order, lowest first.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text), tokens_(tokenize(text)) {}

  NodePtr parse() {
    NodePtr node = conditional();
    if (peek().kind != Token::kEnd) refuse(text_, peek().position, "'" + peek().text + "'");
    return node;
  }

 private:
  const Token& peek() const { return tokens_[next_]; }
  bool accept(std::string_view symbol) {
    const Token& token = peek();
    if ((token.kind == Token::kSymbol || token.kind == Token::kName) && token.text == symbol) {
      ++next_;
      return true;
    }
    return false;
  }
  void expect(std::string_view symbol) {
    if (!accept(symbol)) refuse(text_, peek().position, "expected '" + std::string(symbol) + "'");
  }

  NodePtr conditional() {
    NodePtr value = disjunction();
    if (!accept("if")) return value;
    NodePtr condition = disjunction();
    expect("else");
    return make(Op::kConditional, {value, condition, conditional()});
  }
  NodePtr disjunction() {
    NodePtr node = conjunction();
    while (accept("or")) node = make(Op::kOr, {node, conjunction()});
    return node;
  }
  NodePtr conjunction() {
    NodePtr node = negation();
    while (accept("and")) node = make(Op::kAnd, {node, negation()});
    return node;
  }
  NodePtr negation() {
    if (accept("not")) return make(Op::kNot, {negation()});
    return comparison();
  }
  NodePtr comparison() {
    NodePtr left = sum();
    static constexpr std::pair<std::string_view, Op> kComparisons[] = {
        {"==", Op::kEqual},        {"!=", Op::kNotEqual}, {"<=", Op::kLessEqual},
        {">=", Op::kGreaterEqual}, {"<", Op::kLess},      {">", Op::kGreater},
        {"in", Op::kIn},
    };
    for (const auto& [symbol, op] : kComparisons) {
      if (accept(symbol)) return make(op, {left, sum()});
    }
    if (accept("not")) {
      expect("in");
      return make(Op::kNotIn, {left, sum()});
    }
    if (accept("is")) {
      const Op op = accept("not") ? Op::kIsNot : Op::kIs;
      return make(op, {left, sum()});
    }
    return left;
  }
  NodePtr sum() {
    NodePtr node = product();
    while (true) {
      if (accept("+")) {
        node = make(Op::kAdd, {node, product()});
      } else if (accept("-")) {
        node = make(Op::kSubtract, {node, product()});
      } else {
        return node;
      }
    }
  }
  NodePtr product() {
    NodePtr node = unary();
    while (true) {
      if (accept("*")) {
        node = make(Op::kMultiply, {node, unary()});
      } else if (accept("//")) {
        node = make(Op::kFloorDivide, {node, unary()});
      } else if (accept("%")) {
        node = make(Op::kModulo, {node, unary()});
      } else {
        return node;
      }
    }
  }
  NodePtr unary() {
    if (accept("-")) return make(Op::kNegate, {unary()});
    return postfix();
  }
  NodePtr postfix() {
    NodePtr node = atom();
    while (true) {
      if (accept("[")) {
        node = make(Op::kIndex, {node, conditional()});
        expect("]");
      } else if (accept(".")) {
        const Token method = peek();
        if (method.kind != Token::kName) refuse(text_, method.position, "expected a method name");
        ++next_;
        expect("(");
        std::vector<NodePtr> operands = {node};
        arguments(operands);
        auto call = std::make_shared<ExpressionNode>();
        call->op = Op::kMethod;
        call->name = method.text;
        call->operands = std::move(operands);
        node = call;
      } else {
        return node;
      }
    }
  }
  // A call's arguments after its "(", up to and including ")".
  void arguments(std::vector<NodePtr>& operands) {
    if (accept(")")) return;
    do {
      operands.push_back(conditional());
    } while (accept(","));
    expect(")");
  }
  NodePtr atom() {
    const Token token = peek();
    ++next_;
    auto node = std::make_shared<ExpressionNode>();
    switch (token.kind) {
      case Token::kNumber:
        node->op = Op::kLiteral;
        if (token.text.find_first_of(".eE") == std::string::npos) {
          node->literal = std::stoll(token.text);
        } else {
          node->literal = std::stod(token.text);
        }
        return node;
      case Token::kString:
        node->op = Op::kLiteral;
        node->literal = token.text;
        return node;
      case Token::kName:
        if (token.text == "True" || token.text == "False") {
          node->op = Op::kLiteral;
          node->literal = token.text == "True";
          return node;
        }
        if (token.text == "None") {
          node->op = Op::kLiteral;
          return node;
        }
        node->name = token.text;
        if (accept("(")) {
          node->op = Op::kCall;
          arguments(node->operands);
        } else {
          node->op = Op::kName;
        }
        return node;
      case Token::kSymbol:
        if (token.text == "(") {
          NodePtr inner = conditional();
          expect(")");
          return inner;
        }
        break;
      case Token::kEnd:
        refuse(text_, token.position, "the expression ends early");
    }
    refuse(text_, token.position, "'" + token.text + "'");
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  size_t next_ = 0;
};

class Evaluator {
 public:
  Evaluator(const std::string& text, const Expression::Lookup& lookup, const Expression::Call& call)
      : text_(text), lookup_(lookup), call_(call) {}

  Json run(const ExpressionNode& node) const {
    const auto& operand = [&](size_t k) { return run(*node.operands[k]); };
    switch (node.op) {
      case Op::kLiteral:
        return node.literal;
      case Op::kName: {
        Json unused;
        return held(node, unused);
      }
      case Op::kCall:
        return call(node);
      case Op::kMethod:
        return method(node);
      case Op::kIndex: {
        // A list read by name is indexed where it is, not copied (layer_types[i], per layer).
        Json copy;
        const Json& list = held(*node.operands[0], copy);
        if (list.is_object()) {
          const Json key = operand(1);
          const auto it = key.is_string() ? list.find(key.get<std::string>()) : list.end();
          if (it == list.end())
            fail("reads the key " + key.dump() + ", which " + list.dump() + " lacks");
          return *it;
        }
        const int64_t index = integer(operand(1));
        if (!list.is_array()) fail("indexes " + list.dump() + ", which is not a list");
        const int64_t size = static_cast<int64_t>(list.size());
        if (index < -size || index >= size) {
          fail("index " + std::to_string(index) + " is outside the list of " +
               std::to_string(size));
        }
        return list[static_cast<size_t>(index < 0 ? index + size : index)];
      }
      case Op::kNegate:
        return -integer(operand(0));
      case Op::kNot:
        return !truthy(operand(0));
      case Op::kAnd: {
        Json left = operand(0);
        return truthy(left) ? operand(1) : left;
      }
      case Op::kOr: {
        Json left = operand(0);
        return truthy(left) ? left : operand(1);
      }
      case Op::kConditional:
        return truthy(operand(1)) ? operand(0) : operand(2);
      case Op::kAdd:
      case Op::kSubtract:
      case Op::kMultiply: {
        const Json left = operand(0);
        const Json right = operand(1);
        if (left.is_number_float() || right.is_number_float()) {  // Python: a float result
          const double x = number(left);
          const double y = number(right);
          return node.op == Op::kAdd ? x + y : node.op == Op::kSubtract ? x - y : x * y;
        }
        const int64_t a = integer(left);
        const int64_t b = integer(right);
        int64_t result = 0;
        const bool overflow = node.op == Op::kAdd        ? __builtin_add_overflow(a, b, &result)
                              : node.op == Op::kSubtract ? __builtin_sub_overflow(a, b, &result)
                                                         : __builtin_mul_overflow(a, b, &result);
        if (overflow) fail("overflows 64-bit integers (check the config's sizes)");
        return result;
      }
      case Op::kFloorDivide:
      case Op::kModulo: {
        const int64_t a = integer(operand(0));
        const int64_t b = integer(operand(1));
        if (b == 0) fail("divides by zero");
        int64_t quotient = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --quotient;  // Python floors
        return node.op == Op::kFloorDivide ? quotient : a - quotient * b;
      }
      case Op::kEqual:
        return equal(operand(0), operand(1));
      case Op::kNotEqual:
        return !equal(operand(0), operand(1));
      case Op::kLess:
        return number(operand(0)) < number(operand(1));
      case Op::kLessEqual:
        return number(operand(0)) <= number(operand(1));
      case Op::kGreater:
        return number(operand(0)) > number(operand(1));
      case Op::kGreaterEqual:
        return number(operand(0)) >= number(operand(1));
      case Op::kIn:
      case Op::kNotIn: {
        const Json item = operand(0);
        Json copy;
        const Json& list = held(*node.operands[1], copy);
        bool found = false;
        if (list.is_object() || list.is_string()) {  // a key of a dict, a part of a string
          if (!item.is_string()) fail("tests whether " + item.dump() + " is in " + list.dump());
          const std::string key = item.get<std::string>();
          found = list.is_object() ? list.contains(key)
                                   : list.get<std::string>().find(key) != std::string::npos;
        } else if (list.is_array()) {
          for (const Json& entry : list) found = found || equal(entry, item);
        } else {
          fail("tests membership in " + list.dump() + ", which is not a list, dict or string");
        }
        return node.op == Op::kIn ? found : !found;
      }
      case Op::kIs:
      case Op::kIsNot: {
        const bool same = operand(0).is_null() && operand(1).is_null();
        return node.op == Op::kIs ? same : !same;
      }
    }
    fail("has an operation this backplane does not know");
  }

 private:
  // Python's builtins that config validators use (len, int, isinstance as of_kind), then the
  // caller's functions (rope).
  Json call(const ExpressionNode& node) const {
    const size_t count = node.operands.size();
    const auto argument = [&](size_t k) { return run(*node.operands[k]); };
    if (node.name == "len" && count == 1) {
      const Json value = argument(0);
      if (!value.is_array() && !value.is_object() && !value.is_string()) {
        fail("takes the length of " + value.dump());
      }
      return static_cast<int64_t>(value.is_string() ? value.get<std::string>().size()
                                                    : value.size());
    }
    if (node.name == "int" && count == 1) {
      const Json value = argument(0);
      if (value.is_number_integer() || value.is_boolean()) return integer(value);
      const double x = number(value);
      if (!std::isfinite(x) || std::fabs(x) > 9.0e18)
        fail("cannot make an integer of " + value.dump());
      return static_cast<int64_t>(std::trunc(x));
    }
    // of_kind(x, 'list'): isinstance(x, list); the names are Python's, space-separated.
    if (node.name == "of_kind" && count == 2) return of_kind(argument(0), kinds(argument(1)));
    // all_of_kind(xs, 'int float'): all(isinstance(x, (int, float)) for x in xs).
    if (node.name == "all_of_kind" && count == 2) {
      const Json list = argument(0);
      const std::string wanted = kinds(argument(1));
      if (!list.is_array()) fail("iterates over " + list.dump() + ", which is not a list");
      return std::all_of(list.begin(), list.end(),
                         [&](const Json& entry) { return of_kind(entry, wanted); });
    }
    if (count != 1) fail("calls " + node.name + " with " + std::to_string(count) + " arguments");
    return call_(node.name, argument(0));
  }

  Json method(const ExpressionNode& node) const {
    const Json object = run(*node.operands[0]);
    const size_t count = node.operands.size() - 1;
    if (node.name == "split" && count == 1 && object.is_string()) {
      const Json separator = run(*node.operands[1]);
      if (!separator.is_string() || separator.get<std::string>().empty()) {
        fail("splits at " + separator.dump() + ", which is not a non-empty string");
      }
      const std::string text = object.get<std::string>();
      const std::string at = separator.get<std::string>();
      Json parts = Json::array();
      size_t start = 0;
      for (size_t found = text.find(at); found != std::string::npos; found = text.find(at, start)) {
        parts.push_back(text.substr(start, found - start));
        start = found + at.size();
      }
      parts.push_back(text.substr(start));
      return parts;
    }
    if (node.name == "get" && (count == 1 || count == 2) && object.is_object()) {
      const Json key = run(*node.operands[1]);
      if (key.is_string()) {
        if (const auto it = object.find(key.get<std::string>()); it != object.end()) return *it;
      }
      return count == 2 ? run(*node.operands[2]) : Json();
    }
    fail("calls ." + node.name + "() on " + object.dump());
  }

  std::string kinds(const Json& names) const {
    if (!names.is_string()) fail("names kinds with " + names.dump() + ", not a string");
    return " " + names.get<std::string>() + " ";
  }
  // Whether isinstance(value, one of `wanted`) holds: Python's bool is an int too.
  static bool of_kind(const Json& value, const std::string& wanted) {
    const auto wants = [&](const char* kind) {
      return wanted.find(std::string(" ") + kind + " ") != std::string::npos;
    };
    if (value.is_boolean()) return wants("bool") || wants("int");
    if (value.is_number_integer()) return wants("int");
    if (value.is_number()) return wants("float");
    if (value.is_string()) return wants("str");
    if (value.is_array()) return wants("list");
    if (value.is_object()) return wants("dict");
    return wants("NoneType");
  }

  // The value of `node`: where the lookup holds it for a name, else evaluated into `copy`.
  const Json& held(const ExpressionNode& node, Json& copy) const {
    if (node.op == Op::kName) {
      const Json* value = lookup_(node.name);
      if (value == nullptr) fail("names '" + node.name + "', which the config does not have");
      return *value;
    }
    copy = run(node);
    return copy;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument("descriptor expression '" + text_ + "' " + what);
  }
  int64_t integer(const Json& value) const {
    if (value.is_boolean()) return value.get<bool>() ? 1 : 0;
    if (!value.is_number_integer()) fail("needs an integer, got " + value.dump());
    return value.get<int64_t>();
  }
  double number(const Json& value) const {
    if (value.is_boolean()) return value.get<bool>() ? 1 : 0;
    if (!value.is_number()) fail("compares " + value.dump() + ", which is not a number");
    return value.get<double>();
  }
  static bool equal(const Json& a, const Json& b) {
    if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
    return a == b;
  }

  const std::string& text_;
  const Expression::Lookup& lookup_;
  const Expression::Call& call_;
};

}  // namespace

Expression Expression::parse(std::string_view text) {
  Expression expression;
  expression.text_ = std::string(text);
  expression.root_ = Parser(text).parse();
  return expression;
}

Json Expression::evaluate(const Lookup& lookup, const Call& call) const {
  return Evaluator(text_, lookup, call).run(*root_);
}

namespace {

// repr() of a float: the shortest text that reads back as the same double.
std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof text, "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  std::string result = text;
  if (result.find_first_of(".en") == std::string::npos) result += ".0";
  return result;
}

}  // namespace

std::string python_str(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  return python_repr(value);
}

std::string python_repr(const Json& value) {
  if (value.is_null()) return "None";
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_number_integer()) return value.dump();
  if (value.is_number()) return python_float(value.get<double>());
  if (value.is_string()) return "'" + value.get<std::string>() + "'";
  std::string out = value.is_array() ? "[" : "{";
  bool first = true;
  if (value.is_array()) {
    for (const Json& entry : value) {
      out += (first ? "" : ", ") + python_repr(entry);
      first = false;
    }
    return out + "]";
  }
  for (const auto& [key, entry] : value.items()) {
    out += (first ? "'" : ", '") + key + "': " + python_repr(entry);
    first = false;
  }
  return out + "}";
}

bool truthy(const Json& value) {
  if (value.is_null()) return false;
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_number_integer()) return value.get<int64_t>() != 0;
  if (value.is_number()) return value.get<double>() != 0.0;
  if (value.is_string() || value.is_array() || value.is_object()) return !value.empty();
  return true;
}

}  // namespace backplane::model_detail
