#!/usr/bin/env python3
"""Timings of the kernel-builder packages (kernels/kernel_builder) under the `kernels` library:
not a test, nothing is asserted.

Usage: kernel_builder_bench.py <build>/kernel-builder/backplane [--rounds N] [--threads T]
       (with BACKPLANE_PYTHON, the pinned venv: torch, transformers, kernels)

1. A Llama (hidden 1024, 4 layers, 16 heads of 64, 8 kv heads, intermediate 2816, vocab 2048;
   random weights), one forward of 1 x 512 tokens, float32 and bfloat16: plain, then
   kernelize'd ("RMSNorm" and "rotary_pos_emb" mapped to the packages; the MLP's SiLU has no
   gated counterpart and stays), in interleaved rounds; the median of each.
2. Each op against its eager PyTorch composite, both into preallocated outputs (the composites
   still make their temporaries), and torch's own F.rms_norm; the median time per call.

torch.set_num_threads(T) (2 by default); the kernels' own thread pool takes every core
(std::thread::hardware_concurrency), so pass a machine's core count as T for a like-for-like
figure. The CPU model (from /proc/cpuinfo) and the kernels' SIMD target are printed first.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.dont_write_bytecode = True

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def enable_transformers_kernels():
    """transformers 5.24 asks for kernels >= 0.18.2 and leaves its layers unmarked without it;
    0.17.2's decorators are the same API (tests/python/kernel_layers_check.py)."""
    import transformers.utils as utils
    import transformers.utils.import_utils as import_utils

    import_utils.is_kernels_available = utils.is_kernels_available = lambda *a, **k: True


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def median_time(run, calls, rounds):
    """Median over `rounds` of the time per call of `calls` calls, after one warm-up round."""
    samples = []
    for i in range(rounds + 1):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        if i:
            samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def fmt(seconds):
    return f"{seconds * 1e6:9.1f} us" if seconds < 1e-2 else f"{seconds * 1e3:9.1f} ms"


def bench_model(packages, dtype, rounds):
    from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_mapping
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                         num_attention_heads=16, num_key_value_heads=8, vocab_size=2048,
                         max_position_embeddings=1024, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(dtype).eval()
    ids = torch.randint(0, config.vocab_size, (1, 512))
    mapping = {
        "RMSNorm": {"cpu": {Mode.INFERENCE: LocalLayerRepository(
            repo_path=packages["rmsnorm"], layer_name="RMSNorm")}},
        "rotary_pos_emb": {"cpu": {Mode.INFERENCE: LocalLayerRepository(
            repo_path=packages["rotary"], layer_name="apply_rotary_transformers")}},
    }
    import logging

    logging.getLogger("kernels.layer.layer").setLevel(logging.ERROR)  # SiLU: unmapped
    with use_kernel_mapping(mapping, inherit_mapping=False):
        kernelize(model, mode=Mode.INFERENCE, device="cpu")
    # What kernelize bound, per instance (the rotary function is one shared module), so that
    # the rounds can switch between the two without kernelizing again.
    bound = []
    for module in model.modules():
        if "forward" in module.__dict__:
            bound.append((module, module.__dict__["forward"]))
        for func in getattr(module, "_kernel_funcs", {}).values():
            if "forward" in func.__dict__:
                bound.append((func, func.__dict__["forward"]))

    def use(kernelized):
        for module, forward in bound:
            if kernelized:
                module.__dict__["forward"] = forward
            else:
                module.__dict__.pop("forward", None)

    def forward():
        with torch.inference_mode():
            model(input_ids=ids)

    times = {"plain": [], "kernelized": []}
    use(False)
    forward()
    use(True)
    forward()  # warm-up of both
    for _ in range(rounds):
        for name in ("plain", "kernelized"):
            use(name == "kernelized")
            start = time.perf_counter()
            forward()
            times[name].append(time.perf_counter() - start)
    use(False)
    plain, kern = statistics.median(times["plain"]), statistics.median(times["kernelized"])
    print(f"  {str(dtype):15s} plain {fmt(plain)}   kernelized {fmt(kern)}   "
          f"ratio {plain / kern:5.3f}x   ({rounds} rounds each, interleaved)")


def bench_ops(mods, dtype, rounds):
    rms, act, rot = mods["rmsnorm"], mods["activation"], mods["rotary"]
    tokens, hidden, inter = 512, 1024, 2816
    torch.manual_seed(0)
    x = torch.randn(tokens, hidden).to(dtype)
    w = (1 + 0.1 * torch.randn(hidden)).to(dtype)
    out = torch.empty_like(x)
    residual = torch.randn(tokens, hidden).to(dtype)
    eps = 1e-6

    def eager_rms():
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        torch.mul(w, h.to(dtype), out=out)

    def eager_fused():
        residual.add_(x)
        h = residual.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        torch.mul(w, h.to(dtype), out=out)

    gate = torch.randn(tokens, 2 * inter).to(dtype)
    gout = torch.empty(tokens, inter, dtype=dtype)

    def eager_gated(act_fn):
        def run():
            torch.mul(act_fn(gate[..., :inter]), gate[..., inter:], out=gout)
        return run

    heads, kv_heads, head_dim = 16, 8, 64
    q = torch.randn(1, heads, tokens, head_dim).to(dtype)
    k = torch.randn(1, kv_heads, tokens, head_dim).to(dtype)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    freqs = torch.rand(1, tokens, head_dim // 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    cos_half, sin_half = cos[..., : head_dim // 2], sin[..., : head_dim // 2]

    def rotate_half(t):
        return torch.cat((-t[..., head_dim // 2:], t[..., : head_dim // 2]), dim=-1)

    def eager_rotary():
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        torch.add(q * c, rotate_half(q) * s, out=q_out)
        torch.add(k * c, rotate_half(k) * s, out=k_out)

    def eager_rotary_transformers():  # what apply_rotary_pos_emb returns: new tensors
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        return (q * c) + (rotate_half(q) * s), (k * c) + (rotate_half(k) * s)

    cases = [
        ("rms_norm [512, 1024]", lambda: rms.ops.rms_norm(out, x, w, eps), eager_rms,
         lambda: F.rms_norm(x, (hidden,), w, eps)),
        ("fused_add_rms_norm [512, 1024]",
         lambda: rms.ops.fused_add_rms_norm(out, x, residual, w, eps), eager_fused, None),
        ("silu_and_mul [512, 5632]", lambda: act.ops.silu_and_mul(gout, gate),
         eager_gated(F.silu), None),
        ("gelu_and_mul [512, 5632]", lambda: act.ops.gelu_and_mul(gout, gate),
         eager_gated(F.gelu), None),
        ("gelu_tanh_and_mul [512, 5632]", lambda: act.ops.gelu_tanh_and_mul(gout, gate),
         eager_gated(lambda t: F.gelu(t, approximate="tanh")), None),
        ("rotary_embedding q[1,16,512,64] k[1,8,512,64] in place",
         lambda: rot.ops.rotary_embedding(q, k, cos_half, sin_half, False), eager_rotary, None),
        ("apply_rotary_transformers (new q, k)",
         lambda: rot.apply_rotary_transformers(q, k, cos, sin), eager_rotary_transformers, None),
    ]
    print(f"  {str(dtype)}:")
    for name, ours, eager, torch_fused in cases:
        with torch.inference_mode():
            t_ours = median_time(ours, 20, rounds)
            t_eager = median_time(eager, 20, rounds)
            extra = ""
            if torch_fused is not None:
                t_fused = median_time(torch_fused, 20, rounds)
                extra = f"   F.rms_norm {fmt(t_fused)} ({t_fused / t_ours:5.2f}x)"
        print(f"    {name:56s} ours {fmt(t_ours)}   eager {fmt(t_eager)} "
              f"({t_eager / t_ours:5.2f}x){extra}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="<build>/kernel-builder/backplane")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    enable_transformers_kernels()
    import kernels

    mods, packages = {}, {}
    for name in ("rmsnorm", "activation", "rotary"):
        mods[name] = kernels.get_local_kernel(args.root / name, backend="cpu")
        packages[name] = Path(mods[name].__file__).parent
    print(f"CPU: {cpu_model()} ({os.cpu_count()} logical cores); torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; kernels {kernels.__version__}; "
          f"Highway target {mods['rmsnorm'].cpu_target()}")
    print("Llama forward, 1 x 512 tokens (hidden 1024, 4 layers), median:")
    for dtype in (torch.float32, torch.bfloat16):
        bench_model(packages, dtype, args.rounds)
    print("Ops, median time per call (ratio: eager / ours):")
    for dtype in (torch.float32, torch.bfloat16):
        bench_ops(mods, dtype, args.rounds)


if __name__ == "__main__":
    main()
