# ctest's torch_bridge_system_libtorch: configure (once), build (incrementally) and run the
# bridge's tests against Debian's LibTorch. Arguments: see ../CMakeLists.txt.
if(NOT EXISTS ${BINARY_DIR}/CMakeCache.txt)
  set(launcher "")
  if(CCACHE)
    set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CCACHE})
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G Ninja
            -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTorch_DIR=${Torch_DIR}
            -DBACKPLANE_SOURCE_DIR=${BACKPLANE_SOURCE_DIR}
            -DBACKPLANE_BINARY_DIR=${BACKPLANE_BINARY_DIR} -DBACKPLANE_CORE=${BACKPLANE_CORE}
            -DBACKPLANE_PLUGIN_BUILD_DIR=${BACKPLANE_PLUGIN_BUILD_DIR}
            -DBACKPLANE_WARNINGS_AS_ERRORS=${BACKPLANE_WARNINGS_AS_ERRORS} ${launcher}
    RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    file(REMOVE ${BINARY_DIR}/CMakeCache.txt)  # configure again next time
    message(FATAL_ERROR "configuring ${SOURCE_DIR} against Debian's LibTorch failed")
  endif()
endif()
# Two jobs: each LibTorch source needs over 1 GB to compile.
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} --parallel 2
                RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "building the bridge and its tests against Debian's LibTorch failed")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env BACKPLANE_PLUGIN_PATH=${BACKPLANE_PLUGIN_BUILD_DIR}
          BACKPLANE_PLUGINS=cpu ${BINARY_DIR}/torch_bridge_test --gtest_brief=1
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "the bridge's tests against Debian's LibTorch failed (${result})")
endif()
