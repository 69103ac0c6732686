# shellcheck shell=bash
# What the GPU check scripts (attention_check.sh, layer_kernels_check.sh) share; sourced by
# them, never run. Each caps its whole run, finds the repository, its build folder and nvcc,
# and stops at once on a machine without an NVIDIA GPU or without nvcc.

die() {
  echo "FAIL: $*" >&2
  exit 1
}

# cap_run SECONDS MARKER ARGS...: runs the calling script again with ARGS under timeout, and
# does not return; in that run the environment variable MARKER is set and this does nothing.
cap_run() {
  local seconds=$1 marker=$2
  shift 2
  if [[ -z "${!marker:-}" ]]; then
    export "$marker=1"
    exec timeout --kill-after=5 "$seconds" bash "$0" "$@"
  fi
}

# gpu_check_start DEFAULT_BUILD [BUILD]: sets root (the repository), build (BUILD, else the
# folder DEFAULT_BUILD in the repository, created) and nvcc (NVCC, else nvcc on PATH, else
# /usr/local/cuda/bin/nvcc), and checks that nvidia-smi and nvcc are there.
gpu_check_start() {
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  build=${2:-$root/$1}
  nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  mkdir -p "$build"
  command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this script needs an NVIDIA GPU"
  [[ -x "$nvcc" ]] || die "nvcc not found (set NVCC)"
}
