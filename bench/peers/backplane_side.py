"""backplane's side: the CPU kernels through bench/peers/backplane_peer.cpp (ctypes).

run_out() is one kernel call into buffers made once. run_alloc() takes its output from the
LibTorch bridge's output cache (torch/src/output_blocks.hpp) and gives it back, as a bridge
layer's `norm(x)` does. Rotary works in place on q and k, in the bridge as here: it has nothing
to allocate, so its run_alloc is its run_out.
"""

import ctypes
import os
from pathlib import Path

import torch

from sides import Unsupported

_DTYPES = {"float32": (0, torch.float32), "bfloat16": (1, torch.bfloat16)}
_lib = None


def library():
    """The backplane_peer library (BENCH_PEERS_BACKPLANE_LIB, else the build tree's), loaded once."""
    global _lib
    if _lib is None:
        path = os.environ.get("BENCH_PEERS_BACKPLANE_LIB")
        if not path:
            path = Path(__file__).resolve().parents[2] / "build" / "bench" / "libbackplane_peer.so"
        lib = ctypes.CDLL(str(path))
        vp, i64p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)
        lib.bp_peer_error.restype = ctypes.c_char_p
        lib.bp_peer_describe.restype = ctypes.c_char_p
        lib.bp_peer_set_threads.argtypes = [ctypes.c_int]
        lib.bp_peer_attention.argtypes = [ctypes.c_int, vp, vp, vp, vp, i64p, ctypes.c_int]
        lib.bp_peer_rmsnorm.argtypes = [ctypes.c_int, vp, vp, vp, ctypes.c_int64, ctypes.c_int64,
                                        ctypes.c_double]
        lib.bp_peer_silu_and_mul.argtypes = [ctypes.c_int, vp, vp, ctypes.c_int64, ctypes.c_int64]
        lib.bp_peer_rotary.argtypes = [ctypes.c_int, vp, vp, vp, vp, i64p]
        lib.bp_peer_output_acquire.argtypes = [ctypes.c_size_t]
        lib.bp_peer_output_acquire.restype = vp
        lib.bp_peer_output_release.argtypes = [vp, ctypes.c_size_t]
        # stream_bound.py's traffic without arithmetic (stream_bound.cpp).
        lib.bp_stream_bound.argtypes = [vp, vp, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                        ctypes.c_int]
        _lib = lib
    return _lib


def version():
    return "backplane CPU kernels: " + library().bp_peer_describe().decode()


def _check(rc):
    if rc != 0:
        raise RuntimeError("backplane kernel: " + library().bp_peer_error().decode())


class _Side:
    def __init__(self, threads, label, call, outputs, alloc_bytes):
        self.threads = threads
        self.label = label
        self._call = call              # call(out pointers) -> rc
        self._outputs = outputs        # name -> preallocated tensor
        self._alloc_bytes = alloc_bytes
        self.run_alloc = self._run_alloc if alloc_bytes else self.run_out
        self._pointers = [t.data_ptr() for t in outputs.values()]

    def run_out(self):
        _check(self._call(*self._pointers))

    def _run_alloc(self):
        lib = library()
        block = lib.bp_peer_output_acquire(self._alloc_bytes)
        if not block:
            raise MemoryError("bp_peer_output_acquire")
        try:
            _check(self._call(block))
        finally:
            lib.bp_peer_output_release(block, self._alloc_bytes)

    def result(self):
        return {name: t.float() for name, t in self._outputs.items()}


def build(case, dtype, threads, inputs):
    code, torch_dtype = _DTYPES[dtype]
    lib = library()
    lib.bp_peer_set_threads(threads)
    op = case["op"]
    describe = lib.bp_peer_describe().decode()
    if op == "attention":
        q, k, v = (inputs[n].contiguous() for n in ("q", "k", "v"))
        out = torch.empty_like(q)
        dims = (ctypes.c_int64 * 6)(case["batch"], case["q_heads"], case["kv_heads"],
                                    case["q_len"], case["kv_len"], case["head_dim"])
        causal = 1 if case["causal"] else 0
        call = lambda o: lib.bp_peer_attention(code, q.data_ptr(), k.data_ptr(), v.data_ptr(), o,
                                               dims, causal)
        side = _Side(threads, f"attention::forward sdpa ({describe})", call, {"out": out},
                     out.numel() * out.element_size())
    elif op == "rmsnorm":
        x, w = inputs["x"], inputs["weight"]
        out = torch.empty_like(x)
        call = lambda o: lib.bp_peer_rmsnorm(code, x.data_ptr(), w.data_ptr(), o, x.shape[0],
                                             x.shape[1], case["eps"])
        side = _Side(threads, f"rmsnorm::forward_cpu ({describe})", call, {"out": out},
                     out.numel() * out.element_size())
    elif op == "silu_and_mul":
        x = inputs["x"]
        out = torch.empty(x.shape[0], x.shape[1] // 2, dtype=x.dtype)
        call = lambda o: lib.bp_peer_silu_and_mul(code, x.data_ptr(), o, x.shape[0],
                                                  x.shape[1] // 2)
        side = _Side(threads, f"activation::forward_cpu silu ({describe})", call,
                     {"out": out}, out.numel() * out.element_size())
    elif op == "rotary":
        q, k = inputs["q"].clone(), inputs["k"].clone()
        cos, sin = inputs["cos"].contiguous(), inputs["sin"].contiguous()
        dims = (ctypes.c_int64 * 4)(*q.shape)
        call = lambda qp, kp: lib.bp_peer_rotary(code, qp, kp, cos.data_ptr(), sin.data_ptr(),
                                                 dims)
        side = _Side(threads, f"rotary::forward_cpu neox, in place ({describe})", call,
                     {"q": q, "k": k}, 0)
    else:
        raise Unsupported(f"no backplane kernel for op {op}")
    return side
