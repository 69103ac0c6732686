#!/usr/bin/env python3
"""Startup benchmark: `hwprobe --json` against a minimal LibTorch host program.

Called by bench/startup.sh, which builds the programs; all the measuring is here.

Each run is one fresh child, started from this process:
  * wall time: time.perf_counter() around spawn + os.wait4() (sub-millisecond resolution);
  * peak RSS: the child's own ru_maxrss, as reported by GNU time (%M).

Why GNU time for the RSS and not the ru_maxrss os.wait4() returns here: Linux keeps a
process's RSS high-water mark across execve(), and a child forked (or vforked) from Python
starts out with the Python interpreter's memory, so every child started straight from here
reports at least this interpreter's peak RSS (about 14 MiB, even for /bin/true). GNU time is a
~1 MiB C program, so the child it forks starts small; the "floor" row (/bin/true through the
same launcher) shows what the launcher itself costs in wall time and memory.

The programs run interleaved (floor, libtorch, hwprobe, floor, libtorch, hwprobe, ...) after
warm-up runs, so that load on a shared machine hits all of them alike.

Exit status: 0 when both targets pass, 1 when one fails, 2 on an error.
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time


def die(message):
    """An error, not a failed target: exit status 2."""
    print(f"measure.py: {message}", file=sys.stderr)
    sys.exit(2)


def child_env():
    """The environment without BACKPLANE_*: hwprobe must use its defaults (all plugins)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKPLANE_")}
    return env, sorted(k for k in os.environ if k.startswith("BACKPLANE_"))


class Runner:
    def __init__(self, time_bin, env, workdir):
        self.time_bin = time_bin
        self.env = env
        self.rss_file = os.path.join(workdir, "rss")
        self.out_file = os.path.join(workdir, "stdout")

    def run(self, argv, capture=False):
        """One run: (wall seconds, peak RSS KiB, captured stdout or None)."""
        cmd = [self.time_bin, "-q", "-f", "%M", "-o", self.rss_file, "--"] + argv
        out_path = self.out_file if capture else os.devnull
        actions = [(os.POSIX_SPAWN_OPEN, 1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)]
        t0 = time.perf_counter()
        pid = os.posix_spawn(cmd[0], cmd, self.env, file_actions=actions)
        _, status, _ = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            die(f"{shlex.join(argv)} exited with status {code}")
        with open(self.rss_file) as f:
            lines = f.read().split()
        if not lines or not lines[-1].isdigit():
            die(f"cannot read the peak RSS from {self.time_bin}: {lines!r}")
        output = None
        if capture:
            with open(self.out_file) as f:
                output = f.read()
        return wall, int(lines[-1]), output


def check_hwprobe(output, expected):
    """hwprobe --json must list every expected plugin as loaded, and no plugin failed."""
    try:
        report = json.loads(output)
    except json.JSONDecodeError as e:
        die(f"hwprobe --json printed no valid JSON: {e}")
    plugins = {p["name"]: p for p in report.get("plugins", [])}
    problems = []
    for name in expected:
        if name not in plugins:
            problems.append(f"plugin '{name}' not found")
        elif plugins[name].get("status") != "loaded":
            p = plugins[name]
            problems.append(f"plugin '{name}' is {p.get('status')}: {p.get('error')}")
    for name, p in plugins.items():
        if p.get("status") != "loaded" and name not in expected:
            problems.append(f"plugin '{name}' is {p.get('status')}: {p.get('error')}")
    if problems:
        die("hwprobe did not load every in-tree plugin:\n  " +
                 "\n  ".join(problems))
    return report


def summarize(walls, rsss):
    ms = [w * 1000.0 for w in walls]
    mib = [r / 1024.0 for r in rsss]
    return {
        "median_ms": statistics.median(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
        "median_mib": statistics.median(mib),
        "max_mib": max(mib),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--libtorch", required=True, help="the torch_probe binary")
    ap.add_argument("--hwprobe", required=True, help="the hwprobe binary (run with --json)")
    ap.add_argument("--expect-plugins", default="",
                    help="comma-separated plugins hwprobe must have loaded")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--time-bin", default="/usr/bin/time")
    ap.add_argument("--max-wall-ratio", type=float, default=0.10)
    ap.add_argument("--max-rss-mib", type=float, default=30.0)
    args = ap.parse_args()
    if args.runs < 1 or args.warmup < 1:
        die("--runs and --warmup must be at least 1")

    env, stripped = child_env()
    programs = {
        "floor": [shutil.which("true") or "/bin/true"],
        "libtorch": [os.path.abspath(args.libtorch)],
        "hwprobe": [os.path.abspath(args.hwprobe), "--json"],
    }
    expected = [p for p in args.expect_plugins.split(",") if p]

    with tempfile.TemporaryDirectory(prefix="bench-startup-") as workdir:
        runner = Runner(args.time_bin, env, workdir)

        # Warm-up (page cache, dynamic loader caches); the first runs also check what ran.
        _, _, torch_out = runner.run(programs["libtorch"], capture=True)
        _, _, hw_out = runner.run(programs["hwprobe"], capture=True)
        report = check_hwprobe(hw_out, expected)
        for _ in range(args.warmup - 1):
            for argv in programs.values():
                runner.run(argv)

        walls = {name: [] for name in programs}
        rsss = {name: [] for name in programs}
        for _ in range(args.runs):
            for name, argv in programs.items():
                wall, rss, _ = runner.run(argv)
                walls[name].append(wall)
                rsss[name].append(rss)

    s = {name: summarize(walls[name], rsss[name]) for name in programs}
    t, h = s["libtorch"], s["hwprobe"]
    wall_ratio = h["median_ms"] / t["median_ms"]
    min_ratio = h["min_ms"] / t["min_ms"]
    rss_ratio = h["median_mib"] / t["median_mib"]
    wall_ok = wall_ratio <= args.max_wall_ratio
    rss_ok = h["max_mib"] <= args.max_rss_mib

    loaded = ", ".join(p["name"] for p in report.get("plugins", []))
    print()
    print("LibTorch probe said: " + " / ".join(torch_out.strip().splitlines()))
    print(f"hwprobe --json loaded plugins: {loaded}"
          + (f" (unset for the runs: {', '.join(stripped)})" if stripped else ""))
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    print(f"{args.runs} interleaved runs each after {args.warmup} warm-up; "
          f"{os.cpu_count()} CPUs; load average {load}")
    print()

    def row(label, x):
        return (f"| {label} | {x['median_ms']:.1f} | {x['min_ms']:.1f} | "
                f"{x['median_mib']:.1f} | {x['max_mib']:.1f} |")

    print("| Program | Median wall (ms) | Min wall (ms) | Median peak RSS (MiB) "
          "| Max peak RSS (MiB) |")
    print("|---|---:|---:|---:|---:|")
    print(row("LibTorch `torch::cuda::is_available()`", t))
    print(row("`hwprobe --json` (all in-tree plugins)", h))
    print(f"| hwprobe / LibTorch | {wall_ratio:.3f} | {min_ratio:.3f} | {rss_ratio:.3f} | |")
    print(row("launcher floor (`/bin/true`)", s["floor"]))
    print()
    print(f"| Target | Measured | Result |")
    print("|---|---:|:---:|")
    print(f"| wall: hwprobe median <= {args.max_wall_ratio:.2f} x LibTorch median "
          f"| {wall_ratio:.3f} | {'PASS' if wall_ok else 'FAIL'} |")
    print(f"| memory: hwprobe peak RSS <= {args.max_rss_mib:g} MiB (max over runs) "
          f"| {h['max_mib']:.1f} MiB | {'PASS' if rss_ok else 'FAIL'} |")
    print()
    print("Wall time includes spawning GNU time (see the floor row); peak RSS is the child's "
          "ru_maxrss.")
    ok = wall_ok and rss_ok
    print("RESULT: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
