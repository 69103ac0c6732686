#!/usr/bin/env python3
"""Approximate plans are plans transformers accepts (run by ctest: approximate_plan_check).

For architectures backplane has no description of, `hwprobe plan --weights` rebuilds the tree
from the tensor names and says the plan is approximate. Such a plan must still be one
from_pretrained takes: this saves tiny random checkpoints with transformers itself, plans each
over cpu and disk with the weights alone (sequential, a cpu budget that sends part to disk), and
hands the map back to from_pretrained(device_map=..., offload_folder=...) on this machine, which
must load it and report the same map.

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
        plan = subprocess.run(
            [hwprobe, "plan", "--weights", os.path.join(folder, "model.safetensors"),
             "--device-map", "sequential", "--max-memory", f"cpu={size // 2}", "--json"],
            capture_output=True, text=True, env={**os.environ, "BACKPLANE_PLUGINS": "cpu"})
        if plan.returncode != 0:
            print(f"FAIL {model_type}: hwprobe plan exited {plan.returncode}: {plan.stderr}")
            failures += 1
            continue
        result = json.loads(plan.stdout)
        device_map = result["device_map"]
        assert result["exact"] is False, model_type  # no description of these here
        assert "approximate" in plan.stderr, plan.stderr
        if "disk" not in device_map.values():
            print(f"FAIL {model_type}: the budget sent nothing to disk: {device_map}")
            failures += 1
            continue
        try:
            loaded = AutoModelForCausalLM.from_pretrained(
                folder, device_map=device_map, offload_folder=os.path.join(folder, "offload"))
        except Exception as e:
            print(f"FAIL {model_type}: from_pretrained refused {device_map}: "
                  f"{type(e).__name__}: {e}")
            failures += 1
            continue
        got = {k: v for k, v in loaded.hf_device_map.items()}
        if got != device_map:
            print(f"FAIL {model_type}: hf_device_map {got} != the plan {device_map}")
            failures += 1
            continue
        print(f"ok   {model_type}: from_pretrained took {device_map}")
    print(f"{len(CASES) - failures} of {len(CASES)} approximate plans accepted by transformers "
          f"{transformers.__version__}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
