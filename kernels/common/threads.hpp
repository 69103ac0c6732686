// Threads of the process-wide pool the CPU kernels of this library share (attention, rmsnorm,
// activation, rotary). n <= 0 restores the default, std::thread::hardware_concurrency().
// Takes effect for the next call.
#pragma once

namespace backplane::kernels {

void set_num_threads(int n);
int num_threads();

}  // namespace backplane::kernels
