#!/usr/bin/env bash
# Builds the libFuzzer targets in a clang build tree of their own and runs each for a bounded
# time over its seed corpus (tests/fuzz/corpus/<target>/, kept in the repository; new inputs go
# to a scratch corpus in the build tree, not to the repository: corpus.sh grow does that).
# Any crash, hang (-timeout), leak, sanitizer report or out-of-memory fails, and the input that
# caused it is printed with the command that replays it.
#
#   run_fuzzers.sh [--build-dir DIR] [--seconds N] [TARGET...]
#
# --build-dir: the clang tree (default build/fuzz-tree), configured on first use and rebuilt
# incrementally after. --seconds: per target (default 10). TARGETs: names from corpus/ (default:
# all). Exits 77 (ctest's skip) when clang-14 or its libFuzzer runtime is missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build_dir=$root/build/fuzz-tree
seconds=10
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -*) echo "run_fuzzers.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

cc=${FUZZ_CC:-clang-14}
cxx=${FUZZ_CXX:-clang++-14}
if ! command -v "$cxx" >/dev/null; then
  echo "SKIP: fuzzing needs $cxx (apt-get install clang-14 libclang-rt-14-dev)"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  >"$probe/probe.cpp"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/probe.cpp" -o "$probe/probe" \
  2>"$probe/log"; then
  echo "SKIP: $cxx cannot link libFuzzer with ASan and UBSan (apt-get install libclang-rt-14-dev):"
  cat "$probe/log"
  exit 77
fi

# -O1 and line tables only: quick to build on a small machine, and the sanitizers' reports
# still name each line. Assertions stay on (no NDEBUG).
fuzz_flags="-O1 -gline-tables-only"
if [ ! -f "$build_dir/build.ninja" ]; then
  echo "configuring the fuzz tree $build_dir with $cxx"
  CCACHE_NOHASHDIR=true cmake -S "$root" -B "$build_dir" -G Ninja \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Fuzz \
    -DCMAKE_C_FLAGS_FUZZ="$fuzz_flags" -DCMAKE_CXX_FLAGS_FUZZ="$fuzz_flags" \
    -DBACKPLANE_FUZZ=ON -DBACKPLANE_BUILD_TOOLS=OFF -DBACKPLANE_BUILD_BENCHMARKS=OFF \
    -DBACKPLANE_WARNINGS_AS_ERRORS=ON \
    >"$build_dir.configure.log" 2>&1 || {
    cat "$build_dir.configure.log"
    exit 1
  }
fi
echo "building the fuzz targets in $build_dir"
CCACHE_NOHASHDIR=true cmake --build "$build_dir" --target backplane_fuzzers >"$build_dir/fuzz-build.log" 2>&1 || {
  tail -n 60 "$build_dir/fuzz-build.log"
  exit 1
}

if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cut -d' ' -f1 "$build_dir/fuzz-targets.txt")
fi
work=$build_dir/fuzz-runs
mkdir -p "$work"
failed=()
for name in "${targets[@]}"; do
  executable=$(awk -v n="$name" '$1 == n { print $2 }' "$build_dir/fuzz-targets.txt")
  if [ -z "$executable" ]; then
    echo "run_fuzzers.sh: no fuzz target '$name' (see $build_dir/fuzz-targets.txt)" >&2
    exit 2
  fi
  seeds=$here/corpus/$name
  scratch=$work/$name/corpus
  artifacts=$work/$name/artifacts/
  rm -rf "$artifacts"
  mkdir -p "$scratch" "$artifacts"
  log=$work/$name/log
  # -timeout: one input running past 10 s is a hang. -rss_limit_mb: the parsers bound what they
  # read, so 2 GiB is far above any honest need. -max_len: inputs the size of real files.
  # -seed: the same mutations on every run, so that CI is repeatable (FUZZ_SEED=0: random).
  if "$executable" "$scratch" "$seeds" -max_total_time="$seconds" -timeout=10 \
    -seed="${FUZZ_SEED:-1}" \
    -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$artifacts" -print_final_stats=1 \
    >"$log" 2>&1; then
    echo "fuzz_$name: ok ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" |
      grep -o '[0-9]*$') runs in ${seconds} s)"
  else
    failed+=("$name")
    echo "fuzz_$name: FAILED; the log's end:"
    tail -n 40 "$log"
    for reproducer in "$artifacts"*; do
      [ -e "$reproducer" ] || continue
      echo "  reproducer: $reproducer"
      echo "  replay:     $executable $reproducer"
    done
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz targets that failed: ${failed[*]}"
  exit 1
fi
