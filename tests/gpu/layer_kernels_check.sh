#!/usr/bin/env bash
# The CUDA layer kernels (rmsnorm, activation, rotary) on a machine WITH an NVIDIA GPU of
# compute capability 8.0 or later: builds them and their CPU counterparts, then runs
# layer_kernels_check (tests/gpu/layer_kernels_check.cpp), which compares the CUDA kernels with
# the CPU ones on the same inputs for every op, float32/bfloat16/float16 and a table of shapes
# (one to 2048 x 22016). Prints PASS/FAIL per case; exits non-zero on any mismatch. About a
# minute on an H200 with 16 cores (the whole run is capped at 110 s).
#
# Usage: tests/gpu/layer_kernels_check.sh [build-dir]   (default: build-gpu-layers in the repo)
#   SKIP_BUILD=1  reuse an existing build;  NVCC=/path/to/nvcc  (default: nvcc on PATH, else
#   /usr/local/cuda/bin/nvcc)
set -euo pipefail

# shellcheck source=gpu_check_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_check_common.sh"
cap_run 110 LAYER_CHECK_TIMED "$@"
gpu_check_start build-gpu-layers "$@"

if [[ -z "${SKIP_BUILD:-}" ]]; then
  echo "== building the layer kernels and layer_kernels_check in $build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBACKPLANE_NVCC="$nvcc" \
    -DBACKPLANE_CUDA_ARCHITECTURES="80-real;90" >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; die "configure"; }
  ninja -C "$build" layer_kernels_check >"$build/build.log" 2>&1 ||
    { tail -50 "$build/build.log"; die "build"; }
fi
check=$build/bin/layer_kernels_check
[[ -x "$check" ]] || die "no $check (is the CUDA toolkit found? see $build/configure.log)"
"$check"
