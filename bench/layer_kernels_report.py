#!/usr/bin/env python3
"""Runs backplane-bench's layer-kernel benchmarks (rmsnorm, silu_and_mul, rotary) with
roofline/copy in one process and prints the kernels/LAYERS.md table: ours, LibTorch, the ratio,
our bytes per second against the copy roofline's, and for bf16 its bytes per second against
the float32 case's; PASS/FAIL per goal (>= 60% of copy, >= 1.5x LibTorch, bf16 per byte at
least as fast as float32).

    bench/layer_kernels_report.py [--bench build/bin/backplane-bench] [--repetitions 5]
                                  [--min-time 0.5] [--threads N] [--json out.json]

Repetitions are interleaved at random so that the load of a shared machine spreads over every
benchmark alike; each row is the median of its repetitions' wall times. Bytes are what each op
must read and write at the least (layer_kernels_bench.cpp).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CASES = [
    ("rmsnorm/4096x4096", 4.0 * (4096 * 4096 * 2 + 4096)),
    ("silu_and_mul/2048x2x11008", 4.0 * 2048 * 11008 * 3),
    ("rotary/1x32x2048x128", 4.0 * 4 * 32 * 2048 * 128 + 4.0 * 2048 * 128),
]
COPY_BYTES = 2.0 * (256 << 20)  # read + write


def bytes_of(base, dtype):
    name, f32_bytes = next(c for c in CASES if c[0] == base)
    if dtype == "f32":
        return f32_bytes
    if base.startswith("rotary"):  # cos and sin stay float32
        return (f32_bytes - 4.0 * 2048 * 128) / 2 + 4.0 * 2048 * 128
    return f32_bytes / 2


def run_bench(args):
    cmd = [
        args.bench,
        "--benchmark_filter=^(roofline/copy|rmsnorm|silu_and_mul|rotary)/",
        "--benchmark_format=json",
        f"--benchmark_repetitions={args.repetitions}",
        "--benchmark_enable_random_interleaving=true",
        f"--benchmark_min_time={args.min_time}",
    ]
    env = dict(os.environ)
    if args.threads:
        env["BACKPLANE_BENCH_THREADS"] = str(args.threads)
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def medians(report):
    times = {}
    for b in report["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        name = b["run_name"].removesuffix("/real_time")
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        times.setdefault(name, []).append(b["real_time"] * scale)
    return {k: statistics.median(v) for k, v in times.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", default="build/bin/backplane-bench")
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--min-time", type=float, default=0.5)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--json", help="also write the raw benchmark JSON here")
    args = p.parse_args()
    report = run_bench(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    t = medians(report)
    copy = COPY_BYTES / t["roofline/copy"]
    threads = next(b["threads"] for b in report["benchmarks"] if "threads" in b)
    print(f"threads {int(threads)}; roofline/copy {copy / 1e9:.1f} GB/s "
          f"(median of {args.repetitions})\n")
    print("| case | backplane ms | LibTorch ms | vs LibTorch | backplane GB/s | of copy | "
          "per byte vs f32 | goals |")
    print("|---|---|---|---|---|---|---|---|")
    failed = False
    for base, _ in CASES:
        f32_rate = None
        for dtype in ("f32", "bf16"):
            name = f"{base}_{dtype}"
            ours, torch = t.get(name + "/backplane"), t.get(name + "/libtorch")
            rate = bytes_of(base, dtype) / ours
            if dtype == "f32":
                f32_rate = rate
            speedup = torch / ours if torch else None
            fraction = rate / copy
            goals = []
            if dtype == "f32":
                goals.append(("60% of copy", fraction >= 0.6))
            else:
                goals.append(("per byte >= f32", rate >= f32_rate))
            if speedup is not None:
                goals.append(("1.5x LibTorch", speedup >= 1.5))
            failed |= not all(ok for _, ok in goals)
            print(f"| `{name}` | {ours * 1e3:.2f} | "
                  f"{torch * 1e3:.2f} | {speedup:.2f}x | " if torch else
                  f"| `{name}` | {ours * 1e3:.2f} | - | - | ", end="")
            print(f"{rate / 1e9:.1f} | {fraction:.2f} | "
                  f"{'-' if dtype == 'f32' else f'{rate / f32_rate:.2f}'} | "
                  + ", ".join(f"{g} {'PASS' if ok else 'FAIL'}" for g, ok in goals) + " |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
