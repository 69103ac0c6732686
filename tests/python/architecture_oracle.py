#!/usr/bin/env python3
"""The oracle of the exported-tree differential test (tests/planner/differential_test.cpp,
DeviceMapDifferential.FromExportedTrees): every causal-LM architecture of the pinned
transformers and the encoder-decoder ones of SEQ2SEQ (T5), built on the meta device from its config class's defaults (layers cut to a few,
so that plans split them), written by tools/export-module-tree's own code, and what
from_pretrained's planning (transformers.integrations.accelerate._get_device_map) places for
each strategy over budgets that split the model across 2-4 GPUs with cpu and disk offload.

Writes {"models": {model_type: {"tree": <the tree file's JSON>, "model_size": N,
                                "configs": [{"label", "config": <config.json>, "tree"}],
                                "refusals": [{"config", "error", "validator",
                                              "raised_by_python"}]}},
        "cases": [...as device_map_oracle.py writes them...],
        "refused": {model_type: "why transformers could not build it"}}.
"refusals" (for the architectures core/src/model/architectures/ describes): configs near the
class defaults that transformers refuses, by a config validator (config_checks.refusals) or
when building the model (a pad_token_id outside the embedding), with its message.
"checkpoint" (for those too): a folder holding the model's config.json and a model.safetensors
whose header is what save_pretrained writes for it (tied weights left out, transformers 5's
weight conversions reverted: Mixtral's experts one by one) over a data region left as a hole:
the planner reads headers only, and the model's "tree" and cases are the checkpoint's too.
Deterministic. Usage: architecture_oracle.py OUT.json
"""

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


sys.path.insert(0, HERE)
import oracle_stamp  # noqa: E402

DESCRIBED = os.path.join(ROOT, "core", "src", "model", "architectures")
# The descriptors too: which architectures get refusals follows them.
STAMPED = [__file__, TOOL, os.path.join(HERE, "device_map_oracle.py"), oracle_stamp.__file__,
           os.path.join(HERE, "config_checks.py")] + sorted(
    os.path.join(DESCRIBED, name) for name in os.listdir(DESCRIBED) if name.endswith(".json"))
if __name__ == "__main__" and len(sys.argv) == 2:
    oracle_stamp.exit_if_current(sys.argv[1], STAMPED)  # up to date: nothing to do

sys.path.insert(0, HERE)
import config_checks  # noqa: E402  (configs near the defaults that validators refuse)
import device_map_oracle as dmo  # noqa: E402  (its budget and simulation helpers)
import torch  # noqa: E402
from transformers import CONFIG_MAPPING, PreTrainedConfig  # noqa: E402
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM  # noqa: E402
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # noqa: E402

# Encoder-decoder architectures covered beside every causal LM, built with the auto class
# from_pretrained users load them with.
SEQ2SEQ = ["t5"]


def model_types():
    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) + SEQ2SEQ


def auto_class(model_type):
    """(export-module-tree's --auto-class name, the transformers auto class) of model_type."""
    if model_type in SEQ2SEQ:
        return "seq2seq-lm", AutoModelForSeq2SeqLM
    return "causal-lm", AutoModelForCausalLM


def load_tool():
    loader = importlib.machinery.SourceFileLoader("export_module_tree", TOOL)
    spec = importlib.util.spec_from_loader("export_module_tree", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


LAYER_KEYS = ["num_hidden_layers", "n_layer", "num_layers", "n_layers"]
LIST_KEYS = ("layer_types", "mlp_only_layers", "block_types", "layers_block_type")


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
            # Per-layer lists must follow the layer count: the named ones, and any other list
            # of one entry per layer (mlp_layer_types, attention_layers).
            for list_key, listed in list(vars(text).items()):
                if isinstance(listed, list) and (list_key in LIST_KEYS and len(listed) > 4
                                                 or len(listed) == value):
                    setattr(text, list_key, listed[:4])
    return config


def per_layer_lists(data, key):
    """The keys of config.json `data` holding a list the layer count `key` must match."""
    return [k for k, v in data.items()
            if isinstance(v, list) and (k in LIST_KEYS or len(v) == data[key])]


def saved_config(config, diff):
    """config.json as save_pretrained writes it (diff: only what differs from the defaults)."""
    data = json.loads(config.to_json_string(use_diff=diff))
    data.pop("transformers_version", None)
    return data


def edge_changes(data):
    """Small edge configs: each flag flipped, another activation, grouped-query attention, a
    wider and a shallower model; those transformers refuses are left out."""
    changes = []
    for key in ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_qk_norm", "qkv_bias",
                "bias", "use_bias", "parallel_attn", "new_decoder_architecture"):
        if isinstance(data.get(key), bool):
            changes.append((f"{key}={not data[key]}", {key: not data[key]}))
    for key in ("hidden_act", "activation_function", "hidden_activation"):
        # Another activation: the module (and xIELU's state) the descriptor names follows it.
        if isinstance(data.get(key), str):
            other = "xielu" if data[key] != "xielu" else "relu2"
            changes.append((f"{key}={other}", {key: other}))
    if data.get("feed_forward_proj") == "relu":
        # T5 v1.1 and FLAN-T5's gated feed-forward: gelu_new for "gated-gelu" (unless
        # config.json names dense_act_fn itself, as FLAN-T5's does), the name's tail else.
        changes.append(("gated-gelu", {"feed_forward_proj": "gated-gelu"}))
        changes.append(("gated-silu", {"feed_forward_proj": "gated-silu"}))
        changes.append(("flan-t5", {"feed_forward_proj": "gated-gelu", "dense_act_fn": "gelu_new",
                                    "is_gated_act": True, "tie_word_embeddings": False}))
        changes.append(("dense_act_fn-given", {"feed_forward_proj": "gated-gelu",
                                               "dense_act_fn": "relu"}))
    heads, kv = data.get("num_attention_heads"), data.get("num_key_value_heads")
    if isinstance(heads, int) and heads % 2 == 0 and isinstance(kv, int) and kv == heads:
        changes.append(("gqa", {"num_key_value_heads": heads // 2}))
    for key in ("hidden_size", "n_embd", "d_model"):
        if isinstance(data.get(key), int) and not isinstance(data.get(key), bool):
            changes.append((f"{key}x2", {key: data[key] * 2}))
            break
    for key in LAYER_KEYS:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 2:
            lists = per_layer_lists(data, key)
            change = {key: 3}
            for list_key in lists:
                if len(data[list_key]) > 3:
                    change[list_key] = data[list_key][:3]
            changes.append(("3-layers", change))
            # And deeper, where layer patterns of a long period show (Jamba's attention every
            # 8th layer from the 4th); per-layer lists are left to the class to fill in.
            deep = {key: 16}
            for list_key in lists:
                deep[list_key] = None
            changes.append(("16-layers", deep))
            break
    return changes


def config_variants(config, tool, model_type):
    """[{label, config, tree}]: the configs the descriptor of this architecture must read as
    transformers does, each with the tree transformers builds for it."""
    out = [{"label": "saved", "config": saved_config(config, True)},
           {"label": "full", "config": saved_config(config, False)}]
    base = saved_config(config, False)
    for label, change in edge_changes(base):
        out.append({"label": label, "config": dict(base, **change)})
    built = []
    for variant in out:
        try:
            # Read back as from_pretrained reads config.json: {"__float__": "Infinity"} is inf.
            edited = CONFIG_MAPPING[model_type].from_dict(
                PreTrainedConfig._decode_special_floats(dict(variant["config"])))
            task, auto = auto_class(model_type)
            with torch.device("meta"):
                model = auto.from_config(edited, dtype=torch.float32)
            variant["tree"] = tool.describe(model, edited, task, variant["label"])
            built.append(variant)
        except Exception:  # an edge transformers refuses: not a case
            continue
    return built


SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                      torch.float64: "F64", torch.int64: "I64", torch.int32: "I32",
                      torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


def write_checkpoint(model, config, folder):
    """config.json and a header-true model.safetensors of `model` (built on the meta device)."""
    from transformers import modeling_utils

    os.makedirs(folder, exist_ok=True)
    config.save_pretrained(folder)
    state = modeling_utils.remove_tied_weights_from_state_dict(model.state_dict(), model)
    state = modeling_utils.revert_weight_conversion(model, state)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in sorted(state):
        tensor = state[name]
        size = tensor.numel() * tensor.element_size()
        header[name] = {"dtype": SAFETENSORS_DTYPES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        f.truncate(8 + len(text) + offset)  # the tensors' bytes: a hole, never read
    return folder


def build_refusals(model_type, config):
    """Configs transformers accepts but cannot build a model of: a pad_token_id one past either
    end of the vocabulary (nn.Embedding's padding_idx)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    vocab = getattr(text, "vocab_size", None)
    if not isinstance(vocab, int) or "pad_token_id" not in type(config).__dataclass_fields__:
        return []
    _, auto = auto_class(model_type)
    out = []
    for pad in (vocab, -vocab - 1):
        raw = {"pad_token_id": pad}
        try:
            edited = CONFIG_MAPPING[model_type](**raw)
            with torch.device("meta"):
                auto.from_config(edited, dtype=torch.float32)
        except Exception as e:
            out.append({"config": raw, "error": str(e), "validator": "build",
                        "raised_by_python": False})
    return out


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
    from transformers.integrations import accelerate as tia

    for model_type in model_types():
        task, auto = auto_class(model_type)
        try:
            try:
                config = small_config(model_type)
                with torch.device("meta"):
                    model = auto.from_config(config, dtype=torch.float32)
                # Cut to 4 layers, some configs no longer validate once saved (Dory's layer
                # counts must add up): then the class's own layer count, as below.
                configs = config_variants(config, tool, model_type)
                if not configs:
                    raise ValueError("the cut config does not read back")
            except Exception:  # some classes fix their layer count: the defaults as they are
                config = small_config(model_type, shrink=False)
                with torch.device("meta"):
                    model = auto.from_config(config, dtype=torch.float32)
                configs = config_variants(config, tool, model_type)
            tree = tool.describe(model, config, task, model_type)
            sizes, _ = tia.compute_module_sizes(model)
            size = sizes[""]
        except Exception as e:  # an architecture the defaults cannot build: reported, not hidden
            refused[model_type] = f"{type(e).__name__}: {str(e)[:200]}"
            continue
        if size == 0:
            refused[model_type] = "no parameters"
            continue
        models[model_type] = {"tree": tree, "model_size": size, "configs": configs}
        if os.path.exists(os.path.join(DESCRIBED, model_type + ".json")):
            models[model_type]["refusals"] = (config_checks.refusals(CONFIG_MAPPING[model_type])
                                              + build_refusals(model_type, config))
            folder = os.path.join(os.path.dirname(os.path.abspath(out_path)),
                                  "architecture_checkpoints", model_type)
            models[model_type]["checkpoint"] = write_checkpoint(model, config, folder)
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
    oracle_stamp.write(out_path, STAMPED)
    print(f"architecture_oracle: {len(models)} architectures built, {len(refused)} refused, "
          f"{len(cases)} cases in {time.time() - started:.1f} s -> {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
