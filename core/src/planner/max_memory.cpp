// max_memory: parsing its keys and sizes, and get_max_memory (Accelerate's, and transformers'
// wrapper around it).
#include <backplane/error.hpp>
#include <backplane/units.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>

#include "planner.hpp"

namespace backplane {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

MemoryDevice parse_key(std::string_view text) {
  const std::string_view key = trim(text);
  if (key == "mps") return MemoryDevice::mps();
  if (key == "cpu") return MemoryDevice::cpu();
  if (key == "disk") return MemoryDevice::disk();
  const bool negative = !key.empty() && key[0] == '-';
  const std::string_view digits = negative ? key.substr(1) : key;
  const bool integer = !digits.empty() && std::all_of(digits.begin(), digits.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
  if (!integer) {
    throw InvalidArgument("Device " + std::string(key) +
                          " is not recognized, available devices are integers(for GPU/XPU), "
                          "'mps', 'cpu' and 'disk'");
  }
  // Accelerate only warns about a negative index; no device ever has one.
  if (negative) throw InvalidArgument("accelerator index " + std::string(key) + " is negative");
  int index = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    throw InvalidArgument("accelerator index " + std::string(key) + " is too large");
  }
  return MemoryDevice::accelerator(index);
}

// Accelerate's units stop at GB; "1TB" and "2TiB" get the same size in units it has.
std::string terabyte_hint(std::string_view size) {
  const size_t digits_end = size.find_first_not_of("0123456789.");
  if (digits_end == 0 || digits_end == std::string_view::npos) return {};
  std::string unit(size.substr(digits_end));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit != "TB" && unit != "TIB") return {};
  double number = 0;
  try {
    number = std::stod(std::string(size.substr(0, digits_end)));
  } catch (const std::exception&) {
    return {};
  }
  auto whole = [](double v) {
    std::ostringstream out;
    out.precision(15);
    out << std::floor(v);
    return out.str();
  };
  if (unit == "TB") {
    return " (Accelerate's sizes stop at GB: write " + whole(number * 1000) + "GB, or " +
           whole(number * 1e12 / 1073741824.0) + "GiB)";
  }
  return " (Accelerate's sizes stop at GiB: write " + whole(number * 1024) + "GiB)";
}

}  // namespace

// One KEY=SIZE entry; errors start with "<source> KEY=SIZE: ".
void MaxMemory::add(std::string_view key, std::string_view size, std::string_view source) {
  const std::string entry =
      std::string(source) + " " + std::string(trim(key)) + "=" + std::string(trim(size)) + ": ";
  MemoryDevice device;
  uint64_t bytes = 0;
  try {
    device = parse_key(key);
    bytes = parse_memory_size(trim(size));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(entry + e.what() + terabyte_hint(trim(size)));
  }
  if (get(device)) throw InvalidArgument(entry + "device " + device.str() + " is given twice");
  set(device, bytes);
  written_[device] = std::string(trim(size));
}

std::string MemoryDevice::str() const {
  switch (kind) {
    case Kind::kAccelerator:
      return std::to_string(index);
    case Kind::kMps:
      return "mps";
    case Kind::kCpu:
      return "cpu";
    case Kind::kDisk:
      return "disk";
  }
  return "";
}

DeviceMapTarget MemoryDevice::target() const {
  DeviceMapTarget target;
  switch (kind) {
    case Kind::kAccelerator:
      target.kind = DeviceMapTarget::Kind::kIndex;
      target.index = index;
      break;
    case Kind::kMps:
      target.kind = DeviceMapTarget::Kind::kDevice;
      target.device = Device("mps");
      break;
    case Kind::kCpu:
      target.kind = DeviceMapTarget::Kind::kDevice;
      target.device = Device("cpu");
      break;
    case Kind::kDisk:
      target.kind = DeviceMapTarget::Kind::kDisk;
      break;
  }
  return target;
}

MaxMemory MaxMemory::parse(std::string_view text, std::string_view source) {
  if (trim(text).empty()) {
    throw InvalidArgument(std::string(source) +
                          " is empty; give KEY=SIZE entries such as 0=10GiB,1=10GiB,cpu=64GiB");
  }
  MaxMemory memory;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view entry = text.substr(start, comma - start);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) {
      throw InvalidArgument(std::string(source) +
                            ": expected KEY=SIZE (such as 0=10GiB or cpu=64GiB), found '" +
                            std::string(trim(entry)) + "'");
    }
    memory.add(entry.substr(0, eq), entry.substr(eq + 1), source);
    start = comma + 1;
  }
  return memory;
}

MaxMemory MaxMemory::from_map(const std::vector<std::pair<std::string, std::string>>& entries,
                              std::string_view source) {
  MaxMemory memory;
  for (const auto& [key, size] : entries) memory.add(key, size, source);
  return memory;
}

std::vector<std::string> MaxMemory::warnings(std::string_view source) const {
  std::vector<std::string> out;
  for (const auto& [device, bytes] : entries_) {
    if (bytes == 0 || bytes >= (1u << 20)) continue;
    const auto it = written_.find(device);
    const std::string written = it == written_.end() ? std::to_string(bytes) : it->second;
    const bool unitless = written.find_first_not_of("0123456789") == std::string::npos;
    std::string warning = std::string(source) + " " + device.str() + "=" + written + ": " +
                          std::to_string(bytes) + " bytes is less than 1 MiB";
    if (unitless) {
      warning += "; a size without a unit counts bytes (write " + written + "GiB or " + written +
                 "GB for gigabytes)";
    }
    out.push_back(warning);
  }
  return out;
}

std::optional<uint64_t> MaxMemory::get(MemoryDevice device) const {
  const auto it = entries_.find(device);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::string MaxMemory::str() const {
  std::string out;
  for (const auto& [device, bytes] : entries_) {
    if (!out.empty()) out += ",";
    out += device.str() + "=" + std::to_string(bytes);
  }
  return out;
}

namespace planner {

Budgets get_max_memory(const std::optional<MaxMemory>& given, const PlanHardware& hardware,
                       PlanRules rules) {
  Budgets budgets;
  if (given) {
    // Accelerate converts the sizes and sorts: accelerators by index, then mps, cpu, disk. The
    // map's order is that order. transformers then adds the caching allocator's reserved but
    // unused memory (none: nothing is allocated yet) and keeps the user's values.
    for (const auto& [device, bytes] : given->entries()) {
      budgets[device] = static_cast<double>(bytes);
    }
    return budgets;
  }
  if (hardware.accelerator_type == "mps") {
    // MPS shares host RAM: Accelerate gives it the available RAM, and no cpu budget.
    budgets[MemoryDevice::mps()] = static_cast<double>(hardware.cpu_available);
    return budgets;
  }
  for (const PlanAccelerator& a : hardware.accelerators) {
    budgets[MemoryDevice::accelerator(a.index)] = static_cast<double>(a.free_bytes);
  }
  if (!hardware.unified_memory) {
    double cpu = static_cast<double>(hardware.cpu_available);
    // transformers keeps 10% of RAM free when the user set no max_memory.
    if (rules == PlanRules::kFromPretrained) cpu *= 0.90;
    budgets[MemoryDevice::cpu()] = cpu;
  }
  return budgets;
}

}  // namespace planner
}  // namespace backplane
