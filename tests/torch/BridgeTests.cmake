# backplane_torch_bridge_test_sources: the bridge's tests, compiled by tests/torch against the
# main build's LibTorch and by tests/torch/system_libtorch against Debian's. Each source takes
# about a minute to compile: keep them few.
set(backplane_torch_bridge_test_sources
  ${CMAKE_CURRENT_LIST_DIR}/attention_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dlpack_test.cpp)
