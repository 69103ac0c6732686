"""ggml's side: llama.cpp's tensor library on its CPU backend, through ggml/ggml_peer.cpp (ctypes).

What runs is what llama.cpp's CPU path runs for these layers:
- attention: ggml_flash_attn_ext with f32 accumulation (ggml_prec_set_acc, as llama-graph.cpp
  sets it); causal prefill with an F16 mask of 0 / -inf [kv_len, q_len], made once in build()
  (llama.cpp makes its KQ mask on the host before the graph runs); decode with no mask, the 8 KV
  heads broadcast over the 32 query heads by the kernel. The kernel reads Q as f32 only: a bf16
  Q is cast inside the graph (timed). K/V are taken as they are: f32, or bf16 (a CPU path of
  its own: bf16 dot products with the query rounded to bf16, V widened to f32).
- rmsnorm: ggml_rms_norm then ggml_mul by the weight, which the CPU backend fuses into one pass
  when both are f32 (ggml_cpu_try_fuse_ops; off with GGML_CPU_DISABLE_FUSION=1). The weight is
  f32 in both dtypes, as llama.cpp's norm weights are (GGUF keeps 1-D tensors in F32).
- silu_and_mul: ggml_swiglu on the [2H] row, not swapped: silu(first half) * second half.
- rotary: ggml_rope_ext in NeoX mode, q and k in one graph, with a plain Llama's parameters
  (freq_scale 1, ext_factor 0, attn_factor 1, beta_fast 32, beta_slow 1).

bf16: ggml 0.25.x has CPU kernels in bf16 for flash attention (K/V) and swiglu, none for
rms_norm and rope (F32 only / F32 and F16). BENCH_PEERS_GGML_BF16 picks what a bf16 case runs:
"native" (the bf16 kernel; an op without one is n/a), "via_f32" (every op in f32 between
ggml_cast nodes inside the graph, timed: what llama.cpp does with bf16 data around an f32-only
op), unset: native where the kernel exists and is not slower (_SLOWER_NATIVE), else via_f32. The
label says which ran and why.

Layouts: ggml's ne order is torch's reversed, so attention's q/k/v [B, H, S, D] are ggml's
[D, S, H, B] as they are; its output is ggml's permuted [B, S, Hq, D] (f32; bf16 via_f32),
turned back in result(). Rotary works in llama.cpp's token-major layout [B, S, H, D] (ggml's
[D, H, S, B]), copies made in build() (not timed) and turned back in result().

run_out is one ggml_graph_compute of a graph built once over buffers made in build(): its
input and output tensors point at those buffers, the casts of a via_f32 graph sit in one buffer
placed by ggml-alloc and the work buffer of ggml_graph_plan is kept, as llama.cpp plans its
compute buffer once and never allocates per call. Rotary rotates q and k in place
(ggml_rope_ext_inplace). So llama.cpp's own way has no per-call allocation; run_alloc is the
simplest ggml user's instead, the ggml examples': per call a context from ggml_init (one malloc
holding the outputs, any intermediates and the work buffer; the inputs point at the side's
buffers), the graph built in it, ggml_graph_compute_with_ctx, ggml_free before returning.
Rotary's run_alloc rotates into fresh tensors (ggml_rope_ext).

Threads: ggml_graph_plan / ggml_graph_compute_with_ctx with n_threads = `threads`; this build
runs them as an OpenMP parallel region of exactly that many threads (the caller's among them),
libgomp's default wait policy between calls.
"""

import ctypes
import os
from pathlib import Path

import torch

from sides import Unsupported

_ENV_PREFIX = "BENCH_PEERS_GGML_PREFIX"   # set by bench/peers/run.sh
_ENV_BF16 = "BENCH_PEERS_GGML_BF16"
_DTYPES = {"float32": 0, "bfloat16": 1}
_OK, _UNSUPPORTED = 0, 2
_VIA_F32 = "BF16 in/out, computed in f32 via ggml_cast (timed)"
_lib = None


def _prefix():
    prefix = os.environ.get(_ENV_PREFIX)
    if not prefix:
        raise RuntimeError(f"{_ENV_PREFIX} is not set (bench/peers/run.sh sets it to the ggml "
                           "that setup.sh builds)")
    return Path(prefix)


def _library():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(str(_prefix() / "lib" / "libggml_peer.so"))
        vp, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
        i64p, plan_p = ctypes.POINTER(i64), ctypes.POINTER(vp)
        lib.ggml_peer_error.restype = ctypes.c_char_p
        lib.ggml_peer_info.restype = ctypes.c_char_p
        lib.ggml_peer_describe.argtypes = [vp]
        lib.ggml_peer_describe.restype = ctypes.c_char_p
        lib.ggml_peer_free.argtypes = [vp]
        lib.ggml_peer_run.argtypes = [vp]
        lib.ggml_peer_run_alloc.argtypes = [vp]
        lib.ggml_peer_attention.argtypes = [plan_p, c_int, c_int, vp, vp, vp, vp, i64p, c_int,
                                            c_int]
        lib.ggml_peer_rmsnorm.argtypes = [plan_p, c_int, c_int, vp, vp, vp, i64, i64,
                                          ctypes.c_double, c_int]
        lib.ggml_peer_silu_and_mul.argtypes = [plan_p, c_int, c_int, vp, vp, i64, i64, c_int]
        lib.ggml_peer_rotary.argtypes = [plan_p, c_int, c_int, vp, vp, vp, i64p,
                                         ctypes.c_double, c_int]
        _lib = lib
    return _lib


def _ggml_version():
    return (_prefix() / "VERSION").read_text().strip()


def version():
    return f"{_ggml_version()}; {_library().ggml_peer_info().decode()}"


def _error():
    return _library().ggml_peer_error().decode()


def _check(rc):
    if rc != _OK:
        raise RuntimeError("ggml: " + _error())


class _NoNativeKernel(Exception):
    """The shim refused a bf16 graph because ggml's CPU backend has no bf16 kernel for the op."""


def _plan(make, via_f32):
    """A plan from make(plan_pointer_ref, via_f32) -> rc."""
    plan = ctypes.c_void_p()
    rc = make(ctypes.byref(plan), int(via_f32))
    if rc == _UNSUPPORTED:
        raise _NoNativeKernel(_error())
    _check(rc)
    return plan


def _bf16_choice():
    choice = os.environ.get(_ENV_BF16, "")
    if choice not in ("", "native", "via_f32"):
        raise ValueError(f"{_ENV_BF16}={choice!r}: one of native, via_f32 (or unset)")
    return choice


# Ops whose native bf16 kernel measured slower than the via_f32 graph (2026-12-02, AMD EPYC,
# 2 threads): the default is each side's fastest way, so they run via_f32 unless
# BENCH_PEERS_GGML_BF16=native. Flash attention with BF16 K/V leaves its tiled kernel (F32/F16
# K/V only) for the per-row one: 942 ms against 255 ms via f32 for the causal prefill case;
# swiglu's BF16 kernel is a scalar loop: 151 ms against 17 ms in f32.
_SLOWER_NATIVE = {
    "attention": "BF16 K/V take flash_attn_ext's per-row kernel, measured 3.7x slower",
    "silu_and_mul": "ggml_swiglu's BF16 kernel is scalar, measured slower than casting",
}


def _make_plan(make, dtype, op):
    """(plan, via_f32, why): the native graph unless the dtype is bf16 and BENCH_PEERS_GGML_BF16
    says via_f32, or is unset and ggml has no bf16 kernel for the op, or a slower one (why
    says so)."""
    if dtype != "bfloat16":
        return _plan(make, False), False, ""
    choice = _bf16_choice()
    if choice == "via_f32":
        return _plan(make, True), True, ""
    if choice == "" and op in _SLOWER_NATIVE:
        return _plan(make, True), True, _SLOWER_NATIVE[op]
    try:
        return _plan(make, False), False, ""
    except _NoNativeKernel as e:
        if choice == "native":
            raise Unsupported(f"{e} in {_ggml_version()}") from None
        return _plan(make, True), True, str(e)


class _Side:
    def __init__(self, plan, threads, label, keep, result):
        self.threads = threads
        self.label = label
        self._plan = plan
        self._keep = keep            # the tensors the graph points at
        self._result = result

    def run_out(self):
        _check(_lib.ggml_peer_run(self._plan))

    def run_alloc(self):
        _check(_lib.ggml_peer_run_alloc(self._plan))

    def result(self):
        return self._result()

    def __del__(self):
        if _lib is not None and self._plan:
            _lib.ggml_peer_free(self._plan)
            self._plan = None


def _dims(*values):
    return (ctypes.c_int64 * len(values))(*values)


def _label(what, plan, via_f32, why):
    graph = _lib.ggml_peer_describe(plan).decode()
    if via_f32:
        what = f"{_VIA_F32}: {what}" + (f" [{why}]" if why else "")
    return f"{what} [graph: {graph}]"


def _attention(case, dtype, threads, inputs):
    b, hq, hkv, sq, skv, d = (case[k] for k in
                              ("batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim"))
    causal = bool(case["causal"])
    if causal and sq != skv:
        raise Unsupported("causal attention with q_len != kv_len is not a case of this side")
    q, k, v = (inputs[n].contiguous() for n in ("q", "k", "v"))   # read only
    code, lib = _DTYPES[dtype], _library()
    outs = {}

    def make(ref, via_f32):
        # ggml's result is f32; a via_f32 graph casts it back to bf16.
        out_dt = torch.bfloat16 if via_f32 else torch.float32
        outs["out"] = torch.empty(b, sq, hq, d, dtype=out_dt)
        return lib.ggml_peer_attention(ref, code, via_f32, q.data_ptr(), k.data_ptr(),
                                       v.data_ptr(), outs["out"].data_ptr(),
                                       _dims(b, hq, hkv, sq, skv, d), int(causal), threads)

    plan, via_f32, why = _make_plan(make, dtype, "attention")
    mask = "causal mask f16 [kv_len, q_len] made once" if causal else "no mask"
    if dtype == "float32":
        what = "Q/K/V f32, out f32"
    elif via_f32:
        what = "Q/K/V cast to f32, out f32 cast to bf16"
    else:
        what = ("K/V bf16, Q bf16 cast to f32 in the graph (timed; the kernel takes f32 Q "
                "only), out f32")
    label = _label(f"ggml_flash_attn_ext ({what}; {mask}; f32 accumulation; out in ggml's "
                   f"[B, S, Hq, D])", plan, via_f32, why)
    out = outs["out"]
    return _Side(plan, threads, label, (q, k, v, out),
                 lambda: {"out": out.transpose(1, 2).float()})


def _rmsnorm(case, dtype, threads, inputs):
    # The weight in f32, as llama.cpp's norm weights are (ggml_peer_rmsnorm says why).
    x, w = inputs["x"].contiguous(), inputs["weight"].float().contiguous()
    out = torch.empty_like(x)
    code, lib = _DTYPES[dtype], _library()

    def make(ref, via_f32):
        return lib.ggml_peer_rmsnorm(ref, code, via_f32, x.data_ptr(), w.data_ptr(),
                                     out.data_ptr(), x.shape[0], x.shape[1], case["eps"], threads)

    plan, via_f32, why = _make_plan(make, dtype, "rmsnorm")
    fused = os.environ.get("GGML_CPU_DISABLE_FUSION") != "1"
    what = ("ggml_rms_norm + ggml_mul" + (" (fused by the CPU backend)" if fused else "")
            + ", weight f32")
    return _Side(plan, threads, _label(what, plan, via_f32, why), (x, w, out),
                 lambda: {"out": out.float()})


def _silu_and_mul(case, dtype, threads, inputs):
    x = inputs["x"].contiguous()
    out = torch.empty(x.shape[0], x.shape[1] // 2, dtype=x.dtype)
    code, lib = _DTYPES[dtype], _library()

    def make(ref, via_f32):
        return lib.ggml_peer_silu_and_mul(ref, code, via_f32, x.data_ptr(), out.data_ptr(),
                                          x.shape[0], x.shape[1] // 2, threads)

    plan, via_f32, why = _make_plan(make, dtype, "silu_and_mul")
    return _Side(plan, threads, _label("ggml_swiglu on the [2H] row", plan, via_f32, why),
                 (x, out), lambda: {"out": out.float()})


def _rotary(case, dtype, threads, inputs):
    if case.get("style", "neox") != "neox":
        raise Unsupported(f"rotary style {case['style']}: this side runs neox only")
    b, h, s, d = (case[k] for k in ("batch", "heads", "seq", "head_dim"))
    # llama.cpp's token-major layout [B, S, H, D] (ggml's [D, H, S, B]): the side's own copies.
    q, k = (inputs[n].transpose(1, 2).contiguous() for n in ("q", "k"))
    pos = inputs["positions"].to(torch.int32).contiguous().clone()
    code, lib = _DTYPES[dtype], _library()

    def make(ref, via_f32):
        return lib.ggml_peer_rotary(ref, code, via_f32, q.data_ptr(), k.data_ptr(),
                                    pos.data_ptr(), _dims(b, s, h, d), case["theta"], threads)

    plan, via_f32, why = _make_plan(make, dtype, "rotary")
    what = ("ggml_rope_ext neox, q and k in one graph, in place (ggml_rope_ext_inplace; "
            "run_alloc: ggml_rope_ext into fresh tensors), on llama.cpp's [B, S, H, D] copies")
    return _Side(plan, threads, _label(what, plan, via_f32, why), (q, k, pos),
                 lambda: {"q": q.transpose(1, 2).float(), "k": k.transpose(1, 2).float()})


_OPS = {"attention": _attention, "rmsnorm": _rmsnorm, "silu_and_mul": _silu_and_mul,
        "rotary": _rotary}


def build(case, dtype, threads, inputs):
    if dtype not in _DTYPES:
        raise Unsupported(f"dtype {dtype}")
    op = _OPS.get(case["op"])
    if op is None:
        raise Unsupported(f"no ggml graph for op {case['op']}")
    return op(case, dtype, threads, inputs)
