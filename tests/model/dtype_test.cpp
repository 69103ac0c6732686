// DType names (torch's, their aliases, safetensors' codes) and tensor sizes.
#include <backplane/error.hpp>
#include <backplane/model/model.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace {

using backplane::DType;

struct Name {
  const char* text;
  DType dtype;
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const Name& x, std::ostream* os) {
  *os << x.text;
}

class ValidDType : public ::testing::TestWithParam<Name> {};

TEST_P(ValidDType, Parses) {
  EXPECT_EQ(backplane::parse_dtype(GetParam().text), GetParam().dtype) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(
    TorchAndSafetensors, ValidDType,
    ::testing::Values(
        Name{"float32", DType::kFloat32}, Name{"float", DType::kFloat32},
        Name{"torch.float32", DType::kFloat32}, Name{"F32", DType::kFloat32},
        Name{"float16", DType::kFloat16}, Name{"half", DType::kFloat16},
        Name{"F16", DType::kFloat16}, Name{"bfloat16", DType::kBFloat16},
        Name{"torch.bfloat16", DType::kBFloat16}, Name{"BF16", DType::kBFloat16},
        Name{"float64", DType::kFloat64}, Name{"double", DType::kFloat64},
        Name{"F64", DType::kFloat64}, Name{"float8_e4m3fn", DType::kFloat8E4M3},
        Name{"F8_E4M3", DType::kFloat8E4M3}, Name{"float8_e5m2", DType::kFloat8E5M2},
        Name{"F8_E5M2", DType::kFloat8E5M2}, Name{"float8_e8m0fnu", DType::kFloat8E8M0},
        Name{"F8_E8M0", DType::kFloat8E8M0}, Name{"int64", DType::kInt64},
        Name{"long", DType::kInt64}, Name{"I64", DType::kInt64}, Name{"int32", DType::kInt32},
        Name{"int", DType::kInt32}, Name{"I32", DType::kInt32}, Name{"int16", DType::kInt16},
        Name{"short", DType::kInt16}, Name{"I16", DType::kInt16}, Name{"int8", DType::kInt8},
        Name{"I8", DType::kInt8}, Name{"uint8", DType::kUInt8}, Name{"U8", DType::kUInt8},
        Name{"bool", DType::kBool}, Name{"BOOL", DType::kBool}, Name{"torch.bool", DType::kBool}));

class InvalidDType : public ::testing::TestWithParam<const char*> {};

TEST_P(InvalidDType, NamesTheValueAndTheAcceptedNames) {
  try {
    backplane::parse_dtype(GetParam());
    FAIL() << GetParam();
  } catch (const backplane::InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(std::string("'") + GetParam() + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("bfloat16"), std::string::npos) << message;
    EXPECT_NE(message.find("BF16"), std::string::npos) << message;
  }
}

// Case matters (torch attributes and safetensors codes are case-sensitive); "torch." takes
// torch names only; float8 needs its torch suffix.
INSTANTIATE_TEST_SUITE_P(Refused, InvalidDType,
                         ::testing::Values("", "Float32", "fp16", "bf16", "f32", "torch.F32",
                                           "torch.", "float8_e4m3", "F8_E4M3FN", "U16", "C64",
                                           "complex64", " float32", "float32 ",
                                           "torch.torch.int8"));

TEST(DType, CanonicalNamesRoundTrip) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                      DType::kFloat8E4M3, DType::kFloat8E5M2, DType::kFloat8E8M0, DType::kInt64,
                      DType::kInt32, DType::kInt16, DType::kInt8, DType::kUInt8, DType::kBool}) {
    EXPECT_EQ(backplane::parse_dtype(backplane::to_string(dtype)), dtype)
        << backplane::to_string(dtype);
  }
  EXPECT_STREQ(backplane::to_string(DType::kFloat8E4M3), "float8_e4m3fn");
  EXPECT_STREQ(backplane::to_string(DType::kBFloat16), "bfloat16");
}

TEST(DType, BitsAndKinds) {
  struct Row {
    DType dtype;
    int bits;
    bool floating;
  };
  const Row rows[] = {
      {DType::kFloat32, 32, true},   {DType::kFloat16, 16, true},   {DType::kBFloat16, 16, true},
      {DType::kFloat64, 64, true},   {DType::kFloat8E4M3, 8, true}, {DType::kFloat8E5M2, 8, true},
      {DType::kFloat8E8M0, 8, true}, {DType::kInt64, 64, false},    {DType::kInt32, 32, false},
      {DType::kInt16, 16, false},    {DType::kInt8, 8, false},      {DType::kUInt8, 8, false},
      {DType::kBool, 8, false},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(backplane::dtype_bits(row.dtype), row.bits) << backplane::to_string(row.dtype);
    EXPECT_EQ(backplane::is_floating_point(row.dtype), row.floating)
        << backplane::to_string(row.dtype);
    EXPECT_EQ(backplane::is_float8(row.dtype), row.floating && row.bits == 8)
        << backplane::to_string(row.dtype);
  }
}

backplane::TensorInfo tensor(std::vector<int64_t> shape, DType dtype = DType::kFloat32) {
  backplane::TensorInfo info;
  info.name = "weight";
  info.shape = std::move(shape);
  info.dtype = dtype;
  return info;
}

TEST(TensorInfo, NumelAndBytes) {
  EXPECT_EQ(tensor({}).numel(), 1);  // a scalar
  EXPECT_EQ(tensor({0, 5}).numel(), 0);
  EXPECT_EQ(tensor({4096, 11008}).numel(), 45088768);
  EXPECT_EQ(tensor({4096, 11008}, DType::kBFloat16).nbytes(), 90177536);
  EXPECT_EQ(tensor({3}, DType::kBool).nbytes(), 3);
  // 2^31 x 2^31 x 2 = 2^63 does not fit; 2^31 x 2^31 does, and x 2 bytes does not.
  EXPECT_EQ(tensor({int64_t{1} << 31, int64_t{1} << 31}).numel(), int64_t{1} << 62);
  EXPECT_THROW(tensor({int64_t{1} << 31, int64_t{1} << 31}, DType::kFloat16).nbytes(),
               backplane::InvalidArgument);
  EXPECT_THROW(tensor({int64_t{1} << 31, int64_t{1} << 31, 2}).numel(), backplane::InvalidArgument);
  EXPECT_THROW(tensor({std::numeric_limits<int64_t>::max(), 2}).numel(),
               backplane::InvalidArgument);
  // A zero anywhere makes the product 0, even after a huge dimension.
  EXPECT_EQ(tensor({std::numeric_limits<int64_t>::max(), 0}).numel(), 0);
  try {
    tensor({2, -1}).numel();
    FAIL();
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[2, -1]"), std::string::npos) << e.what();
  }
}

}  // namespace
