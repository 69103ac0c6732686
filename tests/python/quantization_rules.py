#!/usr/bin/env python3
"""Writes core/src/model/quantization_rules.json from the pinned transformers and compressed-tensors:
what the compressed-tensors planner needs to know about classes and presets.

  linear_classes, embedding_classes  the module classes of transformers' models that are
      nn.Linear / nn.Embedding or subclass them (compressed-tensors quantizes exactly those, and
      its class-name targets match any class of a module's MRO, so "Linear" matches
      Llama4Router too).
  compressed_tensors_presets  compressed-tensors' preset schemes (a config group whose value is a
      list of targets names one), as their QuantizationArgs dump them.

ctest quantization_rules_current regenerates it and compares.

Usage: quantization_rules.py OUT.json
"""

import importlib
import inspect
import json
import pkgutil
import sys
import warnings

import torch.nn as nn


def model_classes():
    import transformers
    import transformers.models as models

    linear, embedding = {"Linear"}, {"Embedding"}
    for info in pkgutil.iter_modules(models.__path__):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(f"transformers.models.{info.name}.modeling_{info.name}")
        except Exception:  # models without a modeling file, or needing absent packages
            continue
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, nn.Linear):
                linear.add(name)
            if issubclass(cls, nn.Embedding):
                embedding.add(name)
    return transformers.__version__, sorted(linear), sorted(embedding)


def args_json(args):
    if args is None:
        return None
    out = {}
    for key in ("num_bits", "type", "symmetric", "group_size", "strategy", "block_structure",
                "dynamic", "scale_dtype", "zp_dtype"):
        value = getattr(args, key)
        if hasattr(value, "value"):
            value = value.value
        if key.endswith("dtype") and value is not None:
            value = str(value).replace("torch.", "")
        out[key] = value
    return out


def presets():
    import compressed_tensors
    from compressed_tensors.quantization.quant_scheme import PRESET_SCHEMES

    out = {}
    for name, scheme in PRESET_SCHEMES.items():
        out[name] = {base: args_json(scheme.get(base))
                     for base in ("weights", "input_activations", "output_activations")}
    return compressed_tensors.__version__, out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    transformers_version, linear, embedding = model_classes()
    ct_version, preset_schemes = presets()
    data = {
        "generated_from": f"transformers {transformers_version}, compressed-tensors {ct_version}",
        "linear_classes": linear,
        "embedding_classes": embedding,
        "compressed_tensors_presets": preset_schemes,
    }
    with open(sys.argv[1], "w") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")


if __name__ == "__main__":
    main()
