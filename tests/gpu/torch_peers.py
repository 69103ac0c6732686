#!/usr/bin/env python3
"""backplane's CUDA kernels beside PyTorch's on the same GPU, in the same run (run_all.sh).

Reads gpu_bench's JSON lines (one case each: name, ms, flops, bytes, shape), times PyTorch on
the same shapes and dtypes with CUDA events (3 untimed calls, then the median of 7 rounds, as
gpu_bench does), and prints one table:

  case | backplane ms | PyTorch ms (how) | PyTorch / backplane | backplane TFLOP/s or GB/s |
  share of this GPU's bf16 matmul rate or copy bandwidth

PyTorch's side is its best way on this machine: F.scaled_dot_product_attention with the flash
backend for attention (and sdpa's own choice), torch.rms_norm and its composite, the
SiLU-and-mul and rotary composites, the layer ops also under torch.compile where that works
here and the time budget allows (the fastest is taken; the table says which). The copy bandwidth (a device-to-device copy of 1 GiB) and the bf16
matmul rate (8192 x 8192 x 8192) are measured here too, so every figure is set against this GPU.
Outputs: PyTorch allocates its results (its caching allocator makes that about free), backplane
writes into preallocated ones; rotary is in place for backplane and out of place for PyTorch.

Usage: torch_peers.py BENCH_JSONL [--json OUT.json] [--budget-seconds S]
       torch_peers.py --self-test   (the PyTorch side on the CPU with tiny shapes: checks that
                                     this script runs where there is no GPU)
Exit 0 when every case ran on both sides; 1 otherwise (each problem said in the table).
"""

import argparse
import json
import math
import statistics
import sys
import time


def load_torch():
    try:
        import torch  # noqa: F401
        import torch.nn.functional  # noqa: F401
    except Exception as e:  # a missing torch is a line in the report, not a traceback
        print(f"SKIP: no PyTorch here ({type(e).__name__}: {e}); no comparison", file=sys.stderr)
        sys.exit(1)
    return __import__("torch")


class Timer:
    def __init__(self, torch, device):
        self.torch = torch
        self.device = device

    def median_ms(self, fn, reps):
        torch = self.torch
        for _ in range(3):
            fn()
        if self.device == "cuda":
            torch.cuda.synchronize()
            rounds = []
            for _ in range(7):
                start = torch.cuda.Event(enable_timing=True)
                stop = torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(reps):
                    fn()
                stop.record()
                stop.synchronize()
                rounds.append(start.elapsed_time(stop) / reps)
        else:
            rounds = []
            for _ in range(7):
                t0 = time.perf_counter()
                for _ in range(reps):
                    fn()
                rounds.append((time.perf_counter() - t0) * 1e3 / reps)
        return statistics.median(rounds)


def dtype_of(torch, name):
    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[name]


def attention_fns(torch, shape, causal, dtype, device):
    import torch.nn.functional as F

    b, hq, hkv, sq, sk, d = shape
    q = torch.randn(b, hq, sq, d, dtype=dtype, device=device)
    k = torch.randn(b, hkv, sk, d, dtype=dtype, device=device)
    v = torch.randn(b, hkv, sk, d, dtype=dtype, device=device)
    gqa = hq != hkv

    def plain():
        # is_causal in PyTorch is top-left; with sq == sk it is the same as bottom-right.
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal and sq == sk,
                                              enable_gqa=gqa)

    fns = []
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def flash():
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return plain()

        flash()
        fns.append(("sdpa, flash backend", flash))
    except Exception as e:
        fns.append((f"sdpa (flash backend refused: {type(e).__name__})", plain))
    fns.append(("sdpa, its own choice", plain))
    return fns


def layer_fns(torch, op, shape, dtype, device):
    fns = []
    if op == "rmsnorm":
        x = torch.randn(*shape, dtype=dtype, device=device)
        w = torch.randn(shape[-1], dtype=dtype, device=device)
        if hasattr(torch, "rms_norm"):
            fns.append(("torch.rms_norm", lambda: torch.rms_norm(x, (shape[-1],), w, 1e-6)))

        def composite():
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(dtype) * w

        fns.append(("composite", composite))
    elif op == "silu_and_mul":
        import torch.nn.functional as F

        x = torch.randn(*shape, dtype=dtype, device=device)
        half = shape[-1] // 2
        fns.append(("composite", lambda: F.silu(x[..., :half]) * x[..., half:]))
    elif op == "rotary":
        q = torch.randn(*shape, dtype=dtype, device=device)
        k = torch.randn(*shape, dtype=dtype, device=device)
        seq, dim = shape[-2], shape[-1]
        angles = torch.randn(seq, dim // 2, device=device)
        cos = torch.cat([angles.cos()] * 2, -1).to(dtype)
        sin = torch.cat([angles.sin()] * 2, -1).to(dtype)

        def rotate_half(x):
            x1, x2 = x[..., : dim // 2], x[..., dim // 2:]
            return torch.cat((-x2, x1), -1)

        # transformers' apply_rotary_pos_emb.
        fns.append(("composite", lambda: (q * cos + rotate_half(q) * sin,
                                          k * cos + rotate_half(k) * sin)))
    return fns


DEADLINE = [math.inf]  # time.monotonic() after which nothing more is compiled


def with_compiled(torch, fns):
    out = list(fns)
    if not hasattr(torch, "compile"):
        return out
    if time.monotonic() > DEADLINE[0]:
        return out + [(fns[0][0] + " + torch.compile skipped (time budget)", None)]
    for how, fn in fns:
        try:
            compiled = torch.compile(fn)
            compiled()
            out.append((how + " + torch.compile", compiled))
        except Exception as e:
            out.append((how + f" + torch.compile failed ({type(e).__name__})", None))
    return out


def machine_rates(torch, device):
    """(bf16 matmul TFLOP/s, copy GB/s) measured here."""
    timer = Timer(torch, device)
    n = 8192 if device == "cuda" else 256
    a = torch.randn(n, n, dtype=torch.bfloat16, device=device)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=device)
    ms = timer.median_ms(lambda: a @ b, 10)
    tflops = 2.0 * n ** 3 / (ms * 1e-3) / 1e12
    elements = (1 << 29) if device == "cuda" else (1 << 20)  # 1 GiB of bf16 on the GPU
    src = torch.empty(elements, dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    ms = timer.median_ms(lambda: dst.copy_(src), 10)
    gbs = 2.0 * src.numel() * 2 / (ms * 1e-3) / 1e9  # read and write
    return tflops, gbs


def peer_ms(torch, timer, case, device, dtype_override=None):
    """(best PyTorch ms, how, notes) for one gpu_bench case."""
    name = case["case"]
    op, _, dtype_name = name.split("/")[0], name.split("/")[1], name.split("/")[-1]
    dtype = dtype_override or dtype_of(torch, dtype_name)
    shape = case["shape"]
    if op == "attention":
        # One fused kernel already: torch.compile would only add minutes of compiling.
        causal = "_causal" in name
        fns = attention_fns(torch, shape, causal, dtype, device)
        reps = 50 if shape[3] == 1 else 10
    else:
        fns = with_compiled(torch, layer_fns(torch, op, shape, dtype, device))
        reps = 20
    best, best_how, notes = None, None, []
    for how, fn in fns:
        if fn is None:
            notes.append(how)
            continue
        try:
            ms = timer.median_ms(fn, reps)
        except Exception as e:
            notes.append(f"{how}: {type(e).__name__}: {e}"[:160])
            continue
        if best is None or ms < best:
            best, best_how = ms, how
    return best, best_how, notes


def self_test(torch):
    timer = Timer(torch, "cpu")
    cases = [
        {"case": "attention/sdpa/prefill/bf16", "ms": 1.0, "flops": 1, "bytes": 1,
         "shape": [1, 4, 2, 16, 16, 32]},
        {"case": "rmsnorm/64x64/f32", "ms": 1.0, "flops": 0, "bytes": 1, "shape": [64, 64]},
        {"case": "silu_and_mul/64x128/f32", "ms": 1.0, "flops": 0, "bytes": 1, "shape": [64, 128]},
        {"case": "rotary/1x4x16x32/f32", "ms": 1.0, "flops": 0, "bytes": 1, "shape": [1, 4, 16, 32]},
    ]
    ok = True
    for case in cases:
        ms, how, notes = peer_ms(torch, timer, case, "cpu",
                                 torch.float32 if "attention" in case["case"] else None)
        print(f"{case['case']}: {ms} ms ({how}) {notes}")
        ok = ok and ms is not None and ms > 0
    tflops, gbs = machine_rates(torch, "cpu")
    print(f"cpu bf16 matmul {tflops:.3f} TFLOP/s, copy {gbs:.1f} GB/s")
    return 0 if ok and tflops > 0 and gbs > 0 else 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bench", nargs="?")
    parser.add_argument("--json")
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("--budget-seconds", type=float, default=math.inf,
                        help="compile nothing more after this long (run_all.sh gives 180)")
    args = parser.parse_args()
    DEADLINE[0] = time.monotonic() + args.budget_seconds
    torch = load_torch()
    if args.self_test:
        return self_test(torch)
    if not args.bench:
        parser.error("give gpu_bench's output file")
    if not torch.cuda.is_available():
        print("SKIP: PyTorch here has no CUDA device; no comparison", file=sys.stderr)
        return 1
    cases = []
    for line in open(args.bench):
        line = line.strip()
        if line.startswith("{"):
            cases.append(json.loads(line))
    torch.manual_seed(0)
    timer = Timer(torch, "cuda")
    matmul_tflops, copy_gbs = machine_rates(torch, "cuda")
    print(f"GPU: {torch.cuda.get_device_name(0)}; PyTorch {torch.__version__}; measured here: "
          f"bf16 matmul {matmul_tflops:.0f} TFLOP/s, device copy {copy_gbs:.0f} GB/s")
    rows, problems = [], 0
    header = ("case", "backplane ms", "PyTorch ms", "PyTorch way", "PyTorch/backplane",
              "backplane rate", "of this GPU")
    for case in cases:
        if "error" in case:
            rows.append((case["case"], "error", "", case["error"][:80], "", "", ""))
            problems += 1
            continue
        ms = case["ms"]
        peer, how, notes = peer_ms(torch, timer, case, "cuda")
        if case["flops"] > 0:
            tflops = case["flops"] / (ms * 1e-3) / 1e12
            rate, share = f"{tflops:.1f} TFLOP/s", f"{100 * tflops / matmul_tflops:.0f}% of matmul"
        else:
            gbs = case["bytes"] / (ms * 1e-3) / 1e9
            rate, share = f"{gbs:.0f} GB/s", f"{100 * gbs / copy_gbs:.0f}% of copy"
        if peer is None:
            problems += 1
            rows.append((case["case"], f"{ms:.4f}", "failed", "; ".join(notes)[:80], "", rate, share))
            continue
        rows.append((case["case"], f"{ms:.4f}", f"{peer:.4f}", how, f"{peer / ms:.2f}x", rate, share))
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "matmul_tflops": matmul_tflops, "copy_gbs": copy_gbs,
                       "rows": [dict(zip(header, r)) for r in rows]}, f, indent=1)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
