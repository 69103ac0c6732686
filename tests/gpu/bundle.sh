#!/usr/bin/env bash
# Builds, on this machine, everything the GPU checks need into one folder that runs on a bare
# GPU machine from any path (tests/gpu/README.md): hwprobe, libbackplane, the cpu and cuda
# plugins with their manifests, the check programs (attention_gpu_check, layer_kernels_check,
# cuda_devices), the benchmark (gpu_bench), the scripts (run_all.sh and what it runs), and every
# shared library they load that a bare machine lacks, libstdc++ and libgcc_s included; never
# glibc or the NVIDIA driver's libraries. RUNPATHs are relative to the bundle. CUDA code is
# machine code for sm_80 and sm_90a plus compute_90 PTX.
#
# Usage: tests/gpu/bundle.sh OUTDIR
#   BUNDLE_BUILD=<folder>  the Release build tree (default: build-gpu-bundle in the repository)
#   BUNDLE_CUDA_ARCHITECTURES  (default 80-real;90a-real;90-virtual)
#   BUNDLE_MAX_MIB  the size limit (default 60: what travels to the GPU machine is capped at
#                   64 MiB together with the repository)
set -euo pipefail

die() {
  echo "bundle.sh: $*" >&2
  exit 1
}

[[ $# -eq 1 ]] || die "usage: tests/gpu/bundle.sh OUTDIR"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
build=${BUNDLE_BUILD:-$root/build-gpu-bundle}
archs=${BUNDLE_CUDA_ARCHITECTURES:-80-real;90a-real;90-virtual}
max_mib=${BUNDLE_MAX_MIB:-60}

# patchelf sets the RUNPATHs; the rest is the build's (./dev.sh installs it).
if ! command -v patchelf >/dev/null; then
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  echo "bundle.sh: installing patchelf" >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    patchelf >/dev/null
fi

echo "== building the GPU checks in $build ($archs)"
start=$(date +%s)
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBACKPLANE_BUILD_TESTS=OFF \
  -DBACKPLANE_GPU_CHECKS=ON -DBACKPLANE_HIP_KERNELS=OFF -DBACKPLANE_LIBTORCH=off \
  -DBACKPLANE_WARNINGS_AS_ERRORS=ON "-DBACKPLANE_CUDA_ARCHITECTURES=$archs" \
  >"$build/bundle-configure.log" 2>&1 || { cat "$build/bundle-configure.log"; die "configure failed"; }
grep "backplane: CUDA attention kernels for" "$build/bundle-configure.log" ||
  { cat "$build/bundle-configure.log"; die "the CUDA kernels are not built (is nvcc on PATH?)"; }
cmake --build "$build" --target gpu_checks >"$build/bundle-build.log" 2>&1 ||
  { tail -50 "$build/bundle-build.log"; die "build failed"; }
echo "== built in $(($(date +%s) - start)) s"

echo "== assembling $out"
rm -rf "${out:?}"/*
mkdir -p "$out/bin" "$out/lib/backplane/plugins" "$out/scripts"
for program in hwprobe attention_gpu_check layer_kernels_check cuda_devices gpu_bench; do
  cp "$build/bin/$program" "$out/bin/"
done
soname() { patchelf --print-soname "$1"; }
cp "$build/lib/$(soname "$build/lib/libbackplane.so")" "$out/lib/"
for plugin in cpu cuda; do
  cp "$build/lib/backplane/plugins/$plugin.json" "$build/lib/backplane/plugins/libbackplane-$plugin.so" \
    "$out/lib/backplane/plugins/"
done
for script in run_all.sh cuda_check.sh gpu_check_common.sh torch_peers.py; do
  cp "$root/tests/gpu/$script" "$out/scripts/"
done

# Libraries a bare machine lacks: what the loader resolves for each ELF file here, but glibc's
# own and the driver's (the GPU machine has its own, which must match its kernel module).
is_system() {
  case "$1" in
    ld-linux*.so* | libc.so.* | libm.so.* | libmvec.so.* | libpthread.so.* | libdl.so.* | \
      librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.* | libnsl.so.* | \
      libcuda.so* | libnvidia-*.so* | linux-vdso.so.*) return 0 ;;
  esac
  return 1
}
elf_files() {
  find "$out/bin" "$out/lib" -type f | while read -r f; do
    [[ $(head -c 4 "$f" | od -An -tx1 | tr -d ' ') == 7f454c46 ]] && echo "$f"
  done
}
copied=1
while ((copied > 0)); do
  copied=0
  while read -r file; do
    # "libfoo.so.1 => /usr/lib/x86_64-linux-gnu/libfoo.so.1 (0x...)"
    while read -r name _ path _; do
      [[ $path == /* ]] || continue
      is_system "$name" && continue
      [[ -e $out/lib/$name ]] && continue
      cp -L "$path" "$out/lib/$name"
      copied=$((copied + 1))
    done < <(LD_LIBRARY_PATH="$build/lib" ldd "$file" | grep "=>")
  done < <(elf_files)
done

# RUNPATHs relative to each file, so the bundle runs from any folder.
for f in "$out"/bin/*; do
  [[ $(head -c 4 "$f" | od -An -tx1 | tr -d ' ') == 7f454c46 ]] && patchelf --set-rpath '$ORIGIN/../lib' "$f"
done
for f in "$out"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$f"; done
for f in "$out"/lib/backplane/plugins/*.so; do patchelf --set-rpath '$ORIGIN/../..' "$f"; done

# What it is, for the report.
{
  echo "backplane GPU check bundle"
  echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "cuda architectures: $archs"
  echo "nvcc: $("$(grep -m1 '^BACKPLANE_NVCC:' "$build/CMakeCache.txt" | cut -d= -f2)" --version | tail -1)"
  echo "files:"
  (cd "$out" && find . -type f ! -name BUILD_INFO | sort | xargs sha256sum)
} >"$out/BUILD_INFO"

size=$(du -sb "$out" | cut -f1)
mib=$(((size + 1048575) / 1048576))
echo "== $out: $(find "$out" -type f | wc -l) files, $mib MiB"
((mib <= max_mib)) || die "the bundle is $mib MiB, over the $max_mib MiB limit"
ls "$out/lib"
