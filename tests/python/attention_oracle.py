"""What transformers resolves attn_implementation to: the oracle of the attention tests.

Run with the venv of tests/python/venv.sh:
  attention_oracle.py CASES.json OUTPUT.json
CASES.json (tests/attention/cases.json) lists environments and requested values; each case:
  "requested"   the attn_implementation value (null: the default)
  "device"      the device type the model runs on ("cpu", "cuda", "rocm", "xpu", "mps")
  "available"   accelerator device types present on the machine
  "capability"  [major, minor] of the CUDA device, or null
  "packages"    FlashAttention versions whose package is installed ([2, 3, 4])
  "kernels"     whether the `kernels` library is installed
  "hub"         Hub kernel repos it can load (only builds for the devices transformers lists)
  "dtype"       the model's dtype (default bfloat16)
OUTPUT.json: {"versions": {...}, "results": {name: outcome}}, the outcome being
  {"implementation": str, "warnings": [str, ...]}  or
  {"error": {"type": "ValueError" | "ImportError", "message": str}, "warnings": [...]}.

transformers' availability functions are monkeypatched to describe each environment, and its
kernel loader is replaced by one that succeeds exactly when the environment says it would; the
resolution itself is transformers' own _check_and_adjust_attn_implementation on a tiny Llama.
"""

import json
import sys
import warnings

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM
from transformers import modeling_flash_attention_utils as fa_utils
from transformers import modeling_utils
from transformers.integrations.hub_kernels import is_kernel

transformers.logging.set_verbosity_error()

TORCH_DEVICES = ("cuda", "mlu", "musa", "npu", "xpu")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def tiny_model():
    config = LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, vocab_size=32)
    return LlamaForCausalLM(config)


class Environment:
    """One case's machine, as transformers' availability checks see it."""

    def __init__(self, case):
        self.case = case
        available = set(case["available"])
        if "rocm" in available:  # PyTorch's ROCm builds answer to "cuda"
            available.add("cuda")
        self.available = available
        self.packages = set(case["packages"])

    def has(self, device):
        return device in self.available

    def general_availability(self, version):
        torch_devices = ("cuda", "mlu", "musa") if version == 2 else ("cuda",)
        return version in self.packages and any(self.has(d) for d in torch_devices)

    def load(self, implementation, attention_wrapper=None, allow_all_kernels=False):
        """lazy_import_flash_attention: what importing the package or the Hub kernel does."""
        del attention_wrapper, allow_all_kernels
        name = implementation.split("|")[-1]
        if is_kernel(name):
            if not self.case["kernels"]:
                raise ImportError("the `kernels` library is not installed")
            repo = name.split(":")[0].partition("@")[0]
            if repo not in self.case["hub"]:
                raise ValueError(f"An error occurred while trying to load from '{repo}': not found.")
            device = self.case["device"]
            if device not in fa_utils.FLASH_ATTN_KERNEL_DEVICES.get(repo, (device,)):
                raise ValueError(f"Cannot find a build variant for this system in {repo}")
            return None
        version = int(name[-1])
        if version not in self.packages:
            raise ImportError(f"No module for FlashAttention{version}")
        return None


def patch(env):
    """Point transformers' checks at `env`; returns what to restore."""
    saved = []

    def setattr_saved(obj, name, value):
        saved.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    for device in TORCH_DEVICES:  # those modeling_utils imports (the matrix holds the others)
        if hasattr(modeling_utils, f"is_torch_{device}_available"):
            setattr_saved(modeling_utils, f"is_torch_{device}_available",
                          lambda d=device: env.has(d))
    setattr_saved(modeling_utils, "is_kernels_available", lambda *a, **k: env.case["kernels"])
    setattr_saved(modeling_utils, "is_flash_attn_greater_or_equal", lambda *a, **k: True)
    setattr_saved(modeling_utils, "lazy_import_flash_attention", env.load)
    capability = tuple(env.case["capability"] or (0, 0))
    setattr_saved(torch.cuda, "get_device_capability", lambda *a, **k: capability)

    matrix = fa_utils.FLASH_ATTENTION_COMPATIBILITY_MATRIX
    for version, entry in matrix.items():
        saved.append((entry, None, dict(entry)))
        entry["general_availability_check"] = lambda v=version: env.general_availability(v)
        entry["pkg_availability_check"] = lambda *a, v=version, **k: v in env.packages
        entry["supported_devices"] = tuple(
            (lambda d=name: env.has(d), name) for _, name in entry["supported_devices"])
        if "custom_supported_devices" in entry:
            entry["custom_supported_devices"] = tuple(
                (lambda d=d: env.has(d), message)
                for d, (_, message) in zip(("npu", "xpu"), entry["custom_supported_devices"]))

    fallback = fa_utils.FLASH_ATTN_KERNEL_FALLBACK  # the dict modeling_utils imported
    saved.append((fallback, None, dict(fallback)))
    if env.case["device"] == "rocm":  # is_rocm_platform(), decided at import in transformers
        fallback["flash_attention_2"] = "kernels-community/aiter-flash-attn"
        fallback["flash_attention_3"] = "kernels-community/aiter-flash-attn"
    return saved


def restore(saved):
    for obj, name, value in reversed(saved):
        if name is None:
            obj.clear()
            obj.update(value)
        else:
            setattr(obj, name, value)


def resolve(model, case):
    env = Environment(case)
    model.config.dtype = DTYPES[case.get("dtype") or "bfloat16"]
    logged = []
    saved = patch(env)
    saved.append((modeling_utils.logger, "warning_once", modeling_utils.logger.warning_once))
    modeling_utils.logger.warning_once = lambda message, *a, **k: logged.append(str(message))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                outcome = {"implementation": model._check_and_adjust_attn_implementation(
                    case["requested"], is_init_check=True)}
            except (ValueError, ImportError) as e:
                outcome = {"error": {"type": type(e).__name__, "message": str(e)}}
        outcome["warnings"] = [str(w.message) for w in caught] + logged
    finally:
        restore(saved)
    return outcome


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: attention_oracle.py CASES.json OUTPUT.json")
    with open(sys.argv[1]) as f:
        cases = json.load(f)["cases"]
    model = tiny_model()
    results = {case["name"]: resolve(model, case) for case in cases}
    out = {"versions": {"transformers": transformers.__version__, "torch": torch.__version__},
           "results": results}
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
