// max_memory as the command line and the dict form give it: keys, sizes and Accelerate's order.
#include <backplane/error.hpp>
#include <backplane/model/device_map.hpp>

#include <gtest/gtest.h>

namespace {

using backplane::MaxMemory;
using backplane::MemoryDevice;

struct Valid {
  const char* text;
  const char* parsed;  // MaxMemory::str(): accelerators by index, then mps, cpu, disk
};

// Test names show the input.
void PrintTo(const Valid& v, std::ostream* os) {
  *os << '"' << v.text << '"';
}

class ValidMaxMemory : public ::testing::TestWithParam<Valid> {};

TEST_P(ValidMaxMemory, ParsesInAccelerateOrder) {
  EXPECT_EQ(MaxMemory::parse(GetParam().text).str(), GetParam().parsed) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(
    Table, ValidMaxMemory,
    ::testing::Values(Valid{"0=10GiB,1=10GiB,cpu=64GiB,disk=1000GB",
                            "0=10737418240,1=10737418240,cpu=68719476736,disk=1000000000000"},
                      // Sorted as get_max_memory sorts: integers first, then mps, cpu, disk.
                      Valid{"disk=1GB,cpu=2GB,mps=3GB,10=1KB,2=1KB",
                            "2=1000,10=1000,mps=3000000000,cpu=2000000000,disk=1000000000"},
                      Valid{" 0 = 1.5GiB , cpu=500MB", "0=1610612736,cpu=500000000"},
                      Valid{"0=8Gb", "0=1000000000"},  // lowercase b: bits
                      Valid{"0=0", "0=0"},             // a bare integer is bytes
                      Valid{"cpu=123456", "cpu=123456"}));

struct Invalid {
  const char* text;
  const char* message;
};

void PrintTo(const Invalid& v, std::ostream* os) {
  *os << '"' << v.text << '"';
}

class InvalidMaxMemory : public ::testing::TestWithParam<Invalid> {};

TEST_P(InvalidMaxMemory, NamesTheInputAndWhatIsAccepted) {
  try {
    MaxMemory::parse(GetParam().text);
    FAIL() << GetParam().text;
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), GetParam().message) << GetParam().text;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, InvalidMaxMemory,
    ::testing::Values(
        Invalid{"gpu=10GiB",
                "max_memory gpu=10GiB: Device gpu is not recognized, available devices are "
                "integers(for GPU/XPU), "
                "'mps', 'cpu' and 'disk'"},
        Invalid{"cuda:0=10GiB",
                "max_memory cuda:0=10GiB: Device cuda:0 is not recognized, available devices are "
                "integers(for GPU/XPU), "
                "'mps', 'cpu' and 'disk'"},
        Invalid{"CPU=1GB",
                "max_memory CPU=1GB: Device CPU is not recognized, available devices are "
                "integers(for GPU/XPU), "
                "'mps', 'cpu' and 'disk'"},
        // Accelerate's sizes have no TB: refused with convert_file_size_to_int's message, and
        // the same size in units it has.
        Invalid{"0=10GiB,disk=1TB",
                "max_memory disk=1TB: `size` 1TB is not in a valid format. Use an integer for "
                "bytes, or a string with an unit (like '5.0GB'). (Accelerate's sizes stop at GB: "
                "write 1000GB, or 931GiB)"},
        Invalid{"cpu=1.5tb",
                "max_memory cpu=1.5tb: `size` 1.5tb is not in a valid format. Use an integer for "
                "bytes, or a string with an unit (like '5.0GB'). (Accelerate's sizes stop at GB: "
                "write 1500GB, or 1396GiB)"},
        Invalid{"cpu=2TiB",
                "max_memory cpu=2TiB: `size` 2TiB is not in a valid format. Use an integer for "
                "bytes, or a string with an unit (like '5.0GB'). (Accelerate's sizes stop at GiB: "
                "write 2048GiB)"},
        Invalid{"0=-1GB",
                "max_memory 0=-1GB: `size` -1GB is not in a valid format. Use an integer for "
                "bytes, or a string with "
                "an unit (like '5.0GB')."},
        Invalid{"0=",
                "max_memory 0=: `size`  is not in a valid format. Use an integer for bytes, or a "
                "string "
                "with an unit (like '5.0GB')."},
        Invalid{"-1=10GiB", "max_memory -1=10GiB: accelerator index -1 is negative"},
        Invalid{"99999999999=1GB",
                "max_memory 99999999999=1GB: accelerator index 99999999999 is too large"},
        Invalid{"0=1GB,0=2GB", "max_memory 0=2GB: device 0 is given twice"},
        Invalid{"cpu", "max_memory: expected KEY=SIZE (such as 0=10GiB or cpu=64GiB), found 'cpu'"},
        Invalid{"0=1GB,", "max_memory: expected KEY=SIZE (such as 0=10GiB or cpu=64GiB), found ''"},
        Invalid{" ",
                "max_memory is empty; give KEY=SIZE entries such as 0=10GiB,1=10GiB,cpu=64GiB"}));

TEST(MaxMemory, SourceNamesTheInputAndTinyBudgetsWarn) {
  try {
    MaxMemory::parse("0=10GiB,cpu=1TB", "--max-memory");
    FAIL() << "accepted";
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--max-memory cpu=1TB: `size` 1TB", 0), 0u) << e.what();
  }
  const MaxMemory m = MaxMemory::parse("0=10GiB,1=0,cpu=30,disk=1048575", "--max-memory");
  EXPECT_EQ(m.warnings("--max-memory"),
            (std::vector<std::string>{
                "--max-memory cpu=30: 30 bytes is less than 1 MiB; a size without a unit counts "
                "bytes (write 30GiB or 30GB for gigabytes)",
                "--max-memory disk=1048575: 1048575 bytes is less than 1 MiB; a size without a "
                "unit counts bytes (write 1048575GiB or 1048575GB for gigabytes)"}));
  EXPECT_TRUE(MaxMemory::parse("0=1MiB,cpu=0").warnings().empty());
  // A size with a unit is no missing unit: the warning says only how small it is.
  EXPECT_EQ(MaxMemory::parse("cpu=300KB", "--max-memory").warnings("--max-memory"),
            (std::vector<std::string>{"--max-memory cpu=300KB: 300000 bytes is less than 1 MiB"}));
}

TEST(MaxMemory, FromMap) {
  const MaxMemory m = MaxMemory::from_map({{"cpu", "1GB"}, {"1", "2GiB"}, {"0", "100"}});
  EXPECT_EQ(m.str(), "0=100,1=2147483648,cpu=1000000000");
  EXPECT_EQ(m.get(MemoryDevice::accelerator(1)), 2147483648u);
  EXPECT_FALSE(m.get(MemoryDevice::disk()).has_value());
  EXPECT_TRUE(MaxMemory::from_map({}).empty());
  EXPECT_THROW(MaxMemory::from_map({{"tpu", "1GB"}}), backplane::InvalidArgument);
}

TEST(MemoryDevice, TargetsAsHfDeviceMapHoldsThem) {
  EXPECT_EQ(MemoryDevice::accelerator(3).target().str(), "3");
  EXPECT_EQ(MemoryDevice::cpu().target().str(), "cpu");
  EXPECT_EQ(MemoryDevice::mps().target().str(), "mps");
  EXPECT_EQ(MemoryDevice::disk().target().str(), "disk");
  EXPECT_TRUE(MemoryDevice::accelerator(7) < MemoryDevice::mps());
  EXPECT_TRUE(MemoryDevice::cpu() < MemoryDevice::disk());
}

}  // namespace
