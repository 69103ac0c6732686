"""Up-to-date checks of the oracle scripts' outputs: an output is current while its ".stamp"
file holds the digest of the scripts that wrote it and of the pinned package versions. Checked
before torch is imported (that alone takes seconds)."""

import hashlib
import importlib.metadata
import os
import sys

PACKAGES = ("torch", "transformers", "accelerate")


def stamp(paths):
    """The digest of these files' bytes and of the pinned package versions."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            digest.update(f.read())
    for package in PACKAGES:
        digest.update(f"{package}={importlib.metadata.version(package)}".encode())
    return digest.hexdigest()


def exit_if_current(out_path, paths):
    """Exits 0 when out_path exists and its stamp matches: nothing to do."""
    try:
        with open(out_path + ".stamp") as f:
            if f.read() == stamp(paths) and os.path.exists(out_path):
                sys.exit(0)
    except OSError:
        pass


def write(out_path, paths):
    with open(out_path + ".stamp", "w") as f:
        f.write(stamp(paths))
