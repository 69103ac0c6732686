# backplane_kernel_builder_package(NAME <name> SOURCE <ops.cpp> KERNEL <cpu kernel library>
#                                  [CUDA_KERNEL <cuda kernel library>])
#
# The layer kernel <name> as a Hugging Face kernel-builder package, which the `kernels` Python
# library loads (get_kernel, get_local_kernel, kernelize; README.md here):
#   <build>/kernel-builder/backplane/<name>/build/<variant>/
#     _<name>_cpu_<rev>.abi3.so   SOURCE (a LibTorch extension, ops in torch.ops._<name>_cpu_<rev>)
#                                 + python_module.cpp (its empty abi3 module), over KERNEL
#     __init__.py, layers.py      python/<name>/ (the functions and the kernelize layers)
#     _ops.py                     python/_ops.py.in (the op namespace)
#     metadata.json               write_metadata.cmake: name, id, version, license, backend,
#                                 and the sha256 digest of every other file of the folder
# <variant> is torch<major><minor>-<cxx11|cxx98>-cpu-<cpu>-<os> of the LibTorch built against
# (cmake/LibTorchCpu.cmake), and, with CUDA_KERNEL, ...-cu<major><minor>-... beside it
# (_<name>_cuda_<rev>.abi3.so, CPU and CUDA implementations). <rev> is the first 7 hex digits
# of a SHA-256 over the project version, the variant and the package's sources here, so that
# two builds that differ load side by side (op namespaces are process-wide). Targets:
# backplane_kernel_builder_<name>_<cpu|cuda>, all in backplane_kernel_builder_packages (ALL).
include_guard(GLOBAL)

set(_backplane_kb_dir ${CMAKE_CURRENT_LIST_DIR})

# torch215-cxx11-<backend>-x86_64-linux for the LibTorch of this build; <backend> is cpu or
# cu<major><minor> (the CUDA toolkit's version: kernels takes it under a torch of the same major
# CUDA version and a minor at least as high).
function(backplane_kernel_builder_variant backend out)
  if(NOT BACKPLANE_TORCH_VERSION MATCHES "^([0-9]+)\\.([0-9]+)")
    message(FATAL_ERROR "backplane: cannot read a torch version from '${BACKPLANE_TORCH_VERSION}'")
  endif()
  set(torch torch${CMAKE_MATCH_1}${CMAKE_MATCH_2})
  if(BACKPLANE_TORCH_CXX11_ABI)
    set(abi cxx11)
  else()
    set(abi cxx98)
  endif()
  string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" cpu)
  if(cpu STREQUAL "amd64")
    set(cpu x86_64)
  elseif(cpu STREQUAL "arm64")
    set(cpu aarch64)
  endif()
  string(TOLOWER "${CMAKE_SYSTEM_NAME}" os)
  if(backend STREQUAL "cuda")
    set(backend cu${CUDAToolkit_VERSION_MAJOR}${CUDAToolkit_VERSION_MINOR})
  endif()
  set(${out} ${torch}-${abi}-${backend}-${cpu}-${os} PARENT_SCOPE)
endfunction()

# The "archs" of a cuda variant's metadata, kernels' compute capabilities, from
# BACKPLANE_CUDA_ARCHITECTURES: 80-real is "8.0" (machine code), 90 and 90-virtual "9.0+PTX"
# (PTX, which runs on later GPUs too), 90a-real "9.0a".
function(backplane_kernel_builder_cuda_archs out)
  set(archs "")
  foreach(arch ${BACKPLANE_CUDA_ARCHITECTURES})
    if(NOT arch MATCHES "^([0-9]+)([0-9])(a?)(-real|-virtual)?$")
      message(FATAL_ERROR "BACKPLANE_CUDA_ARCHITECTURES: '${arch}' is not NN, NNa, NN[a]-real or "
                          "NN[a]-virtual")
    endif()
    set(capability "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}${CMAKE_MATCH_3}")
    if(CMAKE_MATCH_4 STREQUAL "-real")
      list(APPEND archs "\"${capability}\"")
    else()
      list(APPEND archs "\"${capability}+PTX\"")
    endif()
  endforeach()
  list(JOIN archs ", " archs)
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()

# backplane_kernel_builder_package(NAME <name> SOURCE <ops.cpp> KERNEL <cpu kernel library>
#                                  [CUDA_KERNEL <cuda kernel library>])
# The cpu variant; with CUDA_KERNEL (when it was built) the cuda variant too, whose extension
# registers the CUDA implementations beside the CPU ones.
function(backplane_kernel_builder_package)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME;SOURCE;KERNEL;CUDA_KERNEL" "")
  _backplane_kernel_builder_variant(${arg_NAME} cpu ${arg_SOURCE} ${arg_KERNEL})
  if(arg_CUDA_KERNEL AND TARGET ${arg_CUDA_KERNEL} AND BACKPLANE_KERNEL_BUILDER_CUDA)
    _backplane_kernel_builder_variant(${arg_NAME} cuda ${arg_SOURCE}
                                      "${arg_KERNEL};${arg_CUDA_KERNEL}")
  endif()
endfunction()

function(_backplane_kernel_builder_variant name backend ops_source kernels)
  backplane_kernel_builder_variant(${backend} variant)
  set(root ${PROJECT_BINARY_DIR}/kernel-builder/backplane/${name})
  set(dir ${root}/build/${variant})

  set(python_dir ${_backplane_kb_dir}/python)
  set(python_sources ${python_dir}/${name}/__init__.py ${python_dir}/${name}/layers.py)
  set(source ${CMAKE_CURRENT_SOURCE_DIR}/${ops_source})
  set(rev_inputs ${source} ${python_sources} ${python_dir}/_ops.py.in
      ${_backplane_kb_dir}/python_module.cpp ${_backplane_kb_dir}/tensor_view.hpp)
  set(hash_input "${PROJECT_VERSION}\n${variant}\n")
  foreach(file ${rev_inputs})
    file(READ ${file} content)
    string(APPEND hash_input "${content}")
  endforeach()
  string(SHA256 rev "${hash_input}")
  string(SUBSTRING "${rev}" 0 7 rev)
  # A new rev needs a new configure: these files are read here.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${rev_inputs})
  set(id _${name}_${backend}_${rev})

  # The extension: the LibTorch ops and the Python module that loads them.
  set(ext backplane_kernel_builder_${name}_${backend}_ext)
  add_library(${ext} MODULE ${source} ${_backplane_kb_dir}/python_module.cpp)
  set(version_script ${CMAKE_CURRENT_BINARY_DIR}/${ext}.map)
  # Written only when it changes (a reconfigure must not relink every package).
  file(CONFIGURE OUTPUT ${version_script} CONTENT "{ global: PyInit_${id}; local: *; };\n")
  set_target_properties(${ext} PROPERTIES
    PREFIX "" OUTPUT_NAME ${id} SUFFIX ".abi3.so" LIBRARY_OUTPUT_DIRECTORY ${dir}
    CXX_STANDARD 20 CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    # No RPATH: LibTorch is the one `import torch` loaded before the extension.
    SKIP_BUILD_RPATH ON LINK_DEPENDS ${version_script})
  target_compile_definitions(${ext} PRIVATE BACKPLANE_OPS_ID=${id} Py_LIMITED_API=0x03090000)
  target_include_directories(${ext} PRIVATE ${PROJECT_SOURCE_DIR}/kernels)
  target_include_directories(${ext} SYSTEM PRIVATE ${BACKPLANE_PYTHON_INCLUDE_DIR})
  target_link_libraries(${ext} PRIVATE ${kernels} backplane_libtorch_cpu backplane_warnings)
  if(backend STREQUAL "cuda")
    target_compile_definitions(${ext} PRIVATE BACKPLANE_KERNEL_BUILDER_CUDA)
    target_include_directories(${ext} SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
    target_link_libraries(${ext} PRIVATE ${BACKPLANE_TORCH_DIR}/lib/libc10_cuda.so)
    backplane_kernel_builder_cuda_archs(archs)
    set(backend_json "{\n    \"type\": \"cuda\",\n    \"archs\": [${archs}]\n  }")
  else()
    set(backend_json "{\n    \"type\": \"cpu\"\n  }")
  endif()
  # Bound at load like Hub builds (-z now); libpython stays unlinked, so no --no-undefined.
  target_link_options(${ext} PRIVATE "LINKER:-z,now" "LINKER:--version-script=${version_script}")

  # The Python files, copied at build time so that an edit refreshes them (and the digest).
  set(staging ${CMAKE_CURRENT_BINARY_DIR}/${name}-${backend})
  configure_file(${python_dir}/_ops.py.in ${staging}/_ops.py @ONLY)
  set(python_files ${python_sources} ${staging}/_ops.py)
  set(python_outputs "")
  set(file_names "")
  foreach(file ${python_files})
    get_filename_component(file_name ${file} NAME)
    list(APPEND python_outputs ${dir}/${file_name})
    list(APPEND file_names ${file_name})
  endforeach()
  add_custom_command(OUTPUT ${python_outputs}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${CMAKE_COMMAND} -E copy ${python_files} ${dir}
    DEPENDS ${python_files}
    COMMENT "kernel-builder package backplane/${name} (${backend}): the Python files"
    VERBATIM)
  list(APPEND file_names ${id}.abi3.so)
  list(SORT file_names)

  # metadata.json last, over the files above: rebuilt whenever one of them is.
  set(script ${_backplane_kb_dir}/write_metadata.cmake)
  set(backend_file ${staging}/backend.json)
  file(CONFIGURE OUTPUT ${backend_file} CONTENT "${backend_json}")
  add_custom_command(OUTPUT ${dir}/metadata.json
    COMMAND ${CMAKE_COMMAND} -DDIR=${dir} "-DFILES=${file_names}" -DNAME=${name} -DID=${id}
            -DVERSION=1 "-DLICENSE=${BACKPLANE_PACKAGE_LICENSE}" -DBACKEND_FILE=${backend_file}
            -P ${script}
    DEPENDS ${ext} $<TARGET_FILE:${ext}> ${python_outputs} ${script} ${backend_file}
    COMMENT "kernel-builder package backplane/${name} (${backend}): metadata.json with the digest"
    VERBATIM)
  set(target backplane_kernel_builder_${name}_${backend})
  add_custom_target(${target} ALL DEPENDS ${dir}/metadata.json)
  if(NOT TARGET backplane_kernel_builder_packages)
    add_custom_target(backplane_kernel_builder_packages ALL)
  endif()
  add_dependencies(backplane_kernel_builder_packages ${target})
  # For tests/kernel_builder: the variants built.
  set_property(GLOBAL APPEND PROPERTY BACKPLANE_KERNEL_BUILDER_VARIANTS ${variant})
endfunction()
