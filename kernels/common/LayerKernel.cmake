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

option(BACKPLANE_CUDA_KERNELS "Build the CUDA kernels when a CUDA toolkit is found" ON)
set(BACKPLANE_CUDA_ARCHITECTURES "80-real;90" CACHE STRING
    "CUDA targets: NN (SASS and PTX), NN-real (SASS), NN-virtual (PTX)")
set(_backplane_layer_cuda OFF)
if(BACKPLANE_CUDA_KERNELS)
  find_program(BACKPLANE_NVCC nvcc HINTS ENV CUDA_PATH PATH_SUFFIXES bin PATHS /usr/local/cuda/bin)
  if(BACKPLANE_NVCC)
    get_filename_component(_nvcc_bin ${BACKPLANE_NVCC} DIRECTORY)
    get_filename_component(_cuda_root ${_nvcc_bin} DIRECTORY)
    if(NOT CUDAToolkit_ROOT)
      set(CUDAToolkit_ROOT ${_cuda_root})
    endif()
    find_package(CUDAToolkit QUIET)
  endif()
  if(BACKPLANE_NVCC AND TARGET CUDA::cudart_static)
    set(_backplane_layer_cuda ON)
    set(_layer_gencode "")
    foreach(arch ${BACKPLANE_CUDA_ARCHITECTURES})
      if(NOT arch MATCHES "^([0-9]+)(-real|-virtual)?$")
        message(FATAL_ERROR "BACKPLANE_CUDA_ARCHITECTURES: '${arch}' is not NN, NN-real or "
                            "NN-virtual")
      endif()
      if(NOT CMAKE_MATCH_2 STREQUAL "-virtual")
        list(APPEND _layer_gencode -gencode arch=compute_${CMAKE_MATCH_1},code=sm_${CMAKE_MATCH_1})
      endif()
      if(NOT CMAKE_MATCH_2 STREQUAL "-real")
        list(APPEND _layer_gencode
             -gencode arch=compute_${CMAKE_MATCH_1},code=compute_${CMAKE_MATCH_1})
      endif()
    endforeach()
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
