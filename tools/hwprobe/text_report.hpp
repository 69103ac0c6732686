// hwprobe's readable output: aligned tables for a person at a terminal.
#pragma once

#include <backplane/backplane.hpp>

#include <ostream>

namespace hwprobe {

void print_runtime(std::ostream& out, const backplane::Runtime& runtime);
void print_plugins(std::ostream& out, const backplane::Runtime& runtime);
// How each backend came to be available or not, and how each device got its index.
void print_explanation(std::ostream& out, const backplane::Runtime& runtime);

// "80.0 GiB"
std::string format_bytes(uint64_t bytes);

}  // namespace hwprobe
