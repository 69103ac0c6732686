# backplane_add_torch_bridge(<name> LIBTORCH <target> CXX_STANDARD <17|20>): the bridge's static
# library, compiled against one LibTorch. Used by torch/CMakeLists.txt and by the test project
# that builds the bridge against a second LibTorch (tests/torch/system_libtorch); both provide
# backplane::core and backplane_warnings.
include_guard(GLOBAL)

set(BACKPLANE_TORCH_BRIDGE_DIR ${CMAKE_CURRENT_LIST_DIR})

function(backplane_add_torch_bridge name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "LIBTORCH;CXX_STANDARD" "")
  # Few sources on purpose: each one that includes LibTorch takes about a minute to compile.
  add_library(${name} STATIC
    ${BACKPLANE_TORCH_BRIDGE_DIR}/src/attention.cpp
    ${BACKPLANE_TORCH_BRIDGE_DIR}/src/attention_autograd.cpp
    ${BACKPLANE_TORCH_BRIDGE_DIR}/src/device.cpp
    ${BACKPLANE_TORCH_BRIDGE_DIR}/src/dlpack.cpp
    ${BACKPLANE_TORCH_BRIDGE_DIR}/src/output.cpp
    ${BACKPLANE_TORCH_BRIDGE_DIR}/src/output_blocks.cpp)
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${BACKPLANE_TORCH_BRIDGE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${name} PUBLIC cxx_std_${arg_CXX_STANDARD})
  # Installed, the LibTorch is backplane::libtorch, which backplane-torch.cmake defines from the
  # LibTorch it finds on the consumer's machine (the build's own target is not exported).
  target_link_libraries(${name}
    PUBLIC backplane::core $<BUILD_INTERFACE:${arg_LIBTORCH}>
           $<INSTALL_INTERFACE:backplane::libtorch>
    PRIVATE $<BUILD_INTERFACE:backplane_warnings>)
  # The layers (layers.hpp) run the Hub kernels use_kernels binds: only with the kernel hub.
  if(TARGET backplane::hub)
    target_sources(${name} PRIVATE ${BACKPLANE_TORCH_BRIDGE_DIR}/src/layers.cpp
                                   ${BACKPLANE_TORCH_BRIDGE_DIR}/src/layer_autograd.cpp
                                   ${BACKPLANE_TORCH_BRIDGE_DIR}/src/native_calls.cpp
                                   ${BACKPLANE_TORCH_BRIDGE_DIR}/src/extension.cpp)
    target_link_libraries(${name} PUBLIC backplane::hub)
    # Kernel Hub extensions reference PyModule_Create2 (extension.hpp): the program that links
    # the bridge exports the bridge's definition, and LibTorch's dispatcher is shared with them.
    target_link_options(${name} INTERFACE "LINKER:--export-dynamic-symbol=PyModule_Create2")
    set_target_properties(${name} PROPERTIES BACKPLANE_TORCH_LAYERS ON)
  endif()
endfunction()
