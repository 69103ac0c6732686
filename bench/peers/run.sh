#!/usr/bin/env bash
# The peers benchmark in one command: sets up its environment once (setup.sh: ONNX Runtime in a
# bench venv over the tests' pinned torch, ggml built from llama-cpp-python's sources), builds
# backplane's side (the backplane_peer target of the build tree), pins the threads and runs
# peers.py with the arguments given (peers.py --help).
#   bench/peers/run.sh [--cases rmsnorm] [--rounds 7] [--json out.json] [--markdown out.md]
# BUILD: the build tree (default build); BENCH_PEERS_THREADS: threads on every side (default
# cases.json's, 2).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${BUILD:-$repo/build}
python=$("$here/setup.sh")
cmake --build "$build" --target backplane_peer >&2
threads=${BENCH_PEERS_THREADS:-$(python3 -c "import json; print(json.load(open('$here/cases.json'))['threads'])")}
# The first `threads` CPUs this process may use, for every side's workers.
cpus=$(python3 -c "import os; print(','.join(map(str, sorted(os.sched_getaffinity(0))[:$threads])))")
export BENCH_PEERS_THREADS=$threads OMP_NUM_THREADS=$threads
export BENCH_PEERS_BACKPLANE_LIB=$build/bench/libbackplane_peer.so
export BENCH_PEERS_GGML_PREFIX=$(dirname "$(dirname "$python")")/ggml
exec taskset -c "$cpus" "$python" "$here/peers.py" "$@"
