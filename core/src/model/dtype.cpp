#include <backplane/error.hpp>
#include <backplane/model/model.hpp>

#include <limits>
#include <string>

namespace backplane {
namespace {

struct DTypeName {
  std::string_view name;
  DType dtype;
};

// torch's names (torch.<name>), then torch's aliases, then safetensors' codes. The first entry
// of each dtype is its canonical name (to_string).
constexpr DTypeName kNames[] = {
    {"float32", DType::kFloat32},
    {"float16", DType::kFloat16},
    {"bfloat16", DType::kBFloat16},
    {"float64", DType::kFloat64},
    {"float8_e4m3fn", DType::kFloat8E4M3},
    {"float8_e5m2", DType::kFloat8E5M2},
    {"float8_e8m0fnu", DType::kFloat8E8M0},
    {"int64", DType::kInt64},
    {"int32", DType::kInt32},
    {"int16", DType::kInt16},
    {"int8", DType::kInt8},
    {"uint8", DType::kUInt8},
    {"bool", DType::kBool},
    {"float", DType::kFloat32},
    {"half", DType::kFloat16},
    {"double", DType::kFloat64},
    {"long", DType::kInt64},
    {"int", DType::kInt32},
    {"short", DType::kInt16},
    {"F32", DType::kFloat32},
    {"F16", DType::kFloat16},
    {"BF16", DType::kBFloat16},
    {"F64", DType::kFloat64},
    {"F8_E4M3", DType::kFloat8E4M3},
    {"F8_E5M2", DType::kFloat8E5M2},
    {"F8_E8M0", DType::kFloat8E8M0},
    {"I64", DType::kInt64},
    {"I32", DType::kInt32},
    {"I16", DType::kInt16},
    {"I8", DType::kInt8},
    {"U8", DType::kUInt8},
    {"BOOL", DType::kBool},
};

std::string accepted_names() {
  std::string names;
  for (const DTypeName& entry : kNames) {
    if (!names.empty()) names += ", ";
    names += entry.name;
  }
  return names;
}

}  // namespace

DType parse_dtype(std::string_view text) {
  std::string_view name = text;
  constexpr std::string_view kTorchPrefix = "torch.";
  if (name.substr(0, kTorchPrefix.size()) == kTorchPrefix) name.remove_prefix(kTorchPrefix.size());
  // Case-sensitive, as torch's attribute names and safetensors' codes are; the prefixed form
  // takes torch names only ("torch.F32" is not a torch dtype).
  const bool prefixed = name.size() != text.size();
  for (const DTypeName& entry : kNames) {
    if (entry.name != name) continue;
    if (prefixed && entry.name.front() >= 'A' && entry.name.front() <= 'Z') break;
    return entry.dtype;
  }
  throw InvalidArgument("Unknown dtype '" + std::string(text) + "'; accepted: " + accepted_names() +
                        " (torch names may carry the 'torch.' prefix)");
}

const char* to_string(DType dtype) {
  for (const DTypeName& entry : kNames) {
    if (entry.dtype == dtype) return entry.name.data();
  }
  return "unknown";
}

int dtype_bits(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
    case DType::kInt64:
      return 64;
    case DType::kFloat32:
    case DType::kInt32:
      return 32;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
      return 16;
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
    case DType::kFloat8E8M0:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return 8;
  }
  return 0;
}

bool is_floating_point(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat64:
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
    case DType::kFloat8E8M0:
      return true;
    default:
      return false;
  }
}

bool is_float8(DType dtype) {
  return dtype == DType::kFloat8E4M3 || dtype == DType::kFloat8E5M2 || dtype == DType::kFloat8E8M0;
}

}  // namespace backplane
