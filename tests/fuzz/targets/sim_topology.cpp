// Simulated-backend topologies (backends/sim/topology.cpp): JSON text as BACKPLANE_SIM_TOPOLOGY
// names it.
#include "fuzz_input.hpp"

#include "topology.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const std::string text(fuzz::as_text(data, size));
  fuzz::refusals_allowed<sim::TopologyError>([&] { sim::parse_topology(text); });
  return 0;
}
