# Every option and cache setting of the build, declared once. The files that act on them say
# what each does in detail; `cmake -LH build` lists them with these help strings.
include_guard(GLOBAL)

# Default ON only where backplane is the top-level project: under add_subdirectory() the parent
# asks for tests, tools and benchmarks itself.
if(PROJECT_IS_TOP_LEVEL)
  set(_backplane_top ON)
else()
  set(_backplane_top OFF)
endif()

# ---- what is built ----
option(BACKPLANE_BUILD_TESTS "Build the test suite" ${_backplane_top})
option(BACKPLANE_BUILD_TOOLS "Build the tools: hwprobe, kernel-hub and export-module-tree"
       ${_backplane_top})
option(BACKPLANE_BUILD_BENCHMARKS "Build the benchmarks (bench/)" ${_backplane_top})
option(BACKPLANE_GPU_CHECKS "Build the programs of tests/gpu (they need a GPU to run)" OFF)
option(BACKPLANE_FUZZ "Build the libFuzzer targets (needs clang; see tests/fuzz/run_fuzzers.sh)"
       OFF)
set(BACKPLANE_FUZZ_SECONDS 10 CACHE STRING "Seconds the ctest `fuzz` runs each fuzz target")
option(BACKPLANE_CUDA_KERNELS "Build the CUDA kernels (attention and layers) when a CUDA \
toolkit is found" ON)
option(BACKPLANE_HIP_KERNELS "Build the HIP attention kernels when hipcc works" ON)

# ---- how ----
option(BACKPLANE_WARNINGS_AS_ERRORS "Treat compiler warnings as errors (CI)" OFF)
set(BACKPLANE_SANITIZE "" CACHE STRING "Sanitizers: empty, address,undefined or thread")
set_property(CACHE BACKPLANE_SANITIZE PROPERTY STRINGS "" "address,undefined" "thread")
set(BACKPLANE_CUDA_ARCHITECTURES "80-real;90" CACHE STRING
    "CUDA targets: NN or NNa (machine code and PTX), NN[a]-real (machine code), NN[a]-virtual (PTX)")
set(BACKPLANE_HIP_ARCHITECTURES "gfx90a;gfx942" CACHE STRING "AMD GPU targets for hipcc")
set(BACKPLANE_LIBTORCH auto CACHE STRING "LibTorch of backplane::torch: auto, wheel, system or off")
set_property(CACHE BACKPLANE_LIBTORCH PROPERTY STRINGS auto wheel system off)
set(BACKPLANE_PYTHON "" CACHE FILEPATH
    "Python of the oracle venv (tests/python/venv.sh); empty skips the differential tests")
set(BACKPLANE_PACKAGE_LICENSE "NOASSERTION" CACHE STRING
    "SPDX license expression written into the in-tree kernel packages' metadata.json")
