# backplane_layer_kernel(NAME <name> SOURCES <src>... CPU_SOURCES <src>... CUDA_SOURCES <cu>...
#                        HEADERS <hdr>...)
#
# One layer-kernel family (rmsnorm, activation, rotary), from its folder:
#   backplane_<name>_args  SOURCES: the argument checks, plain C++, shared by both below
#   backplane_<name>_cpu   CPU_SOURCES: Highway kernels, runtime dispatch, never -march=native
#   backplane_<name>_cuda  CUDA_SOURCES compiled by nvcc for BACKPLANE_CUDA_ARCHITECTURES, with
#                          the static CUDA runtime; only when nvcc and the toolkit are found
# All static, PIC, hidden symbols; <name>/... and common/... included from kernels/.
# The .cu files go through nvcc by custom commands, as the attention kernels' do: the objects
# end up in libraries of other directories, and the CUDA language would have to be enabled at
# the top level.
include_guard(GLOBAL)

find_package(hwy 1.0 CONFIG QUIET)
if(NOT hwy_FOUND)
  backplane_skip("the CPU layer kernels (rmsnorm, activation, rotary)"
                 "need Highway (apt-get install libhwy-dev)")
endif()

include(BackplaneCudaArchitectures)
set(_backplane_layer_cuda OFF)
if(BACKPLANE_CUDA_KERNELS)
  backplane_find_cuda_toolkit()
  if(BACKPLANE_NVCC AND TARGET CUDA::cudart_static)
    set(_backplane_layer_cuda ON)
    backplane_cuda_gencode(_layer_gencode _layer_targets)
    set(_layer_cuda_flags -std=c++17 -O3 ${_layer_gencode}
        -Xcompiler=-fPIC,-fvisibility=hidden,-Wall,-Wextra)
    if(BACKPLANE_WARNINGS_AS_ERRORS)
      list(APPEND _layer_cuda_flags -Werror=all-warnings -Xcompiler=-Werror)
    endif()
    find_program(BACKPLANE_GPU_CCACHE ccache)
  else()
    backplane_skip("the CUDA layer kernels (rmsnorm, activation, rotary)"
                   "no CUDA toolkit (nvcc and the static CUDA runtime) was found")
  endif()
endif()

function(backplane_layer_kernel)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME" "SOURCES;CPU_SOURCES;CUDA_SOURCES;HEADERS")
  set(args backplane_${arg_NAME}_args)
  add_library(${args} STATIC ${arg_SOURCES})
  set_target_properties(${args} PROPERTIES POSITION_INDEPENDENT_CODE ON
                        CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_link_libraries(${args} PUBLIC backplane_kernels_common PRIVATE backplane_warnings)

  if(hwy_FOUND)
    set(cpu backplane_${arg_NAME}_cpu)
    add_library(${cpu} STATIC ${arg_CPU_SOURCES})
    set_target_properties(${cpu} PROPERTIES POSITION_INDEPENDENT_CODE ON
                          CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
    target_link_libraries(${cpu} PUBLIC ${args} hwy::hwy PRIVATE backplane_warnings)
    # Full optimization for the kernels whatever the build type's default.
    target_compile_options(${cpu} PRIVATE $<$<NOT:$<CONFIG:Debug>>:-O3>)
  endif()

  if(_backplane_layer_cuda)
    set(objects "")
    set(headers ${arg_HEADERS})
    list(TRANSFORM headers PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
    list(APPEND headers ${PROJECT_SOURCE_DIR}/kernels/common/tensor.hpp
         ${PROJECT_SOURCE_DIR}/kernels/common/status.hpp
         ${PROJECT_SOURCE_DIR}/kernels/common/cuda_rows.cuh)
    set(includes -I${PROJECT_SOURCE_DIR}/kernels)
    if(NOT BACKPLANE_DLPACK_INCLUDE_DIR STREQUAL "/usr/include")
      list(APPEND includes -I${BACKPLANE_DLPACK_INCLUDE_DIR})
    endif()
    foreach(source ${arg_CUDA_SOURCES})
      get_filename_component(name ${source} NAME_WE)
      set(object ${CMAKE_CURRENT_BINARY_DIR}/cuda/${name}.o)
      add_custom_command(OUTPUT ${object}
        COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/cuda
        COMMAND ${BACKPLANE_GPU_CCACHE} ${BACKPLANE_NVCC} ${_layer_cuda_flags} ${includes}
                -c ${CMAKE_CURRENT_SOURCE_DIR}/${source} -o ${object}
        DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${source} ${headers}
        COMMENT "nvcc: ${arg_NAME}/${source}"
        COMMAND_EXPAND_LISTS VERBATIM)
      list(APPEND objects ${object})
    endforeach()
    set_source_files_properties(${objects} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
    set(cuda backplane_${arg_NAME}_cuda)
    add_library(${cuda} STATIC ${objects})
    set_target_properties(${cuda} PROPERTIES LINKER_LANGUAGE CXX)
    target_link_libraries(${cuda} PUBLIC ${args} CUDA::cudart_static)
  endif()
endfunction()

# backplane_kernel_package(NAME <name> OPS <op>... LAYERS <Layer>=<op>...
#                          [BACKWARD_CPU <Layer>=<backward op>...]
#                          [BACKWARD_CUDA <Layer>=<backward op>...])
#
# A layer listed for a variant's BACKWARD_* has a backward there (has_backward, usable in
# training mode): its backward op is one more function of that variant, which package.cpp
# registers for that device.
# The hub package backplane/<name> (hub/README.md) in the build tree, from <name>/package.cpp:
#   <build>/hub-packages/backplane/<name>/build/<variant>/{libbackplane_<name>.so,metadata.json}
# one cpu variant (cxx11-cpu-<cpu>-<os>) and, when the CUDA kernels are built, one cuda variant
# (cxx11-cu<major><minor>-<cpu>-<os>). `kernel-hub install <build>/hub-packages/backplane/<name>`
# installs it. Each library is a plugin-ABI module exporting only backplane_plugin_get_api.
# BACKPLANE_PACKAGE_LICENSE (BackplaneOptions.cmake) is written into their metadata.json.

function(backplane_kernel_package)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME" "OPS;LAYERS;BACKWARD_CPU;BACKWARD_CUDA")
  string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" cpu)
  if(cpu STREQUAL "amd64")
    set(cpu x86_64)
  endif()
  string(TOLOWER "${CMAKE_SYSTEM_NAME}" os)
  set(cxx_abi cxx11)
  if(CMAKE_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
    set(cxx_abi cxx98)
  endif()
  set(root ${PROJECT_BINARY_DIR}/hub-packages/backplane/${arg_NAME}/build)

  set(variants "")
  if(TARGET backplane_${arg_NAME}_cpu)
    list(APPEND variants cpu)
  endif()
  if(TARGET backplane_${arg_NAME}_cuda)
    list(APPEND variants cuda)
  endif()
  if(NOT TARGET backplane_kernel_packages)
    add_custom_target(backplane_kernel_packages ALL)
  endif()
  foreach(variant ${variants})
    set(functions_json "")
    if(variant STREQUAL "cpu")
      set(folder ${cxx_abi}-cpu-${cpu}-${os})
      set_property(GLOBAL PROPERTY BACKPLANE_KERNEL_PACKAGE_CPU_VARIANT ${folder})
      set(backend_json "{\"name\": \"cpu\"}")
      set(archs_json "\"${cpu}\"")
      set(min_cc "")
    else()
      set(cuda_version ${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR})
      set(folder ${cxx_abi}-cu${CUDAToolkit_VERSION_MAJOR}${CUDAToolkit_VERSION_MINOR}-${cpu}-${os})
      set(backend_json "{\"name\": \"cuda\", \"version\": \"${cuda_version}\"}")
      set(archs "")
      # The package runs on the families it has machine code for (sm_90a counts as sm_90).
      backplane_cuda_gencode(unused_gencode cuda_targets)
      foreach(target ${cuda_targets})
        if(target MATCHES "^sm_([0-9]+)")
          list(APPEND archs "\"sm_${CMAKE_MATCH_1}\"")
        endif()
      endforeach()
      list(REMOVE_DUPLICATES archs)
      list(JOIN archs ", " archs_json)
      set(min_cc ", \"min_compute_capability\": \"8.0\"")
    endif()
    string(TOUPPER ${variant} upper)
    set(backward_ops "")
    set(layers_json "")
    foreach(layer ${arg_LAYERS})
      string(REPLACE "=" ";" pair ${layer})
      list(GET pair 0 layer_name)
      list(GET pair 1 layer_op)
      set(backward "\"has_backward\": false")
      foreach(entry ${arg_BACKWARD_${upper}})
        if(entry MATCHES "^${layer_name}=(.+)$")
          set(backward "\"has_backward\": true, \"backward_function\": \"${CMAKE_MATCH_1}\"")
          list(APPEND backward_ops ${CMAKE_MATCH_1})
        endif()
      endforeach()
      list(APPEND layers_json
           "    {\"name\": \"${layer_name}\", \"function\": \"${layer_op}\", ${backward}}")
    endforeach()
    list(JOIN layers_json ",\n" layers_json)
    foreach(op ${arg_OPS} ${backward_ops})
      list(APPEND functions_json "    {\"name\": \"${op}\", \"op\": \"${op}\", \"device_type\": \
\"${variant}\", \"dtypes\": [\"float32\", \"bfloat16\", \"float16\"]${min_cc}}")
    endforeach()
    list(JOIN functions_json ",\n" functions_json)

    set(target backplane_${arg_NAME}_package_${variant})
    set(out_dir ${root}/${folder})
    add_library(${target} MODULE package.cpp)
    set(version_script ${CMAKE_CURRENT_BINARY_DIR}/${target}.map)
    file(WRITE ${version_script} "{ global: backplane_plugin_get_api; local: *; };\n")
    set_target_properties(${target} PROPERTIES PREFIX "lib" OUTPUT_NAME backplane_${arg_NAME}
      LIBRARY_OUTPUT_DIRECTORY ${out_dir} CXX_VISIBILITY_PRESET hidden
      VISIBILITY_INLINES_HIDDEN ON LINK_DEPENDS ${version_script})
    target_link_options(${target} PRIVATE "LINKER:--version-script=${version_script}"
                        "LINKER:--no-undefined")
    target_link_libraries(${target} PRIVATE backplane::plugin_sdk backplane_${arg_NAME}_${variant}
                          backplane_warnings)
    if(variant STREQUAL "cuda")
      target_compile_definitions(${target} PRIVATE BACKPLANE_PACKAGE_CUDA)
    endif()
    file(GENERATE OUTPUT ${out_dir}/metadata.json CONTENT
"{
  \"format\": 1,
  \"abi_version\": \"${_backplane_plugin_abi_version}\",
  \"repo_id\": \"backplane/${arg_NAME}\",
  \"version\": \"${PROJECT_VERSION}\",
  \"license\": \"${BACKPLANE_PACKAGE_LICENSE}\",
  \"backend\": ${backend_json},
  \"archs\": [${archs_json}],
  \"library\": \"libbackplane_${arg_NAME}.so\",
  \"functions\": [
${functions_json}
  ],
  \"layers\": [
${layers_json}
  ]
}
")
    add_dependencies(backplane_kernel_packages ${target})
    set_property(GLOBAL APPEND PROPERTY BACKPLANE_KERNEL_PACKAGE_VARIANTS
                 "backplane/${arg_NAME}=${out_dir}")
    set_property(GLOBAL APPEND PROPERTY BACKPLANE_KERNEL_PACKAGE_TARGETS ${target})
  endforeach()
endfunction()

# The list of packages this build produced, with every file's hash (hub/README.md, "Trust and
# locks when loading"), beside libbackplane-hub: <lib>/backplane/trusted-packages.json. Call
# once, after every backplane_kernel_package().
function(backplane_trusted_packages_list)
  get_property(variants GLOBAL PROPERTY BACKPLANE_KERNEL_PACKAGE_VARIANTS)
  get_property(targets GLOBAL PROPERTY BACKPLANE_KERNEL_PACKAGE_TARGETS)
  if(NOT variants)
    return()
  endif()
  # The build tree keeps libraries in lib/ whatever CMAKE_INSTALL_LIBDIR is.
  set(output ${PROJECT_BINARY_DIR}/lib/backplane/trusted-packages.json)
  set(metadata "")
  foreach(entry ${variants})
    string(REGEX REPLACE "^[^=]*=" "" folder "${entry}")
    list(APPEND metadata ${folder}/metadata.json)
  endforeach()
  set(script ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/write_trusted_packages.cmake)
  add_custom_command(OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${output} "-DPACKAGES=${variants}" -P ${script}
    DEPENDS ${targets} ${metadata} ${script}
    COMMENT "Hashing the in-tree kernel packages into ${output}"
    VERBATIM)
  add_custom_target(backplane_trusted_packages ALL DEPENDS ${output})
  add_dependencies(backplane_kernel_packages backplane_trusted_packages)
  install(FILES ${output} DESTINATION ${CMAKE_INSTALL_LIBDIR}/backplane COMPONENT hub)
endfunction()
