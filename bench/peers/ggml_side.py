"""ggml's side: llama.cpp's tensor library on its CPU backend, through ggml/ggml_peer.cpp (ctypes).

What runs is what llama.cpp's CPU path runs for these layers: ggml_flash_attn_ext (a causal
mask in f16, as llama.cpp builds it; f32 accumulation), ggml_rms_norm then ggml_mul (fused by the
CPU backend), ggml_swiglu, ggml_rope_ext in neox mode. Where ggml's CPU kernels have no bf16
(rms_norm, rope; flash attention takes an f32 query), the bf16 case keeps bf16 tensors in and
out and casts inside the graph (ggml_cast, timed), and the label says so.

Layouts: ggml's ne order is torch's reversed, so attention's q/k/v [B, H, S, D] are used as they
are; its output is ggml's permuted [B, S, Hq, D]. Rotary works on ggml's [S, H, D] token-major
layout, a copy made in build() (not timed), converted back in result().

run_out computes into buffers made once (f32 rotary in place). run_alloc is a fresh ggml context
per call, ggml_init's malloc holding the outputs, freed before it returns: the way the ggml
examples evaluate a graph. (llama.cpp itself plans one compute buffer and reuses it: that is
run_out.) Threads: ggml's OpenMP workers, exactly `threads` of them (ggml_graph_plan).
"""

import ctypes
import os
from pathlib import Path

import torch

from sides import Unsupported

_DTYPES = {"float32": 0, "bfloat16": 1}
_lib = None


def _prefix():
    prefix = os.environ.get("BENCH_PEERS_GGML_PREFIX")
    if not prefix:
        raise Unsupported("BENCH_PEERS_GGML_PREFIX is not set (bench/peers/run.sh sets it)")
    return Path(prefix)


def _library():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(str(_prefix() / "lib" / "libggml_peer.so"))
        vp, i64, i64p = ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
        lib.gp_error.restype = ctypes.c_char_p
        lib.gp_free.argtypes = [vp]
        lib.gp_run.argtypes = [vp]
        lib.gp_run_fresh.argtypes = [vp]
        lib.gp_attention.argtypes = [ctypes.c_int, vp, vp, vp, vp, vp, i64p, ctypes.c_int]
        lib.gp_rmsnorm.argtypes = [ctypes.c_int, vp, vp, vp, i64, i64, ctypes.c_float,
                                   ctypes.c_int]
        lib.gp_swiglu.argtypes = [ctypes.c_int, vp, vp, i64, i64, ctypes.c_int]
        lib.gp_rotary.argtypes = [ctypes.c_int, vp, vp, vp, vp, vp, i64p, ctypes.c_float,
                                  ctypes.c_int]
        for name in ("gp_attention", "gp_rmsnorm", "gp_swiglu", "gp_rotary"):
            getattr(lib, name).restype = vp
        _lib = lib
    return _lib


def version():
    return (_prefix() / "VERSION").read_text().strip() + " (CPU backend, OpenMP)"


def _check(rc):
    if rc != 0:
        raise RuntimeError("ggml: " + _library().gp_error().decode())


class _Side:
    def __init__(self, plan, threads, label, keep, result):
        self.threads = threads
        self.label = label
        self._plan = plan
        self._keep = keep          # the tensors ggml's graph points at
        self._result = result

    def run_out(self):
        _check(_library().gp_run(self._plan))

    def run_alloc(self):
        _check(_library().gp_run_fresh(self._plan))

    def result(self):
        return self._result()

    def __del__(self):
        if _lib is not None and self._plan:
            _lib.gp_free(self._plan)


def _plan(ptr):
    if not ptr:
        raise Unsupported(_library().gp_error().decode())
    return ptr


def _dims(*values):
    return (ctypes.c_int64 * len(values))(*values)


def build(case, dtype, threads, inputs):
    if dtype not in _DTYPES:
        raise Unsupported(f"dtype {dtype}")
    lib, code, dt = _library(), _DTYPES[dtype], getattr(torch, dtype)
    bf16 = dtype == "bfloat16"
    op = case["op"]
    if op == "attention":
        b, hq, hkv, sq, skv, d = (case[k] for k in
                                  ("batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim"))
        q, k, v = (inputs[n].contiguous().clone() for n in ("q", "k", "v"))
        out = torch.empty(b, sq, hq, d, dtype=dt)
        mask = None
        if case["causal"]:   # top-left = bottom-right here (sq == skv)
            mask = torch.zeros(sq, skv, dtype=torch.float16)
            mask.masked_fill_(torch.ones(sq, skv, dtype=torch.bool).triu(1), float("-inf"))
        plan = _plan(lib.gp_attention(code, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                      mask.data_ptr() if mask is not None else None,
                                      out.data_ptr(), _dims(b, hq, hkv, sq, skv, d), threads))
        what = ("K/V bf16, Q cast to f32 in the graph (timed), out f32 cast to bf16 (timed)"
                if bf16 else "f32")
        label = (f"ggml_flash_attn_ext ({what}; "
                 + ("causal mask f16" if mask is not None else "no mask") + ", f32 accumulation)")
        return _Side(plan, threads, label, (q, k, v, out, mask),
                     lambda: {"out": out.transpose(1, 2).float()})
    if op == "rmsnorm":
        x = inputs["x"].contiguous().clone()
        w = inputs["weight"].float().contiguous()
        out = torch.empty_like(x)
        plan = _plan(lib.gp_rmsnorm(code, x.data_ptr(), w.data_ptr(), out.data_ptr(),
                                    x.shape[0], x.shape[1], case["eps"], threads))
        label = "ggml_rms_norm + ggml_mul (fused)" + (
            " in f32: bf16 x cast to f32 and the result back to bf16 in the graph (timed), "
            "weight f32" if bf16 else "")
        return _Side(plan, threads, label, (x, w, out), lambda: {"out": out.float()})
    if op == "silu_and_mul":
        x = inputs["x"].contiguous().clone()
        out = torch.empty(x.shape[0], x.shape[1] // 2, dtype=dt)
        plan = _plan(lib.gp_swiglu(code, x.data_ptr(), out.data_ptr(), x.shape[0],
                                   x.shape[1] // 2, threads))
        return _Side(plan, threads, f"ggml_swiglu ({'bf16' if bf16 else 'f32'})", (x, out),
                     lambda: {"out": out.float()})
    if op == "rotary":
        b, h, s, d = (case[k] for k in ("batch", "heads", "seq", "head_dim"))
        if case["style"] != "neox":
            raise Unsupported(f"rotary style {case['style']}")
        # ggml's token-major layout [B, S, H, D] (its ne [D, H, S, B]), made once.
        q, k = (inputs[n].transpose(1, 2).contiguous() for n in ("q", "k"))
        pos = torch.arange(s, dtype=torch.int32)
        q_out = torch.empty_like(q) if bf16 else q
        k_out = torch.empty_like(k) if bf16 else k
        plan = _plan(lib.gp_rotary(code, q.data_ptr(), k.data_ptr(),
                                   q_out.data_ptr() if bf16 else None,
                                   k_out.data_ptr() if bf16 else None, pos.data_ptr(),
                                   _dims(b, h, s, d), case["theta"], threads))
        label = ("ggml_rope_ext neox x2 (q, k) on [S, H, D], "
                 + ("in f32: bf16 cast to f32 and back in the graph (timed)" if bf16
                    else "in place"))
        return _Side(plan, threads, label, (q, k, q_out, k_out, pos),
                     lambda: {"q": q_out.transpose(1, 2).float(),
                              "k": k_out.transpose(1, 2).float()})
    raise Unsupported(f"no ggml graph for op {op}")
