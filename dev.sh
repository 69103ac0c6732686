#!/usr/bin/env bash
# The project's front-door commands, for a fresh Debian 12 machine (run as root, or as a
# user with sudo). Each installs what is missing, builds incrementally, then:
#   ./dev.sh hwprobe [ARGS...]   runs hwprobe (ARGS go to it, e.g. --json)
#   ./dev.sh test                runs the whole test suite
#   ./dev.sh sanitize            runs the suite under ASan+UBSan, the concurrency tests under TSan
# Environment: BUILD_DIR (default ./build; sanitize: ./build-asan and ./build-tsan),
# BACKPLANE_WARNINGS_AS_ERRORS (default ON).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# ccache hits whatever folder the checkout is in (CI clones afresh): paths under the checkout
# are hashed relative to it, and the build folder is left out of the hash (only debug-info
# paths differ). Room for the normal, fuzzing and sanitizer trees.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-20G}
build_dir=${BUILD_DIR:-$root/build}

# Debian packages the build needs; see README "Dependencies".
packages=(
  g++ cmake ninja-build ccache pkg-config
  libboost-dev libboost-program-options-dev nlohmann-json3-dev
  libhwloc-dev libcpu-features-dev libze-dev libamdhip64-dev libhwy-dev libdlpack-dev
  libssl-dev libarchive-dev
)
# And the tests: GoogleTest, Google Benchmark, LibTorch with gloo for the distributed run, and
# Python for the oracles (torch, transformers, accelerate: tests/python/venv.sh), and clang-14
# with its libFuzzer runtime for the fuzz targets (tests/fuzz), and Bochs with what boots a
# guest in it for the AVX-512 kernels on an emulated CPU (tests/emulated).
test_packages=(
  libgtest-dev libbenchmark-dev libtorch-dev libgloo-dev python3 python3-venv dpkg-dev
  clang-14 libclang-rt-14-dev
  bochs bochsbios vgabios isolinux syslinux-common xorriso busybox-static cpio
)

install_missing_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "dev.sh: installing ${missing[*]}" >&2
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

# configure [CMAKE_ARGS...]: the first time, or when arguments are given.
configure() {
  if [ ! -f "$build_dir/build.ninja" ] || [ $# -gt 0 ]; then
    cmake -S "$root" -B "$build_dir" -G Ninja \
      -DBACKPLANE_WARNINGS_AS_ERRORS="${BACKPLANE_WARNINGS_AS_ERRORS:-ON}" "$@" >/dev/null
  fi
}

usage() {
  sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[ $# -ge 1 ] || usage
command=$1
shift
case "$command" in
  hwprobe)
    install_missing_packages "${packages[@]}"
    configure
    cmake --build "$build_dir" --target hwprobe backplane_plugins >/dev/null
    exec "$build_dir/bin/hwprobe" "$@"
    ;;
  test)
    install_missing_packages "${packages[@]}" "${test_packages[@]}"
    venv=$("$root/tests/python/venv.sh")
    configure -DBACKPLANE_PYTHON="$venv/bin/python"
    cmake --build "$build_dir"
    exec ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
    ;;
  sanitize)
    # What runs under which sanitizer, and what is left out: README "Sanitizers and isolation".
    install_missing_packages "${packages[@]}" "${test_packages[@]}"
    jobs=$(nproc)
    # ASLR with more random bits than TSan's memory layout allows (newer kernels) makes it abort
    # at start; running without randomization avoids that, where the container allows it.
    no_aslr=()
    if setarch "$(uname -m)" -R true 2>/dev/null; then no_aslr=(setarch "$(uname -m)" -R); fi

    build_dir=${BUILD_DIR:-$root/build-asan}
    configure -DBACKPLANE_SANITIZE=address,undefined
    cmake --build "$build_dir"
    ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1 \
      LSAN_OPTIONS=suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"

    build_dir=${BUILD_DIR:+$BUILD_DIR-tsan}
    build_dir=${build_dir:-$root/build-tsan}
    configure -DBACKPLANE_SANITIZE=thread
    # The GPU kernels' emulated tests run a CPU thread per GPU thread: a missing __syncthreads
    # shows up as a data race.
    cmake --build "$build_dir" --target concurrency_test loader_test attention_kernel_test \
      attention_backward_test thread_pool_test attention_gpu_emulated_test \
      attention_gpu_emulated_backward_test layer_kernels_emulated_test cuda_emulator_test
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 "${no_aslr[@]}" \
      ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" \
      -R '^(Concurrency\.|AttentionThreads\.|AttentionBackward\.SameBits|ThreadPool\.|LoaderTest\.ConcurrentQueries|Kernels/Emulated\.|Kernels/EmulatedBackward\.MatchesTheFloat64Reference/(flash_f16|eager_bf16)|layer_kernels_emulated_test$|CudaEmulator\.)'
    ;;
  *) usage ;;
esac
