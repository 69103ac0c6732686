/* The test package's op "scale": data[i] *= factor for i < count. NULL data with a non-zero
 * count is refused with a status. */
#ifndef BACKPLANE_HUB_TEST_PACKAGE_OP_H_
#define BACKPLANE_HUB_TEST_PACKAGE_OP_H_

#include <backplane/plugin.h>
#include <stddef.h>

typedef bp_status* (*hub_test_scale_fn)(void* context, float* data, size_t count, float factor);

#endif
