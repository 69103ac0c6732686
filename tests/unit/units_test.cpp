// Memory sizes: the values below were produced by Accelerate's own convert_file_size_to_int.
#include <backplane/error.hpp>
#include <backplane/units.hpp>

#include <gtest/gtest.h>

namespace {

struct Size {
  const char* text;
  uint64_t bytes;
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const Size& x, std::ostream* os) {
  *os << x.text;
}

class ValidSize : public ::testing::TestWithParam<Size> {};

TEST_P(ValidSize, MatchesAccelerate) {
  EXPECT_EQ(backplane::parse_memory_size(GetParam().text), GetParam().bytes) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(
    Accelerate, ValidSize,
    ::testing::Values(Size{"10GiB", 10737418240u}, Size{"10gib", 10737418240u},
                      Size{"1.5GiB", 1610612736u}, Size{"500MiB", 524288000u}, Size{"3KiB", 3072u},
                      Size{"5GB", 5000000000u}, Size{"5gb", 625000000u}, Size{"8Gb", 1000000000u},
                      Size{"5MB", 5000000u}, Size{"5Mb", 625000u}, Size{"7KB", 7000u},
                      Size{"7kb", 875u}, Size{" 2GB", 2000000000u}, Size{"2 GB", 2000000000u},
                      Size{"1e3MB", 1000000000u}, Size{"0GB", 0u}, Size{"0.1KB", 100u},
                      Size{"80GiB", 85899345920u}, Size{"1_000MB", 1000000000u},
                      // A bare integer is bytes, as a Python int is there.
                      Size{"123456", 123456u}));

class InvalidSize : public ::testing::TestWithParam<const char*> {};

TEST_P(InvalidSize, NamesTheInputAndTheAcceptedForm) {
  try {
    backplane::parse_memory_size(GetParam());
    FAIL() << GetParam();
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), std::string("`size` ") + GetParam() +
                                         " is not in a valid format. Use an integer for bytes, or "
                                         "a string with an unit (like '5.0GB').");
  }
}

INSTANTIATE_TEST_SUITE_P(Accelerate, InvalidSize,
                         ::testing::Values("-1GB", "abc", "5TB", "GB", "1.2.3GB", "nanGB", "infGiB",
                                           "", "_1GB", "1e30GiB", "99999999999999999999"));

}  // namespace
