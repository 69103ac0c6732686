# Run by ctest (tests/sdk): a vendor's path with the installed SDK and nothing of this tree.
#   cmake -DBUILD_DIR=<backplane build> -DWORK=<scratch folder>
#         -DGENERATOR=<generator> -DCTEST=<ctest> [-DLAUNCHER=<ccache>] -P check_out_of_tree.cmake
# 1. cmake --install the SDK's components into WORK/prefix; 2. build the example plugin the SDK
# installs (share/backplane/example) as its own project against it (its tests: the conformance
# suite and the device-file table) and install it into
# WORK/vendor; 3. the installed hwprobe, with BACKPLANE_ADD_PLUGIN_PATH, lists the NPUs, selects
# one for training and resolves attention to the plugin's kernel; 4. a program built with
# pkg-config's flags alone links libbackplane and runs.
# The example's build folder is kept between runs (incremental); the prefixes are remade.
set(prefix ${WORK}/prefix)
set(vendor ${WORK}/vendor)
set(example_build ${WORK}/installed-example-build)
set(EXAMPLE_DIR ${prefix}/share/backplane/example)

include(${CMAKE_CURRENT_LIST_DIR}/script_helpers.cmake)

function(expect_equal what actual expected)
  if(NOT "${actual}" STREQUAL "${expected}")
    message(FATAL_ERROR "${what}: got '${actual}', expected '${expected}'")
  endif()
endfunction()

file(REMOVE_RECURSE ${prefix} ${vendor})
# What the Debian packages hold is enough for a vendor.
install_packaged_components(${BUILD_DIR} ${prefix})
foreach(path lib/cmake/backplane/backplaneConfig.cmake
        lib/cmake/backplane/backplaneConfigVersion.cmake
        lib/cmake/backplane/backplane-targets.cmake lib/cmake/backplane/BackplanePlugin.cmake
        lib/cmake/backplane/backplane-conformance-targets.cmake lib/pkgconfig/backplane.pc
        lib/libbackplane_conformance.a include/backplane/conformance.hpp
        include/backplane/plugin.h include/backplane/plugin_sdk.hpp bin/hwprobe
        share/backplane/example/CMakeLists.txt share/backplane/example/src/npu_plugin.cpp
        share/backplane/conformance/conformance.cpp share/backplane/topologies/h100x8.json)
  if(NOT EXISTS ${prefix}/${path})
    message(FATAL_ERROR "not installed: ${path}")
  endif()
endforeach()

# The vendor's build: only find_package(backplane) from the prefix.
set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
run(${CMAKE_COMMAND} -S ${EXAMPLE_DIR} -B ${example_build} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEXAMPLE_NPU_TESTS=ON
    -DEXAMPLE_NPU_WARNINGS_AS_ERRORS=ON ${launcher})
run(${CMAKE_COMMAND} --build ${example_build})
run(${CMAKE_COMMAND} --install ${example_build} --prefix ${vendor})
run(${CTEST} --test-dir ${example_build} --output-on-failure)
string(REGEX MATCH "[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+" passed "${out}")
message(STATUS "example_npu's own tests (conformance suite included): ${passed}")

set(plugins ${vendor}/lib/backplane/plugins)
foreach(path ${plugins}/example_npu.json ${plugins}/libbackplane-example_npu.so
        ${vendor}/share/example_npu/devices.conf)
  if(NOT EXISTS ${path})
    message(FATAL_ERROR "the example's install lacks ${path}")
  endif()
endforeach()
# backplane_add_plugin's promise: the entry symbol is the only one exported.
run(nm -D --defined-only ${plugins}/libbackplane-example_npu.so)
string(REGEX MATCHALL "[^\n]+" exported "${out}")
list(LENGTH exported count)
if(NOT count EQUAL 1 OR NOT exported MATCHES " T backplane_plugin_get_api$")
  message(FATAL_ERROR "libbackplane-example_npu.so exports ${count} symbols: ${out}")
endif()

# The installed hwprobe, the vendor's folder added, nothing else pointing anywhere.
set(clean_env ${CMAKE_COMMAND} -E env --unset=BACKPLANE_PLUGIN_PATH --unset=BACKPLANE_PLUGINS
    --unset=BACKPLANE_DISABLE_PLUGINS --unset=BACKPLANE_SIM_TOPOLOGY
    BACKPLANE_ADD_PLUGIN_PATH=${plugins})
set(with_devices ${clean_env} EXAMPLE_NPU_CONFIG=${vendor}/share/example_npu/devices.conf)
run(${with_devices} ${prefix}/bin/hwprobe --json)
set(report "${out}")
string(JSON count LENGTH "${report}" plugins)
math(EXPR last "${count} - 1")
set(found_plugin OFF)
foreach(i RANGE ${last})
  string(JSON name GET "${report}" plugins ${i} name)
  if(name STREQUAL "example_npu")
    string(JSON status GET "${report}" plugins ${i} status)
    string(JSON library GET "${report}" plugins ${i} library)
    expect_equal("example_npu status" "${status}" loaded)
    expect_equal("example_npu library" "${library}" ${plugins}/libbackplane-example_npu.so)
    set(found_plugin ON)
  endif()
endforeach()
if(NOT found_plugin)
  message(FATAL_ERROR "hwprobe did not see example_npu: ${report}")
endif()
string(JSON count LENGTH "${report}" backends)
math(EXPR last "${count} - 1")
set(npu_backend "")
foreach(i RANGE ${last})
  string(JSON type GET "${report}" backends ${i} type)
  if(type STREQUAL "npu")
    string(JSON npu_backend GET "${report}" backends ${i})
  endif()
endforeach()
foreach(field_value "plugin;example_npu" "available;ON" "training_priority;50"
        "collective_backend;hccl" "automatic_placement;ON" "accelerator;ON")
  list(GET field_value 0 field)
  list(GET field_value 1 expected)
  string(JSON value GET "${npu_backend}" ${field})
  expect_equal("npu backend ${field}" "${value}" "${expected}")
endforeach()
set(npu_devices "")
string(JSON count LENGTH "${report}" devices)
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON device GET "${report}" devices ${i} device)
  if(device MATCHES "^npu")
    string(JSON name GET "${report}" devices ${i} name)
    string(JSON memory GET "${report}" devices ${i} memory_total)
    expect_equal("${device} name" "${name}" "Example NPU N1")
    expect_equal("${device} memory" "${memory}" 17179869184)
    list(APPEND npu_devices ${device})
  endif()
endforeach()
expect_equal("NPUs listed" "${npu_devices}" "npu:0;npu:1")
set(kernel_found OFF)
string(JSON count LENGTH "${report}" kernels)
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON kernel GET "${report}" kernels ${i})
  string(JSON type GET "${kernel}" device_type)
  string(JSON plugin GET "${kernel}" plugin)
  if(type STREQUAL "npu" AND plugin STREQUAL "example_npu")
    set(kernel_found ON)
  endif()
endforeach()
if(NOT kernel_found)
  message(FATAL_ERROR "no npu kernel of example_npu listed: ${report}")
endif()
# The default Hub substitution: RMSNorm on npu:0 when inferring.
set(layer_kernel "")
string(JSON count LENGTH "${report}" layer_kernels)
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON device GET "${report}" layer_kernels ${i} device)
  string(JSON layer GET "${report}" layer_kernels ${i} layer)
  if(device STREQUAL "npu:0" AND layer STREQUAL "RMSNorm")
    string(JSON layer_kernel GET "${report}" layer_kernels ${i} inference kernel)
  endif()
endforeach()
if(NOT layer_kernel MATCHES "^example-vendor/npu-layers")
  message(FATAL_ERROR "RMSNorm on npu:0 (inference) maps to '${layer_kernel}', not "
                      "example-vendor/npu-layers: ${report}")
endif()

# The text report shows the plugin's own properties as it gives them: cores, no threads or NUMA.
run(${with_devices} ${prefix}/bin/hwprobe)
if(NOT out MATCHES "npu:0 +Example NPU N1 +16.0 GiB +en1; 8 cores\n")
  message(FATAL_ERROR "hwprobe's text report shows npu:0 as: ${out}")
endif()
if(out MATCHES " threads, ")
  string(REGEX MATCH "npu:0[^\n]*" line "${out}")
  if(line MATCHES "threads")
    message(FATAL_ERROR "npu:0 shows threads it does not report: ${line}")
  endif()
endif()

# Training selection takes the NPU (priority 50, before the cpu's 1000).
run(${with_devices} ${prefix}/bin/hwprobe select --for training --json)
string(JSON device GET "${out}" device)
expect_equal("training device" "${device}" npu:0)
# Launched as rank 1 of 2 by torchrun, it uses the plugin's collective backend.
run(${with_devices} RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 ${prefix}/bin/hwprobe select --for training
    --json)
string(JSON device GET "${out}" device)
string(JSON backend GET "${out}" collective_backend)
expect_equal("rank 1's training device" "${device}" npu:1)
expect_equal("rank 1's collective backend" "${backend}" hccl)

# Attention resolution on npu:0: the default falls back to the plugin's eager kernel.
run(${with_devices} ${prefix}/bin/hwprobe attention --device npu:0 --json)
string(JSON implementation GET "${out}" devices 0 resolutions 0 implementation)
string(JSON plugin GET "${out}" devices 0 resolutions 0 kernel plugin)
expect_equal("default attention on npu:0" "${implementation}" eager)
expect_equal("attention kernel's plugin" "${plugin}" example_npu)

# Without its device file the plugin loads and says why the NPU is unavailable.
run(${clean_env} --unset=EXAMPLE_NPU_CONFIG ${prefix}/bin/hwprobe --json)
string(JSON count LENGTH "${out}" backends)
math(EXPR last "${count} - 1")
set(reason "")
foreach(i RANGE ${last})
  string(JSON type GET "${out}" backends ${i} type)
  if(type STREQUAL "npu")
    string(JSON reason GET "${out}" backends ${i} reason)
  endif()
endforeach()
if(NOT reason MATCHES "EXAMPLE_NPU_CONFIG is not set")
  message(FATAL_ERROR "npu without a device file: reason '${reason}'")
endif()

# pkg-config alone: compile, link and run a host program against the prefix.
file(WRITE ${WORK}/pc_probe.cpp
"#include <backplane/runtime/runtime.hpp>
#include <iostream>
int main() {
  backplane::Runtime rt = backplane::Runtime::open();
  std::cout << rt.devices().size() << \" devices\\n\";
  return rt.devices().empty() ? 1 : 0;
}
")
run(${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${prefix}/lib/pkgconfig
    pkg-config --cflags --libs backplane)
separate_arguments(flags UNIX_COMMAND "${out}")
run(c++ -std=c++17 ${WORK}/pc_probe.cpp -o ${WORK}/pc_probe ${flags} -Wl,-rpath,${prefix}/lib)
run(${clean_env} ${WORK}/pc_probe)
message(STATUS "pkg-config program: ${out}")
