#!/usr/bin/env bash
# Shrinks the seed corpora kept in the repository to the fewest inputs that reach the same code
# (libFuzzer -set_cover_merge=1 over edge coverage, -use_counters=0): hit-count variety is
# found again in seconds at run time, in the scratch corpus run_fuzzers.sh grows in the build
# tree. Inputs named regression-* (ones that found a bug) are always kept.
#
#   minimize_corpus.sh [--build-dir DIR] [TARGET...]
#
# --build-dir: the clang tree run_fuzzers.sh builds (default build/fuzz-tree). TARGETs: default
# all. Commit what it leaves.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build_dir=$root/build/fuzz-tree
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    -*) echo "minimize_corpus.sh: unknown option $1" >&2; exit 2 ;;
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
  corpus=$here/corpus/$name
  work=$(mktemp -d)
  mkdir "$work/min"
  before=$(find "$corpus" -type f | wc -l)
  "$executable" -set_cover_merge=1 -use_counters=0 -max_len=65536 "$work/min" "$corpus" \
    >"$work/log" 2>&1 || { cat "$work/log"; rm -rf "$work"; exit 1; }
  find "$corpus" -maxdepth 1 -type f -name 'regression-*' -exec cp {} "$work/min/" \;
  find "$corpus" -maxdepth 1 -type f ! -name 'regression-*' -delete
  find "$work/min" -maxdepth 1 -type f ! -name 'regression-*' -exec cp {} "$corpus/" \;
  echo "$name: $before -> $(find "$corpus" -type f | wc -l) inputs"
  rm -rf "$work"
done
