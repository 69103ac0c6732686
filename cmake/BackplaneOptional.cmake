# backplane_skip(<part> <reason>): one clear configure message for an optional part whose
# dependency is missing; the rest of the build goes on.
include_guard(GLOBAL)

function(backplane_skip part reason)
  message(STATUS "backplane: skipping ${part}: ${reason}")
  set_property(GLOBAL APPEND PROPERTY BACKPLANE_SKIPPED_PARTS "${part}")
endfunction()
