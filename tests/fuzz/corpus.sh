#!/usr/bin/env bash
# Looks after the seed corpora kept in the repository (tests/fuzz/corpus/<target>/):
#
#   corpus.sh grow [--build-dir DIR] [--seconds N] [TARGET...]
#     runs each fuzz target for a while from its corpus, then merges into the corpus only the new
#     inputs that reach code it did not (libFuzzer -merge=1; inputs of at most 4 KiB).
#   corpus.sh minimize [--build-dir DIR] [TARGET...]
#     shrinks each corpus to the fewest inputs that reach the same code (-set_cover_merge=1 over
#     edge coverage, -use_counters=0): hit-count variety is found again in seconds at run time,
#     in the scratch corpus run_fuzzers.sh grows in the build tree. Inputs named regression-*
#     (ones that found a bug) are always kept.
#
# --build-dir: the clang tree run_fuzzers.sh builds (default build/fuzz-tree); --seconds: per
# target when growing (default 60). TARGETs: default all. Commit what it leaves.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
usage() {
  sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 1 ] || usage
command=$1
shift
case "$command" in grow | minimize) ;; *) usage ;; esac
build_dir=$root/build/fuzz-tree
seconds=60
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --seconds) [ "$command" = grow ] || usage; seconds=$2; shift 2 ;;
    -*) echo "corpus.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

grow() {  # executable corpus
  local scratch before
  scratch=$(mktemp -d)
  before=$(find "$2" -type f | wc -l)
  "$1" "$scratch" "$2" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$scratch/" >"$scratch.log" 2>&1 || {
    echo "$name failed while growing; see $scratch.log"
    exit 1
  }
  "$1" -merge=1 -max_len=4096 "$2" "$scratch" >>"$scratch.log" 2>&1
  # libFuzzer names inputs by their SHA-1; nothing else to rename.
  echo "$name: $before -> $(find "$2" -type f | wc -l) inputs"
  rm -rf "$scratch" "$scratch.log"
}

minimize() {  # executable corpus
  local work before
  work=$(mktemp -d)
  mkdir "$work/min"
  before=$(find "$2" -type f | wc -l)
  "$1" -set_cover_merge=1 -use_counters=0 -max_len=65536 "$work/min" "$2" \
    >"$work/log" 2>&1 || { cat "$work/log"; rm -rf "$work"; exit 1; }
  find "$2" -maxdepth 1 -type f -name 'regression-*' -exec cp {} "$work/min/" \;
  find "$2" -maxdepth 1 -type f ! -name 'regression-*' -delete
  find "$work/min" -maxdepth 1 -type f ! -name 'regression-*' -exec cp {} "$2/" \;
  echo "$name: $before -> $(find "$2" -type f | wc -l) inputs"
  rm -rf "$work"
}

# Builds the tree and checks that the current corpora pass first (a short run each).
"$here/run_fuzzers.sh" --build-dir "$build_dir" --seconds 1 "${targets[@]}"
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cut -d' ' -f1 "$build_dir/fuzz-targets.txt")
fi
for name in "${targets[@]}"; do
  executable=$(awk -v n="$name" '$1 == n { print $2 }' "$build_dir/fuzz-targets.txt")
  "$command" "$executable" "$here/corpus/$name"
done
