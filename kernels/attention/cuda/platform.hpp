// Which vendor's compiler is building the .cu sources: BACKPLANE_GPU_AMD under hipcc (clang in
// HIP mode defines __HIPCC__; Debian's hipcc 5.2 does not define __HIP_PLATFORM_AMD__ before
// the HIP headers are read), NVIDIA's otherwise.
#pragma once

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#define BACKPLANE_GPU_AMD 1
#endif
