"""A streaming case's bound, measured in the case's own minutes: the memory traffic the op must
make (its reads, its writes, in place or not), with no arithmetic, through
bench/peers/stream_bound.cpp on the kernels' thread pool, the fastest of its ways (plain or
streaming stores; no prefetch, 16 KiB ahead into L1 or 4 KiB ahead into L2), each the fastest
of 9 calls.

The machine-wide copy roofline (Tensor.copy_) is the issue's yardstick for the bandwidth goals,
but its stores read each line before writing it: a kernel with streaming stores runs above it,
so "1.2x the peer needs more than the copy rate" would not show that 1.2x cannot be had. This
does: it is the op's own traffic at the best rate this machine gave it in this run.
"""

import math
import time

import torch

import backplane_side

STREAM_STORES, PREFETCH_L1, PREFETCH_L2 = 1, 2, 4
PREFETCHES = (0, PREFETCH_L1, PREFETCH_L2)
CHUNK = 64 << 10  # row length for traffic with no row structure of its own


def _element_size(dtype):
    return torch.finfo(getattr(torch, dtype)).bits // 8


def pattern(case, dtype):
    """(rows, row_bytes, inputs, kind) of the traffic the op must make, kind one of "read",
    "write" (inputs runs read per row, one written elsewhere) and "in place"."""
    es = _element_size(dtype)
    op = case["op"]
    if op == "attention" and case["causal"]:
        raise ValueError("causal prefill is judged by its multiply rate, not its traffic")
    if op == "attention":
        q = case["batch"] * case["q_heads"] * case["q_len"] * case["head_dim"]
        kv = case["batch"] * case["kv_heads"] * case["kv_len"] * case["head_dim"]
        return math.ceil(es * (2 * q + 2 * kv) / CHUNK), CHUNK, 1, "read"
    if op == "rmsnorm":
        return case["rows"], es * case["hidden"], 1, "write"
    if op == "silu_and_mul":
        return case["rows"], es * case["hidden"], 2, "write"
    if op == "rotary":
        qk = case["batch"] * case["heads"] * case["seq"] * case["head_dim"]
        return math.ceil(2 * qk * es / CHUNK), CHUNK, 1, "in place"
    raise ValueError(f"no streaming pattern for op {op!r}")


def _describe(rows, row_bytes, inputs, kind, flags):
    mib = rows * row_bytes * inputs / 2**20
    if kind == "read":
        what = f"reads of {mib:.0f} MiB"
    elif kind == "in place":
        what = f"{mib:.0f} MiB rewritten in place"
    else:
        what = (f"{inputs} reads and 1 write per row" if inputs > 1 else "a copy") + \
               f" ({mib:.0f} MiB in, {rows * row_bytes / 2**20:.0f} MiB out)"
    ways = [w for bit, w in ((STREAM_STORES, "streaming stores"),
                             (PREFETCH_L1, "prefetch 16 KiB ahead into L1"),
                             (PREFETCH_L2, "prefetch 4 KiB ahead into L2")) if flags & bit]
    return what + (", " + " and ".join(ways) if ways else "")


def measure(case, dtype, threads, calls=9):
    """{"gbs": bytes moved / second, "how": what ran} for the case's traffic, or None when the
    op has no streaming pattern here or the library refuses the shape."""
    try:
        rows, row_bytes, inputs, kind = pattern(case, dtype)
    except ValueError:
        return None
    lib = backplane_side.library()
    lib.bp_peer_set_threads(threads)
    src = torch.ones(rows * row_bytes * inputs, dtype=torch.uint8)
    if kind == "read":
        dst, moved, variants = None, src.numel(), PREFETCHES
    else:
        if kind == "in place":
            dst, moved = src, 2 * src.numel()
        else:
            dst = torch.ones(rows * row_bytes, dtype=torch.uint8)
            moved = src.numel() + dst.numel()
        variants = [stores | prefetch for stores in (0, STREAM_STORES) for prefetch in PREFETCHES]
    out_ptr = dst.data_ptr() if dst is not None else None
    best = None
    for flags in variants:
        call = lambda: lib.bp_stream_bound(src.data_ptr(), out_ptr, rows, row_bytes, inputs, flags)
        if call() != 0:
            return None
        seconds = math.inf
        for _ in range(calls):
            t0 = time.perf_counter()
            call()
            seconds = min(seconds, time.perf_counter() - t0)
        if best is None or seconds < best[0]:
            best = (seconds, flags)
    seconds, flags = best
    return {"gbs": moved / seconds / 1e9,
            "how": _describe(rows, row_bytes, inputs, kind, flags) + f", fastest of {calls}"}
