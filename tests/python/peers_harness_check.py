"""The peers benchmark's harness (bench/peers/peers.py) on small cases: what it measures is only
worth its checks, so these hold them. Each backplane case runs the real kernels through the
backplane_peer shim against the float64 reference, every side of cases.json's ops is covered,
a side that computes something else is reported wrong and not timed, and the goals' verdicts
and bounds follow from the figures. Timings are not asserted.

    python peers_harness_check.py BACKPLANE_PEER_LIB
"""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "peers"))

import peers  # noqa: E402

SMALL = [
    {"name": "attention_prefill", "op": "attention", "batch": 1, "q_heads": 4, "kv_heads": 2,
     "q_len": 70, "kv_len": 70, "head_dim": 64, "causal": True},
    {"name": "attention_decode", "op": "attention", "batch": 1, "q_heads": 8, "kv_heads": 2,
     "q_len": 1, "kv_len": 300, "head_dim": 128, "causal": False},
    {"name": "rmsnorm", "op": "rmsnorm", "rows": 33, "hidden": 256, "eps": 1e-6},
    {"name": "silu_and_mul", "op": "silu_and_mul", "rows": 17, "hidden": 160},
    {"name": "rotary", "op": "rotary", "batch": 1, "heads": 3, "seq": 40, "head_dim": 64,
     "theta": 10000.0, "style": "neox"},
]
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


class _WrongSide:
    """Returns twice the right answer: the harness must call it wrong."""
    threads = 1
    label = "doubles the reference"
    run_alloc = None

    def __init__(self, case, inputs):
        self._want = peers.reference(case, inputs)

    def run_out(self):
        pass

    def result(self):
        return {k: (2 * v).float() for k, v in self._want.items()}


def main():
    os.environ["BENCH_PEERS_BACKPLANE_LIB"] = sys.argv[1]
    log = lambda text: None  # noqa: E731
    peers.SIDES["doubled"] = ("peers_harness_check", "build_wrong")
    results = {}
    for case in SMALL:
        for dtype in ("float32", "bfloat16"):
            key = f"{case['name']}_{dtype}"
            entries = peers.run_case(case, dtype, ["backplane", "torch eager", "doubled"],
                                     rounds=1, block_s=0.001, threads=1, log=log)
            bp = entries["backplane"]
            check(bp["status"] == "ok", f"{key}: backplane {bp['status']}")
            check(bp["error"] is not None and bp["error"] <= peers.TOLERANCE[dtype],
                  f"{key}: backplane error {bp['error']}")
            check(bp["out_ms"] is not None and bp["out"] >= 1, f"{key}: backplane was not timed")
            check(len(bp["out_round_ms"]) == 1 and abs(bp["out_round_ms"][0] - bp["out_ms"]) < 1e-9,
                  f"{key}: one round's median is not the median: {bp['out_round_ms']}")
            eager = entries["torch eager"]
            check(eager["status"] == "ok", f"{key}: torch eager {eager['status']}")
            wrong = entries["doubled"]
            check(wrong["status"].startswith("wrong: relative error"),
                  f"{key}: a side doubling the answer is '{wrong['status']}'")
            check(wrong["out_ms"] is None, f"{key}: a wrong side was timed")
            results[key] = {"case": case, "dtype": dtype, "sides": entries}

    # The verdicts follow the figures: a made-up peer 1.5x slower passes, one 1.1x slower fails,
    # and when the peer already moves its bytes above copy / 1.2, the bound says so.
    roofs = {"copy_gbs": 30.0, "read_gbs": 30.0, "sgemm_gflops": 100.0,
             "bf16_gemm_gflops": 300.0}
    case = {"name": "rms", "op": "rmsnorm", "rows": 4096, "hidden": 4096, "eps": 1e-6}
    bytes_gb = peers.moved_bytes(case, "float32") / 1e9
    mine_ms = bytes_gb / 30.0 * 1e3  # backplane at exactly the copy rate
    made_up = {"r": {"case": case, "dtype": "float32", "sides": {
        "backplane": {"out_ms": mine_ms, "alloc_ms": mine_ms},
        "slow": {"out_ms": 1.5 * mine_ms, "alloc_ms": 1.1 * mine_ms}}}}
    goals = {g["goal"]: g for g in peers.judge(made_up, roofs)}
    out = next(g for k, g in goals.items() if "(out)" in k)
    alloc = next(g for k, g in goals.items() if "(alloc)" in k)
    bandwidth = next(g for k, g in goals.items() if "copy bandwidth" in k)
    check(out["pass"] and abs(out["measured"] - 1.5) < 1e-9, f"1.5x peer: {out}")
    check(not alloc["pass"] and "bound" in alloc, f"1.1x peer at 0.91 of copy: {alloc}")
    check("bound" not in out, f"a goal met carries no bound: {out}")
    check(bandwidth["pass"] and abs(bandwidth["measured"] - 1.0) < 1e-9, f"bandwidth: {bandwidth}")
    check("rounds" not in out, f"no rounds, no range: {out}")
    check_rounds(made_up, roofs, mine_ms)

    # With the op's own traffic measured, it is the bound: a peer that needs less than it for
    # 1.2x has no excuse even above the copy rate, one that needs more has.
    made_up["r"]["streams"] = {"gbs": 40.0, "how": "made up"}
    made_up["r"]["sides"]["slow"]["alloc_ms"] = 1.1 * mine_ms  # 1.2x needs 32.7 GB/s
    goals = {g["goal"]: g for g in peers.judge(made_up, roofs)}
    alloc = next(g for k, g in goals.items() if "(alloc)" in k)
    check(not alloc["pass"] and "bound" not in alloc, f"1.2x within the op's traffic: {alloc}")
    made_up["r"]["streams"]["gbs"] = 32.0
    goals = {g["goal"]: g for g in peers.judge(made_up, roofs)}
    alloc = next(g for k, g in goals.items() if "(alloc)" in k)
    check("own traffic" in alloc.get("bound", ""), f"1.2x above the op's traffic: {alloc}")
    check_limits(roofs)
    check(peers.shown(0.7956, 0.8) == "0.796" and peers.shown(0.8123, 0.8) == "0.81"
          and peers.shown(1.5, 1.2) == "1.50", "a figure next to its target shows the difference")
    check_settle()
    check_bf16_roofline()
    check_stream_bound()
    check_in_cache()
    check_arguments()
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print(f"peers harness: {len(results)} small cases, every check held")
    return 0


def check_arguments():
    """A command line that names no dtype, case or side the spec has stops with the accepted
    ones named; a good one selects what it names."""
    import contextlib
    import io
    import json
    spec = json.loads((REPO / "bench" / "peers" / "cases.json").read_text())
    for argv, named in ((["--dtypes", "bf16"], "float32, bfloat16"),
                        (["--cases", "no_such_case"], spec["cases"][0]["name"]),
                        (["--sides", "tvm"], "backplane")):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                peers.parse_args(argv, spec)
                code = 0
            except SystemExit as e:
                code = e.code
        check(code == 2 and argv[1] in err.getvalue() and named in err.getvalue(),
              f"{argv}: exit {code}, message {err.getvalue()!r}")
    _, _, dtypes, cases, sides = peers.parse_args(
        ["--cases", "rmsnorm,rotary", "--dtypes", "bfloat16", "--sides", "backplane"], spec)
    check(dtypes == ["bfloat16"] and [c["op"] for c in cases] == ["rmsnorm", "rotary"]
          and sides == ["backplane"], f"a good command line: {dtypes} {cases} {sides}")


def check_rounds(made_up, roofs, mine_ms):
    """Each goal's figure taken round by round: backplane at the copy rate, then 1.5x slower; the
    peer 1.5x slower, then as fast. Ratios 1.5 and 0.67, bandwidth 1.0 and 0.67: both targets lie
    within, and the report says so; rounds that stay on one side do not."""
    sides = made_up["r"]["sides"]
    sides["backplane"]["out_round_ms"] = [mine_ms, 1.5 * mine_ms]
    sides["slow"]["out_round_ms"] = [1.5 * mine_ms, 1.5 * mine_ms]
    goals = {g["goal"]: g for g in peers.judge(made_up, roofs)}
    out = next(g for k, g in goals.items() if "(out)" in k)
    bandwidth = next(g for k, g in goals.items() if "copy bandwidth" in k)
    check(abs(out["rounds"][0] - 1.0) < 1e-9 and abs(out["rounds"][1] - 1.5) < 1e-9
          and out["flips"], f"ratio over rounds: {out}")
    check(abs(bandwidth["rounds"][0] - 2 / 3) < 1e-9 and abs(bandwidth["rounds"][1] - 1.0) < 1e-9
          and bandwidth["flips"], f"bandwidth over rounds: {bandwidth}")
    sides["backplane"]["out_round_ms"] = [mine_ms, 1.1 * mine_ms]
    goals = {g["goal"]: g for g in peers.judge(made_up, roofs)}
    out = next(g for k, g in goals.items() if "(out)" in k)
    check(out["rounds"][0] > 1.2 and not out["flips"], f"rounds above the target: {out}")
    sides["backplane"]["out_round_ms"] = [mine_ms, 1.5 * mine_ms]
    for side in sides.values():
        side.update(status="ok", label="made up")
    report = {"sides": ["backplane", "slow"], "machine": {"cpu": "cpu", "features": "features"},
              "threads": 1, "date": "today", "versions": {}, "results": made_up,
              "rooflines": dict(roofs, copy_how="", read_how="", bf16_how=""),
              "goals": peers.judge(made_up, roofs)}
    text = peers.markdown(report)
    check("either side of the target" in text and "0.67-1.00" in text,
          f"the report shows the rounds: {text}")
    for side in sides.values():
        side.pop("out_round_ms")


def check_limits(roofs):
    """A bandwidth goal missed names what holds backplane, from its rate in cache: below the
    target's rate, the arithmetic; above it, the overlap; nothing where the goal is met or no
    rate in cache was measured. The report shows it."""
    case = {"name": "rms", "op": "rmsnorm", "rows": 4096, "hidden": 4096, "eps": 1e-6}
    at_half_copy = peers.moved_bytes(case, "float32") / 1e9 / 15.0 * 1e3
    made_up = {"r": {"case": case, "dtype": "float32", "sides": {
        "backplane": {"out_ms": at_half_copy, "alloc_ms": at_half_copy, "status": "ok",
                      "label": "made up"}}}}

    def bandwidth_goal():
        return next(g for g in peers.judge(made_up, roofs) if "copy bandwidth" in g["goal"])

    check("limit" not in bandwidth_goal(), f"no rate in cache, no limit: {bandwidth_goal()}")
    made_up["r"]["in_cache"] = {"gbs": 20.0, "how": "made up"}  # the target needs 24
    goal = bandwidth_goal()
    check(not goal["pass"] and goal.get("limit", "").startswith("its arithmetic")
          and "24.0" in goal["limit"], f"slower than the target in cache: {goal}")
    made_up["r"]["in_cache"]["gbs"] = 25.0
    goal = bandwidth_goal()
    check(goal.get("limit", "").startswith("its arithmetic, nearly"), f"just above: {goal}")
    made_up["r"]["in_cache"]["gbs"] = 60.0
    goal = bandwidth_goal()
    check(goal.get("limit", "").startswith("the overlap"), f"faster in cache: {goal}")
    report = {"sides": ["backplane"], "machine": {"cpu": "cpu", "features": "features"},
              "threads": 1, "date": "today", "versions": {}, "results": made_up,
              "rooflines": dict(roofs, copy_how="", read_how="", bf16_how=""),
              "goals": peers.judge(made_up, roofs)}
    made_up["r"]["streams"] = {"gbs": 40.0, "how": "made up"}
    text = peers.markdown(report)
    check("limit: the overlap" in text and "| 60.0 |" in text,
          f"the report shows the limit and the rate in cache: {text}")
    check("still busy" not in text, f"no wait reached the limit: {text}")
    made_up["r"]["sides"]["backplane"]["settle_ms_max"] = 1e3 * peers.SETTLE_LIMIT_S
    check("still busy after 1 s of waiting" in peers.markdown(report) and "`r` backplane" in
          peers.markdown(report), "a block timed after the longest wait is reported")
    made_up["r"]["sides"]["backplane"]["out_ms"] = at_half_copy / 2  # at the copy rate
    check("limit" not in bandwidth_goal(), f"a goal met has no limit: {bandwidth_goal()}")


def check_settle():
    """Between two sides' blocks the harness waits while another thread of the process burns
    CPU (a peer's spinning workers), and not when none does."""
    import threading
    import time

    check(peers.others_cpu_ns() is not None, "no per-thread CPU times in /proc")
    check(peers.settle() < 0.5, "waited with no thread running")
    spin_s = 0.2
    started = threading.Event()

    def spin():
        end = time.perf_counter() + spin_s
        started.set()
        while time.perf_counter() < end:
            pass

    worker = threading.Thread(target=spin)
    worker.start()
    started.wait()
    waited = peers.settle()
    worker.join()
    check(0.5 * spin_s < waited < 1.0, f"waited {waited:.3f} s for a thread spinning {spin_s} s")


def check_in_cache():
    """in_cache.py cuts a case along the extent its bytes grow with, to the budget, and times
    backplane's real kernel on the cut."""
    import in_cache

    cache = in_cache.last_level_cache_bytes()
    check(cache >= 1 << 20, f"last-level cache of {cache} bytes")
    decode = SMALL[1]
    part, extent = in_cache.slice_of(decode, "float32", 64 << 10, peers.moved_bytes)
    check(extent == "kv_len" and 0 < part["kv_len"] < decode["kv_len"]
          and peers.moved_bytes(part, "float32") <= 64 << 10
          and part["q_heads"] == decode["q_heads"], f"decode cut to 64 KiB: {part}")
    part, _ = in_cache.slice_of(SMALL[4], "bfloat16", 1 << 30, peers.moved_bytes)
    check(part == SMALL[4], f"a case under the budget is not cut: {part}")
    check(in_cache.slice_of(SMALL[0], "float32", 1 << 20, peers.moved_bytes) is None,
          "causal prefill is not cut")
    for case in SMALL[1:]:
        got = in_cache.measure(case, "bfloat16", 2, peers.make_inputs, peers.moved_bytes,
                               calls=2, budget_bytes=16 << 10)
        check(got is not None and got["gbs"] > 0 and in_cache.SLICED[case["op"]] in got["how"],
              f"{case['name']}: in cache {got}")


def check_bf16_roofline():
    """The bf16 roofline is the fastest path: oneDNN's bf16 GEMM where it beats sgemm, else the
    sgemm rate (bf16 widened to f32), never a slow fallback that every kernel would beat."""
    import roofline

    for sgemm, mm, isa, want in ((200.0, 876.0, "brg_matmul:avx512_core_bf16", 876.0),
                                 (168.0, 0.3, None, 168.0),
                                 (200.0, 150.0, "gemm:jit", 200.0)):
        rate, how = roofline.bf16_roofline(sgemm, mm, isa)
        check(rate == want, f"bf16 roofline of sgemm {sgemm}, bf16 mm {mm} ({isa}): {rate}")
        check((isa in how) if rate == mm else ("f32 sgemm rate" in how and f"{mm:.1f}" in how),
              f"bf16 roofline says how: {how}")


def check_stream_bound():
    """stream_bound.cpp moves what it says it moves, refuses what it cannot stream, and
    stream_bound.py turns a case into a rate."""
    import torch
    import backplane_side
    import stream_bound

    lib = backplane_side.library()
    lib.bp_peer_set_threads(2)
    rows, row_bytes = 300, 1024  # big enough for the pool to split it
    src = torch.randint(-2**31, 2**31 - 1, (rows * 2 * row_bytes // 4,), dtype=torch.int32)
    halves = src.view(rows, 2, row_bytes // 4)
    for flags in (0, stream_bound.STREAM_STORES | stream_bound.PREFETCH_L1,
                  stream_bound.PREFETCH_L2):
        out = torch.zeros(rows * row_bytes // 4, dtype=torch.int32)
        check(lib.bp_stream_bound(src.data_ptr(), out.data_ptr(), rows, row_bytes, 2, flags) == 0,
              f"two reads per row, flags {flags}: refused")
        check(torch.equal(out.view(rows, -1), halves[:, 0] + halves[:, 1]),
              f"two reads per row, flags {flags}: not the sum of the halves")
        check(lib.bp_stream_bound(src.data_ptr(), out.data_ptr(), 2 * rows, row_bytes // 2, 1,
                                  flags) == 0, f"copy, flags {flags}: refused")
    copy = torch.zeros_like(src)
    lib.bp_stream_bound(src.data_ptr(), copy.data_ptr(), rows, 2 * row_bytes, 1, 0)
    check(torch.equal(copy, src), "copy: not the input")
    lib.bp_stream_bound(copy.data_ptr(), copy.data_ptr(), rows, 2 * row_bytes, 1, 0)
    check(torch.equal(copy, ~src), "in place: bits not flipped")
    check(lib.bp_stream_bound(src.data_ptr(), None, rows, row_bytes, 1, 0) == 0, "read: refused")
    check(lib.bp_stream_bound(src.data_ptr(), copy.data_ptr(), rows, 100, 1, 0) == -1,
          "rows of 100 bytes were not refused")
    check(lib.bp_stream_bound(src.data_ptr(), src.data_ptr(), rows, row_bytes, 2, 0) == -1,
          "two reads in place were not refused")
    check(torch.equal(copy, ~src), "a refused call wrote")
    for case in SMALL[1:]:
        for dtype in ("float32", "bfloat16"):
            got = stream_bound.measure(case, dtype, 2, calls=2)
            check(got is not None and got["gbs"] > 0 and got["how"],
                  f"{case['name']} {dtype}: stream bound {got}")
    check(stream_bound.measure(SMALL[0], "float32", 2) is None,
          "causal prefill has no streaming bound")


def build_wrong(case, dtype, threads, inputs):
    return _WrongSide(case, inputs)


if __name__ == "__main__":
    sys.exit(main())
