#!/usr/bin/env bash
# A bundle (tests/gpu/bundle.sh) on a bare Debian 12 without a GPU: a minbase root made with
# debootstrap (no -dev package, no library of this project's build), where
#   1. every ELF file's dependencies resolve inside the bundle or to glibc (the root's ldd);
#   2. every program starts: hwprobe reports the root's cpu; the GPU programs say there is no
#      CUDA device instead of failing to load;
#   3. with the fake libcuda and NVML of backends/cuda/tests, the bundle's cuda plugin loads and
#      reports the fake devices;
#   4. run_all.sh, with no driver there, says so in one line and exits non-zero.
# The root is made once and kept (a few hundred MiB); the bundle is copied into it afresh.
#
# Usage: tests/gpu/check_bundle.sh BUNDLE [FAKE_DRIVER_DIR]
#   FAKE_DRIVER_DIR: the folder of the fake libcuda.so.1 and libnvidia-ml.so.1 (default:
#   build/backends/cuda/tests/fake_driver, made by ./dev.sh test)
#   BARE_ROOT=<folder>  where the root is kept (default /var/cache/backplane/bookworm-minbase)
# Needs root (debootstrap, chroot).
set -euo pipefail

die() {
  echo "FAIL: $*" >&2
  exit 1
}

[[ $# -ge 1 ]] || die "usage: tests/gpu/check_bundle.sh BUNDLE [FAKE_DRIVER_DIR]"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bundle=$(cd "$1" && pwd)
fake=${2:-$repo/build/backends/cuda/tests/fake_driver}
bare=${BARE_ROOT:-/var/cache/backplane/bookworm-minbase}
[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap and chroot)"
[[ -e $fake/libcuda.so.1 && -e $fake/libnvidia-ml.so.1 ]] ||
  die "no fake driver in $fake (./dev.sh test builds it)"

if [[ ! -x $bare/usr/bin/ldd ]]; then
  command -v debootstrap >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  echo "== making a bare Debian 12 in $bare (once)"
  rm -rf "$bare"
  mkdir -p "$bare"
  debootstrap --variant=minbase bookworm "$bare" http://deb.debian.org/debian >"$bare.log" 2>&1 ||
    { tail -20 "$bare.log"; die "debootstrap"; }
fi
echo "== the root: $(chroot "$bare" sh -c '. /etc/os-release; echo $PRETTY_NAME'), $(chroot "$bare" dpkg -l | grep -c '^ii') packages, none -dev: $(chroot "$bare" dpkg -l | awk '/^ii/ {print $2}' | grep -c -- '-dev' || true)"

rm -rf "$bare/opt/bundle" "$bare/opt/fake-driver"
cp -a "$bundle" "$bare/opt/bundle"
mkdir -p "$bare/opt/fake-driver"
cp -L "$fake/libcuda.so.1" "$fake/libnvidia-ml.so.1" "$bare/opt/fake-driver/"
# The loader finds $ORIGIN through /proc/self/exe, and hwloc reads /proc and /sys: as on any
# machine, they are there.
mountpoint -q "$bare/proc" || mount -t proc proc "$bare/proc"
mountpoint -q "$bare/sys" || mount -t sysfs sysfs "$bare/sys"
trap 'umount "$bare/proc" "$bare/sys" 2>/dev/null || true' EXIT
in_root() { chroot "$bare" env -i PATH=/usr/bin:/bin HOME=/root "$@"; }
failures=0

echo "== 1. every ELF file's dependencies"
glibc='^/lib/x86_64-linux-gnu/(libc|libm|libmvec|libpthread|libdl|librt|libresolv|ld-linux-x86-64)\.so'
while read -r file; do
  deps=$(in_root ldd "$file" 2>&1) || true
  bad=$(echo "$deps" | grep "not found" || true)
  outside=$(echo "$deps" | awk '/=>/ {print $3}' | grep -v '^/opt/bundle/' | grep -Ev "$glibc" || true)
  if [[ -n $bad || -n $outside ]]; then
    echo "FAIL $file: ${bad}${outside}"
    failures=$((failures + 1))
  else
    echo "ok   $file ($(echo "$deps" | grep -c '=> /opt/bundle/') in the bundle)"
  fi
done < <(cd "$bare" && find opt/bundle -type f | while read -r f; do
  [[ $(head -c 4 "$f" | od -An -tx1 | tr -d ' ') == 7f454c46 ]] && echo "/$f"
done)

echo "== 2. every program starts"
out=$(in_root /opt/bundle/bin/hwprobe --json) || { echo "FAIL hwprobe --json"; failures=$((failures + 1)); }
echo "$out" | grep -q '"device": "cpu"' && echo "ok   hwprobe: the cpu device" ||
  { echo "FAIL hwprobe lists no cpu"; failures=$((failures + 1)); }
in_root /opt/bundle/bin/hwprobe | grep -m1 '^  cuda ' | sed 's/^ */     /' || true
for program in attention_gpu_check layer_kernels_check gpu_bench cuda_devices; do
  set +e
  text=$(in_root /opt/bundle/bin/$program 2>&1)
  rc=$?
  set -e
  if ((rc == 127)) || [[ $text == *"error while loading shared libraries"* ]]; then
    echo "FAIL $program does not start: $text"
    failures=$((failures + 1))
  else
    echo "ok   $program starts (exit $rc): $(echo "$text" | head -1)"
  fi
done

echo "== 3. the cuda plugin of the bundle with the fake driver"
out=$(in_root LD_LIBRARY_PATH=/opt/fake-driver /opt/bundle/bin/hwprobe)
echo "$out" | sed -n '/^Devices/,/^$/p'
if echo "$out" | grep -q "cuda:1 .*Fake GPU 1"; then
  echo "ok   cuda:0 and cuda:1 from the fake driver"
else
  echo "FAIL the bundle's cuda plugin did not report the fake devices"
  failures=$((failures + 1))
fi

echo "== 4. run_all.sh without a driver"
set +e
text=$(in_root /opt/bundle/scripts/run_all.sh /opt/bundle /tmp/report 2>&1)
rc=$?
set -e
echo "$text" | tail -2
if ((rc != 0)) && [[ $text == *"nvidia-smi not found"* ]]; then
  echo "ok   run_all.sh says why and exits $rc"
else
  echo "FAIL run_all.sh without a driver: exit $rc"
  failures=$((failures + 1))
fi

echo "== $failures failure(s); bundle $(du -sh "$bundle" | cut -f1)"
((failures == 0))
