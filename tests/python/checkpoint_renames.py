#!/usr/bin/env python3
"""The checkpoint-to-model renames of transformers 5's weight conversion, as data for the
weights path of backplane (core/src/model/checkpoint_renames.json, compiled in).

from_pretrained renames some tensors of a checkpoint as it loads it (GPT-NeoX's embed_out is the
model's lm_head; Mixtral's block_sparse_moe is mlp) and fuses others (the experts of an MoE
into one tensor). For every architecture the pinned transformers builds from its config class's
defaults, this asks transformers itself (conversion_mapping.get_model_conversion_mapping on the
model built on the meta device) and writes the renames every model takes once, then per
model_type its own renames, each [ECMAScript regex, replacement] or, confined to a sub-model,
[regex, replacement, scope, base_model_prefix], and whether it fuses tensors on load.

Usage: checkpoint_renames.py OUT.json    (ctest checkpoint_renames_current compares a fresh run
                                          with the committed file)
"""

import json
import logging
import re
import sys
import warnings

import torch
import transformers
from transformers import CONFIG_MAPPING, AutoModelForCausalLM
from transformers import conversion_mapping
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES


def ecmascript(pattern):
    """A compiled Python alternative as ECMAScript: named groups become plain groups."""
    return re.sub(r"\(\?P<[^>]+>", "(", pattern)


def replacement(target):
    """Python's \\1 backreferences as ECMAScript's $1."""
    return re.sub(r"\\(\d)", r"$\1", target)


def renames_of(conversions):
    """[pattern, replacement] per source pattern of each renaming, [pattern, replacement, scope,
    base_model_prefix] for one confined to a sub-model, and whether any transform fuses."""
    renames, fuses = [], False
    for c in conversions:
        kind = type(c).__name__
        if kind == "WeightRenaming":
            # One compiled alternative per source pattern; all share the first target.
            alternatives = c.compiled_sources.pattern.split("|(?P<")
            alternatives = [a if i == 0 else "(?P<" + a for i, a in enumerate(alternatives)]
            for alternative in alternatives:
                inner = ecmascript(alternative)
                if inner.startswith("(") and inner.endswith(")"):
                    inner = inner[1:-1]
                rule = [inner, replacement(c.target_patterns[0])]
                if c.scope_prefix is not None:
                    rule += [c.scope_prefix, c.base_model_prefix]
                renames.append(rule)
        elif kind in ("WeightConverter", "LayerPairCollapse", "GroupWeightRename"):
            fuses = True
    return renames, fuses


def main():
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    # The legacy renames transformers appends for every model, once rather than per model.
    every_model, _ = renames_of(conversion_mapping.get_checkpoint_conversion_mapping("legacy"))
    out = {"transformers": transformers.__version__, "every_model": every_model, "models": {}}
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        try:
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(CONFIG_MAPPING[model_type]())
            conversions = conversion_mapping.get_model_conversion_mapping(model, add_legacy=False)
            renames, fuses = renames_of(conversions)
        except Exception:
            continue  # what transformers cannot build from its defaults (architecture_oracle.py)
        out["models"][model_type] = {"renames": renames, "fuses": fuses}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"checkpoint_renames: {len(out['models'])} model types -> {sys.argv[1]}", file=sys.stderr)


if __name__ == "__main__":
    main()
