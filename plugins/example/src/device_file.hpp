// The Example NPU's device file (devices.conf): what the vendor's driver would report, one
// device per line. The plugin reads the file EXAMPLE_NPU_CONFIG names.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace example_npu {

struct NpuDevice {
  std::string name;
  uint64_t memory_bytes = 0;
  uint64_t used_bytes = 0;
  int64_t cores = 1;
  std::string arch = "en1";
  std::string firmware;
};

// A malformed file: the message names the source, the line and what is accepted.
class DeviceFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses the text of a device file; `source` names it in errors.
std::vector<NpuDevice> parse_device_file(const std::string& text, const std::string& source);

// Reads and parses the file at `path`.
std::vector<NpuDevice> read_device_file(const std::string& path);

}  // namespace example_npu
