# Included from tests/CMakeLists.txt: what of the GPU machine's scripts can be checked here,
# without a GPU. Their shell syntax, and torch_peers.py's PyTorch side run on the CPU with
# tiny shapes (the venv's torch), so that a script error is found here and not in the minutes
# a GPU is lent.
set(_gpu_scripts bundle.sh run_all.sh cuda_check.sh check_bundle.sh attention_check.sh
    layer_kernels_check.sh gpu_check_common.sh)
list(TRANSFORM _gpu_scripts PREPEND ${PROJECT_SOURCE_DIR}/tests/gpu/)
add_test(NAME gpu_scripts_syntax COMMAND bash -c "for f in \"$@\"; do bash -n \"$f\" || exit 1; done"
         gpu_scripts_syntax ${_gpu_scripts})
if(BACKPLANE_PYTHON)
  add_test(NAME gpu_torch_peers_self_test
           COMMAND ${BACKPLANE_PYTHON} ${PROJECT_SOURCE_DIR}/tests/gpu/torch_peers.py --self-test)
  set_tests_properties(gpu_torch_peers_self_test PROPERTIES TIMEOUT 300)
endif()
