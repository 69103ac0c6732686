// Simulated machines: the topologies the sim plugin stands up instead of real devices
// (backends/sim/README.md). A topology is a JSON file; the shipped ones (h100x8, mi300x8, ...)
// are installed in <prefix>/share/backplane/topologies (build tree: <build>/share/...), and a
// host names one with RuntimeOptions::sim_topology or BACKPLANE_SIM_TOPOLOGY, by name or path.
#pragma once

#include <backplane/export.hpp>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

// The folder of the shipped topologies next to this libbackplane (empty when none is found).
BACKPLANE_API std::filesystem::path shipped_topology_directory();
// Their names, sorted: "a100x8", "h100x8", ...
BACKPLANE_API std::vector<std::string> shipped_topologies();
// A topology file as an absolute path: `name_or_file` itself when it is a file, else the
// shipped topology of that name. Throws InvalidArgument naming `source` (the option or
// variable) and the shipped names when it is neither.
BACKPLANE_API std::filesystem::path resolve_sim_topology(std::string_view name_or_file,
                                                         std::string_view source);

}  // namespace backplane
