#!/usr/bin/env python3
"""kernel-builder metadata and digests as the `kernels` library reads and computes them, the
oracle of tests/hub/kernel_builder_test.cpp (run by ctest: hub_kernel_builder_oracle).

Writes variant folders with the files a digest must cover or skip (hidden files, nested
folders, __pycache__ at any depth, a metadata.json below the top, links inside the folder,
empty files, a fifo), and for each folder the library's Digest.hash_variant in both algorithms;
and a table of metadata.json texts with whether the library's Rust Metadata.from_bytes accepts
each (its message when not).

Usage: kernel_builder_oracle.py OUT_DIR   (writes OUT_DIR/oracle.json and OUT_DIR/folders/)
"""

import json
import os
import shutil
import sys

from kernels._rust import Digest, DigestAlgorithm, KernelLocks, Metadata

BASE = {
    "name": "rmsnorm",
    "id": "_rmsnorm_cpu_0a1b2c3",
    "version": 1,
    "license": "Apache-2.0",
    "backend": {"type": "cpu"},
    "python-depends": [],
}

# (label, changes to BASE; None deletes the key)
METADATA_CASES = [
    ("minimal", {}),
    ("every optional field", {
        "kernel-depends": [{"repo-id": "kernels-community/activation", "version": 1},
                           {"repo-id": "org/other", "revision": "main"}],
        "kernels-minver": "0.17.0", "upstream": "https://github.com/org/rmsnorm",
        "source": "https://github.com/org/rmsnorm-kb", "license": "MIT",
        "backend": {"type": "cuda", "archs": ["8.0", "9.0a"]},
        "digest": {"algorithm": "sha512", "files": {"a.py": "AAAA"}},
        "python-depends": ["einops"],
        "provenance": {"kernel-builder": {"version": "0.9.0"}},
        "a field of a later format": True}),
    ("no name (kernel-builder before 2026)", {"name": None}),
    ("no id", {"id": None}),
    ("no version", {"version": None}),
    ("version a string", {"version": "1"}),
    ("version negative", {"version": -1}),
    ("no license", {"license": None}),
    ("license a number", {"license": 3}),
    ("no backend", {"backend": None}),
    ("backend type unknown", {"backend": {"type": "vulkan"}}),
    ("backend type upper case", {"backend": {"type": "CUDA"}}),
    ("archs not a list", {"backend": {"type": "cuda", "archs": "8.0"}}),
    ("no python-depends", {"python-depends": None}),
    ("name upper case", {"name": "RmsNorm"}),
    ("name one letter", {"name": "r"}),
    ("name ends with a dash", {"name": "rms-"}),
    ("name with a dash", {"name": "rms-norm"}),
    ("digest algorithm md5", {"digest": {"algorithm": "md5", "files": {}}}),
    ("digest without files", {"digest": {"algorithm": "sha256"}}),
    ("kernel-depends a string", {"kernel-depends": ["org/repo"]}),
    ("not an object", "[1, 2]"),
]


A = "a" * 40
# kernels.lock texts in the library's format (its KernelLocks reads them).
LOCK_CASES = [
    ("empty", "[]"),
    ("a version", f'[{{"dependency": {{"repo-id": "org/a", "version": 1}}, "lock": {{"commit": "{A}"}}}}]'),
    ("a revision", f'[{{"dependency": {{"repo-id": "org/a", "revision": "main"}}, "lock": {{"commit": "{A}"}}}}]'),
    ("a sha-256 commit", f'[{{"dependency": {{"repo-id": "org/a", "version": 2}}, "lock": {{"commit": "{"b" * 64}"}}}}]'),
    ("an upper-case commit", f'[{{"dependency": {{"repo-id": "org/a", "version": 2}}, "lock": {{"commit": "{"B" * 40}"}}}}]'),
    ("a short commit", '[{"dependency": {"repo-id": "org/a", "version": 1}, "lock": {"commit": "abc"}}]'),
    ("version and revision", f'[{{"dependency": {{"repo-id": "org/a", "version": 1, "revision": "x"}}, "lock": {{"commit": "{A}"}}}}]'),
    ("neither", f'[{{"dependency": {{"repo-id": "org/a"}}, "lock": {{"commit": "{A}"}}}}]'),
    ("no lock", '[{"dependency": {"repo-id": "org/a", "version": 1}}]'),
    ("version a string", f'[{{"dependency": {{"repo-id": "org/a", "version": "1"}}, "lock": {{"commit": "{A}"}}}}]'),
    ("an object", "{}"),
    ("the same dependency twice", f'[{{"dependency": {{"repo-id": "org/a", "version": 1}}, "lock": {{"commit": "{A}"}}}}, {{"dependency": {{"repo-id": "org/a", "version": 1}}, "lock": {{"commit": "{A}"}}}}]'),
]


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def folders(root):
    plain = os.path.join(root, "plain")
    write(os.path.join(plain, "__init__.py"), b"from ._ops import ops\n")
    write(os.path.join(plain, "_ops.py"), b"import torch\n")
    write(os.path.join(plain, "_rmsnorm_cpu_0a1b2c3.abi3.so"), bytes(range(256)) * 300)
    write(os.path.join(plain, "metadata.json"), b"{}")
    write(os.path.join(plain, "metadata.json.sigstore"), b"{}")
    yield "plain"

    odd = os.path.join(root, "odd")
    write(os.path.join(odd, ".hidden"), b"h")
    write(os.path.join(odd, "empty"), b"")
    write(os.path.join(odd, "layers", "__init__.py"), b"x = 1\n")
    write(os.path.join(odd, "layers", "deep", "more", "f.txt"), "é ünïcödé\n".encode())
    write(os.path.join(odd, "layers", "__pycache__", "x.cpython-311.pyc"), b"pyc")
    write(os.path.join(odd, "__pycache__", "y.pyc"), b"pyc")
    write(os.path.join(odd, "layers", "metadata.json"), b"a nested one is a file")
    write(os.path.join(odd, "metadata.json"), b"{}")
    os.symlink("layers/__init__.py", os.path.join(odd, "linked.py"))
    os.symlink("layers/deep", os.path.join(odd, "linked_folder"))
    os.mkfifo(os.path.join(odd, "a_fifo"))
    os.makedirs(os.path.join(odd, "empty_folder"))
    yield "odd"


def main():
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    root = os.path.join(out, "folders")
    digests = []
    for name in folders(root):
        for algorithm in (DigestAlgorithm.SHA256, DigestAlgorithm.SHA512):
            d = Digest.hash_variant(algorithm, os.path.join(root, name))
            digests.append({"folder": name, "algorithm": str(algorithm).lower().split(".")[-1],
                            "files": d.files})
    metadata = []
    for label, change in METADATA_CASES:
        if isinstance(change, str):
            text = change
        else:
            doc = dict(BASE)
            for key, value in change.items():
                if value is None:
                    doc.pop(key)
                else:
                    doc[key] = value
            text = json.dumps(doc)
        try:
            Metadata.from_bytes(text.encode())
            metadata.append({"label": label, "text": text, "accepted": True})
        except ValueError as e:
            metadata.append({"label": label, "text": text, "accepted": False, "error": str(e)})
    locks = []
    for label, text in LOCK_CASES:
        try:
            parsed = KernelLocks.from_json(text)
            locks.append({"label": label, "text": text, "accepted": True,
                          "commits": sorted(v.commit for v in parsed.values())})
        except ValueError as e:
            locks.append({"label": label, "text": text, "accepted": False, "error": str(e)})
    with open(os.path.join(out, "oracle.json"), "w") as f:
        json.dump({"digests": digests, "metadata": metadata, "locks": locks}, f, indent=1)
    print(f"kernel_builder_oracle: {len(digests)} digests, {len(metadata)} metadata texts")


if __name__ == "__main__":
    main()
