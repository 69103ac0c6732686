#!/usr/bin/env bash
# Creates (once) and prints the path of the Python virtual environment that holds the pinned
# oracles of tests/python/requirements.txt, and requirements-extra.txt on top. It lives outside
# the repository, keyed by the requirements' hash, so a second run is instant:
# ${BACKPLANE_VENV_ROOT:-~/.cache/backplane}.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
requirements=$here/requirements.txt
key=$(sha256sum "$requirements" | cut -c1-12)
root=${BACKPLANE_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/backplane}
venv=$root/venv-$key
mkdir -p "$root"
# One creator at a time: parallel test runs wait here instead of racing on the folder.
exec 9>"$root/venv-$key.lock"
flock 9
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  python=$(command -v python3) || { echo "venv.sh: python3 is needed" >&2; exit 1; }
  if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "venv.sh: python3 lacks venv/ensurepip (apt-get install python3-venv)" >&2
    exit 1
  fi
  rm -rf "$venv"
  echo "venv.sh: creating $venv (torch, transformers, accelerate: a few GiB, once)" >&2
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements" >&2
  touch "$venv/.complete"
fi
# Pins added later go on top, keyed by their own hash: adding one does not rebuild the few GiB
# of torch the base holds.
extra=$here/requirements-extra.txt
extra_key=$(sha256sum "$extra" | cut -c1-12)
if [ ! -f "$venv/.extra-$extra_key" ]; then
  echo "venv.sh: installing $extra into $venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$extra" >&2
  rm -f "$venv"/.extra-*
  touch "$venv/.extra-$extra_key"
fi
echo "$venv"
