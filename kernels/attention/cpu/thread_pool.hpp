// Internal: the attention kernels run on the pool shared by all CPU kernels (kernels/common).
#pragma once

#include "common/thread_pool.hpp"

namespace backplane::attention::cpu {

using kernels::ThreadPool;

}  // namespace backplane::attention::cpu
