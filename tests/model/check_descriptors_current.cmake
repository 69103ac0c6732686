# cmake -DPYTHON= -DSCRIPT= -DFRESH=<dir> -DCOMMITTED=<dir> -DMODEL_TYPES="a;b" -P ...
# Regenerates some architecture descriptors with the pinned transformers and compares them with
# the committed ones byte for byte (all 196 take minutes: a sample of the families). Without the
# generator's time limit: under a loaded ctest a search that converges in 150 s can pass 180 s,
# and a committed descriptor is checked, not skipped; ctest's TIMEOUT bounds a hang.
file(REMOVE_RECURSE ${FRESH})
execute_process(COMMAND ${PYTHON} ${SCRIPT} --time-limit 0 ${FRESH} ${MODEL_TYPES} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${SCRIPT} exited ${rc}")
endif()
foreach(model_type IN LISTS MODEL_TYPES)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${FRESH}/${model_type}.json
                          ${COMMITTED}/${model_type}.json RESULT_VARIABLE differs)
  if(differs)
    message(FATAL_ERROR "${COMMITTED}/${model_type}.json is not what the generator writes with "
                        "the pinned transformers: regenerate it with `${PYTHON} ${SCRIPT} "
                        "${COMMITTED} ${model_type}` and review the diff (fresh: ${FRESH})")
  endif()
endforeach()
message(STATUS "architecture descriptors ${MODEL_TYPES} match the pinned transformers")
