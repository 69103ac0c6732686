# BACKPLANE_SANITIZE: build everything with sanitizers.
#   address,undefined   AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer;
#                       any UB report aborts the test that caused it
#   thread              ThreadSanitizer
# Parts that cannot be sanitized, or would dominate the run, are left out of such a build, each
# with a configure message: LibTorch (a prebuilt, uninstrumented library: the bridge, its tests,
# the kernels' LibTorch comparisons, the distributed run), the nvcc and hipcc objects, the
# benchmarks, and the Python-oracle differential tests (their C++ side is covered by the unit
# tests, and the oracle runs dominate the time). `./dev.sh sanitize` builds and runs both
# configurations; README "Sanitizers and isolation" lists what runs where.
include_guard(GLOBAL)


if(BACKPLANE_SANITIZE STREQUAL "")
  return()
elseif(BACKPLANE_SANITIZE STREQUAL "address,undefined")
  set(_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
elseif(BACKPLANE_SANITIZE STREQUAL "thread")
  set(_flags -fsanitize=thread)
else()
  message(FATAL_ERROR
          "BACKPLANE_SANITIZE is '${BACKPLANE_SANITIZE}'; expected empty, address,undefined or thread")
endif()
add_compile_options(${_flags} -fno-omit-frame-pointer)
add_link_options(${_flags})
# GCC's -Wmaybe-uninitialized misfires on instrumented code (the sanitizers add branches its
# flow analysis cannot see through; GCC's manual says so), e.g. inside libstdc++'s std::regex,
# which breaks a -Werror build. The normal build keeps the warning.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND TARGET backplane_warnings)
  target_compile_options(backplane_warnings INTERFACE -Wno-maybe-uninitialized)
endif()

set(_why "not built with BACKPLANE_SANITIZE=${BACKPLANE_SANITIZE}")
# Normal variables take precedence over the options and cache entries these parts read.
set(BACKPLANE_PYTHON "")
set(BACKPLANE_LIBTORCH off)
set(CMAKE_DISABLE_FIND_PACKAGE_Torch ON)
set(CMAKE_DISABLE_FIND_PACKAGE_benchmark ON)
set(BACKPLANE_CUDA_KERNELS OFF)
set(BACKPLANE_HIP_KERNELS OFF)
backplane_skip("LibTorch, the benchmarks, the nvcc/hipcc kernels and the Python oracles" "${_why}")
