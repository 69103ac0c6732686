# Included from CMakeLists.txt when BACKPLANE_HIP_KERNELS is on: finds hipcc and the HIP
# runtime, asks hipcc which of BACKPLANE_HIP_ARCHITECTURES it can target (Debian's hipcc 5.2,
# on LLVM 15, knows gfx90a and gfx940 but not gfx942), and builds the kernels for those as
# libbackplane-rocm-attention.so next to the plugins. A missing or broken hipcc skips this part
# with one message; it never fails the build.
find_program(BACKPLANE_HIPCC hipcc PATHS /opt/rocm/bin)
find_library(BACKPLANE_AMDHIP64 NAMES amdhip64 PATHS /opt/rocm/lib)
if(NOT BACKPLANE_HIPCC OR NOT BACKPLANE_AMDHIP64)
  backplane_skip("the HIP attention kernels"
                 "hipcc or the HIP runtime (libamdhip64) was not found (apt-get install hipcc "
                 "libamdhip64-dev)")
  return()
endif()

set(probe_dir ${CMAKE_CURRENT_BINARY_DIR}/hip_probe)
file(MAKE_DIRECTORY ${probe_dir})
file(WRITE ${probe_dir}/probe.cu
  "#include <hip/hip_runtime.h>\n__global__ void probe(float* x) { x[threadIdx.x] += 1.0f; }\n")
set(hip_archs "")
set(hip_refused "")
foreach(arch ${BACKPLANE_HIP_ARCHITECTURES})
  execute_process(
    COMMAND ${BACKPLANE_HIPCC} -x hip --offload-arch=${arch} -c ${probe_dir}/probe.cu
            -o ${probe_dir}/probe_${arch}.o
    RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output
    TIMEOUT 120)
  if(result EQUAL 0)
    list(APPEND hip_archs ${arch})
  else()
    string(REGEX MATCH "error: [^\n]*" first_error "${output}")
    if(NOT first_error)
      set(first_error "exit status ${result}")
    endif()
    list(APPEND hip_refused "${arch} (${first_error})")
  endif()
endforeach()
if(hip_refused)
  list(JOIN hip_refused "; " refused_text)
  message(STATUS "backplane: hipcc (${BACKPLANE_HIPCC}) cannot target: ${refused_text}")
endif()
if(NOT hip_archs)
  backplane_skip("the HIP attention kernels"
                 "hipcc (${BACKPLANE_HIPCC}) targets none of ${BACKPLANE_HIP_ARCHITECTURES}")
  return()
endif()

list(JOIN hip_archs " " hip_targets_text)
set(hip_flags -x hip -std=c++17 -O3 -fPIC -fvisibility=hidden -Wall -Wextra
              "-DBACKPLANE_GPU_TARGETS=\"${hip_targets_text}\"")
foreach(arch ${hip_archs})
  list(APPEND hip_flags --offload-arch=${arch})
endforeach()
if(BACKPLANE_WARNINGS_AS_ERRORS)
  list(APPEND hip_flags -Werror)
endif()
backplane_gpu_compile(hip_objects hip ${BACKPLANE_HIPCC} ${hip_flags})
set_source_files_properties(${hip_objects} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)

# The module the rocm plugin opens when a kernel is first called: the plugin itself stays free
# of the HIP runtime, so it loads (and says why rocm is unavailable) where there is none.
set(module_map ${CMAKE_CURRENT_BINARY_DIR}/rocm_attention.map)
file(WRITE ${module_map} "{ global: backplane_rocm_attention_forward; local: *; };\n")
add_library(backplane-rocm-attention MODULE rocm_module.cpp ${hip_objects})
set_target_properties(backplane-rocm-attention PROPERTIES
  PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${BACKPLANE_PLUGIN_BUILD_DIR} LINKER_LANGUAGE CXX
  LINK_DEPENDS ${module_map})
target_link_options(backplane-rocm-attention PRIVATE "LINKER:--version-script=${module_map}"
                    "LINKER:--no-undefined")
target_link_libraries(backplane-rocm-attention PRIVATE backplane_attention_gpu_validate
                      backplane::plugin_sdk ${BACKPLANE_AMDHIP64} backplane_warnings)
install(TARGETS backplane-rocm-attention LIBRARY DESTINATION ${BACKPLANE_PLUGIN_INSTALL_DIR}
        COMPONENT plugin_rocm)
set(BACKPLANE_ROCM_ATTENTION_ARCHS "${hip_archs}" CACHE INTERNAL
    "the AMD archs libbackplane-rocm-attention.so has code for")
message(STATUS "backplane: HIP attention kernels for ${hip_targets_text} (${BACKPLANE_HIPCC})")
