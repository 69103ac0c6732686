// What the visibility tables share (tests/unit/visibility_*_test.cpp, one per vendor as
// core/src/visibility/ is): their aliases, case naming and note helpers.
#pragma once

#include <backplane/error.hpp>
#include <backplane/rules/visibility.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace visibility_test {

using backplane::InvalidArgument;
using backplane::PhysicalDevice;
using backplane::Visibility;
using Ints = std::vector<int>;
using Strings = std::vector<std::string>;
constexpr std::nullopt_t kUnset = std::nullopt;

// Failures name the case instead of dumping its bytes.
#define PRINTS_NAME(Case)                                          \
  [[maybe_unused]] void PrintTo(const Case& c, std::ostream* os) { \
    *os << c.name;                                                 \
  }

template <typename Case>
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.name;
}

inline bool has_note(const Visibility& v, const std::string& note) {
  return std::find(v.notes.begin(), v.notes.end(), note) != v.notes.end();
}

inline std::string notes_of(const std::vector<std::string>& notes) {
  std::string out;
  for (const std::string& note : notes) out += "\n  " + note;
  return out;
}

// Runs `body`, which must throw InvalidArgument, and returns its message.
template <typename Body>
std::string message_of(Body body) {
  try {
    body();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "<no exception>";
}

inline std::optional<std::string> opt(std::optional<const char*> value) {
  return value ? std::optional<std::string>(*value) : std::nullopt;
}

// The machines the tables run on: NVIDIA GPUs of three speeds, AMD GPUs by UUID, Intel GPUs
// with tiles and an integrated one.
inline PhysicalDevice gpu(const char* uuid, const char* pci, int major, int minor, int sms,
                          int mhz) {
  PhysicalDevice d;
  d.uuid = uuid;
  d.pci_bus_id = pci;
  d.compute_capability_major = major;
  d.compute_capability_minor = minor;
  d.multiprocessors = sms;
  d.clock_mhz = mhz;
  return d;
}

// Speeds: A100 108*64*1410 = 9745920; RTX A6000 84*128*1800 = 19353600; V100 80*64*1530 = 7833600.
const std::vector<PhysicalDevice> kMixed = {
    gpu("GPU-a100-0000", "0000:C1:00.0", 8, 0, 108, 1410),
    gpu("GPU-a6000-111", "0000:41:00.0", 8, 6, 84, 1800),
    gpu("GPU-v100-2222", "0000:01:00.0", 7, 0, 80, 1530),
};
inline PhysicalDevice root(const char* pci, int tiles, bool integrated = false) {
  PhysicalDevice d;
  d.pci_bus_id = pci;
  d.sub_devices = tiles;
  d.integrated = integrated;
  return d;
}

// Sorted by the driver: 1 (18:00.0), 0 (3a:00.0), then the integrated 2.
// With ZE_ENABLE_PCI_ID_DEVICE_ORDER: 2 (00:02.0), 1, 0.
// FLAT numbering: 0 = 1.0, 1 = 1.1, 2 = 0.0, 3 = 0.1, 4 = 2.
const std::vector<PhysicalDevice> kIntel = {root("0000:3a:00.0", 2), root("0000:18:00.0", 2),
                                            root("0000:00:02.0", 1, true)};

const Strings kAmd = {"GPU-0123456789abcdef", "GPU-1111222233334444", "GPU-11aa22bb33cc44dd",
                      "GPU-deadbeefdeadbeef"};

// `count` UUIDs that say nothing but their position.
inline Strings anonymous(int count) {
  Strings uuids;
  for (int i = 0; i < count; ++i) uuids.push_back("GPU-" + std::to_string(i) + "0000000-aaaa");
  return uuids;
}

}  // namespace visibility_test
