"""Real safetensors checkpoints of tiny models, and what transformers loads from them.

Run with the venv of tests/python/venv.sh. For a few small configs it builds the model with
real (random) weights, save_pretrained()s it (single file or sharded), and records:
  kind "config":  the folder as saved (config.json beside the weights) and what
                  from_pretrained(folder) builds: named_modules / named_parameters /
                  named_buffers, as model_oracle.py records them;
  kind "weights": the same weights without config.json, and each stored tensor's name, shape
                  and dtype as safe_open reads them.
Writes OUTPUT_DIR/manifest.json: {"fixtures": [{"name", "path", "kind", ...}]}.

Usage: safetensors_fixtures.py OUTPUT_DIR
"""

import json
import os
import shutil
import sys

import torch
import transformers
from safetensors import safe_open
from transformers import CONFIG_MAPPING, AutoModelForCausalLM

transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

CONFIGS = {
    "llama_tied": {"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
                   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "tie_word_embeddings": True, "dtype": "bfloat16"},
    "llama_bias_sharded": {"model_type": "llama", "vocab_size": 100, "hidden_size": 32,
                           "intermediate_size": 40, "num_hidden_layers": 3, "num_attention_heads": 2,
                           "attention_bias": True, "mlp_bias": True, "dtype": "float16",
                           "_shard": "8KB"},
    "mistral": {"model_type": "mistral", "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24,
                "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
                "dtype": "float32"},
    "qwen2_no_dtype": {"model_type": "qwen2", "vocab_size": 70, "hidden_size": 32,
                       "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
                       "num_key_value_heads": 2, "dtype": "bfloat16", "_drop_dtype": True},
    "qwen3_tied_sharded": {"model_type": "qwen3", "vocab_size": 80, "hidden_size": 32, "head_dim": 8,
                           "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
                           "num_key_value_heads": 1, "tie_word_embeddings": True,
                           "dtype": "bfloat16", "_shard": "6KB"},
}


def dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def described(model):
    persistent = {}
    for name, module in model.named_modules():
        for buffer_name in module._buffers:
            full = f"{name}.{buffer_name}" if name else buffer_name
            persistent[full] = buffer_name not in module._non_persistent_buffers_set
    return {
        "modules": [[n, type(m).__name__] for n, m in model.named_modules()],
        "parameters": [[n, list(p.shape), dtype_name(p.dtype)] for n, p in model.named_parameters()],
        "buffers": [[n, list(b.shape), dtype_name(b.dtype), persistent[n]]
                    for n, b in model.named_buffers()],
    }


def stored_tensors(folder):
    tensors = []
    for file in sorted(os.listdir(folder)):
        if not file.endswith(".safetensors"):
            continue
        with safe_open(os.path.join(folder, file), framework="pt") as f:
            for key in f.keys():
                piece = f.get_slice(key)
                tensors.append([key, list(piece.get_shape()), piece.get_dtype()])
    return sorted(tensors)


def main():
    output = sys.argv[1]
    shutil.rmtree(output, ignore_errors=True)
    os.makedirs(output)
    torch.manual_seed(0)
    fixtures = []
    for name, spec in CONFIGS.items():
        spec = dict(spec)
        shard = spec.pop("_shard", None)
        drop_dtype = spec.pop("_drop_dtype", False)
        config = CONFIG_MAPPING[spec["model_type"]](**{k: v for k, v in spec.items() if k != "model_type"})
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, spec["dtype"]))
        folder = os.path.join(output, name)
        model.save_pretrained(folder, **({"max_shard_size": shard} if shard else {}))
        if drop_dtype:  # from_pretrained then takes the weights' dtype
            path = os.path.join(folder, "config.json")
            with open(path) as f:
                saved = json.load(f)
            saved.pop("dtype", None)
            saved.pop("torch_dtype", None)
            with open(path, "w") as f:
                json.dump(saved, f)
        for extra in ("generation_config.json",):
            if os.path.exists(os.path.join(folder, extra)):
                os.remove(os.path.join(folder, extra))
        sharded = os.path.exists(os.path.join(folder, "model.safetensors.index.json"))
        loaded = AutoModelForCausalLM.from_pretrained(folder)
        fixtures.append({"name": name, "path": folder, "kind": "config", "sharded": sharded,
                         "dtype": dtype_name(loaded.dtype), **described(loaded)})

        weights_only = os.path.join(output, name + "_weights")
        shutil.copytree(folder, weights_only)
        os.remove(os.path.join(weights_only, "config.json"))
        fixtures.append({"name": name + "_weights", "path": weights_only, "kind": "weights",
                         "sharded": sharded, "tensors": stored_tensors(weights_only)})
    with open(os.path.join(output, "manifest.json"), "w") as f:
        json.dump({"fixtures": fixtures}, f, indent=1)
    print(f"safetensors_fixtures: {len(fixtures)} fixtures -> {output}", file=sys.stderr)


if __name__ == "__main__":
    main()
