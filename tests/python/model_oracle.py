"""What transformers builds for many small generated configs: the oracle of the model tests.

Run with the venv of tests/python/venv.sh. Writes one JSON file:
  {"versions": {...}, "cases": [case, ...]}
Each case holds the config.json text it was built from and either
  "error": "<exception type>: <message>"  (transformers refused the config), or what the model
built on the meta device reports:
  "modules":    [[name, class], ...]                   named_modules()
  "parameters": [[name, shape, dtype], ...]            named_parameters()
  "buffers":    [[name, shape, dtype, persistent], ...] named_buffers()
  "no_split": [...], "tied": [[name, ...], ...], "tp_plan": [[pattern, style], ...]
and "tp": {tp_size: {"expanded": [[name, style], ...], "ranks": [[[name, local shape], ...]
per rank]}} from transformers' own apply_tensor_parallelism on a fake process group.

Usage: model_oracle.py OUTPUT.json [--cases N] [--seed S]
"""

import argparse
import json
import random
import sys

import torch
import torch.distributed as dist
import transformers
from torch.distributed.device_mesh import DeviceMesh
from torch.testing._internal.distributed.fake_pg import FakeStore
from transformers import CONFIG_MAPPING, AutoModelForCausalLM
from transformers import initialization as init
from transformers.distributed.tensor_parallel import apply_tensor_parallelism

transformers.logging.set_verbosity_error()

ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
}
ACTIVATIONS = ["silu", "gelu", "gelu_pytorch_tanh", "relu", "swish", "prelu", "xielu", "relu2"]
DTYPE_KEYS = [None, "dtype", "torch_dtype"]
DTYPES = ["float32", "bfloat16", "float16", "float64", "half", "float"]


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def rope_for(rng, head_dim):
    """A rope_parameters dict (or None) whose inverse frequencies transformers can build."""
    kind = rng.choice(["none", "none", "default", "linear", "dynamic", "llama3", "yarn",
                       "longrope", "proportional", "legacy"])
    partial = rng.choice([None, None, 1.0, 0.5, 0.25])
    if kind == "none":
        return None, partial
    if kind == "legacy":  # old rope_scaling with "type"
        return {"type": "linear", "factor": 2.0}, partial
    rope = {"rope_type": kind, "rope_theta": rng.choice([10000.0, 500000.0])}
    if kind in ("linear", "dynamic", "yarn", "llama3"):
        rope["factor"] = rng.choice([2.0, 4.0, 8.0])
    if kind == "llama3":
        rope.update(low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=64)
    if kind == "longrope":
        dim = int(head_dim * (partial or 1.0))
        size = (dim + 1) // 2
        rope.update(short_factor=[1.0] * size, long_factor=[1.0] * size,
                    original_max_position_embeddings=64)
    return rope, partial


def generated_config(rng, index):
    model_type = rng.choice(list(ARCHITECTURES))
    heads = rng.choice([1, 2, 3, 4, 6, 8])
    kv = rng.choice(divisors(heads))
    explicit_head_dim = rng.random() < 0.5 or model_type == "qwen3"
    head_dim = rng.choice([4, 8, 16, 12, 32, 6, 3, 5])
    if explicit_head_dim:
        hidden = rng.choice([32, 48, 64, 96]) if model_type != "llama" else heads * rng.choice([8, 16])
    else:
        hidden = heads * head_dim
    config = {
        "model_type": model_type,
        "vocab_size": rng.choice([97, 128, 256, 1000]),
        "hidden_size": hidden,
        "intermediate_size": rng.choice([24, 64, 96, 100]),
        "num_hidden_layers": rng.choice([1, 2, 3]),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "tie_word_embeddings": rng.random() < 0.4,
        "hidden_act": rng.choice(ACTIVATIONS),
        "max_position_embeddings": 128,
    }
    if explicit_head_dim:
        config["head_dim"] = head_dim
    if rng.random() < 0.7:
        config["architectures"] = [ARCHITECTURES[model_type]]
        if rng.random() < 0.2:
            del config["model_type"]  # the class alone chooses
    for flag in ("attention_bias", "mlp_bias"):
        if rng.random() < 0.5:
            config[flag] = rng.random() < 0.5
    dtype_key = rng.choice(DTYPE_KEYS)
    if dtype_key:
        config[dtype_key] = rng.choice(DTYPES)
    effective_head_dim = config.get("head_dim", hidden // heads)
    rope, partial = rope_for(rng, effective_head_dim)
    if rope is not None:
        config["rope_scaling" if "type" in rope else "rope_parameters"] = rope
    if partial is not None:
        config["partial_rotary_factor"] = partial
    if model_type in ("qwen2", "qwen3") and rng.random() < 0.3:
        config["use_sliding_window"] = True
        config["max_window_layers"] = 1
    if rng.random() < 0.2:
        config["pad_token_id"] = rng.choice([0, config["vocab_size"] - 1])
    return config


def fixed_configs():
    """Defaults, real-model shapes, and configs transformers refuses."""
    cases = [{"model_type": m} for m in ARCHITECTURES]  # every key from the config class
    cases += [
        {"architectures": ["Qwen2ForCausalLM"], "num_hidden_layers": 2},
        {"model_type": "qwen2", "num_attention_heads": 4, "num_key_value_heads": None,
         "hidden_size": 64, "num_hidden_layers": 1},
        # Llama-3-8B and Qwen3-0.6B shapes, two layers.
        {"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336,
         "num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 8,
         "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
         "rope_theta": 500000.0, "torch_dtype": "bfloat16", "tie_word_embeddings": False},
        {"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
         "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 8,
         "head_dim": 128, "tie_word_embeddings": True, "torch_dtype": "bfloat16"},
        # Refused by transformers (the C++ side must refuse them too).
        {"model_type": "llama", "hidden_size": 100, "num_attention_heads": 3, "head_dim": 32},
        {"model_type": "mistral", "hidden_size": 99, "num_attention_heads": 3, "num_key_value_heads": 1},
        {"model_type": "llama", "num_hidden_layers": 1, "layer_types": ["full_attention", "full_attention"]},
        {"model_type": "llama", "num_hidden_layers": 1, "layer_types": ["nope"]},
        {"model_type": "llama", "rope_parameters": {"rope_type": "linear"}},
        {"model_type": "llama", "rope_parameters": {"rope_type": "llama3", "factor": 8.0}},
        {"model_type": "llama", "hidden_size": 4096.0},
        {"model_type": "llama", "tie_word_embeddings": 1},
        {"model_type": "llama", "attention_bias": "yes"},
        {"model_type": "llama", "hidden_act": "swiglu"},
        {"model_type": "llama", "torch_dtype": "float8_e4m3fn"},
        {"model_type": "llama", "dtype": "torch.float16"},
        {"model_type": "qwen3", "head_dim": None},
        {"model_type": "mistral", "num_key_value_heads": None},
        {"model_type": "llama", "vocab_size": 100, "pad_token_id": 100},
        {"model_type": "llama", "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},
         "head_dim": 4, "hidden_size": 16, "num_attention_heads": 4, "partial_rotary_factor": 0.5},
    ]
    return cases


def describe(config_dict):
    # As from_pretrained reads config.json: the config class's from_dict. Without model_type,
    # the class named by architectures (what LlamaForCausalLM.from_pretrained would use).
    model_type = config_dict.get("model_type")
    if model_type is None:
        architecture = config_dict["architectures"][0]
        model_type = next(k for k, v in ARCHITECTURES.items() if v == architecture)
    config = CONFIG_MAPPING[model_type].from_dict(dict(config_dict))
    dtype = config.dtype if config.dtype is not None else torch.float32
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    persistent = {}
    for name, module in model.named_modules():
        for buffer_name in module._buffers:
            full = f"{name}.{buffer_name}" if name else buffer_name
            persistent[full] = buffer_name not in module._non_persistent_buffers_set
    tied = []
    for target, source in (getattr(model, "all_tied_weights_keys", None) or {}).items():
        tied.append(sorted([target, source]))
    return config, model, {
        "modules": [[n, type(m).__name__] for n, m in model.named_modules()],
        "parameters": [[n, list(p.shape), str(p.dtype).removeprefix("torch.")]
                       for n, p in model.named_parameters()],
        "buffers": [[n, list(b.shape), str(b.dtype).removeprefix("torch."), persistent[n]]
                    for n, b in model.named_buffers()],
        "no_split": sorted(model._no_split_modules),
        "tied": sorted(tied),
        "tp_plan": [[k, v] for k, v in model.tp_plan.items()],
    }


def tensor_parallel(config, tp_size):
    """Local shard shapes on every rank, as transformers' own TP code makes them."""
    dtype = config.dtype if config.dtype is not None else torch.float32
    expanded, ranks = None, []
    for rank in range(tp_size):
        dist.init_process_group("fake", rank=rank, world_size=tp_size, store=FakeStore())
        try:
            mesh = DeviceMesh("cpu", list(range(tp_size)))
            # from_pretrained builds without tying, distributes, then ties after loading.
            with torch.device("meta"), init.no_tie_weights():
                model = AutoModelForCausalLM.from_config(config, dtype=dtype)
            plan = model._expand_parallel_plan(dict(model.tp_plan))
            expanded = [[k, v] for k, v in plan.items()]
            apply_tensor_parallelism(model, mesh, plan)
            model.tie_weights()
            shapes = []
            for name, parameter in model.named_parameters():
                local = parameter.to_local() if hasattr(parameter, "to_local") else parameter
                shapes.append([name, list(local.shape)])
            ranks.append(shapes)
        finally:
            dist.destroy_process_group()
    return {"expanded": expanded, "ranks": ranks}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output")
    parser.add_argument("--cases", type=int, default=120)
    parser.add_argument("--seed", type=int, default=20240611)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    configs = fixed_configs() + [generated_config(rng, i) for i in range(args.cases)]
    cases = []
    for index, config_dict in enumerate(configs):
        case = {"name": f"case{index:03d}", "config": json.dumps(config_dict)}
        try:
            config, model, described = describe(config_dict)
        except Exception as error:  # transformers refused: so must backplane
            case["error"] = f"{type(error).__name__}: {error}"
            cases.append(case)
            continue
        case.update(described)
        heads = config.num_attention_heads
        kv = config.num_key_value_heads
        small = sum(1 for _ in model.parameters()) < 200
        if small:
            case["tp"] = {str(t): tensor_parallel(config, t)
                          for t in (2, 3, 4) if heads % t == 0 and kv % t == 0}
        cases.append(case)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    with open(args.output, "w") as out:
        json.dump({"versions": versions, "cases": cases}, out, indent=1)
    refused = sum(1 for c in cases if "error" in c)
    print(f"model_oracle: {len(cases)} cases ({refused} refused) -> {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
