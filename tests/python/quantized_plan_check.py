#!/usr/bin/env python3
"""hwprobe plan with a quantizer against transformers 5.24's own quantizers (bitsandbytes 4-bit and
8-bit, fine-grained fp8, compressed-tensors 0.20; GPTQ through optimum 2.3's layer selection, see
GPTQ_CASES), on models transformers builds from configs written here.

For each case the transformers side runs from_pretrained's planning steps with their own
functions, in from_pretrained's order: get_hf_quantizer (the merge of a config.json's
quantization_config with the one passed, validate_environment on the device_map as given),
_get_dtype, the model built under get_init_context (meta device, weights not tied),
hf_quantizer.preprocess_model (the module swap), compute_module_sizes and _get_device_map (the
quantizer's element sizes, adjust_max_memory, validate_environment again on the inferred map).
Only the weights are missing: no checkpoint is read. hwprobe must give the same map, model size,
swapped-module count and modules_to_not_convert, or fail with the same message (exit 2, nothing on
stdout), and report the same fall-back to dequantizing.

The quantizers are imported and run as they are; bitsandbytes 0.50 and compressed-tensors 0.20
(requirements-extra.txt) run on a CPU. fp8 asks torch whether a GPU is there and of which compute capability: on this CPU-only
machine the simulated machine's answer is given to it (torch.cuda.is_available and
get_device_capability patched to say what hwprobe's --sim topology says), so the check compares
the same hardware on both sides.

Usage: quantized_plan_check.py HWPROBE
"""

import contextlib
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import warnings

import loguru  # noqa: E402
import torch  # noqa: E402
from optimum.gptq.utils import get_block_name_with_pattern, get_layers  # noqa: E402
from transformers import (  # noqa: E402
    AutoConfig,
    AutoModelForCausalLM,
    AwqConfig,
    BitsAndBytesConfig,
    FineGrainedFP8Config,
    GPTQConfig,
)
from transformers.integrations.awq import AWQ_SCALES_MAPPINGS  # noqa: E402
from transformers.quantizers.base import HfQuantizer  # noqa: E402
from transformers.quantizers.quantizers_utils import should_convert_module  # noqa: E402
from transformers.integrations import accelerate as tia
from transformers.modeling_utils import _get_dtype
from transformers.quantizers.auto import get_hf_quantizer
from transformers.utils import ContextManagers
from transformers.utils import logging as hf_logging

# Small models of five descriptor architectures (dimensions even, so 4-bit sizes are whole bytes).
MODELS = {
    "llama": ("llama", {"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
                        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
                        "dtype": "bfloat16"}),
    "llama_tied": ("llama", {"hidden_size": 192, "intermediate_size": 512, "num_hidden_layers": 3,
                             "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 640,
                             "tie_word_embeddings": True, "dtype": "float16"}),
    "gpt2": ("gpt2", {"n_embd": 128, "n_layer": 3, "n_head": 4, "n_positions": 64,
                      "vocab_size": 500, "bos_token_id": 0, "eos_token_id": 0,
                      "dtype": "float32"}),
    "mixtral": ("mixtral", {"hidden_size": 256, "intermediate_size": 384, "num_hidden_layers": 3,
                            "num_attention_heads": 4, "num_key_value_heads": 2,
                            "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 800,
                            "dtype": "bfloat16"}),
    "gpt_neox": ("gpt_neox", {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "vocab_size": 700, "dtype": "float16"}),
    "gpt_oss": ("gpt_oss", {"hidden_size": 256, "intermediate_size": 256, "num_hidden_layers": 2,
                            "num_local_experts": 4, "num_experts_per_tok": 2,
                            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                            "vocab_size": 500, "dtype": "bfloat16"}),
    "qwen2": ("qwen2", {"hidden_size": 256, "intermediate_size": 704, "num_hidden_layers": 4,
                        "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1200,
                        "tie_word_embeddings": True, "dtype": "bfloat16"}),
}

# quantization_config blocks of pre-quantized checkpoints, as their config.json carries them.
BNB_4BIT = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
            "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16"}
BNB_8BIT_SKIPS = {"quant_method": "bitsandbytes", "load_in_8bit": True,
                  "llm_int8_skip_modules": ["lm_head", "mlp.down_proj"]}
FP8_BLOCKS = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
FP8_STATIC = {"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": None,
              "modules_to_not_convert": ["lm_head", "model.layers.0.self_attn"]}
FP8_UE8M0 = {"quant_method": "fp8", "weight_block_size": [64, 128], "scale_fmt": "ue8m0"}

# compressed-tensors checkpoints (llm-compressor's formats): a scheme dict, presets by group name,
# asymmetric static int8 with regex ignores, NVFP4, block fp8, two groups, a dense "frozen" one.
def ct(groups, ignore=("lm_head",), status="compressed", **extra):
    return {"quant_method": "compressed-tensors", "format": "pack-quantized",
            "quantization_status": status, "config_groups": groups, "ignore": list(ignore),
            **extra}


W4_GROUP = {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": True,
                                               "strategy": "group", "group_size": 128}}
CT_W4A16 = ct({"group_0": W4_GROUP})
CT_FP8_DYNAMIC = ct({"FP8_DYNAMIC": ["Linear"]})
CT_W8A8_ASYM = ct({"group_0": {
    "targets": ["Linear"],
    "weights": {"num_bits": 8, "type": "int", "symmetric": False, "strategy": "tensor"},
    "input_activations": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "tensor",
                          "dynamic": False}}}, ignore=["re:.*lm_head", "re:.*down_proj"])
CT_NVFP4A16 = ct({"NVFP4A16": ["Linear"]})
CT_FP8_BLOCK = ct({"FP8_BLOCK": ["Linear"]})
CT_TWO_GROUPS = ct({"attention": {"targets": ["re:.*self_attn"], "weights": {
                        "num_bits": 8, "type": "float", "strategy": "channel"},
                        "input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                                              "dynamic": True}},
                    "mlp": dict(W4_GROUP, targets=["re:.*mlp\\..*_proj"])},
                   ignore=["lm_head"], format="mixed-precision")
CT_FROZEN = ct({"group_0": W4_GROUP}, status="frozen")
CT_CASES = [("llama", CT_W4A16), ("qwen2", CT_W4A16), ("mixtral", CT_W4A16),
            ("gpt2", CT_W4A16), ("llama", CT_FP8_DYNAMIC), ("qwen2", CT_W8A8_ASYM),
            ("llama", CT_NVFP4A16), ("mixtral", CT_FP8_BLOCK), ("llama", CT_TWO_GROUPS),
            ("qwen2", CT_FROZEN)]
# Refused by compressed-tensors: the part of its message hwprobe must say too.
CT_REFUSALS = [
    ("llama", ct({"group_0": {"targets": ["Linear"], "weights": {
        "num_bits": 4, "strategy": "group"}}}),
     "strategy group requires group_size to be set to a positive value"),
    ("llama", ct({"group_0": dict(W4_GROUP, format="marlin-24")}), "Unable to find marlin-24"),
    ("llama", ct({"group_0": dict(W4_GROUP, format="int-quantized")}),
     "tensor column shape must be divisble by the given group_size 128 but got 688"),
    ("llama", ct({"group_0": {"targets": ["Linear"], "weights": {
        "num_bits": 4, "type": "int", "strategy": "rows"}}}),
     "'rows' is not a valid QuantizationStrategy"),
    ("llama", ct({"W4A17": ["Linear"]}), "Unknown preset scheme name W4A17"),
]

# GPTQ checkpoints. transformers' GPTQ quantizer needs GPT-QModel, which has no wheel for this
# machine; optimum (requirements-extra.txt) is there. So the GPTQ cases run optimum's own layer
# selection (get_block_name_with_pattern, get_layers, the modules_in_block_to_quantize filter)
# on the meta model transformers builds, and replace the layers with GptqQuantLinear below: a
# reproduction of the tensors GPT-QModel 7.7's QuantLinear registers (its torch kernel's layout;
# every class it may pick holds the same bytes), then transformers' own compute_module_sizes and
# _get_device_map, as from_pretrained runs them for GPTQ (no element size or max_memory
# override).
GPTQ_4BIT = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False,
             "sym": True, "damp_percent": 0.01}
GPTQ_CASES = [
    ("llama", GPTQ_4BIT),
    ("qwen2", dict(GPTQ_4BIT, bits=8, group_size=-1)),  # q/k/v biases, one group a column
    ("mixtral", GPTQ_4BIT),  # router and fused experts stay dense
    ("gpt2", dict(GPTQ_4BIT, bits=3, group_size=32)),  # Conv1D
    ("llama", dict(GPTQ_4BIT, modules_in_block_to_quantize=[
        ["self_attn.q_proj", "self_attn.k_proj"], ["mlp.down_proj"]])),
    ("llama", dict(GPTQ_4BIT, bits=2, block_name_to_quantize="model.layers.1")),
]
GPTQ_REFUSALS = [
    ("llama", dict(GPTQ_4BIT, bits=5), "Only support quantization to [2,3,4,8] bits but found 5"),
    ("llama", dict(GPTQ_4BIT, group_size=0), "group_size must be greater than 0 or equal to -1"),
    ("llama", dict(GPTQ_4BIT, damp_percent=1.0), "damp_percent must between 0 and 1."),
]


class GptqQuantLinear(torch.nn.Module):
    """GPT-QModel's GPTQQuantLinear._register_gptq_buffers, reproduced (see above)."""

    def __init__(self, bits, group_size, in_features, out_features, bias):
        super().__init__()
        groups = math.ceil(in_features / (in_features if group_size == -1 else group_size))
        shapes = {"qweight": (math.ceil(in_features * bits / 32), out_features, torch.int32),
                  "qzeros": (groups, math.ceil(out_features * bits / 32), torch.int32),
                  "scales": (groups, out_features, torch.float16),
                  "g_idx": (in_features, torch.int32)}
        for name, (*shape, dtype) in shapes.items():
            self.register_buffer(name, torch.empty(*shape, dtype=dtype))
        if bias:
            self.register_buffer("bias", torch.empty(out_features, dtype=torch.float16))


def gptq_convert(model, q):
    """optimum's GPTQQuantizer.convert_model, with GptqQuantLinear for GPT-QModel's class."""
    block = q.get("block_name_to_quantize") or get_block_name_with_pattern(model)
    layers = get_layers(model, prefix=block)
    if q.get("modules_in_block_to_quantize"):
        kept = sum(q["modules_in_block_to_quantize"], [])
        layers = {n: m for n, m in layers.items() if any(n.endswith(k) for k in kept)}
    for name, layer in layers.items():
        parent, _, attr = name.rpartition(".")
        conv1d = type(layer).__name__ == "Conv1D"
        in_f, out_f = (layer.weight.shape if conv1d else (layer.in_features, layer.out_features))
        setattr(model.get_submodule(parent), attr,
                GptqQuantLinear(q["bits"], q.get("group_size", 128), in_f, out_f,
                                layer.bias is not None))
    return len(layers)


def gptq_awq_plan(folder, device_map, max_memory):
    """from_pretrained's planning for a GPTQ or AWQ checkpoint, GPT-QModel's classes reproduced."""
    out = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = AutoConfig.from_pretrained(folder)
            given = dict(config.quantization_config)
            awq = given["quant_method"] == "awq"
            # The config class's own post_init checks.
            q = (AwqConfig if awq else GPTQConfig).from_dict(given)
            model_class = AutoModelForCausalLM._model_mapping[type(config)]
            dm = tia.check_and_set_device_map(device_map)
            config, dtype = _get_dtype("auto", None, config, None, None, True, None)
            with ContextManagers(model_class.get_init_context(dtype, True, False, False)):
                model = model_class(config)
                if awq:
                    out["replaced"], out["not_converted"] = awq_convert(model, q)
                else:
                    out["replaced"], out["not_converted"] = gptq_convert(model, given), []
            out["model_size"] = tia.compute_module_sizes(model, None)[0][""]
            out["dequantized"] = False
            result = tia._get_device_map(model, dm, max_memory, None)
            out["device_map"] = [[k, v if not isinstance(v, torch.device) else str(v)]
                                 for k, v in result.items()]
            out["warnings"] = []
    except Exception as e:
        out = {"error": str(e)}
    out["logged"] = []
    return out


# AWQ checkpoints: transformers' AWQ quantizer imports GPT-QModel too. The AWQ cases run
# transformers' own skip list (HfQuantizer.get_modules_to_not_convert with its default skips,
# should_convert_module) and its AWQ_SCALES_MAPPINGS, with AwqQuantLinear below for GPT-QModel's
# GEMM-layout class (the bytes of every class it may pick for format "gemm").
AWQ_4BIT = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
            "version": "gemm"}
AWQ_CASES = [
    ("llama", AWQ_4BIT),
    ("qwen2", dict(AWQ_4BIT, group_size=64, modules_to_not_convert=["mlp.down_proj"])),
    ("mixtral", dict(AWQ_4BIT, modules_to_not_convert=["gate"])),
    ("llama_tied", dict(AWQ_4BIT, bits=8, group_size=-1)),
    ("gpt_neox", AWQ_4BIT),  # ScaledActivation scales
]
AWQ_REFUSALS = [
    ("llama", dict(AWQ_4BIT, version="marlin"),
     "Invalid format 'marlin'. Must be one of: ['gemm', 'gemv', 'gemv_fast', 'llm-awq']"),
    ("llama", dict(AWQ_4BIT, backend="bogus"), "Invalid backend 'bogus'"),
    ("gpt2", AWQ_4BIT, "'has_been_replaced'"),  # Conv1D is no nn.Linear: nothing replaced
]


class AwqQuantLinear(torch.nn.Module):
    """GPT-QModel's AWQuantLinear buffers (register_buffers=True), reproduced."""

    def __init__(self, bits, group_size, in_features, out_features, bias):
        super().__init__()
        groups = math.ceil(in_features / (in_features if group_size == -1 else group_size))
        packed = math.ceil(out_features * bits / 32)
        self.register_buffer("qweight", torch.empty(in_features, packed, dtype=torch.int32))
        self.register_buffer("qzeros", torch.empty(groups, packed, dtype=torch.int32))
        self.register_buffer("scales", torch.empty(groups, out_features, dtype=torch.float16))
        if bias:
            self.register_buffer("bias", torch.empty(out_features, dtype=torch.float16))


class ScaledActivation(torch.nn.Module):
    """GPT-QModel's ScaledActivation (its scales in the model's dtype), reproduced."""

    def __init__(self, act, size):
        super().__init__()
        self.act = act
        self.scales = torch.nn.Parameter(torch.ones(size))


def awq_convert(model, q):
    """AwqQuantizer._process_model_before_weight_loading, GPT-QModel's classes reproduced."""
    skips = HfQuantizer.get_modules_to_not_convert(
        model, q.modules_to_not_convert, model._keep_in_fp32_modules, add_default_skips=True)
    replaced = 0
    for name, module in list(model.named_modules()):
        if isinstance(module, torch.nn.Linear) and should_convert_module(name, skips):
            model.set_submodule(name, AwqQuantLinear(q.bits, q.group_size, module.in_features,
                                                     module.out_features,
                                                     module.bias is not None))
            replaced += 1
    if replaced == 0:
        raise UnboundLocalError(
            "cannot access local variable 'has_been_replaced' where it is not associated with a value")
    mapping = AWQ_SCALES_MAPPINGS.get(model.config.model_type)
    for name, module in list(model.named_modules()) if mapping else []:
        act = getattr(module, mapping["act"], None)
        before = getattr(module, mapping["layer_before_act"], None)
        if act is not None and before is not None and not isinstance(act, ScaledActivation):
            size = before.scales.shape[1] if isinstance(before, AwqQuantLinear) else before.out_features
            setattr(module, mapping["act"], ScaledActivation(act, size))
    return replaced, sorted(set(skips))


# MXFP4 (gpt-oss) checkpoints, through transformers' own Mxfp4HfQuantizer. It needs triton and the
# kernels package (0.18.2 or later, which PyPI lacks) and downloads its Triton kernels from the
# Hub before planning: the check tells it both are there and stubs the download, as hwprobe
# assumes them installed (and says so in a note); torch's accelerator is the simulated machine's.
MXFP4_SKIPS = {"quant_method": "mxfp4", "modules_to_not_convert": [
    "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
MXFP4_CASES = [("gpt_oss", MXFP4_SKIPS, "h100x8"), ("gpt_oss", {"quant_method": "mxfp4"}, "a10g"),
               ("gpt_oss", MXFP4_SKIPS, "v100"), ("gpt_oss", MXFP4_SKIPS, "cpu"),
               ("gpt_oss", dict(MXFP4_SKIPS, modules_to_not_convert=["model.layers.1.mlp.experts"]),
                "h100x8")]


@contextlib.contextmanager
def mxfp4_environment(machine):
    import transformers.integrations.hub_kernels as hub_kernels
    import transformers.quantizers.quantizer_mxfp4 as quantizer_mxfp4

    saved = (torch.accelerator.current_accelerator, hub_kernels.get_kernel,
             quantizer_mxfp4.is_triton_available, quantizer_mxfp4.is_kernels_available)
    gpu = SIMULATED[machine]["cuda"] is not None
    torch.accelerator.current_accelerator = lambda *a, **k: torch.device("cuda") if gpu else None
    hub_kernels.get_kernel = lambda *a, **k: None
    quantizer_mxfp4.is_triton_available = lambda *a, **k: True
    quantizer_mxfp4.is_kernels_available = lambda *a, **k: True
    try:
        yield
    finally:
        (torch.accelerator.current_accelerator, hub_kernels.get_kernel,
         quantizer_mxfp4.is_triton_available, quantizer_mxfp4.is_kernels_available) = saved


# --quantize values and the configs from_pretrained(quantization_config=...) gets for them.
ON_LOAD = {
    "bnb-4bit": lambda: BitsAndBytesConfig(load_in_4bit=True),
    "bnb-8bit": lambda: BitsAndBytesConfig(load_in_8bit=True),
    "fp8": lambda: FineGrainedFP8Config(),
}

# (model, config.json's quantization_config or None, --quantize or None, simulated machine)
CASES = [
    ("llama", None, "bnb-4bit", "h100x8"),
    ("llama", None, "bnb-8bit", "h100x8"),
    ("llama", None, "fp8", "h100x8"),
    ("llama_tied", None, "bnb-4bit", "h100x8"),
    ("llama_tied", None, "fp8", "h100x8"),
    ("gpt2", None, "bnb-4bit", "h100x8"),
    ("gpt2", None, "bnb-8bit", "h100x8"),
    ("gpt2", None, "fp8", "h100x8"),
    ("mixtral", None, "bnb-4bit", "h100x8"),
    ("mixtral", None, "fp8", "h100x8"),
    ("qwen2", None, "bnb-8bit", "h100x8"),
    ("qwen2", None, "fp8", "h100x8"),
    ("llama", BNB_4BIT, None, "h100x8"),
    ("qwen2", BNB_8BIT_SKIPS, None, "h100x8"),
    ("mixtral", FP8_BLOCKS, None, "h100x8"),
    ("llama", FP8_STATIC, None, "h100x8"),
    ("qwen2", FP8_UE8M0, None, "h100x8"),
    ("mixtral", FP8_UE8M0, None, "h100x8"),
    # A config's quantization_config wins over the one passed (bitsandbytes warns; fp8 takes the
    # passed one's loading attributes); another config class is refused.
    ("llama", BNB_8BIT_SKIPS, "bnb-4bit", "h100x8"),
    ("mixtral", FP8_STATIC, "fp8", "h100x8"),
    ("llama", FP8_BLOCKS, "bnb-4bit", "h100x8"),
    # Where fp8 cannot run: a GPU under compute capability 8.9, no GPU at all.
    ("llama", FP8_BLOCKS, None, "a10g"),
    ("llama", None, "fp8", "a10g"),
    ("qwen2", FP8_BLOCKS, None, "cpu"),
    ("qwen2", None, "fp8", "cpu"),
    ("gpt2", None, "bnb-4bit", "cpu"),
] + [(model, config, None, "h100x8") for model, config in CT_CASES + GPTQ_CASES + AWQ_CASES] + [
    (model, config, None, machine) for model, config, machine in MXFP4_CASES]

# Budgets as fractions of the quantized model's size, per simulated machine: all on one GPU,
# split over three, too little GPU memory (cpu and disk entries in the map).
GPU_BUDGETS = [
    {0: 1.3, "cpu": 2.0},
    {0: 0.45, 1: 0.45, 2: 1.0, "cpu": 2.0},
    {0: 0.3, 1: 0.3, "cpu": 2.0},
    {0: 0.25, "cpu": 0.3, "disk": 10.0},
]
CPU_BUDGETS = [{"cpu": 2.0}, {"cpu": 0.5, "disk": 10.0}]
STRATEGIES = ["auto", "balanced_low_0", "sequential"]
DICT_MAPS = [
    {"": 0},
    {"model.embed_tokens": 0, "model.layers": 1, "model.norm": 1, "model.rotary_emb": 1,
     "lm_head": "cpu"},
]

SIMULATED = {
    "h100x8": {"cuda": (9, 0), "devices": 8},
    "v100": {"cuda": (7, 0), "devices": 1},
    "a10g": {"cuda": (8, 6), "devices": 1},
    "cpu": {"cuda": None, "devices": 0},
}
TOPOLOGIES = {
    "a10g": {"name": "1x NVIDIA A10G", "devices": [{
        "type": "cuda", "vendor": "nvidia", "name": "NVIDIA A10G", "memory": "23028MiB",
        "compute_capability": "8.6", "uuid": "GPU-00000000-0000-0000-0000-00000000a10g",
        "pci_bus_id": "0000:00:1e.0", "multiprocessors": 80, "clock_mhz": 1710}]},
    "v100": {"name": "1x Tesla V100", "devices": [{
        "type": "cuda", "vendor": "nvidia", "name": "Tesla V100-SXM2-16GB", "memory": "16160MiB",
        "compute_capability": "7.0", "uuid": "GPU-00000000-0000-0000-0000-00000000v100",
        "pci_bus_id": "0000:00:1e.0", "multiprocessors": 80, "clock_mhz": 1530}]},
    "cpu": {"name": "CPU only", "devices": []},
}


@contextlib.contextmanager
def simulated_cuda(machine):
    """torch's answers about CUDA, as the simulated machine would give them."""
    capability = SIMULATED[machine]["cuda"]
    saved = torch.cuda.is_available, torch.cuda.get_device_capability
    torch.cuda.is_available = lambda: capability is not None
    torch.cuda.get_device_capability = lambda *args: capability
    try:
        yield
    finally:
        torch.cuda.is_available, torch.cuda.get_device_capability = saved


class Captured(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


# accelerate warns of every budgeted GPU index that this CPU-only machine lacks; transformers'
# warnings are captured per case (Captured) instead of printed.
logging.getLogger("accelerate").setLevel(logging.ERROR)
loguru.logger.remove()  # compressed-tensors' own warnings (a group that does not divide a width)
hf_logging.disable_default_handler()
hf_logging.disable_progress_bar()  # compressed-tensors' "Applying quantization config" bars


def transformers_plan(folder, quantize, device_map, max_memory, machine):
    """from_pretrained's planning steps, without reading weights. Returns a dict with the map or
    the error, the sizes, the swap and the warnings."""
    with open(os.path.join(folder, "config.json")) as f:
        if (json.load(f).get("quantization_config") or {}).get("quant_method") in ("gptq", "awq"):
            return gptq_awq_plan(folder, device_map, max_memory)
    hf_logging.get_logger("transformers").warning_once.cache_clear()
    handler = Captured()
    root = hf_logging.get_logger("transformers")
    root.addHandler(handler)
    out = {}
    try:
        mxfp4 = contextlib.nullcontext()
        with open(os.path.join(folder, "config.json")) as f:
            if (json.load(f).get("quantization_config") or {}).get("quant_method") == "mxfp4":
                mxfp4 = mxfp4_environment(machine)
        with simulated_cuda(machine), mxfp4, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            config = AutoConfig.from_pretrained(folder)
            model_class = AutoModelForCausalLM._model_mapping[type(config)]
            passed = ON_LOAD[quantize]() if quantize else None
            dm = tia.check_and_set_device_map(device_map)
            hf_quantizer, config, dm = get_hf_quantizer(config, passed, dm, True, {})
            config, dtype = _get_dtype("auto", None, config, None, None, True, hf_quantizer)
            with ContextManagers(model_class.get_init_context(dtype, True, False, False)):
                model = model_class(config)
                hf_quantizer.preprocess_model(model=model, dtype=dtype, device_map=dm,
                                              checkpoint_files=None, use_kernels=False)
            out["model_size"] = tia.compute_module_sizes(model, hf_quantizer)[0][""]
            q = hf_quantizer.quantization_config
            out["dequantized"] = bool(getattr(q, "dequantize", False))
            replaced = {"Linear4bit", "Linear8bitLt", "FP8Linear", "FP8Experts", "Mxfp4GptOssMLP"}
            # compressed-tensors keeps the classes and gives each quantized module its scheme.
            out["replaced"] = sum(type(m).__name__ in replaced
                                  or getattr(m, "quantization_scheme", None) is not None
                                  for m in model.modules())
            out["not_converted"] = sorted(set(getattr(hf_quantizer, "modules_to_not_convert", None) or []))
            result = tia._get_device_map(model, dm, max_memory, hf_quantizer)
            out["device_map"] = [[k, v if not isinstance(v, torch.device) else str(v)]
                                 for k, v in result.items()]
            out["warnings"] = [str(w.message) for w in caught if "quantization_config" in str(w.message)]
    except Exception as e:  # hwprobe must refuse where transformers does
        out = {"error": str(e)}
    finally:
        root.removeHandler(handler)
    out["logged"] = handler.messages
    return out


def budget_text(budgets):
    return ",".join(f"{k}={v}" for k, v in budgets.items())


def hwprobe(tool, folder, quantize, device_map, max_memory, machine, topology_files):
    args = [tool, "plan", folder, "--device-map",
            device_map if isinstance(device_map, str) else json.dumps(device_map), "--json",
            "--sim", topology_files.get(machine, machine)]
    if max_memory:
        args += ["--max-memory", budget_text(max_memory)]
    if quantize:
        args += ["--quantize", quantize]
    return subprocess.run(args, capture_output=True, text=True)


def hwprobe_map(got):
    return sorted([k, v] for k, v in got["device_map"].items())


def compare(label, expected, run, failures):
    if "error" in expected:
        if run.returncode != 2 or run.stdout.strip():
            failures.append(f"{label}: transformers refuses ({expected['error']}), hwprobe exit "
                            f"{run.returncode}, stdout {run.stdout[:200]!r}")
        elif expected["error"].strip() not in run.stderr:
            failures.append(f"{label}: transformers says {expected['error']!r}; hwprobe says "
                            f"{run.stderr.strip()!r}")
        return
    if run.returncode != 0:
        failures.append(f"{label}: transformers plans {expected['device_map']}; hwprobe exit "
                        f"{run.returncode}: {run.stderr.strip()}")
        return
    got = json.loads(run.stdout)
    q = got.get("quantization") or {}
    checks = [
        # hf_device_map is a dict: equal entries in any order.
        ("device_map", sorted(expected["device_map"]), hwprobe_map(got)),
        ("model_size", expected["model_size"], got["model_size"]),
        ("dequantized", expected["dequantized"], q.get("dequantized")),
        ("replaced modules", expected["replaced"], q.get("replaced_modules")),
        ("modules_to_not_convert", expected["not_converted"],
         sorted(set(q.get("modules_to_not_convert", [])))),
    ]
    for what, want, have in checks:
        if want != have:
            failures.append(f"{label}: {what}: transformers {want}, hwprobe {have}")
    # Every warning transformers gives about the quantizer hwprobe gives too, in its words.
    for message in expected["warnings"] + [m for m in expected["logged"]
                                           if "FP8" in m or "fp8" in m or "MXFP4" in m]:
        said = [run.stderr] + got.get("load_warnings", []) + got.get("warnings", [])
        if not any(message.strip() in text for text in said):
            failures.append(f"{label}: transformers warns {message!r}; hwprobe does not "
                            f"(stderr {run.stderr.strip()!r})")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    tool = sys.argv[1]
    failures = []
    planned = refused = 0
    with tempfile.TemporaryDirectory() as tmp:
        topology_files = {}
        for name, topology in TOPOLOGIES.items():
            path = os.path.join(tmp, name + ".json")
            with open(path, "w") as f:
                json.dump(topology, f)
            topology_files[name] = path
        for index, (model_name, quantization, quantize, machine) in enumerate(CASES):
            model_type, overrides = MODELS[model_name]
            folder = os.path.join(tmp, f"case{index}")
            config = AutoConfig.for_model(model_type, **overrides)
            config.architectures = [AutoModelForCausalLM._model_mapping[type(config)].__name__]
            if quantization is not None:
                config.quantization_config = dict(quantization)
            config.save_pretrained(folder)
            # The quantized size, to scale the budgets by.
            whole = transformers_plan(folder, quantize, {"": "cpu"}, None, machine)
            size = whole.get("model_size", 10**6)
            budgets = GPU_BUDGETS if SIMULATED[machine]["devices"] else CPU_BUDGETS
            for fractions in budgets:
                max_memory = {k: int(size * f) for k, f in fractions.items()}
                for strategy in STRATEGIES:
                    label = (f"{model_name} config={quantization and quantization['quant_method']} "
                             f"--quantize {quantize} {machine} {strategy} {budget_text(max_memory)}")
                    expected = transformers_plan(folder, quantize, strategy, max_memory, machine)
                    run = hwprobe(tool, folder, quantize, strategy, max_memory, machine,
                                  topology_files)
                    compare(label, expected, run, failures)
                    planned += "error" not in expected
                    refused += "error" in expected
            if SIMULATED[machine]["devices"] > 1 and model_type in ("llama", "qwen2", "mixtral"):
                for device_map in DICT_MAPS:
                    label = f"{model_name} --quantize {quantize} {machine} device_map={device_map}"
                    expected = transformers_plan(folder, quantize, device_map, None, machine)
                    run = hwprobe(tool, folder, quantize, device_map, None, machine,
                                  topology_files)
                    compare(label, expected, run, failures)
                    planned += "error" not in expected
                    refused += "error" in expected
        for index, (model_name, quantization, phrase) in enumerate(CT_REFUSALS + GPTQ_REFUSALS + AWQ_REFUSALS):
            model_type, overrides = MODELS[model_name]
            folder = os.path.join(tmp, f"refusal{index}")
            config = AutoConfig.for_model(model_type, **overrides)
            config.architectures = [AutoModelForCausalLM._model_mapping[type(config)].__name__]
            config.quantization_config = dict(quantization)
            config.save_pretrained(folder)
            expected = transformers_plan(folder, None, "auto", None, "h100x8")
            run = hwprobe(tool, folder, None, "auto", None, "h100x8", topology_files)
            label = f"{model_name} {quantization['quant_method']} refusal {phrase!r}"
            if phrase not in expected.get("error", ""):
                failures.append(f"{label}: transformers: {expected}")
            elif run.returncode != 2 or run.stdout.strip() or phrase not in run.stderr:
                failures.append(f"{label}: hwprobe exit {run.returncode}: {run.stderr.strip()}")
            refused += 1
    for failure in failures:
        print("FAIL", failure)
    print(f"quantized plans: {planned} planned, {refused} refused, {len(failures)} differences")
    return 1 if failures or planned == 0 or refused == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
