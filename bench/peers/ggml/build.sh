#!/usr/bin/env bash
# Builds the ggml peer of bench/peers outside the repository:
#   1. downloads the llama-cpp-python source distribution (pinned version and sha256) into
#      ${BACKPLANE_VENV_ROOT:-~/.cache/backplane}/downloads, reusing it when present;
#   2. extracts only the ggml it vendors (vendor/llama.cpp/ggml) and builds its CPU backend
#      the way a llama.cpp user builds it on the machine it runs on: Release, GGML_NATIVE=ON,
#      shared libraries, ggml's default threading (OpenMP when found), no tests or examples;
#   3. installs it to $GGML_PREFIX and compiles bench/peers/ggml/ggml_peer.cpp (the C-ABI shim
#      that bench/peers/ggml_side.py loads with ctypes) into $GGML_PREFIX/lib/libggml_peer.so;
#   4. writes one line naming what was built to $GGML_PREFIX/VERSION.
# Input: GGML_PREFIX (required). Optional: PYTHON (the Python whose pip downloads; python3).
set -euo pipefail

: "${GGML_PREFIX:?GGML_PREFIX (install prefix) is required}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${PYTHON:-python3}

sdist_version=0.3.36
sdist_name=llama_cpp_python-$sdist_version
sdist_file=$sdist_name.tar.gz
sdist_sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

# The same cache root as bench/peers/setup.sh.
root=${BACKPLANE_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/backplane}
downloads=$root/downloads
mkdir -p "$downloads"
sdist=$downloads/$sdist_file

sha_ok() { [ -f "$sdist" ] && echo "$sdist_sha256  $sdist" | sha256sum --check --status; }

if ! sha_ok; then
  rm -f "$sdist"
  echo "ggml/build.sh: downloading $sdist_file" >&2
  "$python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$downloads" "llama-cpp-python==$sdist_version" >&2
  if ! sha_ok; then
    echo "ggml/build.sh: $sdist does not have the pinned sha256 $sdist_sha256" >&2
    exit 1
  fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ggml-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

tar -xzf "$sdist" -C "$work" --strip-components=3 "$sdist_name/vendor/llama.cpp/ggml"
src=$work/ggml
# The sdist leaves out ggml.pc.in, the pkg-config template CMakeLists.txt configures; nothing
# here uses pkg-config, so an empty one stands in.
[ -f "$src/ggml.pc.in" ] || : >"$src/ggml.pc.in"

# GGML_BUILD_TESTS/EXAMPLES default to ON for a standalone ggml, but the vendored copy carries
# neither folder. GGML_BLAS and the GPU backends are off by default on Linux; the CPU backend
# is the only one built. GGML_BACKEND_DL stays off so libggml links the CPU backend directly.
cmake -S "$src" -B "$work/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$GGML_PREFIX" \
  -DCMAKE_INSTALL_LIBDIR=lib \
  -DBUILD_SHARED_LIBS=ON \
  -DGGML_NATIVE=ON \
  -DGGML_CPU=ON \
  -DGGML_BACKEND_DL=OFF \
  -DGGML_BLAS=OFF \
  -DGGML_BUILD_TESTS=OFF \
  -DGGML_BUILD_EXAMPLES=OFF >&2
cmake --build "$work/build" -j 2 >&2
cmake --install "$work/build" >&2

g++ -std=c++17 -O3 -march=native -shared -fPIC -Wall -Wextra \
  -I"$GGML_PREFIX/include" "$here/ggml_peer.cpp" \
  -L"$GGML_PREFIX/lib" -Wl,-rpath,"$GGML_PREFIX/lib" -lggml -lggml-base -lggml-cpu \
  -o "$GGML_PREFIX/lib/libggml_peer.so"

# ggml's own version is in its CMakeLists.txt; the llama.cpp commit llama-cpp-python vendors is
# in the sdist's submodule HEAD. The llama.cpp build number (bNNNN) is a git commit count that a
# shallow submodule clone cannot give, so it is not claimed.
ggml_version=$(sed -n 's/^set(GGML_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\))$/\2/p' \
  "$src/CMakeLists.txt" | paste -sd.)
llama_commit=$(tar -xzOf "$sdist" "$sdist_name/.git/modules/vendor/llama.cpp/HEAD" 2>/dev/null \
  | cut -c1-9 || true)
line="ggml ${ggml_version:-unknown} from llama-cpp-python $sdist_version"
[ -n "$llama_commit" ] && line="$line (llama.cpp $llama_commit)"
# The CPU backend runs a graph's threads as an OpenMP parallel region when CMake found OpenMP
# (GGML_OPENMP, on by default), else on ggml's own threadpool: the line says which was built.
if ldd "$GGML_PREFIX/lib/libggml-cpu.so" | grep -qE 'lib(g|i)?omp'; then
  line="$line, CPU backend, OpenMP threads"
else
  line="$line, CPU backend, ggml threadpool"
fi
echo "$line" >"$GGML_PREFIX/VERSION"
echo "ggml/build.sh: built $line into $GGML_PREFIX" >&2
