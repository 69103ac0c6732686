// Names of Level Zero result codes, and what a failed zeInit() means for a person to act on.
#pragma once

#include <level_zero/ze_api.h>

#include <string>

namespace backplane::xpu {

// "ZE_RESULT_ERROR_UNINITIALIZED"; "ze_result_t 0x12345678" for a code not in the table.
std::string ze_result_name(ze_result_t result);

// What zeInit() failing with `result` usually means; empty when there is nothing to add.
const char* ze_init_hint(ze_result_t result);

// "zeInit failed: ZE_RESULT_ERROR_UNINITIALIZED (no Level Zero driver ...)".
std::string describe_ze_init_failure(ze_result_t result);

}  // namespace backplane::xpu
