# Helpers of the tests/sdk check scripts (cmake -P).

# run(<command> <args>...): runs it; a failure stops the script with the command, its output
# and its errors. Its standard output is left in `out`.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " command)
    message(FATAL_ERROR "failed (${rc}): ${command}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

# install_packaged_components(<build folder> <prefix> [<extra component>...]): cmake --install,
# component by component, of what the Debian packages hold (CPACK_COMPONENTS_ALL: what a
# vendor or a user gets from them), plus the extra ones (torch, which no package holds). Leaves
# the packaged list in `components`.
function(install_packaged_components build prefix)
  file(STRINGS ${build}/CPackConfig.cmake line REGEX "^set\\(CPACK_COMPONENTS_ALL ")
  string(REGEX REPLACE "^set\\(CPACK_COMPONENTS_ALL \"([^\"]*)\"\\)$" "\\1" packaged "${line}")
  string(REPLACE "\\;" ";" packaged "${packaged}")  # file(STRINGS) escapes list separators
  if(NOT packaged)
    message(FATAL_ERROR "no CPACK_COMPONENTS_ALL in ${build}/CPackConfig.cmake")
  endif()
  foreach(component ${packaged} ${ARGN})
    run(${CMAKE_COMMAND} --install ${build} --prefix ${prefix} --component ${component})
  endforeach()
  set(components "${packaged}" PARENT_SCOPE)
endfunction()
