# cmake -DPYTHON= -DSCRIPT= -DFRESH= -DCOMMITTED= -P check_renames_current.cmake
# Regenerates the checkpoint renames with the pinned transformers and compares.
execute_process(COMMAND ${PYTHON} ${SCRIPT} ${FRESH} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${SCRIPT} exited ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${FRESH} ${COMMITTED}
                RESULT_VARIABLE differs)
if(differs)
  message(FATAL_ERROR "${COMMITTED} is not what the pinned transformers does: regenerate it with "
                      "`${PYTHON} ${SCRIPT} ${COMMITTED}` and review the diff (fresh: ${FRESH})")
endif()
message(STATUS "checkpoint renames match the pinned transformers")
