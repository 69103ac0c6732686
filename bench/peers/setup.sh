#!/usr/bin/env bash
# Sets up the peers benchmark's environment once and prints the path of its Python:
#   - a venv under ${BACKPLANE_VENV_ROOT:-~/.cache/backplane}/bench-peers-<hash> with
#     requirements.txt (ONNX Runtime), seeing tests/python/venv.sh's torch through a .pth file;
#   - ggml built from the llama-cpp-python source distribution (ggml/build.sh).
# Nothing of a peer is kept in the repository.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
base=$("$repo/tests/python/venv.sh")
key=$(cat "$here/requirements.txt" "$here/ggml/build.sh" "$here/ggml/ggml_peer.cpp" | sha256sum | cut -c1-12)
root=${BACKPLANE_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/backplane}
venv=$root/bench-peers-$key
exec 9>"$venv.lock"
flock 9
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  echo "bench/peers/setup.sh: creating $venv" >&2
  "$base/bin/python" -m venv "$venv"
  base_site=$("$base/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  echo "$base_site" >"$site/backplane-test-venv.pth"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt" >&2
  GGML_PREFIX="$venv/ggml" "$here/ggml/build.sh" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
