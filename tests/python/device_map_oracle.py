#!/usr/bin/env python3
"""The oracle of the device_map differential test (tests/planner/differential_test.cpp).

Builds LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM on the meta
device from generated configs, and asks the pinned transformers / Accelerate what they place
where, over many max_memory budgets, dtypes and strategies:

  from_pretrained  transformers.integrations.accelerate._get_device_map(model, strategy,
                   max_memory, None): what from_pretrained(device_map=...) runs, on the model
                   from_pretrained builds (meta device, the config's dtype, weights not yet tied).
  accelerate       load_checkpoint_and_dispatch's planning: accelerate.utils get_balanced_memory
                   and infer_auto_device_map with their dtype override, on a float32 model with
                   its weights tied (as init_empty_weights + from_config + tie_weights leave it).
  accelerate, loaded  the same with dtype=float32 on a model in the config's half precision (what
                   from_config builds from a bfloat16 or float16 config): load_checkpoint_in_model
                   converts every floating parameter and persistent buffer to float32 as it loads
                   it, so the expected map is Accelerate's planning of the model as loaded (those
                   tensors converted first). Accelerate's own map for the unconverted model, which
                   then overfills its devices, is kept as "accelerate_own".

Budgets "none" (max_memory not given) run on simulated hardware: Accelerate's get_max_memory(None)
is replaced by one returning given free memory per accelerator and available RAM, which is
exactly what the C++ planner takes as PlanHardware.

Writes one JSON file: {"models": {id: {config, tree}}, "cases": [...]}. Each case has the
expected hf_device_map (a list of [name, device] pairs) or the exception Python raised, and the
budgets infer_auto_device_map ran with. Deterministic: a fixed seed.

Usage: device_map_oracle.py OUT.json
"""

import copy
import json
import logging
import os
import random
import sys
import time
import warnings


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_stamp  # noqa: E402

STAMPED = [__file__, oracle_stamp.__file__]
if __name__ == "__main__" and len(sys.argv) == 2:
    oracle_stamp.exit_if_current(sys.argv[1], STAMPED)  # up to date: nothing to do

import torch  # noqa: E402
from accelerate.utils import modeling as acc  # noqa: E402
from transformers import (  # noqa: E402
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)
from transformers.integrations import accelerate as tia  # noqa: E402
from transformers.utils import ContextManagers  # noqa: E402

ARCHITECTURES = {
    "LlamaForCausalLM": (LlamaConfig, LlamaForCausalLM),
    "MistralForCausalLM": (MistralConfig, MistralForCausalLM),
    "Qwen2ForCausalLM": (Qwen2Config, Qwen2ForCausalLM),
    "Qwen3ForCausalLM": (Qwen3Config, Qwen3ForCausalLM),
}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CONFIGS_PER_ARCHITECTURE = 8
STRATEGIES = ["auto", "balanced", "balanced_low_0", "sequential"]
# load_checkpoint_and_dispatch: "auto" and "balanced" are one code path there.
ACCELERATE_STRATEGIES = ["auto", "balanced_low_0", "sequential"]
ACCELERATE_DTYPES = [None, "bfloat16", "float16"]

# --- simulated hardware for max_memory=None ----------------------------------------------------
_real_get_max_memory = acc.get_max_memory
_simulated = None


def _get_max_memory(max_memory=None):
    if max_memory is None and _simulated is not None:
        return dict(_simulated)
    return _real_get_max_memory(max_memory)


acc.get_max_memory = _get_max_memory  # what Accelerate's own functions call
tia.accelerate_max_memory = _get_max_memory  # what transformers' get_max_memory wraps

# --- the budgets infer_auto_device_map receives from _get_device_map ---------------------------
_real_infer = tia.infer_auto_device_map
_last_budgets = None


def _infer(model, max_memory=None, **kwargs):
    global _last_budgets
    _last_budgets = dict(max_memory)
    return _real_infer(model, max_memory=max_memory, **kwargs)


tia.infer_auto_device_map = _infer


def generate_configs(rng, architecture):
    configs = []
    for i in range(CONFIGS_PER_ARCHITECTURE):
        heads = rng.choice([1, 2, 4, 8])
        head_dim = rng.choice([4, 8, 16, 32])
        kv = rng.choice([d for d in (1, 2, 4, 8) if heads % d == 0])
        hidden = heads * head_dim * rng.choice([1, 1, 2])
        config = {
            "model_type": ARCHITECTURES[architecture][0].model_type,
            "architectures": [architecture],
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "num_key_value_heads": kv,
            "intermediate_size": rng.choice([hidden * 2, hidden * 3 + 8, hidden * 4, 100]),
            # One config per architecture with a single layer, one with many.
            "num_hidden_layers": [1, 24][i] if i < 2 else rng.choice([2, 3, 4, 6, 8, 12]),
            "vocab_size": rng.choice([64, 500, 1000, 4096, 32000]),
            "tie_word_embeddings": i % 2 == 1,
            "dtype": rng.choice(list(DTYPES)),
        }
        if architecture in ("Qwen3ForCausalLM", "MistralForCausalLM") or rng.random() < 0.3:
            config["head_dim"] = head_dim if hidden == heads * head_dim else rng.choice([8, 16])
        else:
            # Llama and Qwen2 derive head_dim from hidden_size / num_attention_heads.
            config["hidden_size"] = heads * head_dim
        configs.append(config)
    return configs


def build(architecture, config_dict, dtype_name, tie):
    config_class, model_class = ARCHITECTURES[architecture]
    kwargs = {k: v for k, v in config_dict.items() if k not in ("model_type", "architectures", "dtype")}
    config = config_class(**kwargs)
    config.architectures = [architecture]
    contexts = model_class.get_init_context(DTYPES[dtype_name], False, False, False)
    with ContextManagers(contexts):
        model = model_class(config)
    if tie:
        model.tie_weights()
    return config, model


def tree_of(model):
    """named_modules() with each module's own parameters and buffers (the planner's input)."""
    modules = []
    for name, module in model.named_modules(remove_duplicate=False):
        persistent = set(getattr(module, "_non_persistent_buffers_set", set()))
        tensors = [
            [n, list(p.shape), str(p.dtype).replace("torch.", ""), False, True]
            for n, p in module.named_parameters(recurse=False, remove_duplicate=False)
        ]
        tensors += [
            [n, list(b.shape), str(b.dtype).replace("torch.", ""), True, n not in persistent]
            for n, b in module.named_buffers(recurse=False, remove_duplicate=False)
        ]
        modules.append([name, type(module).__name__, tensors])
    return modules


def budget_specs(rng, size, layer, embed):
    """(label, max_memory or None, simulated hardware or None), relative to the model size."""
    s = max(size, 1)
    specs = [
        ("one-gpu-fits", {0: 2 * s, "cpu": 2 * s}, None),
        ("one-gpu-offload-cpu", {0: s // 2, "cpu": 2 * s}, None),
        ("offload-disk", {0: s // 3, "cpu": s // 3}, None),
        ("no-cpu-key", {0: s * 2 // 5, 1: s * 2 // 5}, None),
        ("smaller-than-a-layer", {0: layer // 2, 1: layer // 2, "cpu": layer // 2}, None),
        ("uneven", {0: s // 10, 1: s // 2, 2: s, "cpu": s}, None),
        ("index-gap", {1: s // 2, 3: s // 2, "cpu": s}, None),
        ("disk-key", {0: s // 3, 1: s // 3, "cpu": s // 4, "disk": 10**12}, None),
        ("mps", {"mps": s // 2, "cpu": s}, None),
        # Exact boundaries: embed + two layers + the reserve for one, then three layers.
        ("boundary", {0: embed + 3 * layer, 1: 3 * layer, "cpu": 2 * layer}, None),
        ("boundary-1", {0: embed + 3 * layer - 1, 1: 3 * layer + 1, "cpu": 2 * layer - 1}, None),
        ("many-small-gpus", {**{i: 2 * layer for i in range(8)}, "cpu": layer}, None),
        ("default-one-gpu", None, {"type": "cuda", "accelerators": [2 * s], "cpu": 4 * s}),
        ("default-one-small-gpu", None, {"type": "cuda", "accelerators": [s // 2], "cpu": s}),
        ("default-two-gpus", None, {"type": "cuda", "accelerators": [s // 3, s // 3], "cpu": s // 5}),
        ("default-four-gpus", None, {"type": "cuda", "accelerators": [s // 4] * 4, "cpu": s}),
        ("default-cpu-only", None, {"type": "", "accelerators": [], "cpu": s // 2}),
        ("default-mps", None, {"type": "mps", "accelerators": [0], "cpu": s // 2}),
    ]
    for n in (2, 3, 4, 8):
        f = rng.uniform(0.3, 2.5)
        budgets = {i: int(s * f / n) for i in range(n)}
        if rng.random() < 0.7:
            budgets["cpu"] = int(s * rng.uniform(0.1, 3))
        specs.append((f"{n}-gpus-x{f:.2f}", budgets, None))
    return specs


def simulated_max_memory(hardware):
    if hardware["type"] == "mps":  # Accelerate: the available RAM for mps, no cpu budget
        return {"mps": hardware["cpu"]}
    memory = {i: free for i, free in enumerate(hardware["accelerators"])}
    memory["cpu"] = hardware["cpu"]
    return memory


def budgets_json(budgets):
    return None if budgets is None else [[str(k), v] for k, v in budgets.items()]


def run(fn):
    try:
        return {"device_map": [[k, v] for k, v in fn().items()]}
    except Exception as e:  # the C++ planner must fail where Python does
        return {"error": f"{type(e).__name__}: {e}"}


def layer_size(model):
    sizes, _ = tia.compute_module_sizes(model)
    return sizes["model.layers.0"], sizes["model.embed_tokens"], sizes[""]


def accelerate_plan(model, strategy, max_memory, dtype, no_split):
    # load_checkpoint_and_dispatch's planning, without the loading.
    global _last_budgets
    if strategy != "sequential":
        max_memory = acc.get_balanced_memory(
            model,
            max_memory=max_memory,
            no_split_module_classes=no_split,
            dtype=dtype,
            low_zero=strategy == "balanced_low_0",
        )
    if max_memory is not None:
        _last_budgets = dict(max_memory)
    elif _simulated is not None:
        _last_budgets = dict(_simulated)
    return acc.infer_auto_device_map(
        model, max_memory=max_memory, no_split_module_classes=no_split, dtype=dtype
    )


def as_loaded(model, dtype_name):
    """The meta model as load_checkpoint_in_model(dtype=...) leaves it: floating parameters and
    persistent buffers in that dtype (ties kept: the Parameter objects stay)."""
    loaded = copy.deepcopy(model)
    dtype = DTYPES[dtype_name]
    for p in loaded.parameters():
        if torch.is_floating_point(p):
            p.data = p.data.to(dtype)
    for module in loaded.modules():
        skip = getattr(module, "_non_persistent_buffers_set", set())
        for name, b in list(module._buffers.items()):
            if b is not None and name not in skip and torch.is_floating_point(b):
                module._buffers[name] = b.to(dtype)
    return loaded


def main():
    global _simulated, _last_budgets
    out_path = sys.argv[1]
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    rng = random.Random(20261130)
    started = time.time()
    models = {}
    cases = []
    for architecture in ARCHITECTURES:
        for index, config_dict in enumerate(generate_configs(rng, architecture)):
            tied = config_dict["tie_word_embeddings"]
            # from_pretrained: the model in the config's dtype, weights not yet tied.
            model_id = f"{architecture}/{index}"
            config, model = build(architecture, config_dict, config_dict["dtype"], tie=False)
            no_split = model._no_split_modules
            models[model_id] = {
                "config": json.loads(config.to_json_string(use_diff=True)) | {"dtype": config_dict["dtype"]},
                "tree": tree_of(model),
                "tied": [["lm_head.weight", "model.embed_tokens.weight"]] if tied else [],
                "no_split": sorted(no_split),
            }
            layer, embed, size = layer_size(model)
            models[model_id]["model_size"] = size
            specs = budget_specs(rng, size, layer, embed)
            for label, max_memory, hardware in specs:
                _simulated = simulated_max_memory(hardware) if hardware else None
                for strategy in STRATEGIES:
                    _last_budgets = None
                    result = run(lambda: tia._get_device_map(
                        model, strategy, None if max_memory is None else dict(max_memory), None))
                    cases.append({
                        "model": model_id, "rules": "from_pretrained", "strategy": strategy,
                        "budget": label, "max_memory": budgets_json(max_memory),
                        "hardware": hardware, "dtype": None, "expected": result,
                        "budgets": budgets_json(_last_budgets),
                    })

            # Accelerate: a float32 model, tied, with its dtype override.
            acc_id = f"{architecture}/{index}/accelerate"
            _, acc_model = build(architecture, config_dict, "float32", tie=tied)
            models[acc_id] = {
                "config": models[model_id]["config"] | {"dtype": "float32"},
                "tree": tree_of(acc_model),
                "tied": acc.find_tied_parameters(acc_model),
                "no_split": sorted(no_split),
                "model_size": acc.compute_module_sizes(acc_model)[""],
            }
            for label, max_memory, hardware in specs:
                _simulated = simulated_max_memory(hardware) if hardware else None
                for dtype in ACCELERATE_DTYPES:
                    for strategy in ACCELERATE_STRATEGIES:
                        _last_budgets = None
                        result = run(lambda: accelerate_plan(
                            acc_model, strategy, None if max_memory is None else dict(max_memory),
                            dtype, list(no_split)))
                        cases.append({
                            "model": acc_id, "rules": "accelerate", "strategy": strategy,
                            "budget": label, "max_memory": budgets_json(max_memory),
                            "hardware": hardware, "dtype": dtype, "expected": result,
                            "budgets": budgets_json(_last_budgets),
                        })

            # Accelerate, loaded: a half-precision model (from_config of its config), dtype=float32.
            if config_dict["dtype"] == "float32":
                continue
            loaded_id = f"{architecture}/{index}/accelerate-loaded"
            _, half_model = build(architecture, config_dict, config_dict["dtype"], tie=tied)
            converted = as_loaded(half_model, "float32")
            models[loaded_id] = {
                "config": models[model_id]["config"],
                "tree": tree_of(half_model),
                "tied": acc.find_tied_parameters(half_model),
                "no_split": sorted(no_split),
                "model_size": acc.compute_module_sizes(half_model)[""],
            }
            for label, max_memory, hardware in specs:
                _simulated = simulated_max_memory(hardware) if hardware else None
                for strategy in ACCELERATE_STRATEGIES:
                    _last_budgets = None
                    own = run(lambda: accelerate_plan(
                        half_model, strategy, None if max_memory is None else dict(max_memory),
                        "float32", list(no_split)))
                    _last_budgets = None
                    result = run(lambda: accelerate_plan(
                        converted, strategy, None if max_memory is None else dict(max_memory),
                        "float32", list(no_split)))
                    cases.append({
                        "model": loaded_id, "rules": "accelerate", "strategy": strategy,
                        "budget": label, "max_memory": budgets_json(max_memory),
                        "hardware": hardware, "dtype": "float32", "expected": result,
                        "budgets": budgets_json(_last_budgets), "accelerate_own": own,
                    })
    _simulated = None
    with open(out_path, "w") as f:
        json.dump({"models": models, "cases": cases}, f)
    oracle_stamp.write(out_path, STAMPED)
    print(f"device_map_oracle: {len(models)} models, {len(cases)} cases in "
          f"{time.time() - started:.1f} s -> {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
