# Run by ctest (tests/sdk) when the LibTorch bridge is built: an application's path to
# backplane::torch through the installed package, and nothing of this tree.
#   cmake -DBUILD_DIR=<backplane build> -DSOURCE_DIR=<tests/sdk> -DWORK=<scratch folder>
#         -DGENERATOR=<generator> [-DLAUNCHER=<ccache>] -P check_torch_consumer.cmake
# 1. cmake --install the packaged components and the torch component into WORK/prefix;
# 2. torch_consumer/ (find_package(backplane COMPONENTS torch)) builds and its attention through
#    the bridge matches LibTorch's composite;
# 3. with LibTorch out of reach, core_consumer/ (backplane::core alone) still configures, and
#    torch_consumer/ fails saying why;
# 4. against a LibTorch of another version, torch_consumer/ fails naming both versions.
# The consumer's build folder is kept between runs (incremental); the prefix is remade.
cmake_minimum_required(VERSION 3.25)  # IN_LIST, string(JSON) and the like in script mode
set(prefix ${WORK}/prefix)

include(${CMAKE_CURRENT_LIST_DIR}/script_helpers.cmake)

# configure_fails(<what> <build folder> <regex the error must match> <cmake arguments>...)
function(configure_fails what build expected)
  file(REMOVE_RECURSE ${build})
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/torch_consumer -B ${build}
                          -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${what}: torch_consumer configured, but should have failed\n${out}")
  endif()
  # CMake wraps long messages: compare with the line breaks and indentation taken out.
  string(REGEX REPLACE "\n *" " " err "${err}")
  if(NOT err MATCHES "${expected}")
    message(FATAL_ERROR "${what}: the error does not match '${expected}':\n${err}")
  endif()
  message(STATUS "${what}: refused as expected")
endfunction()

file(REMOVE_RECURSE ${prefix})
# The components the Debian packages hold (as check_out_of_tree.cmake installs them), plus torch,
# which no package holds (cmake/BackplanePackaging.cmake).
install_packaged_components(${BUILD_DIR} ${prefix} torch)
if(torch IN_LIST components)
  message(FATAL_ERROR "the torch component is in the Debian packages: ${components}")
endif()
set(config_dir ${prefix}/lib/cmake/backplane)
foreach(path ${config_dir}/backplane-torch.cmake ${config_dir}/backplane-torch-targets.cmake
        ${prefix}/lib/libbackplane_torch.a ${prefix}/include/backplane/torch.hpp
        ${prefix}/include/backplane/torch/attention.hpp)
  if(NOT EXISTS ${path})
    message(FATAL_ERROR "not installed: ${path}")
  endif()
endforeach()
file(STRINGS ${config_dir}/backplane-torch.cmake line
     REGEX "^set\\(_backplane_torch_built_version ")
string(REGEX REPLACE "^set\\(_backplane_torch_built_version \"([^\"]*)\"\\)$" "\\1" built_version
       "${line}")
if(NOT built_version MATCHES "^[0-9]+\\.[0-9]+")
  message(FATAL_ERROR "backplane-torch.cmake records no LibTorch version: '${line}'")
endif()

# The application: find_package(backplane COMPONENTS torch), then attention on the cpu plugin.
set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
set(consumer_build ${WORK}/torch-consumer-build)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/torch_consumer -B ${consumer_build} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=RelWithDebInfo ${launcher})
run(${CMAKE_COMMAND} --build ${consumer_build})
run(${CMAKE_COMMAND} -E env --unset=BACKPLANE_PLUGIN_PATH --unset=BACKPLANE_ADD_PLUGIN_PATH
    --unset=BACKPLANE_PLUGINS --unset=BACKPLANE_DISABLE_PLUGINS --unset=BACKPLANE_SIM_TOPOLOGY
    ${consumer_build}/torch_consumer)
message(STATUS "torch_consumer: ${out}")
if(NOT out MATCHES "plugin cpu device cpu:0 ")
  message(FATAL_ERROR "torch_consumer's attention did not run on the installed cpu plugin: ${out}")
endif()

# LibTorch out of reach: Torch_DIR names no LibTorch and find_package(Torch) is disabled.
set(no_torch -DTorch_DIR=${WORK}/no-libtorch -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON)
set(core_build ${WORK}/core-consumer-build)
file(REMOVE_RECURSE ${core_build})
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/core_consumer -B ${core_build} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} ${no_torch})
message(STATUS "core_consumer configured without LibTorch")
# The same settings do keep LibTorch out of reach: the torch consumer cannot configure.
configure_fails("torch_consumer without LibTorch" ${WORK}/torch-consumer-no-libtorch
                "backplane::torch needs the LibTorch ${built_version} it was built against"
                ${no_torch})

# Another LibTorch version: a stand-in LibTorch 0.0.1 (only its package files).
set(other ${WORK}/libtorch-0.0.1)
file(WRITE ${other}/TorchConfigVersion.cmake "set(PACKAGE_VERSION \"0.0.1\")\n"
     "set(PACKAGE_VERSION_COMPATIBLE TRUE)\n")
file(WRITE ${other}/TorchConfig.cmake "set(TORCH_INCLUDE_DIRS \"\")\n")
string(REPLACE "." "\\." built_pattern "${built_version}")
configure_fails("torch_consumer against LibTorch 0.0.1" ${WORK}/torch-consumer-other-libtorch
                "built against LibTorch ${built_pattern} .* but the LibTorch here is 0\\.0\\.1"
                -DTorch_DIR=${other})
