#!/usr/bin/env bash
# Grows the seed corpora kept in the repository: runs each fuzz target for a while from its
# corpus, then merges into tests/fuzz/corpus/<target>/ only the new inputs that reach code the
# corpus did not (libFuzzer -merge=1). Commit what it adds; it keeps the corpora small (inputs
# of at most 4 KiB, only coverage-adding ones).
#
#   grow_corpus.sh [--build-dir DIR] [--seconds N] [TARGET...]
#
# --build-dir: the clang tree run_fuzzers.sh builds (default build/fuzz-tree); --seconds: per
# target (default 60). TARGETs: default all.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build_dir=$root/build/fuzz-tree
seconds=60
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -*) echo "grow_corpus.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

# Builds the tree and checks that the current corpora pass first (a short run each).
"$here/run_fuzzers.sh" --build-dir "$build_dir" --seconds 1 "${targets[@]}"
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cut -d' ' -f1 "$build_dir/fuzz-targets.txt")
fi
for name in "${targets[@]}"; do
  executable=$(awk -v n="$name" '$1 == n { print $2 }' "$build_dir/fuzz-targets.txt")
  seeds=$here/corpus/$name
  scratch=$(mktemp -d)
  before=$(ls "$seeds" | wc -l)
  "$executable" "$scratch" "$seeds" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$scratch/" >"$scratch.log" 2>&1 || {
    echo "fuzz_$name failed while growing; see $scratch.log"
    exit 1
  }
  "$executable" -merge=1 -max_len=4096 "$seeds" "$scratch" >>"$scratch.log" 2>&1
  # libFuzzer names inputs by their SHA-1; nothing else to rename.
  echo "fuzz_$name: $before -> $(ls "$seeds" | wc -l) inputs"
  rm -rf "$scratch" "$scratch.log"
done
