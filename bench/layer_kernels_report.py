#!/usr/bin/env python3
"""Runs backplane-bench's layer-kernel benchmarks (rmsnorm, silu_and_mul, rotary) with
roofline/copy in one process and prints the kernels/LAYERS.md table: ours, LibTorch, the ratio,
our bytes per second against the copy roofline's, and for bf16 its bytes per second against
the float32 case's, beside the same ratio for a bare loop with the same memory pattern
(roofline/scale_*: y = -x with the kernels' conversions and nothing else, which is what this CPU
gives bf16 per byte); PASS/FAIL per goal (>= 60% of copy, >= 1.5x LibTorch, bf16 per byte at
least as fast as float32).

    bench/layer_kernels_report.py [--bench build/bin/backplane-bench] [--repetitions 5]
                                  [--min-time 0.5] [--threads N] [--json out.json]

Repetitions are interleaved at random so that the load of a shared machine spreads over every
benchmark alike; each row is the median of its repetitions' wall times. Bytes are what each op
must read and write at the least (layer_kernels_bench.cpp).
"""
import argparse
import sys

from report_common import COPY_BYTES, add_run_options, medians, run_bench, write_json

CASES = [
    ("rmsnorm/4096x4096", 4.0 * (4096 * 4096 * 2 + 4096)),
    ("silu_and_mul/2048x2x11008", 4.0 * 2048 * 11008 * 3),
    ("rotary/1x32x2048x128", 4.0 * 4 * 32 * 2048 * 128 + 4.0 * 2048 * 128),
]


# The bare loop with each case's memory pattern: output streamed, or updated in place.
SCALE_PATTERN = {"rmsnorm": "stream", "silu_and_mul": "stream", "rotary": "inplace"}


def bytes_of(base, dtype):
    name, f32_bytes = next(c for c in CASES if c[0] == base)
    if dtype == "f32":
        return f32_bytes
    if base.startswith("rotary"):  # cos and sin stay float32
        return (f32_bytes - 4.0 * 2048 * 128) / 2 + 4.0 * 2048 * 128
    return f32_bytes / 2


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_run_options(p, "build/bin/backplane-bench")
    args = p.parse_args()
    report = run_bench(args, "^(roofline/copy/|roofline/scale_|rmsnorm/|silu_and_mul/|rotary/)")
    if args.json:
        write_json(report, args.json)
    t = {name: seconds for name, (seconds, _, _) in medians(report).items()}
    copy = COPY_BYTES / t["roofline/copy"]
    threads = next(b["threads"] for b in report["benchmarks"] if "threads" in b)
    print(f"threads {int(threads)}; roofline/copy {copy / 1e9:.1f} GB/s "
          f"(median of {args.repetitions})\n")

    def bare_ratio(pattern):  # bf16 bytes per second over f32's: same elements, half the bytes
        f32 = t.get(f"roofline/scale_{pattern}/16777216_f32")
        bf16 = t.get(f"roofline/scale_{pattern}/16777216_bf16")
        return f32 / (2 * bf16) if f32 and bf16 else None

    print("| case | backplane ms | LibTorch ms | vs LibTorch | backplane GB/s | of copy | "
          "per byte vs f32 | bare loop per byte | goals |")
    print("|---|---|---|---|---|---|---|---|---|")
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
            bare = bare_ratio(SCALE_PATTERN[base.split("/")[0]]) if dtype == "bf16" else None
            print(f"{rate / 1e9:.1f} | {fraction:.2f} | "
                  f"{'-' if dtype == 'f32' else f'{rate / f32_rate:.2f}'} | "
                  f"{'-' if bare is None else f'{bare:.2f}'} | "
                  + ", ".join(f"{g} {'PASS' if ok else 'FAIL'}" for g, ok in goals) + " |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
