#!/usr/bin/env python3
"""The oracle of the exported-tree differential test (tests/planner/differential_test.cpp,
DeviceMapDifferential.FromExportedTrees): every causal-LM architecture of the pinned
transformers, built on the meta device from its config class's defaults (layers cut to a few,
so that plans split them), written by tools/export-module-tree's own code, and what
from_pretrained's planning (transformers.integrations.accelerate._get_device_map) places for
each strategy over budgets that split the model across 2-4 GPUs with cpu and disk offload.

Writes {"models": {model_type: {"tree": <the tree file's JSON>, "model_size": N}},
        "cases": [...as device_map_oracle.py writes them...],
        "refused": {model_type: "why transformers could not build it"}}.
Deterministic. Usage: architecture_oracle.py OUT.json
"""

import hashlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "tools", "export-module-tree", "export-module-tree")


def _stamp():
    digest = hashlib.sha256()
    for path in (__file__, TOOL, os.path.join(HERE, "device_map_oracle.py")):
        with open(path, "rb") as f:
            digest.update(f.read())
    import importlib.metadata

    for package in ("torch", "transformers", "accelerate"):
        digest.update(f"{package}={importlib.metadata.version(package)}".encode())
    return digest.hexdigest()


if __name__ == "__main__" and len(sys.argv) == 2:
    try:
        with open(sys.argv[1] + ".stamp") as f:
            if f.read() == _stamp() and os.path.exists(sys.argv[1]):
                sys.exit(0)
    except OSError:
        pass

sys.path.insert(0, HERE)
import device_map_oracle as dmo  # noqa: E402  (its budget and simulation helpers)
import torch  # noqa: E402
from transformers import CONFIG_MAPPING  # noqa: E402
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # noqa: E402


def load_tool():
    loader = importlib.machinery.SourceFileLoader("export_module_tree", TOOL)
    spec = importlib.util.spec_from_loader("export_module_tree", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


LAYER_KEYS = ["num_hidden_layers", "n_layer", "num_layers", "n_layers"]


def small_config(model_type, shrink=True):
    """The config class's defaults, with at most 4 layers (what a plan splits) when `shrink`."""
    config = CONFIG_MAPPING[model_type]()
    if not shrink:
        return config
    try:
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
    except ValueError:
        return config
    for key in LAYER_KEYS:
        value = getattr(text, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 4:
            setattr(text, key, 4)
            # Per-layer lists must follow the layer count.
            for list_key in ("layer_types", "mlp_only_layers", "block_types", "layers_block_type"):
                listed = getattr(text, list_key, None)
                if isinstance(listed, list) and len(listed) > 4:
                    setattr(text, list_key, listed[:4])
    return config


def main():
    out_path = sys.argv[1]
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    tool = load_tool()
    import random

    rng = random.Random(20261201)
    started = time.time()
    models, cases, refused = {}, [], {}
    from transformers import AutoModelForCausalLM
    from transformers.integrations import accelerate as tia

    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        try:
            try:
                config = small_config(model_type)
                with torch.device("meta"):
                    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
            except Exception:  # some classes fix their layer count: the defaults as they are
                config = small_config(model_type, shrink=False)
                with torch.device("meta"):
                    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
            tree = tool.describe(model, config, "causal-lm", model_type)
            sizes, _ = tia.compute_module_sizes(model)
            size = sizes[""]
        except Exception as e:  # an architecture the defaults cannot build: reported, not hidden
            refused[model_type] = f"{type(e).__name__}: {str(e)[:200]}"
            continue
        if size == 0:
            refused[model_type] = "no parameters"
            continue
        models[model_type] = {"tree": tree, "model_size": size}
        s = size
        block = max((v for k, v in sizes.items() if k.count(".") == 2 and k.split(".")[-1].isdigit()),
                    default=s // 8)
        specs = [
            ("2-gpus", {0: s // 2, 1: s // 2, "cpu": s}),
            ("3-gpus-offload", {0: s // 4, 1: s // 4, 2: s // 4, "cpu": s // 2}),
            ("4-gpus-disk", {0: s // 6, 1: s // 6, 2: s // 6, 3: s // 6, "cpu": s // 8}),
            ("blocks", {0: 2 * block, 1: 2 * block, "cpu": 2 * block}),
        ]
        f = rng.uniform(0.3, 1.5)
        specs.append((f"random-x{f:.2f}", {0: int(s * f / 3), 1: int(s * f / 3), 2: int(s * f / 3),
                                          "cpu": int(s * rng.uniform(0.1, 1))}))
        for label, max_memory in specs:
            dmo._simulated = None
            for strategy in dmo.STRATEGIES:
                dmo._last_budgets = None
                result = dmo.run(lambda: tia._get_device_map(model, strategy, dict(max_memory), None))
                cases.append({
                    "model": model_type, "rules": "from_pretrained", "strategy": strategy,
                    "budget": label, "max_memory": dmo.budgets_json(max_memory), "hardware": None,
                    "dtype": None, "expected": result, "budgets": dmo.budgets_json(dmo._last_budgets),
                })
    with open(out_path, "w") as f:
        json.dump({"models": models, "cases": cases, "refused": refused}, f)
    with open(out_path + ".stamp", "w") as f:
        f.write(_stamp())
    print(f"architecture_oracle: {len(models)} architectures built, {len(refused)} refused, "
          f"{len(cases)} cases in {time.time() - started:.1f} s -> {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
