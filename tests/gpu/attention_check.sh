#!/usr/bin/env bash
# The GPU attention kernels on a machine WITH an NVIDIA GPU (compute capability 8.0 or later):
# builds the cuda and cpu plugins and attention_check.cpp (Release, only those targets), then
# runs every case of attention_check.cpp on cuda:0 through the plugin ABI against the CPU
# plugin's float32 sdpa: head dims 64-256, sequences 1 to 4097, causal and not, decoding, GQA
# and MQA, bool and additive masks, strided inputs, empty batch, and the refused calls, each
# case that fits also backward (attention_backward against the CPU plugin's). Prints
# PASS/FAIL per case with the largest absolute error, then the prefill throughput (TFLOP/s) as
# information. Exits non-zero on any failure. The whole run is capped at 290 s; the build of
# the needed targets takes about 3 minutes on 16 cores, the cases well under a minute.
#
# Usage: tests/gpu/attention_check.sh [build-dir]   (default: build-gpu-check in the repo)
#   SKIP_BUILD=1  reuse an existing build;  NVCC=/path/to/nvcc (default: nvcc on PATH, else
#   /usr/local/cuda/bin/nvcc);  BACKPLANE_CUDA_ARCHITECTURES (default 80-real;90)
set -euo pipefail

# shellcheck source=gpu_check_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_check_common.sh"
cap_run 290 ATTENTION_CHECK_TIMED "$@"
gpu_check_start build-gpu-check "$@"
nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total --format=csv,noheader |
  head -1

if [[ -z "${SKIP_BUILD:-}" ]]; then
  echo "== building the cuda and cpu plugins and attention_gpu_check in $build"
  start=$(date +%s)
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBACKPLANE_BUILD_TESTS=OFF \
    -DBACKPLANE_BUILD_TOOLS=OFF -DBACKPLANE_GPU_CHECKS=ON -DBACKPLANE_HIP_KERNELS=OFF \
    -DBACKPLANE_NVCC="$nvcc" \
    ${BACKPLANE_CUDA_ARCHITECTURES:+-DBACKPLANE_CUDA_ARCHITECTURES="$BACKPLANE_CUDA_ARCHITECTURES"} \
    >"$build/attention-configure.log" 2>&1 || { cat "$build/attention-configure.log"; die "configure"; }
  grep "backplane:" "$build/attention-configure.log" || true
  ninja -C "$build" attention_gpu_check backplane-cuda backplane-cpu >"$build/attention-build.log" 2>&1 ||
    { tail -50 "$build/attention-build.log"; die "build"; }
  echo "== built in $(($(date +%s) - start)) s"
fi
check=$build/bin/attention_gpu_check
[[ -x "$check" ]] || die "no $check (was the CUDA toolkit found? see $build/attention-configure.log)"

# Only the cuda and cpu plugins: the reference runs on the CPU plugin's sdpa.
BACKPLANE_PLUGINS=cuda,cpu "$check"
