"""What the bench/*_report.py scripts share: their options for running backplane-bench, one
run of it over a filter with interleaved repetitions, and each benchmark's median wall time."""
import json
import os
import statistics
import subprocess
import sys

COPY_BYTES = 2.0 * (256 << 20)  # roofline/copy: 256 MiB read + written


def add_run_options(parser, default_bench):
    parser.add_argument("--bench", default=default_bench)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=0, help="default: hardware_concurrency")
    parser.add_argument("--json", help="also write the raw Google Benchmark JSON here")


def run_bench(args, benchmark_filter):
    """The benchmarks matching benchmark_filter, repetitions interleaved at random so that the
    load of a shared machine spreads over every benchmark alike; Google Benchmark's JSON."""
    cmd = [
        args.bench,
        f"--benchmark_filter={benchmark_filter}",
        "--benchmark_format=json",
        f"--benchmark_repetitions={args.repetitions}",
        "--benchmark_enable_random_interleaving=true",
        f"--benchmark_min_time={args.min_time}",
    ]
    env = dict(os.environ)
    if args.threads:
        env["BACKPLANE_BENCH_THREADS"] = str(args.threads)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    report = json.loads(out)
    # Google Benchmark exits 0 when a benchmark fails: say which, and why, once per name.
    failed = {}
    for b in report["benchmarks"]:
        if b.get("error_occurred"):
            failed.setdefault(b.get("run_name", b["name"]), b.get("error_message", ""))
    for name, message in failed.items():
        print(f"{name}: failed: {message}", file=sys.stderr)
    return report


def write_json(report, path):
    with open(path, "w") as f:
        json.dump(report, f, indent=1)


def medians(report):
    """name -> (median seconds per iteration, counters of one repetition, label); runs that
    ended in an error are left out."""
    runs = {}
    for b in report["benchmarks"]:
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        name = b["run_name"] if "run_name" in b else b["name"]
        name = name.replace("/real_time", "")
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
        runs.setdefault(name, []).append((b["real_time"] * unit, b))
    return {
        name: (statistics.median(t for t, _ in rs), rs[0][1], rs[0][1].get("label", ""))
        for name, rs in runs.items()
    }
