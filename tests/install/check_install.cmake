# Run by ctest: cmake -DBUILD_DIR=... -DPREFIX=... -P check_install.cmake
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()

foreach(path bin/hwprobe bin/export-module-tree lib/libbackplane.so lib/backplane/plugins/cpu.json
        lib/backplane/plugins/libbackplane-cpu.so lib/backplane/plugins/mps.json
        lib/backplane/plugins/libbackplane-mps.so include/backplane/plugin.h
        include/backplane/plugin_sdk.hpp include/backplane/runtime/runtime.hpp
        include/backplane/version.hpp lib/cmake/backplane/backplaneConfig.cmake
        lib/cmake/backplane/backplaneConfigVersion.cmake lib/cmake/backplane/backplane-targets.cmake
        lib/cmake/backplane/BackplanePlugin.cmake lib/pkgconfig/backplane.pc)
  if(NOT EXISTS ${PREFIX}/${path})
    message(FATAL_ERROR "not installed: ${path}")
  endif()
endforeach()
# Benchmarks stay in the build tree, and nothing installed points into the build tree.
if(EXISTS ${PREFIX}/bin/backplane-bench)
  message(FATAL_ERROR "backplane-bench was installed; benchmarks run from the build tree")
endif()
file(GLOB_RECURSE installed LIST_DIRECTORIES false ${PREFIX}/*)
foreach(file ${installed})
  if(IS_SYMLINK ${file})
    continue()
  endif()
  file(READ ${file} head LIMIT 4 HEX)
  if(head STREQUAL "7f454c46")  # ELF: its RUNPATH
    execute_process(COMMAND readelf -d ${file} OUTPUT_VARIABLE dynamic ERROR_QUIET)
    string(REGEX MATCH "R(UN)?PATH[^\n]*\[([^]]*)\]" runpath "${dynamic}")
    if(CMAKE_MATCH_2 MATCHES "^/|:/")
      message(FATAL_ERROR "${file} has the absolute RUNPATH ${CMAKE_MATCH_2}")
    endif()
  elseif(file MATCHES "\\.(cmake|pc|json)$")
    file(READ ${file} text)
    string(FIND "${text}" "${BUILD_DIR}" at)
    if(NOT at EQUAL -1 AND NOT file MATCHES "backplane-torch")
      message(FATAL_ERROR "${file} names the build tree ${BUILD_DIR}")
    endif()
  endif()
endforeach()

# Every plugin the build made, with its manifest.
file(GLOB manifests RELATIVE ${BUILD_DIR}/lib/backplane/plugins ${BUILD_DIR}/lib/backplane/plugins/*.json)
foreach(manifest ${manifests})
  file(READ ${BUILD_DIR}/lib/backplane/plugins/${manifest} text)
  string(JSON library GET "${text}" plugin library_path)
  foreach(path ${manifest} ${library})
    if(NOT EXISTS ${PREFIX}/lib/backplane/plugins/${path})
      message(FATAL_ERROR "not installed: lib/backplane/plugins/${path}")
    endif()
  endforeach()
endforeach()
# The installed manifests load: the installed hwprobe must see as many plugins as the build made.
list(LENGTH manifests built_plugins)

# A clean environment: no BACKPLANE_* variable may point the tool anywhere.
execute_process(COMMAND env -u BACKPLANE_PLUGIN_PATH -u BACKPLANE_ADD_PLUGIN_PATH
                        -u BACKPLANE_PLUGINS -u BACKPLANE_DISABLE_PLUGINS
                        ${PREFIX}/bin/hwprobe --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "installed hwprobe failed (${rc}): ${err}")
endif()
string(JSON plugin_count LENGTH "${out}" plugins)
if(plugin_count LESS built_plugins OR plugin_count LESS 2)
  message(FATAL_ERROR "installed hwprobe found ${plugin_count} plugins: ${out}")
endif()
math(EXPR last "${plugin_count} - 1")
foreach(i RANGE ${last})
  string(JSON name GET "${out}" plugins ${i} name)
  string(JSON status GET "${out}" plugins ${i} status)
  string(JSON library GET "${out}" plugins ${i} library)
  if(NOT status STREQUAL "loaded")
    message(FATAL_ERROR "installed plugin ${name} is ${status}")
  endif()
  string(FIND "${library}" "${PREFIX}/lib/backplane/plugins/" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "plugin ${name} was loaded from ${library}, not from the install prefix")
  endif()
endforeach()
message(STATUS "installed hwprobe loaded ${plugin_count} plugins from ${PREFIX}")
