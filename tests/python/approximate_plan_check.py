#!/usr/bin/env python3
"""Plans from checkpoints are plans transformers accepts (run by ctest: approximate_plan_check).

This saves tiny random checkpoints with transformers itself and plans each over cpu and disk
(sequential, a cpu budget that sends part to disk) twice: from the folder, where config.json
names an architecture backplane describes (the plan is exact and the weights are checked
against it, renamed and fused experts included), and from the weights alone, copied where no
config.json is (`--weights`: the tree is rebuilt from the tensor names and the plan says it is
approximate). Each map is handed back to from_pretrained(device_map=..., offload_folder=...) on
this machine, which must load it and report the same map.

Usage: approximate_plan_check.py HWPROBE WORK
"""

import json
import os
import shutil
import subprocess
import sys
import warnings

warnings.simplefilter("ignore")
os.environ["HF_HUB_OFFLINE"] = "1"

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import CONFIG_MAPPING, AutoModelForCausalLM  # noqa: E402

transformers.logging.set_verbosity_error()

CASES = {
    "gpt2": {"n_layer": 3, "n_embd": 64, "n_head": 4, "vocab_size": 500, "n_positions": 64},
    "gpt_neox": {"num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 4,
                 "intermediate_size": 128, "vocab_size": 500},
    "mixtral": {"num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 4,
                "num_key_value_heads": 2, "intermediate_size": 96, "num_local_experts": 4,
                "vocab_size": 500},
    "phi": {"num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 4,
            "intermediate_size": 128, "vocab_size": 500},
}


def check(hwprobe, model_type, label, source, exact, folder, size):
    """1 if the plan of `source` is not what it should be or from_pretrained refuses it."""
    plan = subprocess.run(
        [hwprobe, "plan", source, "--device-map", "sequential", "--max-memory",
         f"cpu={size // 2}", "--json"],
        capture_output=True, text=True, env={**os.environ, "BACKPLANE_PLUGINS": "cpu"})
    if plan.returncode != 0:
        print(f"FAIL {model_type} ({label}): hwprobe plan exited {plan.returncode}: {plan.stderr}")
        return 1
    result = json.loads(plan.stdout)
    device_map = result["device_map"]
    if result["exact"] is not exact or ("approximate" in plan.stderr) == exact:
        print(f"FAIL {model_type} ({label}): exact is {result['exact']}, expected {exact}; "
              f"stderr: {plan.stderr}")
        return 1
    if "disk" not in device_map.values():
        print(f"FAIL {model_type} ({label}): the budget sent nothing to disk: {device_map}")
        return 1
    try:
        loaded = AutoModelForCausalLM.from_pretrained(
            folder, device_map=device_map, offload_folder=os.path.join(folder, "offload"))
    except Exception as e:
        print(f"FAIL {model_type} ({label}): from_pretrained refused {device_map}: "
              f"{type(e).__name__}: {e}")
        return 1
    got = dict(loaded.hf_device_map.items())
    if got != device_map:
        print(f"FAIL {model_type} ({label}): hf_device_map {got} != the plan {device_map}")
        return 1
    if exact:
        # And it is the map from_pretrained makes itself for the same request.
        own = AutoModelForCausalLM.from_pretrained(
            folder, device_map="sequential", max_memory={"cpu": size // 2},
            offload_folder=os.path.join(folder, "offload-own")).hf_device_map
        if dict(own) != device_map:
            print(f"FAIL {model_type} ({label}): from_pretrained's own map {dict(own)} != the plan "
                  f"{device_map}")
            return 1
    print(f"ok   {model_type} ({label}): from_pretrained took {device_map}")
    return 0


def main():
    hwprobe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    torch.manual_seed(0)
    failures = 0
    for model_type, fields in CASES.items():
        folder = os.path.join(work, model_type)
        config = CONFIG_MAPPING[model_type](**fields)
        model = AutoModelForCausalLM.from_config(config)
        model.save_pretrained(folder)
        size = sum(p.numel() * p.element_size() for p in model.parameters())
        alone = os.path.join(work, model_type + "-weights-only")
        os.makedirs(alone)
        shutil.copy(os.path.join(folder, "model.safetensors"), alone)
        for label, source, exact in (("config", folder, True),
                                     ("weights alone", os.path.join(alone, "model.safetensors"),
                                      False)):
            failures += check(hwprobe, model_type, label, source, exact, folder, size)
    print(f"{2 * len(CASES) - failures} of {2 * len(CASES)} plans (exact from config.json, "
          f"approximate from the weights alone) accepted by transformers {transformers.__version__}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
