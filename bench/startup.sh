#!/usr/bin/env bash
# Startup benchmark: `hwprobe --json` (every in-tree plugin) against a minimal LibTorch host
# program asking torch::cuda::is_available(), measured side by side in one run.
#
# Goal: hwprobe takes at most 1/10 of the LibTorch program's wall time and at most 30 MiB peak
# RSS. Prints a markdown table; exits 0 when both targets pass, 1 when one fails (2+ on error).
#
# Environment:
#   HWPROBE          hwprobe binary (default: <repo>/build/bin/hwprobe)
#   RUNS             measured runs of each program, interleaved (default 30)
#   WARMUP           warm-up runs of each program (default 3)
#   STARTUP_BUILD_DIR  where the LibTorch probe is built (default: <repo>/build-bench-startup)
#
# Installs libtorch-dev (Debian's LibTorch) and GNU time with apt-get when they are missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
runs="${RUNS:-30}"
warmup="${WARMUP:-3}"
build_dir="${STARTUP_BUILD_DIR:-$repo/build-bench-startup}"
hwprobe="${HWPROBE:-$repo/build/bin/hwprobe}"

die() {
  echo "startup.sh: $*" >&2
  exit 2
}
step() { echo "== $*" >&2; }

[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, not '$runs'"
[[ "$warmup" =~ ^[1-9][0-9]*$ ]] || die "WARMUP must be a positive integer, not '$warmup'"
if [[ ! -x "$hwprobe" ]]; then
  die "no hwprobe binary at $hwprobe; build it (ninja -C build hwprobe backplane-cpu" \
    "backplane-mps) or set HWPROBE=/path/to/bin/hwprobe"
fi
command -v python3 >/dev/null || die "python3 is needed to measure"

# hwprobe must run with its defaults: the default plugin folder and every plugin in it.
for var in $(compgen -e | grep '^BACKPLANE_' || true); do
  echo "startup.sh: unsetting $var for the measurement" >&2
  unset "$var"
done

# --- Dependencies (apt-get only when something is missing) ---------------------------------
t_start=$SECONDS
missing=()
dpkg-query -W -f='${Status}' libtorch-dev 2>/dev/null | grep -q 'install ok installed' ||
  missing+=(libtorch-dev)
[[ -x /usr/bin/time ]] || missing+=(time)
if ((${#missing[@]})); then
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || die "missing ${missing[*]}; run as root or install them"
    sudo=(sudo)
  fi
  step "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  step "install took $((SECONDS - t_start)) s"
fi

# --- The LibTorch probe (incremental) -------------------------------------------------------
t_build=$SECONDS
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  step "configuring $build_dir"
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$here/startup" -B "$build_dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >&2
fi
step "building torch_probe"
cmake --build "$build_dir" --target torch_probe >&2
torch_probe="$build_dir/torch_probe"
[[ -x "$torch_probe" ]] || die "the build produced no $torch_probe"
step "probe build took $((SECONDS - t_build)) s"

# --- Expected plugins: every backplane_add_plugin(NAME ...) under backends/ ------------------
plugins="$(sed -n 's/.*backplane_add_plugin(NAME \([a-z0-9_-]*\).*/\1/p' \
  "$repo"/backends/*/CMakeLists.txt | paste -sd, -)"
[[ -n "$plugins" ]] || die "found no in-tree plugins under $repo/backends"

step "measuring: $runs interleaved runs each, $warmup warm-up (hwprobe: $hwprobe," \
  "plugins: $plugins)"
status=0
python3 "$here/startup/measure.py" \
  --libtorch "$torch_probe" \
  --hwprobe "$hwprobe" \
  --expect-plugins "$plugins" \
  --runs "$runs" --warmup "$warmup" || status=$?
step "total $((SECONDS - t_start)) s"
exit "$status"
