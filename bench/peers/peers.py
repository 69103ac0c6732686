#!/usr/bin/env python3
"""The peers benchmark: backplane's CPU kernels against torch.compile, PyTorch eager, ONNX
Runtime and ggml, in one process, on equal terms (README.md in this folder), with this machine's
rooflines measured in the same run, and the goals of issue 23 judged from the medians.

    python peers.py [--cases SUBSTR,...] [--dtypes float32,bfloat16] [--sides NAME,...]
                    [--rounds 7] [--block-ms 60] [--json OUT] [--markdown OUT]

Run it through run.sh, which sets up the environment (setup.sh) and pins the threads.
"""

import argparse
import importlib
import json
import math
import os
import platform
import random
import statistics
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sides import Unsupported  # noqa: E402
import in_cache  # noqa: E402
import roofline  # noqa: E402
import stream_bound  # noqa: E402

HERE = Path(__file__).resolve().parent

# name -> (module, builder): the order is the table's column order.
SIDES = {
    "backplane": ("backplane_side", "build"),
    "torch.compile": ("torch_side", "build_compiled"),
    "torch eager": ("torch_side", "build_eager"),
    "onnxruntime": ("ort_side", "build"),
    "ggml": ("ggml_side", "build"),
}
TOLERANCE = {"float32": 2e-3, "bfloat16": 3e-2}  # max |err| / max |ref|


def make_inputs(case, dtype):
    gen = torch.Generator().manual_seed(0)
    t = getattr(torch, dtype)
    randn = lambda *shape: torch.randn(*shape, generator=gen).to(t)
    op = case["op"]
    if op == "attention":
        b, hq, hkv, sq, skv, d = (case[k] for k in
                                  ("batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim"))
        return {"q": randn(b, hq, sq, d), "k": randn(b, hkv, skv, d), "v": randn(b, hkv, skv, d)}
    if op == "rmsnorm":
        return {"x": randn(case["rows"], case["hidden"]),
                "weight": (1 + 0.1 * torch.randn(case["hidden"], generator=gen)).to(t)}
    if op == "silu_and_mul":
        return {"x": randn(case["rows"], 2 * case["hidden"])}
    if op == "rotary":
        b, h, s, d = (case[k] for k in ("batch", "heads", "seq", "head_dim"))
        inv_freq = case["theta"] ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        angles = torch.outer(torch.arange(s, dtype=torch.float64), inv_freq)
        return {"q": randn(b, h, s, d), "k": randn(b, h, s, d),
                "cos": angles.cos().float(), "sin": angles.sin().float(),
                "positions": torch.arange(s, dtype=torch.int32)}
    raise ValueError(f"unknown op {op!r} in cases.json")


def reference(case, inputs):
    """The exact answer in float64, from the inputs as the sides got them."""
    d = {k: v.double() for k, v in inputs.items() if v.is_floating_point()}
    op = case["op"]
    if op == "attention":
        out = torch.nn.functional.scaled_dot_product_attention(
            d["q"], d["k"], d["v"], is_causal=bool(case["causal"]),
            enable_gqa=case["q_heads"] != case["kv_heads"])
        return {"out": out}
    if op == "rmsnorm":
        x = d["x"]
        return {"out": x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + case["eps"]) * d["weight"]}
    if op == "silu_and_mul":
        gate, up = d["x"].chunk(2, dim=-1)
        return {"out": torch.nn.functional.silu(gate) * up}
    if op == "rotary":
        c, s = d["cos"], d["sin"]
        half = c.shape[-1]

        def rotate(x):
            x1, x2 = x[..., :half], x[..., half:]
            return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
        return {"q": rotate(d["q"]), "k": rotate(d["k"])}
    raise ValueError(op)


def moved_bytes(case, dtype):
    """What the op must read and write at the least: one pass over each input and output."""
    es = torch.finfo(getattr(torch, dtype)).bits // 8
    op = case["op"]
    if op == "attention":
        q = case["batch"] * case["q_heads"] * case["q_len"] * case["head_dim"]
        kv = case["batch"] * case["kv_heads"] * case["kv_len"] * case["head_dim"]
        return es * (2 * q + 2 * kv)
    if op == "rmsnorm":
        return es * (2 * case["rows"] * case["hidden"] + case["hidden"])
    if op == "silu_and_mul":
        return es * 3 * case["rows"] * case["hidden"]
    if op == "rotary":
        qk = case["batch"] * case["heads"] * case["seq"] * case["head_dim"]
        return es * 4 * qk + 4 * case["seq"] * case["head_dim"]  # cos and sin float32
    raise ValueError(op)


def attention_flops(case):
    """4 * S_q * S_k * D per head (two matmuls); causal prefill computes half the scores."""
    f = 4.0 * case["batch"] * case["q_heads"] * case["q_len"] * case["kv_len"] * case["head_dim"]
    return f / 2 if case["causal"] else f


def relative_error(got, want):
    err = 0.0
    for name, ref in want.items():
        if name not in got:
            return math.inf
        g = got[name].double()
        if g.shape != ref.shape:
            return math.inf
        err = max(err, ((g - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item())
    return err


def time_block(fn, block_s):
    """Per-call seconds of as many calls as fill about block_s (at least 3)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    calls = max(3, min(200, int(block_s / max(first, 1e-6))))
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def others_cpu_ns():
    """CPU time so far of this process's threads other than the caller, in ns (Linux schedstat),
    or None where /proc does not say."""
    me = threading.get_native_id()
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    total = 0
    for task in tasks:
        if int(task) == me:
            continue
        try:
            with open(f"/proc/self/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended between the listing and the read
    return total


SETTLE_LIMIT_S = 1.0  # the longest wait for idle workers before a block is timed anyway


def settle(limit_s=SETTLE_LIMIT_S, window_s=0.005, quiet=0.05):
    """Waits until the process's other threads (every side's workers) used under `quiet` of a
    window's CPU time, at most limit_s, and returns the seconds waited. ONNX Runtime's workers
    spin for about 60 ms after a run: a side timed in those milliseconds shares its two CPUs
    with them (measured: backplane's bf16 decoding 0.54 ms alone, 0.64-1.76 ms per round among
    the peers with a fixed 20 ms pause)."""
    t0 = time.perf_counter()
    before = others_cpu_ns()
    if before is None:
        time.sleep(0.1)
        return time.perf_counter() - t0
    while time.perf_counter() - t0 < limit_s:
        time.sleep(window_s)
        after = others_cpu_ns()
        if after - before < quiet * window_s * 1e9:
            break
        before = after
    return time.perf_counter() - t0


def run_case(case, dtype, side_names, rounds, block_s, threads, log):
    inputs = make_inputs(case, dtype)
    want = reference(case, inputs)
    entries = {}
    for name in side_names:
        module, builder = SIDES[name]
        entry = {"label": "", "status": "ok", "error": None, "out": [], "alloc": [],
                 "out_round_ms": [], "alloc_round_ms": [], "settle_ms_max": 0.0}
        entries[name] = entry
        try:
            side = getattr(importlib.import_module(module), builder)(case, dtype, threads, inputs)
            entry["label"] = side.label
            if side.threads != threads:
                raise RuntimeError(f"runs on {side.threads} threads, not {threads}")
            (side.run_out or side.run_alloc)()
            entry["error"] = relative_error(side.result(), want)
            if not entry["error"] <= TOLERANCE[dtype]:
                entry["status"] = f"wrong: relative error {entry['error']:.2g}"
                continue
            entry["side"] = side
        except Unsupported as e:
            entry["status"] = f"n/a: {e}"
        except Exception as e:  # a peer failing is a row, not the end of the run
            entry["status"] = f"failed: {type(e).__name__}: {e}"
        log(f"  {name}: {entry['status']} {entry['label']}")
    runnable = [(n, mode) for n, e in entries.items() if "side" in e
                for mode in ("out", "alloc") if getattr(e["side"], "run_" + mode) is not None]
    for n, mode in runnable:  # warm-up
        for _ in range(3):
            getattr(entries[n]["side"], "run_" + mode)()
    for r in range(rounds):
        order = runnable[:]
        random.Random(r).shuffle(order)
        for n, mode in order:
            waited = settle()  # no side's workers left running from the block before
            entries[n]["settle_ms_max"] = max(entries[n]["settle_ms_max"], waited * 1e3)
            times = time_block(getattr(entries[n]["side"], "run_" + mode), block_s)
            entries[n][mode] += times
            # Each round's median: the rounds run every side within a second or two, so a figure
            # taken round by round shows how much of a verdict the VM's swings can move.
            entries[n][mode + "_round_ms"].append(statistics.median(times) * 1e3)
    for e in entries.values():
        e.pop("side", None)
        for mode in ("out", "alloc"):
            e[mode + "_ms"] = statistics.median(e[mode]) * 1e3 if e[mode] else None
            e[mode] = len(e[mode])
    return entries


def is_compute_bound(case):
    """Causal prefill is judged by its multiply rate; decode and the layers by their bytes."""
    return case["op"] == "attention" and bool(case["causal"])


def round_range(figure, *series):
    """(lowest, highest) of figure(ms, ...) over the rounds that every series has, each series
    (one side's round medians, ms) giving its round's median; None without rounds."""
    rounds = min((len(x) for x in series), default=0)
    if rounds == 0:
        return None
    values = [figure(*(x[r] for x in series)) for r in range(rounds)]
    return min(values), max(values)


def round_ms(entry, mode):
    return entry.get(mode + "_round_ms") or []


def judge(results, rooflines):
    """The goals of issue 23, each with its measured figure, from the medians of every call; and
    the figure's range over the rounds, taken round by round (`rounds`), with `flips` where the
    target lies within it: a verdict the VM's swings can turn. A streaming goal missed without a
    bound carries its `limit` (in_cache.py): backplane's arithmetic, or its overlap with memory."""
    goals = []
    for key, r in results.items():
        case, dtype, entries = r["case"], r["dtype"], r["sides"]
        streams = r.get("streams")
        bp = entries.get("backplane", {})
        for mode in ("out", "alloc"):
            mine = bp.get(mode + "_ms")
            peers = [(e[mode + "_ms"], n) for n, e in entries.items()
                     if n != "backplane" and e.get(mode + "_ms")]
            if mine is None or not peers:
                continue
            best, who = min(peers)
            goal = {"goal": f"{key} ({mode}): >= 1.2x the fastest peer ({who})",
                    "measured": best / mine, "target": 1.2}
            timed = [round_ms(entries[n], mode) for _, n in peers]
            goal["rounds"] = round_range(lambda m, *p: min(p) / m, round_ms(bp, mode), *timed)
            if best / mine < 1.2 and not is_compute_bound(case):
                need = 1.2 * moved_bytes(case, dtype) / (best / 1e3) / 1e9
                bound = streaming_bound(need, who, streams, rooflines)
                if bound:
                    goal["bound"] = bound
                else:
                    add_limit(goal, r, need)
            goals.append(goal)
        mine = bp.get("out_ms")
        if mine is None:
            continue
        if is_compute_bound(case):
            rate = attention_flops(case) / (mine / 1e3) / 1e9
            roof, name, target = ((rooflines["bf16_gemm_gflops"], "bf16 GEMM", 0.5)
                                  if dtype == "bfloat16"
                                  else (rooflines["sgemm_gflops"], "sgemm", 0.7))
            flops = attention_flops(case)
            goals.append({"goal": f"{key}: >= {target:.0%} of the {name} roofline "
                                  f"({rate:.0f} of {roof:.0f} GFLOP/s)",
                          "measured": rate / roof, "target": target,
                          "rounds": round_range(lambda m: flops / (m / 1e3) / 1e9 / roof,
                                                round_ms(bp, "out"))})
        else:
            rate = moved_bytes(case, dtype) / (mine / 1e3) / 1e9
            roof = rooflines["copy_gbs"]
            own = f"; its own traffic {streams['gbs']:.1f} GB/s" if streams else ""
            moved = moved_bytes(case, dtype)
            goals.append({"goal": f"{key}: >= 80% of copy bandwidth over its bytes "
                                  f"({rate:.1f} of {roof:.1f} GB/s; read-only "
                                  f"{rooflines['read_gbs']:.1f} GB/s{own})",
                          "measured": rate / roof, "target": 0.8,
                          "rounds": round_range(lambda m: moved / (m / 1e3) / 1e9 / roof,
                                                round_ms(bp, "out"))})
            if rate < 0.8 * roof:
                add_limit(goals[-1], r, 0.8 * roof)
    for g in goals:
        g["pass"] = g["measured"] >= g["target"]
        lo_hi = g.get("rounds")
        if lo_hi is None:
            g.pop("rounds", None)
        else:
            g["flips"] = lo_hi[0] < g["target"] <= lo_hi[1]
    return goals


def add_limit(goal, result, need_gbs):
    """The goal's `limit` from the case's rate in cache (in_cache.py), where one was measured."""
    why = in_cache.limit(result.get("in_cache"), need_gbs)
    if why:
        goal["limit"] = why


def streaming_bound(need, who, streams, rooflines):
    """Why 1.2x the peer cannot be had, when it cannot: the rate it needs over the op's bytes is
    above what the op's own traffic reaches with no arithmetic (stream_bound.py), measured in
    the case's minutes; without that figure, above the copy roofline. None when 1.2x is within
    reach, so the miss stands without an excuse. need: the GB/s over the op's bytes that 1.2x
    the peer takes."""
    if streams:
        if need <= streams["gbs"]:
            return None
        return (f"1.2x {who} needs {need:.1f} GB/s over the op's bytes, above its own traffic "
                f"with no arithmetic in this run ({streams['gbs']:.1f} GB/s: {streams['how']})")
    if need <= rooflines["copy_gbs"]:
        return None
    return (f"1.2x {who} needs {need:.1f} GB/s over the op's bytes, above this run's copy "
            f"bandwidth ({rooflines['copy_gbs']:.1f} GB/s)")


def shown(measured, target):
    """A goal's figure to 2 decimals, or to 3 where 2 would print the target itself (0.795
    failing 0.80 would read as 0.80)."""
    text = f"{measured:.2f}"
    return f"{measured:.3f}" if text == f"{target:.2f}" and measured != target else text


def markdown(report):
    lines = []
    cols = report["sides"]
    lines.append(f"Machine: {report['machine']['cpu']}, {report['machine']['features']}; "
                 f"{report['threads']} threads on every side; {report['date']}.")
    lines.append("")
    lines.append("Versions: " + "; ".join(report["versions"].values()) + ".")
    lines.append("")
    lines.append("| case | " + " | ".join(f"{c} (ms)" for c in cols) + " | fastest peer / backplane |")
    lines.append("|---|" + "---:|" * len(cols) + "---:|")
    for key, r in report["results"].items():
        for mode, title in (("out", "into a given buffer"), ("alloc", "output allocated")):
            cells, peers = [], []
            for c in cols:
                e = r["sides"].get(c)
                if e is None:
                    cells.append("")
                elif e["status"] != "ok":
                    cells.append(e["status"].split(":")[0])
                elif e.get(mode + "_ms") is None:
                    cells.append("no out= form" if mode == "out" else "-")
                else:
                    cells.append(f"{e[mode + '_ms']:.2f}")
                    if c != "backplane":
                        peers.append(e[mode + "_ms"])
            mine = r["sides"].get("backplane", {}).get(mode + "_ms")
            ratio = f"{min(peers) / mine:.2f}x" if peers and mine else ""
            lines.append(f"| `{key}` {title} | " + " | ".join(cells) + f" | {ratio} |")
    lines.append("")
    roof = report["rooflines"]
    lines.append(f"Rooflines (same run): copy {roof['copy_gbs']:.1f} GB/s ({roof['copy_how']}); "
                 f"read {roof['read_gbs']:.1f} GB/s ({roof['read_how']}); "
                 f"sgemm {roof['sgemm_gflops']:.0f} GFLOP/s; bf16 GEMM "
                 f"{roof['bf16_gemm_gflops']:.0f} GFLOP/s ({roof['bf16_how']}).")
    lines.append("")
    streams = [(key, r["streams"]) for key, r in report["results"].items() if r.get("streams")]
    if streams:
        lines.append("Each streaming case's own traffic with no arithmetic, measured before and "
                     "after its rounds, the faster kept (stream_bound.py), backplane's rate "
                     "over the same bytes, and backplane's rate on a slice of the case held in "
                     "cache (in_cache.py; how in the goals below where one misses):")
        lines.append("")
        lines.append("| case | own traffic (GB/s) | how | backplane (GB/s) | backplane / own "
                     "| backplane in cache (GB/s) |")
        lines.append("|---|---:|---|---:|---:|---:|")
        for key, st in streams:
            r = report["results"][key]
            mine = r["sides"].get("backplane", {}).get("out_ms")
            rate = moved_bytes(r["case"], r["dtype"]) / (mine / 1e3) / 1e9 if mine else None
            cells = (f"{rate:.1f} | {rate / st['gbs']:.2f}" if rate else " | ")
            cached = f"{r['in_cache']['gbs']:.1f}" if r.get("in_cache") else ""
            lines.append(f"| `{key}` | {st['gbs']:.1f} | {st['how']} | {cells} | {cached} |")
        lines.append("")
    lines.append("Each goal's figure is from the medians of all its calls; \"over rounds\" is the "
                 "same figure taken round by round (every side runs once in each round), lowest "
                 "to highest, marked where the target lies within it.")
    lines.append("")
    lines.append("| goal | measured | over rounds | target | | measured bound, or what limits "
                 "backplane |")
    lines.append("|---|---:|---:|---:|:---:|---|")
    for g in report["goals"]:
        spread = ""
        if "rounds" in g:
            spread = f"{g['rounds'][0]:.2f}-{g['rounds'][1]:.2f}"
            if g["flips"]:
                spread += " (either side of the target)"
        why = g.get("bound") or ("limit: " + g["limit"] if "limit" in g else "")
        lines.append(f"| {g['goal']} | {shown(g['measured'], g['target'])} | {spread} | "
                     f"{g['target']:.2f} | "
                     f"{'PASS' if g['pass'] else 'FAIL'} | {why} |")
    lines.append("")
    busy = [f"`{key}` {c}" for key, r in report["results"].items()
            for c, e in r["sides"].items()
            if e.get("settle_ms_max", 0) >= 1e3 * SETTLE_LIMIT_S]
    if busy:
        lines.append(f"Timed while other threads were still busy after {SETTLE_LIMIT_S:.0f} s of "
                     "waiting (a side's workers that never go idle share the CPUs with every "
                     "side after them): " + "; ".join(busy) + ".")
        lines.append("")
    lines.append("What ran:")
    for key, r in report["results"].items():
        for c, e in r["sides"].items():
            detail = e["label"] if e["status"] == "ok" else e["status"]
            lines.append(f"- `{key}` {c}: {detail}")
    return "\n".join(lines) + "\n"


def parse_args(argv, spec):
    """The command line against cases.json's spec: (args, threads, dtypes, cases, side names).
    A dtype, case filter or side that names nothing ends the run with an error that lists what
    would be accepted (argparse's exit status 2)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default="", help="comma-separated substrings of case names")
    p.add_argument("--dtypes", default="")
    p.add_argument("--sides", default=",".join(SIDES))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--block-ms", type=float, default=60)
    p.add_argument("--json")
    p.add_argument("--markdown")
    args = p.parse_args(argv)
    threads = int(os.environ.get("BENCH_PEERS_THREADS", spec["threads"]))
    dtypes = args.dtypes.split(",") if args.dtypes else spec["dtypes"]
    for dt in dtypes:
        if dt not in spec["dtypes"]:
            p.error(f"--dtypes: unknown dtype {dt!r}; the dtypes are {', '.join(spec['dtypes'])}")
    wanted = [c for c in args.cases.split(",") if c]
    cases = [c for c in spec["cases"] if not wanted or any(w in c["name"] for w in wanted)]
    if not cases:
        names = ", ".join(c["name"] for c in spec["cases"])
        p.error(f"--cases: {args.cases!r} matches none of the cases: {names}")
    side_names = [s for s in args.sides.split(",") if s]
    for s in side_names:
        if s not in SIDES:
            p.error(f"--sides: unknown side {s!r}; the sides are {', '.join(SIDES)}")
    return args, threads, dtypes, cases, side_names


def main():
    spec = json.loads((HERE / "cases.json").read_text())
    args, threads, dtypes, cases, side_names = parse_args(sys.argv[1:], spec)
    log = lambda text: print(text, file=sys.stderr, flush=True)
    torch.set_num_threads(threads)
    versions = {}
    for s in side_names:
        try:
            versions[s] = importlib.import_module(SIDES[s][0]).version()
        except Exception as e:
            versions[s] = f"{s}: not available ({type(e).__name__}: {e})"
    log("rooflines ...")
    roofs = roofline.measure(threads)
    results = {}
    for case in cases:
        streaming = not is_compute_bound(case) and "backplane" in side_names
        for dtype in dtypes:
            key = f"{case['name']}_{dtype}"
            log(key)
            # The op's own traffic just before and just after the case's rounds, the faster
            # kept: the same minutes, and a ceiling that a quiet moment of the VM sets.
            own = cached = None
            if streaming:
                settle()
                own = stream_bound.measure(case, dtype, threads)
                settle()
                cached = in_cache.measure(case, dtype, threads, make_inputs, moved_bytes)
            results[key] = {"case": case, "dtype": dtype,
                            "sides": run_case(case, dtype, side_names, args.rounds,
                                              args.block_ms / 1e3, threads, log)}
            if streaming:
                settle()
                after = stream_bound.measure(case, dtype, threads)
                results[key]["streams"] = max((own, after), key=lambda m: m["gbs"] if m else 0)
                results[key]["in_cache"] = cached
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "machine": roofline.machine(), "threads": threads, "sides": side_names,
              "versions": versions, "rooflines": roofs, "results": results,
              "platform": platform.platform()}
    report["goals"] = judge(results, roofs)
    text = markdown(report)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(text)


if __name__ == "__main__":
    main()
