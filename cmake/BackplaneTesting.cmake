# Testing for the whole tree, set up before any subdirectory so that every folder (backends/
# included) registers its tests where it builds them.
#
# backplane_add_test(NAME <name> SOURCES <src>... [LIBRARIES <lib>...] [ENVIRONMENT <VAR=value>...])
# One GoogleTest executable; its tests are discovered into ctest by name.
include_guard(GLOBAL)

enable_testing()
find_package(GTest 1.10 QUIET)
if(GTest_FOUND)
  set(BACKPLANE_TESTING ON)
  include(GoogleTest)
else()
  set(BACKPLANE_TESTING OFF)
  backplane_skip("the tests" "need GoogleTest (apt-get install libgtest-dev)")
endif()

# The tests that configure a project of their own against an installed prefix (tests/sdk,
# tests/docs) pass it this build's compiler launcher: -DLAUNCHER=<ccache>, or nothing.
find_program(BACKPLANE_CCACHE ccache)
set(BACKPLANE_SCRIPT_LAUNCHER "")
if(BACKPLANE_CCACHE)
  set(BACKPLANE_SCRIPT_LAUNCHER -DLAUNCHER=${BACKPLANE_CCACHE})
endif()

function(backplane_add_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME" "SOURCES;LIBRARIES;ENVIRONMENT")
  add_executable(${arg_NAME} ${arg_SOURCES})
  target_link_libraries(${arg_NAME} PRIVATE GTest::gtest_main ${arg_LIBRARIES} backplane_warnings)
  set(properties TIMEOUT 300)
  if(arg_ENVIRONMENT)
    list(APPEND properties ENVIRONMENT "${arg_ENVIRONMENT}")
  endif()
  gtest_discover_tests(${arg_NAME} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                       PROPERTIES ${properties})
endfunction()
