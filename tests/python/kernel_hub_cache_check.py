#!/usr/bin/env python3
"""kernel-hub on Kernel Hub packages in a Hugging Face cache, against the `kernels` library
itself (run by ctest: kernel_hub_cache_check).

Builds a cache with huggingface_hub's own functions (repo_folder_name for repo type "kernel"
and the older "model", blobs linked into snapshots with _create_symlink, refs written by
_cache_commit_hash_for_specific_revision) holding the kernel-builder packages this build
publishes, plus a repository of many variant folders. Then:
- `kernel-hub list --json` reports every ref and snapshot huggingface_hub's scan_cache_dir does;
- `kernel-hub resolve --json` chooses the variant the library's resolve_variant chooses on
  this very system (this torch, cpu; and CUDA as this torch build reports it, on a simulated
  GPU), accepting and refusing the same ones;
- `kernel-hub show --json` says the digest matches where the library's Digest.validate does,
  and names the file after a blob is changed;
- `kernel-hub lock --format kernels` writes a lock the library's KernelLocks reads, and its
  load_kernel loads the package from this cache with that lock; `kernel-hub verify` accepts it;
- `kernel-hub ops --json` lists the ops the library's import registers in torch's dispatcher;
- `kernel-hub install --repo` installs a kernel-builder package folder, refused without --repo.

Usage: kernel_hub_cache_check.py KERNEL_HUB PACKAGES_DIR CPU_VARIANT WORK
"""

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import warnings

warnings.simplefilter("ignore")
os.environ["HF_HUB_OFFLINE"] = "1"
KERNEL_HUB, PACKAGES, CPU_VARIANT, WORK = sys.argv[1:5]
# The kernels library reads KERNELS_CACHE when it is imported.
os.environ["KERNELS_CACHE"] = os.path.join(WORK, "hf-cache")

import huggingface_hub  # noqa: E402
from huggingface_hub import file_download  # noqa: E402

import kernels  # noqa: E402
from kernels import variants as kv  # noqa: E402
from kernels._rust import Digest, DigestValidationError, KernelLocks, Metadata  # noqa: E402

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def add_snapshot(cache, repo_id, repo_type, ref, commit, package):
    """`package` (holding build/) as huggingface_hub stores a download."""
    storage = os.path.join(cache, file_download.repo_folder_name(repo_id=repo_id,
                                                                 repo_type=repo_type))
    for root, _, files in os.walk(package):
        for name in sorted(files):
            path = os.path.join(root, name)
            if "__pycache__" in path:
                continue
            with open(path, "rb") as f:
                data = f.read()
            blob = os.path.join(storage, "blobs", hashlib.sha256(data).hexdigest())
            os.makedirs(os.path.dirname(blob), exist_ok=True)
            with open(blob, "wb") as f:
                f.write(data)
            pointer = os.path.join(storage, "snapshots", commit, os.path.relpath(path, package))
            os.makedirs(os.path.dirname(pointer), exist_ok=True)
            file_download._create_symlink(blob, pointer)
    file_download._cache_commit_hash_for_specific_revision(storage, ref, commit)
    return os.path.join(storage, "snapshots", commit)


def run(*args, env, expect=0):
    p = subprocess.run([KERNEL_HUB, *args], env=env, capture_output=True, text=True)
    if p.returncode != expect:
        failures.append(f"kernel-hub {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
        print("FAIL: kernel-hub", *args, p.returncode, p.stderr)
    return p


def commit_of(text):
    return hashlib.sha1(text.encode()).hexdigest()


shutil.rmtree(WORK, ignore_errors=True)
cache = os.path.join(WORK, "hf-cache")
env = dict(os.environ, KERNELS_CACHE=cache, BACKPLANE_HUB_CACHE=os.path.join(WORK, "store"),
           HOME=WORK)
env.pop("BACKPLANE_LOCAL_KERNELS", None)
env.pop("BACKPLANE_TRUSTED_KERNELS", None)

activation = os.path.join(PACKAGES, "activation")
rmsnorm = os.path.join(PACKAGES, "rmsnorm")
c1, c2 = commit_of("activation v1"), commit_of("rmsnorm v2")
add_snapshot(cache, "acme/activation", "kernel", "v1", c1, activation)
add_snapshot(cache, "acme/activation", "kernel", "main", c1, activation)
add_snapshot(cache, "older/rmsnorm", "model", "v2", c2, rmsnorm)  # the older "models--" layout

# A repository of many variant folders (copies of the cpu build under other names).
many = os.path.join(WORK, "many")
names = ["torch215-cxx11-cpu-x86_64-linux", "torch215-cpu-x86_64-linux",
         "torch214-cxx11-cpu-x86_64-linux", "torch-stable-abi29-cpu-x86_64-linux",
         "torch-stable-abi212-cpu-x86_64-linux", "torch-stable-abi216-cpu-x86_64-linux",
         "torch215-cxx98-cpu-x86_64-linux", "torch215-cxx11-cpu-aarch64-linux",
         "torch215-cxx11-cu130-x86_64-linux", "torch215-cu132-x86_64-linux",
         "torch215-cxx11-cu126-x86_64-linux", "torch215-cu133-x86_64-linux",
         "torch-stable-abi210-cu130-x86_64-linux", "torch-cpu", "torch-cuda", "torch-universal"]
for name in names:
    shutil.copytree(os.path.join(activation, "build", CPU_VARIANT),
                    os.path.join(many, "build", name))
c3 = commit_of("many")
many_snapshot = add_snapshot(cache, "acme/many", "kernel", "main", c3, many)

# 1. list: every ref and snapshot huggingface_hub sees.
listed = json.loads(run("list", "--json", env=env).stdout)
ours = {(p["repo"], p["revision"], p["commit"]) for p in listed["packages"] if p["hf_cache"]}
theirs = set()
for repo in huggingface_hub.scan_cache_dir(cache).repos:
    for rev in repo.revisions:
        for ref in rev.refs:
            theirs.add((repo.repo_id, ref, rev.commit_hash))
check(ours == theirs, f"kernel-hub list {sorted(ours)} != scan_cache_dir {sorted(theirs)}")

# 2. resolve: the library's choice on this system, for cpu and for this torch's CUDA.
import torch  # noqa: E402

torch_version = "{}.{}".format(*torch.__version__.split(".")[:2])
abi = "cxx11" if torch.compiled_with_cxx11_abi() else "cxx98"
build = os.path.join(many_snapshot, "build")
cases = [("cpu", ["--torch-version", torch_version, "--torch-cxx-abi", abi])]
if torch.version.cuda:
    cases.append((None, ["--sim", "h100x8", "--device", "cuda:0", "--backend-version",
                         torch.version.cuda, "--torch-version", torch_version,
                         "--torch-cxx-abi", abi]))
for backend, args in cases:
    chosen, trace = kv.resolve_variant(kv.get_variants_local(pathlib.Path(build)), backend)
    out = json.loads(run("resolve", "acme/many", "--json", *args, env=env).stdout)
    check(out["variant"] == (chosen.variant_str if chosen else None),
          f"resolve ({backend or 'cuda'}): kernel-hub chose {out['variant']}, kernels "
          f"{chosen.variant_str if chosen else None}")
    accepted = {d.variant.variant_str for d in trace if isinstance(d, kv.VariantAccepted)}
    ours_accepted = {d["variant"] for d in out["decisions"] if d["accepted"]}
    check(accepted == ours_accepted,
          f"resolve ({backend or 'cuda'}): accepted {sorted(ours_accepted)} != {sorted(accepted)}")

# 3. show: the digest verdict, before and after a blob changes.
def digest_ok(variant_folder):
    m = Metadata.read_from_file(os.path.join(variant_folder, "metadata.json"))
    try:
        m.digest.validate(Digest.hash_variant(m.digest.algorithm, variant_folder))
        return True
    except DigestValidationError:
        return False


def show_digest(repo, revision):
    out = json.loads(run("show", repo, "--json", env=env).stdout)
    for r in out["revisions"]:
        if r["revision"] == revision:
            return {v["variant"]: v["digest"] for v in r["variants"]}
    return {}


snapshot = os.path.join(cache, "kernels--acme--activation", "snapshots", c1)
shown = show_digest("acme/activation", "v1")
for variant, digest in shown.items():
    check(digest["ok"] == digest_ok(os.path.join(snapshot, "build", variant)),
          f"show: digest of {variant}")
check(all(d["ok"] for d in shown.values()) and len(shown) >= 1, "show: the published digests")
run("verify", "acme/activation", env=env)
legacy = json.loads(run("show", "older/rmsnorm", "--json", env=env).stdout)
check(legacy["revisions"][0]["revision"] == "v2" and legacy["revisions"][0]["hf_cache"],
      "show: a models-- folder is read")

# 4. lock in the kernels library's format, read and loaded by the library itself.
config = os.path.join(WORK, "lock-config.json")
with open(config, "w") as f:
    json.dump({"kernels": {"acme/activation": "v1"}}, f)
lock_path = os.path.join(WORK, "kernels.lock")
run("lock", config, "--format", "kernels", "-o", lock_path, env=env)
with open(lock_path) as f:
    lock_text = f.read()
locks = KernelLocks.from_json(lock_text)
check(locks.to_json().strip() == lock_text.strip(), "lock: the library writes it back the same")
check([v.commit for v in locks.values()] == [c1], "lock: the commit")
run("verify", lock_path, env=env)
try:
    module = kernels.load_kernel("acme/activation", lockfile=pathlib.Path(lock_path), backend="cpu")
    x = torch.randn(4, 16)
    out = torch.empty(4, 8)
    module.silu_and_mul(out, x)
    check(torch.allclose(out, torch.nn.functional.silu(x[:, :8]) * x[:, 8:], atol=1e-5),
          "lock: the kernel the library loaded with our lock computes silu_and_mul")
except Exception as e:  # noqa: BLE001
    check(False, f"lock: kernels.load_kernel with our lock: {e!r}")

# 5. ops: what the library's import registered.
ops = run("ops", "acme/activation", "--lock", lock_path, "--json", env=env)
if ops.returncode == 0:
    listed_ops = json.loads(ops.stdout)
    ns = listed_ops["namespace"]
    registered = {n for n in torch._C._dispatch_get_all_op_names() if n.startswith(ns + "::")}
    ours_ops = {s.split("(")[0] for s in listed_ops["ops"]}
    check(ours_ops == registered, f"ops: {sorted(ours_ops)} != torch's {sorted(registered)}")
untrusted = run("ops", "acme/activation", env=env, expect=1)
check("not locked and its publisher is not trusted" in untrusted.stderr,
      f"ops: an untrusted package is refused: {untrusted.stderr.strip()}")

# 6. A changed blob: show and verify name the file; the library agrees it no longer matches.
init = os.path.join(snapshot, "build", CPU_VARIANT, "__init__.py")
blob = os.path.realpath(init)
with open(blob, "a") as f:
    f.write("# changed\n")
shown = show_digest("acme/activation", "v1")
check(not digest_ok(os.path.dirname(init)), "the library sees the change")
check(not shown[CPU_VARIANT]["ok"] and
      any("__init__.py" in p for p in shown[CPU_VARIANT]["problems"]),
      f"show: the changed file is named: {shown[CPU_VARIANT]}")
bad = run("verify", lock_path, env=env, expect=1)
check("hash mismatch __init__.py" in bad.stdout, f"verify names the file: {bad.stdout}")

# 7. install a kernel-builder package folder: --repo is needed.
refused = run("install", activation, env=env, expect=2)
check("--repo org/name" in refused.stderr, f"install without --repo: {refused.stderr.strip()}")
installed = json.loads(run("install", activation, "--repo", "acme/act-installed", "--json",
                           env=env).stdout)
check(sorted(installed["variants"]) == sorted(os.listdir(os.path.join(activation, "build"))),
      f"install: {installed}")

if failures:
    print(f"kernel_hub_cache_check: {len(failures)} failures")
    sys.exit(1)
print("kernel_hub_cache_check: list, resolve (%d systems), show, lock, load_kernel, ops, verify "
      "and install agree with the kernels library" % len(cases))
