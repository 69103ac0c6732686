// The host's CPU topology and memory, read with hwloc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace backplane::cpu {

struct CpuTopology {
  int64_t packages = 0;
  int64_t cores = 0;
  int64_t threads = 0;  // hardware threads (hwloc PUs) this process may use
  int64_t numa_nodes = 0;
  int64_t l1d_cache_bytes = 0;  // one instance of each cache level; 0 when unknown
  int64_t l2_cache_bytes = 0;
  int64_t l3_cache_bytes = 0;
  uint64_t memory_total = 0;  // MemTotal where the kernel reports it, else hwloc's NUMA total
};

// Throws std::runtime_error with hwloc's complaint when the topology cannot be read.
CpuTopology read_topology();

// A field of /proc/meminfo in bytes ("MemTotal", "MemAvailable"): what psutil, and so
// Accelerate, call total and available memory. nullopt where the kernel does not report it.
std::optional<uint64_t> meminfo_bytes(const std::string& field);

}  // namespace backplane::cpu
