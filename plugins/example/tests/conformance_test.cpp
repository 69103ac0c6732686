// The plugin joins backplane's conformance suite with one line (the device file first, so that
// the plugin has devices to check).
#include <backplane/conformance.hpp>

#include <stdlib.h>

static const bool device_file_set = ::setenv("EXAMPLE_NPU_CONFIG", EXAMPLE_NPU_DEVICE_FILE, 1) == 0;

BACKPLANE_CONFORMANCE_SUITE(example_npu, EXAMPLE_NPU_MANIFEST);
