#!/usr/bin/env python3
"""Wall time of a whole `hwprobe plan` process: the 80-layer Llama 70B and Mixtral 8x22B, each
described by its architecture descriptor, over eight simulated H100s.

Goal: under 50 ms (process start, plugin loading, config parsing, planning, JSON out). Prints the
median, min and max of RUNS interleaved runs after 3 warm-ups; exits 0 when the median meets the
goal, 1 otherwise. Not a test: timing depends on the machine.

    bench/plan_timing.py [HWPROBE] [RUNS]     (default: build/bin/hwprobe, 30)
"""

import os
import resource
import statistics
import subprocess
import sys
import time

GOAL_MS = 50.0
here = os.path.dirname(os.path.abspath(__file__))
hwprobe = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "build", "bin", "hwprobe")
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 30
# Both through their architecture descriptors (core/src/model/architectures/).
MODELS = [("70B Llama", "llama-70b-config.json"),
          ("8x22B Mixtral (141B)", "mixtral-8x22b-config.json")]


def command(config):
    return [hwprobe, "plan", os.path.join(here, "data", config), "--device-map", "auto",
            "--sim", "h100x8", "--json"]
env = {k: v for k, v in os.environ.items() if not k.startswith("BACKPLANE_")}


def once(config):
    """Wall and CPU (user + system) milliseconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command(config), env=env, check=True, stdout=subprocess.DEVNULL)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


met = True
for _, config in MODELS:
    for _ in range(3):
        once(config)
# Interleaved, so that both see the same machine.
results = {config: [] for _, config in MODELS}
for _ in range(runs):
    for _, config in MODELS:
        results[config].append(once(config))
for label, config in MODELS:
    times = [wall for wall, _ in results[config]]
    median = statistics.median(times)
    cpu = statistics.median(c for _, c in results[config])
    met = met and median < GOAL_MS
    # A busy machine stretches wall time; CPU time says what the process itself costs.
    print(f"hwprobe plan ({label}, auto, --sim h100x8, --json): median {median:.1f} ms wall "
          f"(min {min(times):.1f}, max {max(times):.1f}), {cpu:.1f} ms CPU, over {runs} runs; "
          f"goal < {GOAL_MS:.0f} ms: {'met' if median < GOAL_MS else 'MISSED'} "
          f"(load average {os.getloadavg()[0]:.1f})")
sys.exit(0 if met else 1)
