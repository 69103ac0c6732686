#include "cpu_topology.hpp"

#include <hwloc.h>

#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

namespace backplane::cpu {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

int64_t count(hwloc_topology_t topology, hwloc_obj_type_t type) {
  const int n = hwloc_get_nbobjs_by_type(topology, type);
  return n < 0 ? 0 : n;  // -1: objects of this type live at several depths; not for these types
}

int64_t first_cache_size(hwloc_topology_t topology, hwloc_obj_type_t type) {
  hwloc_obj_t cache = hwloc_get_obj_by_type(topology, type, 0);
  return cache != nullptr ? static_cast<int64_t>(cache->attr->cache.size) : 0;
}

}  // namespace

CpuTopology read_topology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throw std::runtime_error("hwloc_topology_init failed");
  TopologyPtr topology(raw);
  // CPU and memory only: I/O discovery (PCI) costs milliseconds that hwprobe does not need here.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(raw) != 0) throw std::runtime_error("hwloc_topology_load failed");

  CpuTopology t;
  t.packages = count(raw, HWLOC_OBJ_PACKAGE);
  t.cores = count(raw, HWLOC_OBJ_CORE);
  t.threads = count(raw, HWLOC_OBJ_PU);
  t.numa_nodes = count(raw, HWLOC_OBJ_NUMANODE);
  t.l1d_cache_bytes = first_cache_size(raw, HWLOC_OBJ_L1CACHE);
  t.l2_cache_bytes = first_cache_size(raw, HWLOC_OBJ_L2CACHE);
  t.l3_cache_bytes = first_cache_size(raw, HWLOC_OBJ_L3CACHE);
  // hwloc sums the NUMA nodes' own counts, which miss memory some virtual machines hot-plug.
  t.memory_total = meminfo_bytes("MemTotal").value_or(hwloc_get_root_obj(raw)->total_memory);
  return t;
}

std::optional<uint64_t> meminfo_bytes(const std::string& field) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key.size() == field.size() + 1 && key.compare(0, field.size(), field) == 0) {
      return kib * 1024;
    }
  }
  return std::nullopt;
}

}  // namespace backplane::cpu
