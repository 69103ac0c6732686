#!/usr/bin/env bash
# Run by ctest (tests/sdk): check_debs.sh <build dir> <scratch dir> <version>
# Builds the Debian packages of a built tree with cpack, checks what each holds and depends on
# (dpkg-deb), then extracts them all into one root (dpkg-deb -x) and runs the extracted hwprobe
# with no variable set: it must find the extracted cpu plugin through its relative RPATH and
# list the cpu device. Installing the packages with apt-get is tests/sdk/apt_install_debs.sh.
set -euo pipefail
build=$1
work=$2
version=$3
rm -rf "$work"
mkdir -p "$work/debs" "$work/root"

fail() {
  echo "check_debs: $*" >&2
  exit 1
}

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/debs" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; fail "cpack failed"; }
mapfile -t debs < <(find "$work/debs" -maxdepth 1 -name '*.deb' | sort)
[ ${#debs[@]} -gt 0 ] || fail "cpack made no .deb (log: $work/cpack.log)"

deb_of() {  # the file of package $1
  local d
  for d in "${debs[@]}"; do
    [ "$(dpkg-deb -f "$d" Package)" = "$1" ] && { echo "$d"; return 0; }
  done
  fail "no package $1 among: $(for d in "${debs[@]}"; do basename "$d"; done | tr '\n' ' ')"
}

# package, then paths it must hold (relative to /usr)
expect_files() {
  local package=$1 deb listing path
  shift
  deb=$(deb_of "$package")
  listing=$(dpkg-deb -c "$deb")
  for path in "$@"; do
    grep -Eq "\./usr/$path( -> .*)?\$" <<<"$listing" || fail "$package lacks /usr/$path:"$'\n'"$listing"
  done
}
# package, then a pattern its Depends must match
expect_depends() {
  local depends
  depends=$(dpkg-deb -f "$(deb_of "$1")" Depends)
  grep -Eq "$2" <<<"$depends" || fail "$1 Depends '$depends' does not match '$2'"
}

expect_files libbackplane0 lib/libbackplane.so.$version lib/libbackplane.so.0 \
  lib/backplane/plugins/cpu.json lib/backplane/plugins/libbackplane-cpu.so
expect_depends libbackplane0 'libc6'
expect_depends libbackplane0 'libhwloc'
expect_files backplane-tools bin/hwprobe
expect_depends backplane-tools "libbackplane0 \\(= $version\\)"
expect_depends backplane-tools 'libboost-program-options'
expect_files libbackplane-dev include/backplane/plugin.h include/backplane/plugin_sdk.hpp \
  include/backplane/runtime/runtime.hpp include/backplane/version.hpp lib/libbackplane.so \
  lib/cmake/backplane/backplaneConfig.cmake lib/cmake/backplane/BackplanePlugin.cmake \
  lib/pkgconfig/backplane.pc
expect_depends libbackplane-dev 'libdlpack-dev'
# Every accelerator plugin the tree built has its own package, depending on the runtime.
for manifest in "$build"/lib/backplane/plugins/*.json; do
  plugin=$(basename "$manifest" .json)
  [ "$plugin" = cpu ] && continue
  expect_files "backplane-plugin-$plugin" "lib/backplane/plugins/$plugin.json" \
    "lib/backplane/plugins/libbackplane-$plugin.so"
  expect_depends "backplane-plugin-$plugin" "libbackplane0 \\(= $version\\)"
done
# No file in two packages (apt would refuse to install them together).
for d in "${debs[@]}"; do dpkg-deb -c "$d" | awk '$1 !~ /^d/ {print $6}'; done | sort | uniq -d \
  >"$work/duplicates"
[ ! -s "$work/duplicates" ] || fail "files in more than one package: $(cat "$work/duplicates")"

for d in "${debs[@]}"; do dpkg-deb -x "$d" "$work/root"; done
# Stripped as Debian ships them, the debug information in the -dbgsym packages.
while IFS= read -r -d '' file; do
  if readelf -S "$file" 2>/dev/null | grep -q '\.debug_info'; then
    fail "$file is not stripped (debug information belongs in a -dbgsym package)"
  fi
done < <(find "$work/root/usr" -path "$work/root/usr/lib/debug" -prune -o -type f -print0)
# cpack names them <package>-dbgsym_<version>_<arch>.ddeb (Debian's format, Ubuntu's suffix).
for package in libbackplane0 libbackplane-hub0 backplane-tools; do
  dbgsym="$work/debs/$package-dbgsym_${version}_$(dpkg --print-architecture).ddeb"
  [ -f "$dbgsym" ] || fail "no $package-dbgsym package ($(basename "$dbgsym"))"
  [ "$(dpkg-deb -f "$dbgsym" Package)" = "$package-dbgsym" ] || fail "$dbgsym is misnamed"
  listing=$(dpkg-deb -c "$dbgsym")
  grep -q '/usr/lib/debug/.build-id/.*\.debug$' <<<"$listing" ||
    fail "$package-dbgsym holds no debug file:"$'\n'"$listing"
done
out=$(env -i PATH=/usr/bin:/bin "$work/root/usr/bin/hwprobe" --json) ||
  fail "the extracted hwprobe failed"
printf '%s\n' "$out" >"$work/report.json"
python3 - "$work/root" "$work/report.json" <<'PY' || fail "the extracted hwprobe's report: $out"
import json, sys
root = sys.argv[1]
report = json.load(open(sys.argv[2]))
cpu = [d for d in report["devices"] if d["type"] == "cpu"]
assert cpu, "no cpu device"
plugins = {p["name"]: p for p in report["plugins"]}
assert plugins["cpu"]["status"] == "loaded", plugins["cpu"]
assert plugins["cpu"]["library"].startswith(root + "/usr/lib/backplane/plugins/"), plugins["cpu"]
PY
echo "check_debs: ${#debs[@]} packages:"
for d in "${debs[@]}"; do
  echo "  $(dpkg-deb -f "$d" Package) $(dpkg-deb -f "$d" Version): Depends $(dpkg-deb -f "$d" Depends)"
done
echo "check_debs: the extracted hwprobe lists the cpu device from the extracted cpu plugin"
