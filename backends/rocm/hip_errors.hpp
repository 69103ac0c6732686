// Names and descriptions of the HIP error codes that discovery can meet, for unavailable
// reasons. HIP 5.2's hipGetErrorString() returns the bare name, so the text comes from here.
#pragma once

#include <string>

#include "hip_api.hpp"

namespace backplane::rocm {

// "hipErrorNoDevice"; nullptr for a code not in the table.
const char* hip_error_name(HipError error);

// "no ROCm-capable device is detected"; nullptr for a code not in the table.
const char* hip_error_text(HipError error);

// "<name>: <text>". The runtime's own name and text win; ours fill in what it lacks, and a text
// that only repeats the name is dropped. Either runtime string may be null.
std::string describe_hip_error(HipError error, const char* runtime_name, const char* runtime_text);

}  // namespace backplane::rocm
