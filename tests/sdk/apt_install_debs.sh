#!/usr/bin/env bash
# Installs backplane's Debian packages for real, with apt-get, in a throwaway Debian 12 root, and
# runs hwprobe there: the check the issue words as "apt-get install ./*.deb on a clean machine".
# Not run by ctest (it needs root, debootstrap and the Debian archive, and takes minutes):
#
#   tests/sdk/apt_install_debs.sh <folder of .deb files> [<root folder>]
#
# Make the packages first: cpack -G DEB --config build/CPackConfig.cmake -B build/debs
set -euo pipefail
debs=${1:?usage: apt_install_debs.sh <folder of .deb files> [<root folder>]}
root=${2:-$(mktemp -d /tmp/backplane-apt-root.XXXXXX)}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

[ "$(id -u)" -eq 0 ] || { echo "apt_install_debs: run as root (chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "apt_install_debs: apt-get install debootstrap" >&2; exit 2; }
compgen -G "$debs/*.deb" >/dev/null || { echo "apt_install_debs: no .deb in $debs" >&2; exit 2; }

if [ ! -x "$root/usr/bin/apt-get" ]; then
  debootstrap --variant=minbase bookworm "$root" "$mirror"
fi
mkdir -p "$root/debs"
rm -f "$root"/debs/*.deb
cp "$debs"/*.deb "$root/debs/"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"  # hwloc reads the CPU topology there
trap 'umount "$root/sys"; umount "$root/proc"' EXIT
# The packages this machine's build needs at run time come from the archive, as on a user's.
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
chroot "$root" sh -c 'env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /debs/*.deb'
chroot "$root" hwprobe
report=$(chroot "$root" hwprobe --json)
grep -q '"type": "cpu"' <<<"$report" || { echo "apt_install_debs: no cpu device" >&2; exit 1; }
echo "apt_install_debs: installed $(ls "$root"/debs/*.deb | wc -l) packages in $root; hwprobe works"
