# backplane_libtorch_cpu: LibTorch's CPU libraries (torch_cpu, c10) from the torch wheel of the
# oracle venv (BACKPLANE_PYTHON, the python of tests/python/venv.sh), as one imported target.
# find_package(Torch) is avoided: the wheel's config pulls in CUDA. Sources that include
# LibTorch 2.x headers need C++20; the wheel's _GLIBCXX_USE_CXX11_ABI is propagated.
# Sets BACKPLANE_LIBTORCH_CPU_FOUND. Included by torch/, tests/kernels and bench; when it is not
# there, one configure message covers them all.

function(backplane_libtorch_cpu_skip reason)
  get_property(told GLOBAL PROPERTY BACKPLANE_LIBTORCH_CPU_TOLD)
  if(NOT told)
    set_property(GLOBAL PROPERTY BACKPLANE_LIBTORCH_CPU_TOLD ON)
    backplane_skip("the attention tests and benchmarks against LibTorch" "${reason}")
  endif()
endfunction()

set(BACKPLANE_LIBTORCH_CPU_FOUND OFF)
if(NOT BACKPLANE_PYTHON)
  backplane_libtorch_cpu_skip(
    "need BACKPLANE_PYTHON, the python of tests/python/venv.sh with torch (dev.sh test sets it)")
  return()
endif()

if(NOT BACKPLANE_TORCH_PROBE_PYTHON STREQUAL BACKPLANE_PYTHON)
  execute_process(
    COMMAND ${BACKPLANE_PYTHON} -c
      "import os, torch; print(os.path.dirname(torch.__file__)); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.__version__)"
    OUTPUT_VARIABLE probe ERROR_VARIABLE probe_error RESULT_VARIABLE probe_result
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT probe_result EQUAL 0)
    backplane_libtorch_cpu_skip("cannot import torch with ${BACKPLANE_PYTHON}")
    return()
  endif()
  string(REPLACE "\n" ";" probe "${probe}")
  list(GET probe 0 dir)
  list(GET probe 1 abi)
  list(GET probe 2 version)
  set(BACKPLANE_TORCH_DIR "${dir}" CACHE INTERNAL "")
  set(BACKPLANE_TORCH_CXX11_ABI "${abi}" CACHE INTERNAL "")
  set(BACKPLANE_TORCH_VERSION "${version}" CACHE INTERNAL "")
  set(BACKPLANE_TORCH_PROBE_PYTHON "${BACKPLANE_PYTHON}" CACHE INTERNAL "")
endif()

set(lib ${BACKPLANE_TORCH_DIR}/lib)
if(NOT EXISTS ${lib}/libtorch_cpu.so OR NOT EXISTS ${lib}/libc10.so)
  backplane_libtorch_cpu_skip("the torch wheel at ${BACKPLANE_TORCH_DIR} has no C++ libraries")
  return()
endif()
if(NOT TARGET backplane_libtorch_cpu)
  add_library(backplane_libtorch_cpu INTERFACE IMPORTED GLOBAL)
  set_target_properties(backplane_libtorch_cpu PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES
      "${BACKPLANE_TORCH_DIR}/include;${BACKPLANE_TORCH_DIR}/include/torch/csrc/api/include"
    INTERFACE_LINK_LIBRARIES "${lib}/libtorch_cpu.so;${lib}/libc10.so"
    INTERFACE_COMPILE_DEFINITIONS
      "_GLIBCXX_USE_CXX11_ABI=${BACKPLANE_TORCH_CXX11_ABI};BACKPLANE_TORCH_VERSION=\"${BACKPLANE_TORCH_VERSION}\"")
endif()
set(BACKPLANE_LIBTORCH_CPU_FOUND ON)
get_property(told GLOBAL PROPERTY BACKPLANE_LIBTORCH_CPU_TOLD)
if(NOT told)
  set_property(GLOBAL PROPERTY BACKPLANE_LIBTORCH_CPU_TOLD ON)
  message(STATUS "backplane: LibTorch ${BACKPLANE_TORCH_VERSION} (CPU) from ${BACKPLANE_TORCH_DIR}")
endif()
