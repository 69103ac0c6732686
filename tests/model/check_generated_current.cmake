# cmake -DPYTHON= -DSCRIPT= -DFRESH= -DCOMMITTED= -P check_generated_current.cmake
# Regenerates a data file written from the pinned transformers (SCRIPT FRESH) and compares it
# with the committed one.
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
message(STATUS "${COMMITTED} matches the pinned transformers")
