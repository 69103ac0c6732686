#!/usr/bin/env python3
"""Writes core/src/model/auto_models.json from transformers itself: for each described
architecture, the model AutoModel.from_config builds (what `accelerate estimate-memory` sizes)
as a part of the tree the descriptor gives (the AutoModelForCausalLM / Seq2SeqLM one):
  {"class": "LlamaModel", "prefix": "model", "no_split_modules": [...]}: the subtree at `prefix`;
  {"class": "T5Model", "prefix": "", "without": ["lm_head"], ...}: the root minus those children;
  "separate": AutoModel's parameters that estimate-memory's build (init_empty_weights) leaves
  untied although the model ties them (T5Model's encoder.embed_tokens.weight): counted again, as
  accelerate counts them.
An architecture whose AutoModel is neither is left out (backplane then says it cannot tell).

Usage: auto_models.py OUT_JSON [MODEL_TYPE...]   (default: every descriptor's model_type)
       auto_models.py --check JSON               (exit 1 when the file differs from a rewrite)
"""

import glob
import json
import os
import sys
import warnings

import torch
import transformers
from accelerate import init_empty_weights
from transformers import AutoModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import architecture_oracle  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DESCRIPTORS = os.path.join(ROOT, "core", "src", "model", "architectures")


def tensor_names(model):
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    return set(names)


def part_of(full, base_names):
    """How the tensors `base_names` sit in `full`: (prefix, children left out), or None."""
    full_names = tensor_names(full)
    for prefix, _ in full.named_children():
        inside = {n[len(prefix) + 1:] for n in full_names if n.startswith(prefix + ".")}
        if inside == base_names:
            return prefix, []
    top = {n.split(".", 1)[0] for n in full_names}
    extra = sorted(c for c in top if not any(b.split(".", 1)[0] == c for b in base_names))
    if {n for n in full_names if n.split(".", 1)[0] not in extra} == base_names:
        return "", extra
    return None


def entry(model_type):
    config = architecture_oracle.small_config(model_type)
    _, full_class = architecture_oracle.auto_class(model_type)
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = full_class.from_config(config)  # tied as from_pretrained ties: the descriptor's
        tied_base = AutoModel.from_config(config)
    # As estimate-memory builds it: under init_empty_weights, whose re-registered parameters
    # lose some ties (T5Model's embeddings). Its buffers are real: where they do not fit this
    # machine (some are tens of GiB), the meta build stands in and the ties are taken as kept.
    try:
        with init_empty_weights(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            base = AutoModel.from_config(config, dtype=torch.float32)
    except RuntimeError as error:
        print(f"{model_type}: estimate-memory's build does not fit here "
              f"({str(error).splitlines()[0][:80]}...): ties taken as kept", file=sys.stderr)
        base = tied_base
    tied_names = tensor_names(tied_base)
    where = part_of(full, tied_names)
    if where is None:
        return None
    prefix, without = where
    out = {"class": type(base).__name__, "prefix": prefix}
    if without:
        out["without"] = without
    separate = sorted(tensor_names(base) - tied_names)
    if separate:
        out["separate"] = separate
    out["no_split_modules"] = sorted(base._no_split_modules or [])
    return out


def described_types():
    types = []
    for path in sorted(glob.glob(os.path.join(DESCRIPTORS, "*.json"))):
        with open(path) as f:
            types.append(json.load(f)["model_type"])
    return types


def build(model_types):
    models = {}
    for model_type in model_types:
        try:
            found = entry(model_type)
        except Exception as error:  # an architecture AutoModel cannot build: left out, said
            print(f"{model_type}: {type(error).__name__}: {str(error).splitlines()[0][:160]}",
                  file=sys.stderr)
            continue
        if found is None:
            print(f"{model_type}: AutoModel's tree is not a part of the causal LM's", file=sys.stderr)
            continue
        models[model_type] = found
    return {"format": "backplane-auto-models", "version": 1,
            "generated_from": "transformers " + transformers.__version__, "models": models}


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        with open(argv[2]) as f:
            written = json.load(f)
        fresh = build(sorted(written["models"]))
        if fresh != written:
            for key in sorted(set(fresh["models"]) | set(written["models"])):
                if fresh["models"].get(key) != written["models"].get(key):
                    print(f"{key}: transformers {fresh['models'].get(key)}, file {written['models'].get(key)}")
            return 1
        print(f"auto_models: {len(written['models'])} architectures as transformers builds them")
        return 0
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = build(argv[2:] or described_types())
    with open(argv[1], "w") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"{len(data['models'])} architectures written to {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
