#include "device_file.hpp"

#include <cctype>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

namespace example_npu {
namespace {

constexpr const char* kFormat =
    "device name=\"<name>\" memory=<size> [used=<size>] [cores=<n>] [arch=<name>] "
    "[firmware=<text>]";

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw DeviceFileError(where + ": " + what);
}

// Splits a line into words; a double-quoted part keeps its spaces (without the quotes).
std::vector<std::string> words(const std::string& line, const std::string& where) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
      in_word = true;
    } else if (!quoted && std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) out.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quoted) fail(where, "unterminated '\"'");
  if (in_word) out.push_back(std::move(word));
  return out;
}

uint64_t parse_count(const std::string& digits, const std::string& where, const std::string& key) {
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
      digits.size() > 18) {
    fail(where, key + "='" + digits + "' is not a whole number");
  }
  return std::stoull(digits);
}

uint64_t parse_size(const std::string& value, const std::string& where, const std::string& key) {
  static const std::pair<const char*, uint64_t> kUnits[] = {
      {"GiB", uint64_t{1} << 30}, {"MiB", uint64_t{1} << 20}, {"KiB", uint64_t{1} << 10}};
  for (const auto& [suffix, scale] : kUnits) {
    const std::string unit(suffix);
    if (value.size() > unit.size() &&
        value.compare(value.size() - unit.size(), unit.size(), unit) == 0) {
      const uint64_t n = parse_count(value.substr(0, value.size() - unit.size()), where, key);
      if (n > std::numeric_limits<uint64_t>::max() / scale) fail(where, key + " is too large");
      return n * scale;
    }
  }
  if (value.find_first_not_of("0123456789") != std::string::npos) {
    fail(where, key + "='" + value + "' is not a size: bytes, or a number with KiB, MiB or GiB");
  }
  return parse_count(value, where, key);
}

NpuDevice parse_device(const std::vector<std::string>& fields, const std::string& where) {
  NpuDevice device;
  bool has_memory = false;
  for (size_t i = 1; i < fields.size(); ++i) {
    const size_t eq = fields[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      fail(where, "'" + fields[i] + "' is not key=value; a line is: " + kFormat);
    }
    const std::string key = fields[i].substr(0, eq);
    const std::string value = fields[i].substr(eq + 1);
    if (key == "name") {
      device.name = value;
    } else if (key == "memory") {
      device.memory_bytes = parse_size(value, where, key);
      has_memory = true;
    } else if (key == "used") {
      device.used_bytes = parse_size(value, where, key);
    } else if (key == "cores") {
      device.cores = static_cast<int64_t>(parse_count(value, where, key));
    } else if (key == "arch") {
      device.arch = value;
    } else if (key == "firmware") {
      device.firmware = value;
    } else {
      fail(where, "unknown key '" + key + "'; a line is: " + kFormat);
    }
  }
  if (device.name.empty()) fail(where, "the device has no name=");
  if (!has_memory || device.memory_bytes == 0) fail(where, "the device needs memory= above 0");
  if (device.used_bytes > device.memory_bytes) fail(where, "used= is more than memory=");
  if (device.cores < 1) fail(where, "cores= must be at least 1");
  return device;
}

}  // namespace

std::vector<NpuDevice> parse_device_file(const std::string& text, const std::string& source) {
  std::vector<NpuDevice> devices;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string where = source + ":" + std::to_string(number);
    const std::vector<std::string> fields = words(line, where);
    if (fields.empty() || fields[0][0] == '#') continue;
    if (fields[0] != "device") {
      fail(where,
           "a line starts with 'device' or '#', not '" + fields[0] + "'; a line is: " + kFormat);
    }
    devices.push_back(parse_device(fields, where));
  }
  return devices;
}

std::vector<NpuDevice> read_device_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw DeviceFileError(path + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_device_file(text.str(), path);
}

}  // namespace example_npu
