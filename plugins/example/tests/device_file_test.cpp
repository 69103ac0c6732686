#include "device_file.hpp"

#include <gtest/gtest.h>

#include <string>

namespace example_npu {
namespace {

TEST(DeviceFile, ReadsDevicesWithSizesAndDefaults) {
  const auto devices = parse_device_file(
      "# comment\n\n"
      "device name=\"Example NPU N1\" memory=16GiB used=512MiB cores=8 arch=en2 firmware=1.4\n"
      "device name=small memory=4096\n",
      "test.conf");
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].name, "Example NPU N1");
  EXPECT_EQ(devices[0].memory_bytes, uint64_t{16} << 30);
  EXPECT_EQ(devices[0].used_bytes, uint64_t{512} << 20);
  EXPECT_EQ(devices[0].cores, 8);
  EXPECT_EQ(devices[0].arch, "en2");
  EXPECT_EQ(devices[0].firmware, "1.4");
  EXPECT_EQ(devices[1].memory_bytes, 4096u);
  EXPECT_EQ(devices[1].cores, 1);
  EXPECT_EQ(devices[1].arch, "en1");
}

struct BadLine {
  const char* text;
  const char* error;  // a part of the message
};

class DeviceFileErrors : public ::testing::TestWithParam<BadLine> {};

TEST_P(DeviceFileErrors, NameTheLineAndWhatIsAccepted) {
  try {
    parse_device_file(std::string("# first\n") + GetParam().text + "\n", "f.conf");
    FAIL() << "accepted: " << GetParam().text;
  } catch (const DeviceFileError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("f.conf:2: ", 0), 0u) << message;
    EXPECT_NE(message.find(GetParam().error), std::string::npos) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, DeviceFileErrors,
    ::testing::Values(BadLine{"gpu name=x memory=1", "starts with 'device'"},
                      BadLine{"device memory=1", "no name="},
                      BadLine{"device name=x", "memory= above 0"},
                      BadLine{"device name=x memory=0", "memory= above 0"},
                      BadLine{"device name=x memory=12TB", "not a size"},
                      BadLine{"device name=x memory=1GiB used=2GiB", "more than memory="},
                      BadLine{"device name=x memory=1 cores=0", "at least 1"},
                      BadLine{"device name=x memory=1 cores=-2", "not a whole number"},
                      BadLine{"device name=x memory=1 colour=red", "unknown key 'colour'"},
                      BadLine{"device name=x memory=1 loose", "not key=value"},
                      BadLine{"device name=\"x memory=1", "unterminated"}));

}  // namespace
}  // namespace example_npu
