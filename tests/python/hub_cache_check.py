#!/usr/bin/env python3
"""`hwprobe plan ORG/NAME[@REV]` finds models in a Hugging Face cache as transformers does
offline (run by ctest: hub_cache_check).

Builds a cache with huggingface_hub's own functions (repo_folder_name, blobs linked into
snapshots with _create_symlink, refs written by _cache_commit_hash_for_specific_revision) from
tiny random checkpoints that transformers saves, then for each case:
- huggingface_hub's try_to_load_from_cache finds the snapshot hwprobe reports;
- hwprobe plan's map equals the hf_device_map of transformers' from_pretrained(ID,
  revision=REV, device_map="sequential", max_memory=...) with HF_HUB_OFFLINE=1 and the same
  cache (a budget that sends part of the model to disk); for an architecture planned from its
  weights alone (approximate), every parameter lands where from_pretrained puts it;
- an id or revision not in the cache exits 2 with nothing on stdout.

Usage: hub_cache_check.py HWPROBE WORK
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import warnings

warnings.simplefilter("ignore")
os.environ["HF_HUB_OFFLINE"] = "1"

import huggingface_hub  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from huggingface_hub import file_download, try_to_load_from_cache  # noqa: E402
from transformers import CONFIG_MAPPING, AutoModelForCausalLM  # noqa: E402

transformers.logging.set_verbosity_error()

LLAMA = {"num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 500}


def add_snapshot(cache, repo_id, revision, commit, folder, only=None):
    """Files of `folder` as huggingface_hub stores a download: blobs named by content, links in
    snapshots/<commit>, refs/<revision> naming the commit."""
    storage = os.path.join(cache, file_download.repo_folder_name(repo_id=repo_id,
                                                                 repo_type="model"))
    for name in sorted(os.listdir(folder)):
        if only is not None and name not in only:
            continue
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        blob = os.path.join(storage, "blobs", hashlib.sha256(data).hexdigest())
        os.makedirs(os.path.dirname(blob), exist_ok=True)
        with open(blob, "wb") as f:
            f.write(data)
        pointer = os.path.join(storage, "snapshots", commit, name)
        os.makedirs(os.path.dirname(pointer), exist_ok=True)
        file_download._create_symlink(blob, pointer)
    file_download._cache_commit_hash_for_specific_revision(storage, revision, commit)


def saved(work, name, model_type, fields):
    folder = os.path.join(work, "saved", name)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(CONFIG_MAPPING[model_type](**fields))
    model.save_pretrained(folder)
    return folder, sum(p.numel() * p.element_size() for p in model.parameters())


def plan(hwprobe, model, env, budget):
    return subprocess.run(
        [hwprobe, "plan", model, "--device-map", "sequential", "--max-memory", f"cpu={budget}",
         "--json"], capture_output=True, text=True,
        env={**os.environ, **env, "BACKPLANE_PLUGINS": "cpu"})


def placed(device_map, name):
    """The device a map gives parameter `name`: its longest module prefix's."""
    parts = name.split(".")
    for i in range(len(parts), -1, -1):
        key = ".".join(parts[:i])
        if key in device_map:
            return device_map[key]
    return None


def load_elsewhere(repo_id, revision, budget, env, offload):
    """hf_device_map of from_pretrained in a fresh process: huggingface_hub reads its cache
    variables once, at import."""
    child = subprocess.run(
        [sys.executable, __file__, "--load", repo_id, revision, str(budget), offload],
        capture_output=True, text=True,
        env={**{k: v for k, v in os.environ.items() if k not in ("HF_HUB_CACHE", "HF_HOME")},
             **env})
    if child.returncode != 0:
        return f"from_pretrained failed: {child.stderr.strip().splitlines()[-1:]}"
    return json.loads(child.stdout.strip().splitlines()[-1])


def load(repo_id, revision, budget, offload):
    model = AutoModelForCausalLM.from_pretrained(
        repo_id, revision=revision, device_map="sequential", max_memory={"cpu": int(budget)},
        offload_folder=offload)
    names = [n for n, _ in model.named_parameters()]
    print(json.dumps({"map": dict(model.hf_device_map), "parameters": names}))
    return 0


def main():
    if sys.argv[1] == "--load":
        return load(*sys.argv[2:6])
    hwprobe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cache = os.path.join(work, "hf_home", "hub")
    llama, llama_size = saved(work, "llama", "llama", LLAMA)
    deeper, deeper_size = saved(work, "llama6", "llama", {**LLAMA, "num_hidden_layers": 6})
    gpt2, gpt2_size = saved(work, "gpt2", "gpt2", {"n_layer": 3, "n_embd": 64, "n_head": 4,
                                                   "vocab_size": 500, "n_positions": 64})
    main_commit, tag_commit, gpt2_commit = "1" * 40, "2" * 40, "3" * 40
    add_snapshot(cache, "tests-org/tiny-llama", "main", main_commit, llama)
    add_snapshot(cache, "tests-org/tiny-llama", "v2", tag_commit, deeper)
    add_snapshot(cache, "tiny-gpt2", "main", gpt2_commit, gpt2)
    add_snapshot(cache, "tests-org/config-only", "main", "4" * 40, llama, only={"config.json"})

    by_cache = {"HF_HUB_CACHE": cache}
    by_home = {"HF_HOME": os.path.dirname(cache)}  # HF_HOME/hub, as huggingface_hub derives it
    cases = [  # (model word, repo id, revision, env, parameter bytes, exact)
        ("tests-org/tiny-llama", "tests-org/tiny-llama", "main", by_cache, llama_size, True),
        ("tests-org/tiny-llama@v2", "tests-org/tiny-llama", "v2", by_cache, deeper_size, True),
        (f"tests-org/tiny-llama@{main_commit}", "tests-org/tiny-llama", main_commit, by_home,
         llama_size, True),
        # GPT-2 is described too (core/src/model/architectures/gpt2.json): exact.
        ("tiny-gpt2", "tiny-gpt2", "main", by_home, gpt2_size, True),
    ]
    failures = 0

    def fail(text):
        nonlocal failures
        failures += 1
        print("FAIL " + text)

    for word, repo_id, revision, env, size, exact in cases:
        budget = size // 2
        result = plan(hwprobe, word, env, budget)
        if result.returncode != 0:
            fail(f"{word}: hwprobe plan exited {result.returncode}: {result.stderr}")
            continue
        out = json.loads(result.stdout)
        found = try_to_load_from_cache(repo_id, "config.json", cache_dir=cache, revision=revision)
        snapshot = os.path.dirname(found) if isinstance(found, str) else None
        model = out["model"]
        if snapshot is None or os.path.realpath(model["path"]).rstrip("/") not in (
                os.path.realpath(snapshot), os.path.realpath(os.path.join(snapshot, "config.json"))):
            fail(f"{word}: hwprobe read {model['path']}, huggingface_hub finds {snapshot}")
            continue
        if model["hub_id"] != repo_id or model["revision"] != revision or out["exact"] != exact:
            fail(f"{word}: reported {model}, exact={out['exact']}")
            continue
        theirs = load_elsewhere(repo_id, revision, budget, env,
                                os.path.join(work, "offload", repo_id.replace("/", "_")))
        if isinstance(theirs, str):
            fail(f"{word}: {theirs}")
            continue
        # An exact plan is from_pretrained's map; an approximate one (no description of the
        # architecture: modules without tensors are unknown) puts every parameter where
        # from_pretrained puts it.
        same = (theirs["map"] == out["device_map"] if exact else
                all(placed(out["device_map"], n) == placed(theirs["map"], n)
                    for n in theirs["parameters"]))
        if not same:
            fail(f"{word}: hwprobe {out['device_map']} != from_pretrained {theirs['map']}")
            continue
        print(f"ok   {word}: snapshot {model['commit'][:8]}, {out['device_map']}")

    config_only = plan(hwprobe, "tests-org/config-only", by_cache, llama_size // 2)
    if config_only.returncode != 0 or json.loads(config_only.stdout)["model"]["kind"] != "config":
        fail(f"config-only snapshot: {config_only.returncode} {config_only.stdout[:200]} "
             f"{config_only.stderr}")
    else:
        print("ok   a snapshot with only config.json plans from the config")

    for word, expected in (("tests-org/not-cached", "models--tests-org--not-cached"),
                           ("tests-org/tiny-llama@v9", "cached snapshots: ")):
        missing = plan(hwprobe, word, by_cache, 1 << 30)
        if missing.returncode != 2 or missing.stdout or expected not in missing.stderr:
            fail(f"{word}: exit {missing.returncode}, stdout {missing.stdout!r}, "
                 f"stderr {missing.stderr!r}")
        else:
            print(f"ok   {word}: exit 2, {missing.stderr.strip().splitlines()[0][:100]}...")
    print(f"hub cache: {failures} failures (transformers {transformers.__version__}, "
          f"huggingface_hub {huggingface_hub.__version__})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
