# The CUDA targets every nvcc-built part compiles for (the attention kernels, the layer kernels,
# the GPU check programs), in one place.
#
# BACKPLANE_CUDA_ARCHITECTURES: entries NN or NNa (machine code and PTX), NN[a]-real (machine
# code only), NN[a]-virtual (PTX only). An "a" target (90a) carries the instructions specific to
# that one architecture (Hopper's wgmma, setmaxnreg), which run on it alone, so it is paired with
# a plain target's PTX for the GPUs after it: "80-real;90a-real;90-virtual".
#
# backplane_cuda_gencode(<gencode var> <targets var>): nvcc's -gencode flags, and the targets'
# names ("sm_80 sm_90a compute_90"), for BACKPLANE_CUDA_ARCHITECTURES.
#
# backplane_find_cuda_toolkit(): BACKPLANE_NVCC (nvcc on PATH, $CUDA_PATH or /usr/local/cuda) and
# find_package(CUDAToolkit) from nvcc's toolkit, in the calling directory (a macro: the imported
# CUDA:: targets are the caller's folder's). Afterwards TARGET CUDA::cudart_static says whether
# nvcc-built code can be linked.
include_guard(GLOBAL)

macro(backplane_find_cuda_toolkit)
  find_program(BACKPLANE_NVCC nvcc HINTS ENV CUDA_PATH PATH_SUFFIXES bin PATHS /usr/local/cuda/bin)
  if(BACKPLANE_NVCC)
    get_filename_component(_backplane_nvcc_bin ${BACKPLANE_NVCC} DIRECTORY)
    get_filename_component(_backplane_cuda_root ${_backplane_nvcc_bin} DIRECTORY)
    if(NOT CUDAToolkit_ROOT)
      set(CUDAToolkit_ROOT ${_backplane_cuda_root})
    endif()
    find_package(CUDAToolkit QUIET)
  endif()
endmacro()

# BACKPLANE_CUDA_ARCHITECTURES (BackplaneOptions.cmake) lists the targets.

function(backplane_cuda_gencode gencode_var targets_var)
  set(gencode "")
  set(targets "")
  foreach(arch ${BACKPLANE_CUDA_ARCHITECTURES})
    if(NOT arch MATCHES "^([0-9]+a?)(-real|-virtual)?$")
      message(FATAL_ERROR "BACKPLANE_CUDA_ARCHITECTURES: '${arch}' is not NN, NNa, NN[a]-real or "
                          "NN[a]-virtual (e.g. 80-real;90a-real;90-virtual)")
    endif()
    set(number ${CMAKE_MATCH_1})
    set(kind "${CMAKE_MATCH_2}")
    if(NOT kind STREQUAL "-virtual")
      list(APPEND gencode -gencode arch=compute_${number},code=sm_${number})
      list(APPEND targets sm_${number})
    endif()
    if(NOT kind STREQUAL "-real")
      list(APPEND gencode -gencode arch=compute_${number},code=compute_${number})
      list(APPEND targets compute_${number})
    endif()
  endforeach()
  set(${gencode_var} ${gencode} PARENT_SCOPE)
  set(${targets_var} ${targets} PARENT_SCOPE)
endfunction()
