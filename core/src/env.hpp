// Reading the process environment. Owned by the core; not part of the public API.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail {

// secure_getenv: nullopt when unset, or when the process is privileged (setuid/setgid), so a
// user can never redirect a privileged program to their own plugins.
std::optional<std::string> secure_env(const char* name);

// Splits on `separator`, trims spaces, drops empty items.
std::vector<std::string> split_list(std::string_view text, char separator);

}  // namespace backplane::detail
