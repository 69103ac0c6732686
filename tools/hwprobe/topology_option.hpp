// `--sim NAME|FILE`: a simulated topology, by file or by the name of one that ships.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace hwprobe {

// <folder of this program>/../share/backplane/topologies, in the build and install trees.
std::filesystem::path shipped_topology_directory();
// Names of the shipped topologies (file stems), sorted.
std::vector<std::string> shipped_topologies();
// An existing file as given, or a shipped topology's file. Throws backplane::InvalidArgument
// naming the value and the shipped names.
std::filesystem::path resolve_topology(const std::string& name_or_file);

}  // namespace hwprobe
