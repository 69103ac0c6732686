"""backplane's own rate where memory does not hold it back: its kernel on a slice of a streaming
case small enough to stay in the last-level cache from call to call, timed warm, over the
slice's bytes. Next to the op's own traffic (stream_bound.py) it says which of the two limits a
bandwidth goal's miss: a kernel that is slower than the target even in cache is held by its
arithmetic; one that is faster in cache than the target but misses it from memory does not
overlap the two. It is backplane's figure, not a bound on what the op could do: each call's
thread-pool start is in it.

The slice cuts the case's leading extent (decoding's keys, the layers' rows, rotary's positions)
to a quarter of the last-level cache, the rest of the cache left to the threads' other data.
The figure is the fastest of its calls, as the op's own traffic is (stream_bound.py): on a VM a
call of a few tenths of a millisecond can wait as long again for the pool's second thread.
"""

import math
import time
from pathlib import Path

import backplane_side

# The extent each op is cut along: the one its bytes grow with.
SLICED = {"attention": "kv_len", "rmsnorm": "rows", "silu_and_mul": "rows", "rotary": "seq"}
FALLBACK_CACHE_BYTES = 32 << 20  # when sysfs does not say
NEAR = 1.1  # a rate in cache this close above the need still leaves the arithmetic the limit


def last_level_cache_bytes(cpu_dir=Path("/sys/devices/system/cpu/cpu0/cache")):
    """The largest cache that cpu0's sysfs lists (its size field, e.g. "32768K"), else the
    fallback."""
    sizes = []
    for index in cpu_dir.glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        if text and text[-1] in units and text[:-1].isdigit():
            sizes.append(int(text[:-1]) * units[text[-1]])
        elif text.isdigit():
            sizes.append(int(text))
    return max(sizes, default=FALLBACK_CACHE_BYTES)


def slice_of(case, dtype, budget_bytes, moved_bytes):
    """(slice, extent): the case with its leading extent cut so that the op moves at most
    budget_bytes (at least one step of it), or None for an op judged by its multiply rate."""
    if case["op"] == "attention" and case["causal"]:
        return None
    extent = SLICED[case["op"]]
    full = case[extent]
    one, two = (moved_bytes(dict(case, **{extent: n}), dtype) for n in (1, 2))
    per_step, fixed = two - one, 2 * one - two  # decoding's query and output stay whole
    steps = max(1, min(full, int((budget_bytes - fixed) // per_step)))
    return dict(case, **{extent: steps}), extent


def measure(case, dtype, threads, make_inputs, moved_bytes, calls=15, budget_bytes=None):
    """{"gbs": the slice's bytes / its fastest warm call, "how": the slice}, or None for a case
    that has no streaming pattern. make_inputs and moved_bytes are the harness's (peers.py)."""
    budget = budget_bytes or last_level_cache_bytes() // 4
    sliced = slice_of(case, dtype, budget, moved_bytes)
    if sliced is None:
        return None
    part, extent = sliced
    side = backplane_side.build(part, dtype, threads, make_inputs(part, dtype))
    for _ in range(3):  # brings the slice into the cache
        side.run_out()
    seconds = math.inf
    for _ in range(calls):
        t0 = time.perf_counter()
        side.run_out()
        seconds = min(seconds, time.perf_counter() - t0)
    moved = moved_bytes(part, dtype)
    return {"gbs": moved / seconds / 1e9,
            "how": f"{extent} {part[extent]} of {case[extent]} ({moved / 2**20:.1f} MiB a call, "
                   f"under a quarter of the {math.ceil(budget * 4 / 2**20)} MiB cache), "
                   f"fastest of {calls} warm calls"}


def limit(in_cache, need_gbs):
    """What holds backplane below a goal that needs need_gbs over the op's bytes, from its rate
    in cache: the arithmetic when even the cache-resident slice is slower (or less than NEAR
    times faster), else the overlap of arithmetic and memory."""
    if in_cache is None:
        return None
    if in_cache["gbs"] < need_gbs:
        return (f"its arithmetic: backplane with its operands in cache reaches "
                f"{in_cache['gbs']:.1f} GB/s over the op's bytes, under the {need_gbs:.1f} "
                f"needed ({in_cache['how']})")
    if in_cache["gbs"] < NEAR * need_gbs:
        return (f"its arithmetic, nearly: backplane with its operands in cache reaches "
                f"{in_cache['gbs']:.1f} GB/s over the op's bytes, within {NEAR - 1:.0%} of the "
                f"{need_gbs:.1f} needed, which leaves the memory almost no time of its own "
                f"({in_cache['how']})")
    return (f"the overlap of arithmetic and memory: backplane in cache reaches "
            f"{in_cache['gbs']:.1f} GB/s over the op's bytes, above the {need_gbs:.1f} needed "
            f"({in_cache['how']})")
