#!/usr/bin/env bash
# Runs the CPU kernels' tests on an emulated AVX-512 CPU: Bochs (Debian's build has the EVEX
# instructions) as an Ice Lake client, booting Debian's own kernel with a busybox initramfs
# that holds the test programs and the libraries they load. For machines without AVX-512, so
# that the AVX3 instantiations of the kernels run somewhere before they reach a CPU that
# dispatches to them. Slow: Bochs interprets every instruction (README.md beside this file).
#
#   tests/emulated/avx512.sh [GTEST_FILTER]
#
# Environment: BUILD_DIR (default ./build); EMU_TIMEOUT (seconds for the whole run, default
# 10800); EMU_BOOT_TIMEOUT (seconds the guest has to reach its init, default 600); EMU_CACHE
# (default ~/.cache/backplane/emulated); EMU_PREBUILT=1 to take the test programs as they are
# (CTest) instead of building them; EMU_EXPECT, a test name (regex) that must be among those
# that passed, so that a filter matching nothing is not a pass.
# Exit status: the tests' own (0 or 1); 124 when the emulator ran out of time; 77 when the
# emulator or the guest could not be had (no Bochs, no kernel image, or a guest that did not
# reach the tests), which CTest reports as skipped.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
filter=${1:-*}
cache=${EMU_CACHE:-$HOME/.cache/backplane/emulated}
timeout_s=${EMU_TIMEOUT:-10800}
tests=(attention_kernel_test attention_backward_test layer_kernels_test)

skip() {
  echo "avx512.sh: skipped: $*" >&2
  exit 77
}
# Installed by `./dev.sh test` (its test_packages), as the fuzzers' compiler is.
missing=()
for p in bochs bochsbios vgabios isolinux syslinux-common xorriso busybox-static cpio; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] || skip "the emulator needs ${missing[*]} (apt-get install ${missing[*]})"

# Debian's current kernel image, once: only its vmlinuz is used.
mkdir -p "$cache"
kernel=$cache/vmlinuz
if [ ! -f "$kernel" ]; then
  download() {
    image=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
    [ -n "$image" ] && (cd "$cache" && apt-get download "$image" >/dev/null 2>&1)
  }
  # A point release replaces the image: stale package lists name one the archive dropped.
  download || { apt-get update -qq >/dev/null 2>&1 && download; } ||
    skip "could not download Debian's kernel image (linux-image-amd64: '${image:-}')"
  dpkg-deb --fsys-tarfile "$cache/$image"_*.deb | tar -x -C "$cache" --wildcards './boot/vmlinuz-*'
  mv "$cache"/boot/vmlinuz-* "$kernel.part" && mv "$kernel.part" "$kernel"
  rm -rf "$cache/boot" "$cache/$image"_*.deb
fi

[ "${EMU_PREBUILT:-0}" = 1 ] || cmake --build "$build_dir" --target "${tests[@]}" >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
initrd=$work/initrd
mkdir -p "$initrd"/{bin,proc,sys,dev,t}
cp /bin/busybox "$initrd/bin/"
for t in "${tests[@]}"; do
  cp "$build_dir/bin/$t" "$initrd/t/"
  for lib in $(ldd "$build_dir/bin/$t" | grep -o '/[^ ]*'); do
    mkdir -p "$initrd$(dirname "$lib")"
    cp -L "$lib" "$initrd$lib"
  done
done
{
  echo '#!/bin/busybox sh'
  echo '/bin/busybox --install -s /bin'
  echo 'mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev'
  echo 'echo "guest CPU: $(grep -m1 "^flags" /proc/cpuinfo | tr " " "\n" | grep -c avx512) avx512 flags"'
  echo 'cd /t; status=0'
  for t in "${tests[@]}"; do
    echo "./$t --gtest_color=no --gtest_filter='$filter' || status=1"
  done
  echo 'echo "EMULATED-TESTS-STATUS $status"; sync; sleep 1; poweroff -f'
} >"$initrd/init"
chmod +x "$initrd/init"
(cd "$initrd" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz"

# Kernel command line. clearcpuid= takes out what Bochs 2.7 emulates wrongly for this kernel
# (README.md): xsaves (323) and xsavec (321): the compacted XSAVE size it reports is the sum of
# the components', so Linux finds the XSAVE layout inconsistent and turns AVX off; pku (515):
# its XSAVE leaf is empty; fsrm (580) and erms (297): `rep movsb` faults on a page past the
# bytes it copies, which kills the kernel at boot.
iso=$work/iso
mkdir -p "$iso/isolinux"
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 "$iso/isolinux/"
cp "$kernel" "$iso/vmlinuz"
cp "$work/initrd.gz" "$iso/initrd.gz"
cat >"$iso/isolinux/isolinux.cfg" <<CFG
DEFAULT t
PROMPT 0
TIMEOUT 0
LABEL t
  KERNEL /vmlinuz
  APPEND initrd=/initrd.gz console=ttyS0 loglevel=3 clearcpuid=323,321,515,580,297 nosmp noapic nokaslr mitigations=off panic=-1
CFG
xorriso -as mkisofs -quiet -o "$work/boot.iso" -b isolinux/isolinux.bin -c isolinux/boot.cat \
  -no-emul-boot -boot-load-size 4 -boot-info-table "$iso" 2>/dev/null

cat >"$work/bochsrc" <<RC
cpu: model=corei7_icelake_u, count=1, ips=200000000
memory: guest=1024, host=1024
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/vgabios/vgabios.bin
ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14
ata0-master: type=cdrom, path=$work/boot.iso, status=inserted
boot: cdrom
com1: enabled=1, mode=file, dev=$work/serial.out
display_library: rfb, options="timeout=0"
log: $work/bochs.log
panic: action=fatal
error: action=ignore
info: action=ignore
clock: sync=none, time0=local
RC
echo c >"$work/debugger.rc"  # Debian's Bochs starts in its debugger: continue at once
echo "avx512.sh: booting the emulated CPU (minutes), then ${tests[*]} (filter '$filter')" >&2
timeout "$timeout_s" bochs -q -f "$work/bochsrc" -rc "$work/debugger.rc" </dev/null \
  >"$work/bochs.out" 2>&1 &
emulator=$!
# A guest that has not reached its init in 10 minutes will not (it boots in about 2.5).
booted=0
for ((waited = 0; waited < ${EMU_BOOT_TIMEOUT:-600}; waited += 5)); do
  grep -aq '^guest CPU:' "$work/serial.out" 2>/dev/null && { booted=1; break; }
  kill -0 "$emulator" 2>/dev/null || break
  sleep 5
done
[ "$booted" = 1 ] || kill "$emulator" 2>/dev/null || true
rc=0
wait "$emulator" || rc=$?
sed -n '/^guest CPU:/,$p' "$work/serial.out" 2>/dev/null | grep -av '^\[ *[0-9.]*\] ' || true
if [ "$rc" -eq 124 ]; then
  echo "avx512.sh: the emulator ran past ${timeout_s} s" >&2
  exit 124
fi
status=$(grep -aso 'EMULATED-TESTS-STATUS [0-9]*' "$work/serial.out" | awk '{print $2}' || true)
if [ -z "$status" ]; then
  tail -n 40 "$work/serial.out" >&2 2>/dev/null || true
  skip "the emulated guest did not reach the tests (its console's end above)"
fi
flags=$(grep -aso '^guest CPU: [0-9]*' "$work/serial.out" | awk '{print $3}' || true)
# A kernel that turned AVX-512 off (a new Bochs or kernel quirk) ran the tests on AVX2: no
# verdict on AVX3, which is what this script is for.
[ "${flags:-0}" -gt 0 ] || skip "the guest's kernel exposes no AVX-512 (console above)"
if [ "$status" = 0 ] && [ -n "${EMU_EXPECT:-}" ] &&
  ! grep -aEq "^\[ +OK \] .*${EMU_EXPECT}" "$work/serial.out"; then
  echo "avx512.sh: no test matching '${EMU_EXPECT}' passed in the guest" >&2
  exit 1
fi
exit "$status"
