#!/usr/bin/env python3
"""Runs backplane-bench's attention and roofline benchmarks in one process and prints the
README table: ours, LibTorch, rooflines, ratios, and PASS/FAIL per goal. The decode case also
against LibTorch with folded query heads (libtorch_folded), and through the LibTorch bridge
(backplane_torch) against the cpu plugin's kernel called directly (backplane_plugin), when the
program has them.

    bench/attention_report.py [--bench build/bin/backplane-bench] [--repetitions 5]
                              [--min-time 0.5] [--threads N] [--json out.json]

Repetitions are interleaved at random (--benchmark_enable_random_interleaving), so that the
load of a shared machine spreads over every benchmark alike; each row is the median of its
repetitions' wall times. Ratios are taken between medians of the same run.
"""
import argparse
import json
import os
import sys

from report_common import COPY_BYTES, add_run_options, medians, run_bench, write_json

CASES = [
    # name, kind, flops or bytes (see attention_bench.cpp)
    ("prefill_causal_1x32x1024x128_f32", "prefill", 4.0 * 1 * 32 * 1024 * 1024 * 128 / 2),
    ("decode_1x32q8kv_1x4096x128_f32", "decode", 2.0 * 1 * 8 * 4096 * 128 * 4),
    ("prefill_causal_1x32x1024x128_bf16", "prefill", 4.0 * 1 * 32 * 1024 * 1024 * 128 / 2),
]
SGEMM_FLOPS = 2.0 * 2048 ** 3


def repetitions(report):
    counts = {}
    for b in report["benchmarks"]:
        if b.get("run_type") == "iteration":
            counts[b.get("run_name", b["name"])] = counts.get(b.get("run_name", b["name"]), 0) + 1
    return max(counts.values()) if counts else 0


def fmt_ms(s):
    return f"{s * 1e3:.2f}" if s is not None else "n/a"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_bench = os.path.join(here, "..", "build", "bin", "backplane-bench")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_run_options(ap, default_bench)
    ap.add_argument("--from-json", help="read a saved run instead of running the benchmark")
    args = ap.parse_args()

    if args.from_json:
        with open(args.from_json) as f:
            report = json.load(f)
    else:
        report = run_bench(args, "^(roofline|attention)/")
        if args.json:
            write_json(report, args.json)
    m = medians(report)

    def secs(name):
        return m[name][0] if name in m else None

    copy_s, sgemm_s = secs("roofline/copy"), secs("roofline/sgemm")
    copy_bw = COPY_BYTES / copy_s if copy_s else None
    sgemm_fl = SGEMM_FLOPS / sgemm_s if sgemm_s else None
    threads = next((int(v[1].get("threads", 0)) for v in m.values() if "threads" in v[1]), 0)
    ctx = report.get("context", {})

    print(f"backplane-bench, {threads} threads, {ctx.get('num_cpus', '?')} CPUs, "
          f"{repetitions(report)} interleaved repetitions, medians")
    print()
    print("| Benchmark | backplane (ms) | LibTorch (ms) | LibTorch / backplane | backplane rate "
          "| roofline | fraction of roofline |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    results = {}
    for name, kind, work in CASES:
        ours, torch = secs(f"attention/{name}/backplane"), secs(f"attention/{name}/libtorch")
        speedup = torch / ours if ours and torch else None
        if kind == "prefill":
            rate = work / ours if ours else None
            roof, roof_txt = sgemm_fl, "sgemm"
            rate_txt = f"{rate / 1e9:.1f} GFLOP/s" if rate else "n/a"
            roof_val = f"{roof / 1e9:.1f} GFLOP/s" if roof else "n/a"
        else:
            rate = work / ours if ours else None
            roof, roof_txt = copy_bw, "copy"
            rate_txt = f"{rate / 1e9:.1f} GB/s" if rate else "n/a"
            roof_val = f"{roof / 1e9:.1f} GB/s" if roof else "n/a"
        frac = rate / roof if rate and roof else None
        results[name] = {"ours": ours, "torch": torch, "speedup": speedup, "fraction": frac}
        label = m.get(f"attention/{name}/backplane", (0, {}, ""))[2]
        print(f"| `attention/{name}` ({label}) | {fmt_ms(ours)} | {fmt_ms(torch)} | "
              f"{speedup:.2f}x | {rate_txt} | {roof_txt} {roof_val} | "
              f"{frac:.2f} |" if speedup and frac else
              f"| `attention/{name}` | {fmt_ms(ours)} | {fmt_ms(torch)} | n/a | {rate_txt} | "
              f"{roof_txt} {roof_val} | n/a |")
    # The decode case two more ways: against LibTorch's fastest way to decode with GQA (query
    # heads folded into rows, no enable_gqa), and our kernel through the LibTorch bridge.
    dec_name, _, dec_bytes = CASES[1]
    dec_base = f"attention/{dec_name}"
    folded = secs(f"{dec_base}/libtorch_folded")
    bridge = secs(f"{dec_base}/backplane_torch")
    plugin = secs(f"{dec_base}/backplane_plugin")
    dec_ours = results[dec_name]["ours"]
    if folded is not None:
        ratio = f"{folded / dec_ours:.2f}x" if dec_ours else "n/a"
        print(f"| `{dec_base}` against `libtorch_folded` (q as [1, 8, 4, 128]) | "
              f"{fmt_ms(dec_ours)} | {fmt_ms(folded)} | {ratio} | | | |")
    if bridge is not None:
        torch_s = results[dec_name]["torch"]
        ratio = f"{torch_s / bridge:.2f}x" if torch_s else "n/a"
        rate = dec_bytes / bridge
        frac = f"{rate / copy_bw:.2f}" if copy_bw else "n/a"
        print(f"| `{dec_base}/backplane_torch` (through the LibTorch bridge) | {fmt_ms(bridge)} | "
              f"{fmt_ms(torch_s)} | {ratio} | {rate / 1e9:.1f} GB/s | copy | {frac} |")
    print(f"| `roofline/copy` (256 MiB, read + write) | {fmt_ms(copy_s)} | | | "
          f"{copy_bw / 1e9:.1f} GB/s | | |" if copy_bw else "| `roofline/copy` | n/a | | | | | |")
    print(f"| `roofline/sgemm` (2048^3, at::mm_out) | {fmt_ms(sgemm_s)} | | | "
          f"{sgemm_fl / 1e9:.1f} GFLOP/s | | |" if sgemm_fl else
          "| `roofline/sgemm` | n/a (needs LibTorch) | | | | | |")

    f32 = results["prefill_causal_1x32x1024x128_f32"]
    dec = results["decode_1x32q8kv_1x4096x128_f32"]
    b16 = results["prefill_causal_1x32x1024x128_bf16"]
    goals = [
        ("prefill f32: >= 1.2x faster than LibTorch", f32["speedup"], 1.2, "x"),
        ("prefill f32: >= 50% of the sgemm roofline (causal half of the FLOPs)",
         f32["fraction"], 0.5, ""),
        ("decode f32: >= 1.2x faster than LibTorch", dec["speedup"], 1.2, "x"),
        ("decode f32: >= 60% of the copy roofline (K and V bytes)", dec["fraction"], 0.6, ""),
        ("decode f32: >= 1.2x faster than LibTorch with folded query heads",
         folded / dec["ours"] if folded and dec["ours"] else None, 1.2, "x"),
        ("prefill bf16: faster than prefill f32 (f32 time / bf16 time > 1)",
         f32["ours"] / b16["ours"] if f32["ours"] and b16["ours"] else None, 1.0 + 1e-9, "x"),
    ]
    if bridge is not None and plugin:
        # The bridge calls the cpu plugin's copy of the kernels (their own thread pool), so its
        # baseline is that copy called directly, not the program's own.
        print()
        print(f"The LibTorch bridge (decode): `backplane_torch` {fmt_ms(bridge)} ms / "
              f"`backplane_plugin` {fmt_ms(plugin)} ms = {bridge / plugin:.3f} "
              f"(1 means the bridge adds nothing)")
    print()
    print("| Goal | Measured | Result |")
    print("|---|---:|:---:|")
    failed = 0
    for text, value, need, unit in goals:
        if value is None:
            print(f"| {text} | n/a | SKIP |")
            continue
        ok = value >= need
        failed += not ok
        shown = f"{value:.2f}{unit}" if unit else f"{value:.2f}"
        print(f"| {text} | {shown} | {'PASS' if ok else 'FAIL'} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
