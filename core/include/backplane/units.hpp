// Memory sizes written the way Accelerate reads them ("10GiB", "500MB", "8Gb").
#pragma once

#include <backplane/export.hpp>

#include <cstdint>
#include <string_view>

namespace backplane {

// Accelerate's convert_file_size_to_int: GiB/MiB/KiB are powers of 2, GB/MB/KB powers of 10,
// units case-insensitive, and a trailing lowercase 'b' on the decimal units means bits ("8Gb"
// is 1e9 bytes). The number may have a fraction or exponent ("1.5GiB"); the result is
// truncated to whole bytes. A bare integer means bytes, as a Python int does there.
// Throws InvalidArgument "`size` <text> is not in a valid format. Use an integer for bytes, or a
// string with an unit (like '5.0GB')." for anything else, negative sizes and overflow included.
BACKPLANE_API uint64_t parse_memory_size(std::string_view text);

}  // namespace backplane
