#!/usr/bin/env python3
"""hwprobe estimate against accelerate 1.15's own estimate-memory functions, on models transformers
5.24 builds from configs written here (no Hub: `accelerate estimate-memory` itself asks the Hub
first). For each case the model is built as the command builds it (AutoModel.from_config in
float32 under init_empty_weights), sized by calculate_maximum_sizes, its rows made as gather_data
and estimate_command make them (estimate_training_usage, the dtype divisors, convert_bytes), and
drawn by create_ascii_table; hwprobe's JSON must give the same total, largest layer, training
figure and, character for character, the same table. Then the anatomy's parts, the fits on a
simulated machine, and bad input (exit 2, nothing on stdout).

Usage: estimate_check.py HWPROBE
"""

import json
import os
import subprocess
import sys
import tempfile
import warnings

import torch
from accelerate import init_empty_weights
from accelerate.commands.estimate import create_ascii_table, estimate_training_usage
from accelerate.utils import calculate_maximum_sizes, convert_bytes
from transformers import AutoConfig, AutoModel

# (model_type, config overrides): defaults are the config classes' own (full-size models).
CASES = [
    ("llama", {}),
    ("llama", {"tie_word_embeddings": True, "num_hidden_layers": 3, "hidden_size": 1000,
               "num_attention_heads": 10, "intermediate_size": 2500, "vocab_size": 1234}),
    ("gpt2", {}),
    ("mixtral", {"num_hidden_layers": 4}),
    ("qwen2", {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
               "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000}),
    ("gemma", {}),
    ("phi3", {"num_hidden_layers": 6}),
    ("t5", {}),
    ("gpt_neox", {"num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 4,
                  "intermediate_size": 16, "vocab_size": 8}),
    # Quantized checkpoints' configs: estimate-memory applies no quantizer (the dense model).
    ("llama", {"num_hidden_layers": 2, "quantization_config": {
        "quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}}),
    ("qwen2", {"num_hidden_layers": 2, "quantization_config": {
        "quant_method": "fp8", "weight_block_size": [128, 128]}}),
]
DTYPE_ORDERS = [["float32", "float16", "int8", "int4"], ["int4", "float16"]]
HEADERS = ["dtype", "Largest Layer", "Total Size", "Training using Adam"]


def accelerate_rows(model, dtypes):
    """estimate-memory's rows and table, as gather_data and estimate_command make them."""
    total_size, largest_layer = calculate_maximum_sizes(model)
    data = []
    for dtype in dtypes:
        total, largest = total_size, largest_layer[0]
        training = estimate_training_usage(total, dtype)
        divisor = {"float16": 2, "int8": 4, "int4": 8}.get(dtype)
        if divisor:
            total /= divisor
            largest /= divisor
        peak = max(training.values())
        data.append((dtype, largest, total, None if peak == -1 else peak))
    return total_size, largest_layer, data


def table_of(data, name):
    rows = [[d, convert_bytes(l), convert_bytes(t), "N/A" if a is None else convert_bytes(a)]
            for d, l, t, a in data]
    return create_ascii_table(HEADERS, rows, f"Memory Usage for loading `{name}`")


def hwprobe(tool, *args, sim=None):
    return subprocess.run([tool, "estimate", *args, *(["--sim", sim] if sim else [])],
                          capture_output=True, text=True)


# One 24 GB GPU, as a simulated topology file.
A10G = {"name": "1x NVIDIA A10G", "devices": [{
    "type": "cuda", "vendor": "nvidia", "name": "NVIDIA A10G", "memory": "23028MiB",
    "compute_capability": "8.6", "uuid": "GPU-00000000-0000-0000-0000-00000000a10g",
    "pci_bus_id": "0000:00:1e.0", "multiprocessors": 80, "clock_mhz": 1710}]}


def check_case(tool, folder, model_type, overrides, failures):
    config = AutoConfig.for_model(model_type, **overrides)
    config.save_pretrained(folder)
    with init_empty_weights(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModel.from_config(config, dtype=torch.float32)
    label = f"{model_type} {overrides or 'defaults'}"
    for dtypes in DTYPE_ORDERS:
        total, largest, data = accelerate_rows(model, dtypes)
        run = hwprobe(tool, folder, "--dtypes", ",".join(dtypes), "--json")
        if run.returncode != 0:
            failures.append(f"{label}: hwprobe exit {run.returncode}: {run.stderr.strip()}")
            return
        got = json.loads(run.stdout)
        expect_table = table_of(data, folder)
        checks = [
            ("model class", type(model).__name__, got["model_class"]),
            ("total bytes", total, got["total_bytes"]),
            ("largest layer bytes", largest[0], got["largest_layer"]["bytes"]),
            ("largest layer name", largest[1][0] if largest[1] else "", got["largest_layer"]["name"]),
            ("parameters", sum(p.numel() for p in model.parameters()), got["parameters"]),
            ("rows", [(d, l, t, a) for d, l, t, a in data],
             [(r["dtype"], r["largest_layer_bytes"], r["total_bytes"], r["training_adam_bytes"])
              for r in got["rows"]]),
            ("table", expect_table, got["table"]),
        ]
        for what, want, have in checks:
            if want != have:
                failures.append(f"{label} --dtypes {','.join(dtypes)}: {what}: accelerate {want!r}, "
                                f"hwprobe {have!r}")
        # The anatomy: fp32 weights, gradients and Adam's two states (16 bytes a parameter);
        # mixed precision adds the 16-bit copy (18 bytes a parameter).
        for row in got["rows"]:
            parts = row["training"]
            if row["dtype"] in ("int8", "int4"):
                if parts is not None or row["fits"]["training"] is not None:
                    failures.append(f"{label}: {row['dtype']} has a training estimate")
                continue
            weights = total * (1.5 if row["dtype"] == "float16" else 1)
            want = {"weights_bytes": weights, "gradients_bytes": total, "optimizer_bytes": 2 * total,
                    "total_bytes": weights + 3 * total}
            if parts != want:
                failures.append(f"{label}: {row['dtype']} training parts {parts}, expected {want}")
    text = hwprobe(tool, folder)
    if text.returncode != 0 or not text.stdout.startswith(table_of(accelerate_rows(
            model, DTYPE_ORDERS[0])[2], folder) + "\n"):
        failures.append(f"{label}: the text output does not begin with accelerate's table")
    print(f"ok {label}: {convert_bytes(total)} float32, largest layer {largest[1][:1]}")


def fit(size, accelerators, cpu):
    if not accelerators:
        return "whole" if size <= cpu else "no"
    if size <= max(accelerators):
        return "whole"
    if size <= sum(accelerators):
        return "split"
    return "cpu offload" if size <= sum(accelerators) + cpu else "no"


def check_fits(tool, folder, failures):
    """On simulated machines: each row's verdicts from the free memory hwprobe reports."""
    AutoConfig.for_model("llama").save_pretrained(folder)  # 6.7B parameters: 25 GiB in float32
    a10g_file = os.path.join(folder, "a10g.json")
    with open(a10g_file, "w") as f:
        json.dump(A10G, f)
    for sim in ("h100x8", a10g_file):
        run = hwprobe(tool, folder, "--json", sim=sim)
        if run.returncode != 0:
            failures.append(f"fits --sim {sim}: exit {run.returncode}: {run.stderr.strip()}")
            continue
        got = json.loads(run.stdout)
        accel = [d["free_bytes"] for d in got["devices"] if d["device"] != "cpu"]
        cpu = sum(d["free_bytes"] for d in got["devices"] if d["device"] == "cpu")
        if not accel:
            failures.append(f"fits --sim {sim}: no accelerator listed: {got['devices']}")
        for row in got["rows"]:
            want = fit(row["total_bytes"], accel, cpu)
            if row["fits"]["inference"] != want:
                failures.append(f"fits --sim {sim} {row['dtype']}: inference "
                                f"{row['fits']['inference']}, expected {want}")
            if row["training"]:
                want = fit(row["training"]["total_bytes"], accel, cpu)
                if row["fits"]["training"] != want:
                    failures.append(f"fits --sim {sim} {row['dtype']}: training "
                                    f"{row['fits']['training']}, expected {want}")
        verdicts = {r["dtype"]: r["fits"]["inference"] for r in got["rows"]}
        print(f"ok fits --sim {sim}: {verdicts}")
    # 8 x 80 GB: the float32 7B model fits one GPU whole; on one 24 GB A10G only int8 and int4 do.
    h100 = json.loads(hwprobe(tool, folder, "--json", sim="h100x8").stdout)
    if h100["rows"][0]["fits"]["inference"] != "whole":
        failures.append("fits: llama 7B float32 is not whole on one H100")
    a10g = json.loads(hwprobe(tool, folder, "--json", sim=a10g_file).stdout)
    if [r["fits"]["inference"] for r in a10g["rows"]][2:] != ["whole", "whole"]:
        failures.append(f"fits: llama 7B int8/int4 on an A10G: {a10g['rows']}")


def check_refusals(tool, folder, failures):
    for args, needle in ((["--dtypes", "int3"], "int3"), (["--dtypes", ""], "--dtypes"),
                         ([os.path.join(folder, "missing")], "missing")):
        run = hwprobe(tool, *([folder] if args[0].startswith("--") else []), *args)
        if run.returncode != 2 or run.stdout or needle not in run.stderr:
            failures.append(f"refusal {args}: exit {run.returncode}, stdout {run.stdout!r}, "
                            f"stderr {run.stderr.strip()!r}")
    # from_pretrained refuses what BitsAndBytesConfig refuses; estimate-memory never builds it.
    both = os.path.join(folder, "both-flags")
    os.makedirs(both, exist_ok=True)
    AutoConfig.for_model("llama", num_hidden_layers=1, quantization_config={
        "quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": True}).save_pretrained(both)
    run = subprocess.run([tool, "plan", both, "--device-map", "auto"], capture_output=True, text=True)
    if (run.returncode != 2 or run.stdout
            or "load_in_4bit and load_in_8bit are both True, but only one can be used" not in run.stderr):
        failures.append(f"plan with both bnb flags: exit {run.returncode}, stdout {run.stdout!r}, "
                        f"stderr {run.stderr.strip()!r}")
    if hwprobe(tool, both).returncode != 0:
        failures.append("estimate refused the config with both bnb flags (accelerate does not)")
    print("ok refusals: exit 2, nothing on stdout, the input named")


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    tool, failures = argv[1], []
    with tempfile.TemporaryDirectory() as tmp:
        for n, (model_type, overrides) in enumerate(CASES):
            folder = os.path.join(tmp, f"{model_type}-{n}")
            os.makedirs(folder)
            check_case(tool, folder, model_type, overrides, failures)
        fits_folder = os.path.join(tmp, "fits")
        os.makedirs(fits_folder)
        check_fits(tool, fits_folder, failures)
        check_refusals(tool, fits_folder, failures)
    for f in failures:
        print("FAIL", f)
    print(f"{len(CASES)} models x {len(DTYPE_ORDERS)} dtype lists: {len(failures)} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
