# Run by ctest (tests/docs): what a newcomer does with the READMEs, from an installed prefix and
# nothing of this tree but the READMEs and the build's kernel packages.
#   cmake -DBUILD_DIR=<backplane build> -DSOURCE_DIR=<repository> -DWORK=<scratch folder>
#         -DGENERATOR=<generator> -DPYTHON=<python3> [-DLAUNCHER=<ccache>] -P check_snippets.cmake
# 1. cmake --install every packaged component and torch into WORK/prefix;
# 2. the kernel-hub flow: the installed kernel-hub installs the in-tree packages into a fresh
#    store, `show` says they load without a lock (this build produced them), `resolve --load`
#    loads one;
# 3. every C++ snippet of README.md, plugins/README.md and hub/README.md becomes one project
#    (extract_snippets.py) built against the prefix: each program runs and exits 0 (the host
#    application, the LibTorch application, use_kernels on the store of step 2), each plugin is
#    loaded by the installed hwprobe, each conformance program passes.
# The snippets' build folder is kept between runs (incremental); the prefix and store are remade.
cmake_minimum_required(VERSION 3.25)
set(prefix ${WORK}/prefix)
set(store ${WORK}/store)
set(snippets ${WORK}/snippets)
set(snippets_build ${WORK}/snippets-build)

include(${SOURCE_DIR}/tests/sdk/script_helpers.cmake)

function(expect_match what text regex)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: expected to match '${regex}', got:\n${text}")
  endif()
endfunction()

# 1. The prefix.
file(REMOVE_RECURSE ${prefix} ${store})
install_packaged_components(${BUILD_DIR} ${prefix} torch)

# What a newcomer's shell has: the prefix's plugins, no project variables.
set(clean_env ${CMAKE_COMMAND} -E env --unset=BACKPLANE_PLUGIN_PATH --unset=BACKPLANE_PLUGINS
    --unset=BACKPLANE_DISABLE_PLUGINS --unset=BACKPLANE_SIM_TOPOLOGY
    --unset=BACKPLANE_ADD_PLUGIN_PATH --unset=BACKPLANE_TRUSTED_KERNELS
    --unset=BACKPLANE_LOCAL_KERNELS BACKPLANE_HUB_CACHE=${store})

# 2. The kernel-hub flow.
foreach(package rmsnorm activation rotary)
  run(${clean_env} ${prefix}/bin/kernel-hub install ${BUILD_DIR}/hub-packages/backplane/${package})
endforeach()
run(${clean_env} ${prefix}/bin/kernel-hub show backplane/rmsnorm)
expect_match("kernel-hub show backplane/rmsnorm" "${out}"
             "loads without a lock: yes, its files are exactly those of backplane/rmsnorm")
run(${clean_env} ${prefix}/bin/kernel-hub resolve backplane/rmsnorm --device cpu --load)
expect_match("kernel-hub resolve --load" "${out}" "rms_norm/rms_norm on cpu")
message(STATUS "kernel-hub: the in-tree packages install into ${store} and load")
# The Kernel Hub format (README "Kernel Hub packages from C++"): a kernel-builder package.
if(EXISTS ${BUILD_DIR}/kernel-builder/backplane/activation)
  run(${clean_env} ${prefix}/bin/kernel-hub install ${BUILD_DIR}/kernel-builder/backplane/activation
      --repo kernels-demo/activation)
endif()

# 3. The snippets.
run(${PYTHON} ${SOURCE_DIR}/tests/docs/extract_snippets.py ${snippets} ${SOURCE_DIR}/README.md
    ${SOURCE_DIR}/plugins/README.md ${SOURCE_DIR}/hub/README.md)
set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
run(${CMAKE_COMMAND} -S ${snippets} -B ${snippets_build} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=RelWithDebInfo ${launcher})
run(${CMAKE_COMMAND} --build ${snippets_build})

file(STRINGS ${snippets}/snippets.txt listing)
set(ran "")
foreach(entry ${listing})
  string(REPLACE " " ";" words "${entry}")
  list(GET words 0 kind)
  list(GET words 1 name)
  if(kind STREQUAL "program")
    run(${clean_env} ${snippets_build}/${name})
    message(STATUS "snippet ${name}:\n${out}")
  elseif(kind STREQUAL "plugin")
    set(with_plugin ${clean_env} BACKPLANE_ADD_PLUGIN_PATH=${snippets_build}/plugins)
    run(${with_plugin} ${prefix}/bin/hwprobe plugins)
    expect_match("hwprobe plugins with ${name}" "${out}" "${name} +[^\n]*loaded")
    run(${with_plugin} ${prefix}/bin/hwprobe)
    message(STATUS "hwprobe with snippet plugin ${name}:\n${out}")
    # Its own device type is known, and shows only the properties it gives.
    list(GET words 2 type)
    expect_match("hwprobe with ${name}" "${out}" "\n  ${type}:0 ")
    string(REGEX MATCH "\n  ${type}:0 [^\n]*" device_line "${out}")
    if(device_line MATCHES "threads|NUMA")
      message(FATAL_ERROR "${type}:0 shows properties its plugin does not give: ${device_line}")
    endif()
    run(${with_plugin} ${prefix}/bin/hwprobe parse ${type}:1)
    expect_match("hwprobe parse ${type}:1" "${out}" "type=${type} index=1")
  elseif(kind STREQUAL "conformance")
    run(${clean_env} ${snippets_build}/${name})
    expect_match("conformance snippet ${name}" "${out}" "PASSED")
    # Its plugin has no kernels: the kernel checks are skipped, not passed.
    expect_match("conformance snippet ${name}" "${out}"
                 "SKIPPED \\][^\n]*KernelsRunWithinTheirRequirements")
  endif()
  list(APPEND ran ${name})
endforeach()
list(LENGTH ran count)
message(STATUS "${count} README snippets built against ${prefix} and run: ${ran}")
