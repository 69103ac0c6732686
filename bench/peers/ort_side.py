"""ONNX Runtime's side: its CPU execution provider, running the fused ops an exporter emits.

Each case is a small ONNX graph made here (onnx.helper), run in its own InferenceSession on the
CPU EP: ORT_ENABLE_ALL, intra_op_num_threads = threads, one inter-op thread, sequential.
CANDIDATES are the graphs tried for each op, _DEFAULTS the one measured fastest (below), and
BENCH_PEERS_ORT_VARIANT=<name>[,...] runs another. The label names the graph and, as
"[ORT ran: ...]", the ops of ORT's optimized graph where its optimizer rewrote it.

Calls. run_out: an IOBinding made once in build() binds every input to the side's own torch
tensor and every output to a torch buffer allocated once (element type, shape, data_ptr);
run_with_iobinding reads and writes them in place, and ORT allocates only a multi-node graph's
intermediates and its kernels' scratch (from its arena). run_alloc: a second IOBinding binds the
result outputs to the CPU device without a buffer, so ORT allocates them in the run, and binds
them again after it, which drops them (left bound, ORT would write into them again next run).
They come from ORT's CPU arena (enable_cpu_mem_arena, on by default), which keeps a freed block
and hands it back: the output had the same address on every call, so this column pays an arena
allocation, not fresh pages. That is ORT's usual way; the two columns differ little.
Threads: ORT's intra-op workers spin after a run (session.intra_op.allow_spinning, on by
default, left so); the harness pauses 20 ms between blocks so they are idle before the next side.

bfloat16. ORT 1.32.0's CPU EP has bf16 kernels for few ops: of those here only
SimplifiedLayerNormalization (and ScaledSiLU, but not the gating Mul). Session creation fails
with "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for
GroupQueryAttention(1) node with name ''", and so for MultiHeadAttention(1), com.microsoft
RotaryEmbedding(1), Sigmoid(13) and Mul(14); the ONNX function ops Attention-23,
RMSNormalization-23, RotaryEmbedding-23 and Swish-24 have no bf16 kernel either, and ORT expands
them into their bodies, whose Expand(13) or Mul(14) has none. Such an op runs as a *_via_f32
graph: bf16 in and out, Cast to f32 and back inside the graph (timed), as its label says.

Measured 2026-12-02 on an AMD EPYC (/proc/cpuinfo "model name"; avx512_bf16, no AMX), 2
threads on 2 pinned CPUs, while a large C++ build ran on the same CPUs: rough figures. One
candidate's block medians varied up to 3x within a run and its medians up to 2x between runs;
two names that run the same optimized graph differed by up to 8%. Medians of 9 interleaved
rounds (prefill 7), ms into a given buffer / output allocated; near ties were rerun head to head
(15 rounds) and, still tied, go to the standard ONNX op, else to the harness's own q/k/v.
- attention prefill causal 1x32x1024x128. f32: Attention-23 BNSH 128/126 (default),
  MultiHeadAttention 129-130/127-128, GroupQueryAttention 129-140/135, Attention-23 BSNH
  143/148. bf16: Attention-23 BNSH via f32 128/125 (default), the others 128-148.
- attention decode GQA 32q/8kv, 4096 keys. f32: GroupQueryAttention 3.4/3.8 (default) and
  packed QKV 3.3/3.3, a tie (3.2/3.2 and 3.7/3.1 head to head); Attention-23 BNSH 7.4/5.9, BSNH
  6.8/7.0; MultiHeadAttention, its KV heads repeated by Expand, 24-32. bf16: Attention-23 BNSH
  via f32 9.5/9.5 (default); GroupQueryAttention via f32 11.2/11.0 (it also casts the cache and
  copies it into a separate f32 present each call), Attention-23 BSNH 12.7/12.3, MHA 22-32.
- rmsnorm 4096x4096. f32: RMSNormalization-23 6.5/7.4 (default) and
  SimplifiedLayerNormalization 7.2/7.0, a tie (6.4/6.5 and 6.3/6.8). bf16:
  SimplifiedLayerNormalization in bf16 26.8/25.0 (its native bf16 kernel), via f32 21.9/20.4,
  RMSNormalization-23 via f32 19.9/20.4 (default: the fastest).
- silu_and_mul 2048 x 2x11008. f32: Split -> Sigmoid -> Mul -> Mul 25.9/27.5 (default; ORT fuses
  Sigmoid and Mul into QuickGelu, and turns the Slice pair of slice_sigmoid_mul into the same
  Split: 26.3/27.3), Swish-24 37/39, ScaledSiLU 120/121. bf16 via f32: the same graph 84/81
  (default; as slices 78/77), Swish-24 101/98, ScaledSiLU 287/274.
- rotary 1x32x2048x128. f32: RotaryEmbedding-23 on BSNH copies 8.4/6.4 (default) and
  com.microsoft RotaryEmbedding BSNH 7.8/5.3, a tie (4.4/4.5 and 4.4/5.1); both on BNSH, the
  harness layout, 12-16. bf16 via f32: RotaryEmbedding-23 BSNH 22.0/20.8 (default) and
  com.microsoft BSNH 21.6/21.0, a tie (18.5/18.8 and 19.1/19.1); BNSH 28/28-30.
"""

import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Callable

import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper

from sides import Unsupported

_ENV = "BENCH_PEERS_ORT_VARIANT"
_MS = "com.microsoft"
_ONNX_TYPE = {torch.float32: TensorProto.FLOAT, torch.bfloat16: TensorProto.BFLOAT16,
              torch.int32: TensorProto.INT32, torch.int64: TensorProto.INT64}
_SHORT = {torch.float32: "f32", torch.bfloat16: "bf16"}


def version():
    return f"onnxruntime {ort.__version__} (CPU EP)"


# --------------------------------------------------------------------------------------------
# What a candidate builds: an ONNX graph in the op's compute dtype, plus the tensors bound to it.
# --------------------------------------------------------------------------------------------

@dataclass
class _Graph:
    """One candidate's graph for one case.

    Float graph inputs and outputs are declared in the compute dtype; _model() adds the Cast
    nodes of a *_via_f32 variant around them. `inputs` are the side's own tensors (ORT's layout,
    made once in build()); an output is ("name", shape, role) with role "result" (what result()
    reports, allocated per call in run_alloc) or "aux" (e.g. a KV cache, always bound to a
    buffer made once); `alias` binds an aux output to an input's buffer (GQA's shared KV cache).
    """
    nodes: list
    inputs: dict                                   # name -> torch tensor, in ORT's layout
    outputs: list                                  # (name, shape, role)
    result: Callable[[dict], dict]                 # output tensors -> harness-layout float32
    op: str                                        # what ran, for the label
    layout: str
    initializers: list = field(default_factory=list)
    alias: dict = field(default_factory=dict)      # output name -> input name
    opset: int = 23


def _bsnh(x):
    """[B, N, S, H] -> ORT's packed-heads layout [B, S, N * H] (a copy)."""
    b, n, s, h = x.shape
    return x.transpose(1, 2).reshape(b, s, n * h).contiguous()


def _from_bsnh(y, n):
    """[B, S, N * H] -> [B, N, S, H] float32."""
    b, s, nh = y.shape
    return y.reshape(b, s, n, nh // n).transpose(1, 2).float()


def _attention_shape(case):
    b, hq, hkv, sq, skv, d = (case[k] for k in
                              ("batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim"))
    causal = bool(case["causal"])
    if causal and sq != skv:
        raise Unsupported("causal attention with q_len != kv_len is not a case of this side")
    return b, hq, hkv, sq, skv, d, causal


# ---------------------------------- attention -----------------------------------------------

def _gqa(case, inputs, dt, packed, shared=True):
    """com.microsoft GroupQueryAttention in its native layout: q/k/v BSNH, KV cache BNSH.

    GQA is always causal with bottom-right alignment, so it expresses causal prefill
    (q_len == kv_len) and unmasked decode (q_len == 1). Prefill passes no past and omits the
    present_key/value outputs (optional; the case is attention only). Decode is how
    onnxruntime-genai runs it: the KV cache is a buffer of kv_len rows bound as past_key AND
    present_key (ORT then works in place, "past/present share buffer"), seqlens_k = kv_len - 1,
    total_sequence_length = kv_len; the new token's k/v (the kv_len-th key) come in as key/value
    and GQA writes them into row kv_len - 1, so the query attends over exactly kv_len keys: a
    past of kv_len - 1 plus the new one. Each call rewrites the same row with the same values.
    With shared=False (the *_via_f32 variant, whose cache goes through a Cast) past_key holds
    kv_len - 1 rows and GQA concatenates into a separate present buffer.
    """
    b, hq, hkv, sq, skv, d, causal = _attention_shape(case)
    if not (causal or sq == 1):
        raise Unsupported("GroupQueryAttention is causal only; an unmasked case needs q_len == 1")
    decode = not causal
    q = _bsnh(inputs["q"].to(dt))
    k_all, v_all = inputs["k"].to(dt), inputs["v"].to(dt)
    k_new = _bsnh(k_all[:, :, -1:] if decode else k_all)
    v_new = _bsnh(v_all[:, :, -1:] if decode else v_all)
    ins = {}
    if packed:
        ins["query"] = torch.cat((q, k_new, v_new), dim=-1).contiguous()
        names = ["query", "", ""]
    else:
        ins.update(query=q, key=k_new, value=v_new)
        names = ["query", "key", "value"]
    outputs = [("output", [b, sq, hq * d], "result")]
    alias = {}
    if decode:
        rows = skv if shared else skv - 1
        ins["past_key"] = k_all[:, :, :rows].contiguous()
        ins["past_value"] = v_all[:, :, :rows].contiguous()
        names += ["past_key", "past_value"]
        outputs += [("present_key", [b, hkv, skv, d], "aux"),
                    ("present_value", [b, hkv, skv, d], "aux")]
        if shared:
            alias = {"present_key": "past_key", "present_value": "past_value"}
    else:
        names += ["", ""]
    ins["seqlens_k"] = torch.full((b,), skv - 1, dtype=torch.int32)
    ins["total_sequence_length"] = torch.tensor(skv, dtype=torch.int32)
    names += ["seqlens_k", "total_sequence_length"]
    node = helper.make_node("GroupQueryAttention", names, [o[0] for o in outputs], domain=_MS,
                            num_heads=hq, kv_num_heads=hkv, scale=1.0 / math.sqrt(d))
    if decode and shared:
        cache = "KV cache BNSH, shared past/present buffer: past %d + 1 new" % (skv - 1)
    elif decode:
        cache = "KV cache BNSH: past %d + 1 new, concatenated into a separate present" % (skv - 1)
    else:
        cache = "no KV cache"
    layout = ("packed QKV" if packed else "q/k/v") + " BSNH; " + cache
    return _Graph([node], ins, outputs, lambda o: {"out": _from_bsnh(o["output"], hq)},
                  "com.microsoft GroupQueryAttention", layout, alias=alias)


def _repeat_kv(name, out, hkv, group, bnsh, shape):
    """Nodes that repeat each KV head `group` times (what exporters of repeat_kv emit)."""
    b, s, d = shape
    if bnsh:   # [B, Hkv, S, D] -> [B, Hkv, 1, S, D] -> [B, Hkv, G, S, D] -> [B, Hkv*G, S, D]
        op, arg, expand, final = "Unsqueeze", [2], [b, hkv, group, s, d], [b, hkv * group, s, d]
    else:      # [B, S, Hkv*D] -> [B, S, Hkv, 1, D] -> [B, S, Hkv, G, D] -> [B, S, Hkv*G*D]
        op, arg, expand, final = "Reshape", [b, s, hkv, 1, d], [b, s, hkv, group, d], \
            [b, s, hkv * group * d]
    consts = [helper.make_tensor(f"{name}_{tag}", TensorProto.INT64, [len(v)], v)
              for tag, v in (("arg", arg), ("expand", expand), ("final", final))]
    nodes = [helper.make_node(op, [name, f"{name}_arg"], [f"{name}_u"]),
             helper.make_node("Expand", [f"{name}_u", f"{name}_expand"], [f"{name}_e"]),
             helper.make_node("Reshape", [f"{name}_e", f"{name}_final"], [out])]
    return nodes, consts


def _mha(case, inputs, dt, kv_bnsh):
    """com.microsoft MultiHeadAttention: q BSNH, k/v BSNH (3-D) or BNSH (4-D); causal through
    unidirectional=1. It has no GQA: fewer KV heads are repeated inside the graph (timed)."""
    b, hq, hkv, sq, skv, d, causal = _attention_shape(case)
    ins = {"query": _bsnh(inputs["q"].to(dt))}
    for n in ("key", "value"):
        t = inputs[n[0]].to(dt)
        ins[n] = t.contiguous() if kv_bnsh else _bsnh(t)
    nodes, inits, kv = [], [], ["key", "value"]
    if hkv != hq:
        kv = []
        for n in ("key", "value"):
            more, consts = _repeat_kv(n, n + "_rep", hkv, hq // hkv, kv_bnsh, (b, skv, d))
            nodes += more
            inits += consts
            kv.append(n + "_rep")
    nodes.append(helper.make_node("MultiHeadAttention", ["query"] + kv, ["output"], domain=_MS,
                                  num_heads=hq, unidirectional=int(causal),
                                  scale=1.0 / math.sqrt(d)))
    layout = "q BSNH, k/v " + ("BNSH" if kv_bnsh else "BSNH")
    if hkv != hq:
        layout += f"; KV heads repeated {hkv}->{hq} in the graph (Expand, timed)"
    return _Graph(nodes, ins, [("output", [b, sq, hq * d], "result")],
                  lambda o: {"out": _from_bsnh(o["output"], hq)},
                  "com.microsoft MultiHeadAttention" + (" unidirectional" if causal else ""),
                  layout, initializers=inits)


def _onnx_attention(case, inputs, dt, bnsh):
    """ONNX opset-23 Attention: 4-D BNSH (the harness layout) or 3-D BSNH with q_num_heads /
    kv_num_heads; GQA native, is_causal for prefill, no mask for decode."""
    b, hq, hkv, sq, skv, d, causal = _attention_shape(case)
    attrs = dict(is_causal=int(causal), scale=1.0 / math.sqrt(d))
    if bnsh:
        ins = {n: inputs[n].to(dt).contiguous() for n in ("q", "k", "v")}
        shape, result = [b, hq, sq, d], (lambda o: {"out": o["out"].float()})
    else:
        ins = {n: _bsnh(inputs[n].to(dt)) for n in ("q", "k", "v")}
        attrs.update(q_num_heads=hq, kv_num_heads=hkv)
        shape, result = [b, sq, hq * d], (lambda o: {"out": _from_bsnh(o["out"], hq)})
    node = helper.make_node("Attention", ["q", "k", "v"], ["out"], **attrs)
    return _Graph([node], ins, [("out", shape, "result")], result,
                  "Attention-23" + (" is_causal" if causal else ""),
                  "q/k/v " + ("BNSH" if bnsh else "BSNH"))


# ---------------------------------- rmsnorm -------------------------------------------------

def _rmsnorm(case, inputs, dt, onnx_op):
    """SimplifiedLayerNormalization (ORT's contrib op in the default domain) or ONNX opset-23
    RMSNormalization; both over the last axis, float32 statistics (stash_type=1)."""
    x = inputs["x"].to(dt).contiguous()
    op = "RMSNormalization" if onnx_op else "SimplifiedLayerNormalization"
    node = helper.make_node(op, ["x", "weight"], ["out"], axis=-1, epsilon=float(case["eps"]),
                            stash_type=1)
    return _Graph([node], {"x": x, "weight": inputs["weight"].to(dt).contiguous()},
                  [("out", list(x.shape), "result")], lambda o: {"out": o["out"].float()},
                  "RMSNormalization-23" if onnx_op else "SimplifiedLayerNormalization",
                  "x [R, H]")


# ---------------------------------- silu_and_mul --------------------------------------------

def _silu_and_mul(case, inputs, dt, how):
    """out = silu(x[:, :H]) * x[:, H:] as ONNX graphs: ORT's CPU EP has no gated-SiLU kernel
    (ONNX SwiGLU-28 and com.microsoft SwiGLU have none; see the module docstring).
    how: "split" Split -> Sigmoid -> Mul -> Mul; "slice" the same with two Slices;
    "scaledsilu" Split -> com.microsoft ScaledSiLU -> Mul; "swish" Split -> Swish-24 -> Mul."""
    x = inputs["x"].to(dt).contiguous()
    rows, hidden = x.shape[0], x.shape[1] // 2
    nodes, inits, opset = [], [], 23
    if how == "slice":
        for name, lo, hi in (("gate", 0, hidden), ("up", hidden, 2 * hidden)):
            for tag, v in (("lo", lo), ("hi", hi), ("ax", -1)):
                inits.append(helper.make_tensor(f"{name}_{tag}", TensorProto.INT64, [1], [v]))
            nodes.append(helper.make_node("Slice", ["x", f"{name}_lo", f"{name}_hi",
                                                    f"{name}_ax"], [name]))
    else:
        nodes.append(helper.make_node("Split", ["x"], ["gate", "up"], axis=-1, num_outputs=2))
    if how in ("split", "slice"):
        nodes += [helper.make_node("Sigmoid", ["gate"], ["sig"]),
                  helper.make_node("Mul", ["gate", "sig"], ["act"])]
        op = f"{how.capitalize()} -> Sigmoid -> Mul -> Mul"
    elif how == "scaledsilu":
        nodes.append(helper.make_node("ScaledSiLU", ["gate"], ["act"], domain=_MS, alpha=1.0))
        op = "Split -> com.microsoft ScaledSiLU -> Mul"
    else:
        nodes.append(helper.make_node("Swish", ["gate"], ["act"], alpha=1.0))
        op, opset = "Split -> Swish-24 -> Mul", 24
    nodes.append(helper.make_node("Mul", ["act", "up"], ["out"]))
    return _Graph(nodes, {"x": x}, [("out", [rows, hidden], "result")],
                  lambda o: {"out": o["out"].float()}, op, "x [R, 2H]",
                  initializers=inits, opset=opset)


# ---------------------------------- rotary --------------------------------------------------

def _rotary(case, inputs, dt, onnx_op, bnsh):
    """com.microsoft RotaryEmbedding (input, position_ids, cos_cache, sin_cache) or ONNX
    opset-23 RotaryEmbedding (input, cos_cache, sin_cache, position_ids); neox halves
    (interleaved=0), cos/sin [S, D/2] and position_ids [B, S] as initializers (an exported
    model's constants), one node for q and one for k in one model. Input 4-D BNSH (the harness
    layout) or 3-D BSNH with num_heads. Not in place: ORT writes separate outputs."""
    b, h, s, d = (case[k] for k in ("batch", "heads", "seq", "head_dim"))
    if "cos" in inputs:
        cos, sin = inputs["cos"], inputs["sin"]
    else:   # the SIDES.md formula
        inv = case["theta"] ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        ang = torch.outer(torch.arange(s, dtype=torch.float64), inv)
        cos, sin = ang.cos(), ang.sin()
    pos = inputs["positions"] if "positions" in inputs else torch.arange(s)
    # The caches are in the op's dtype (its T); make_tensor takes them as raw bytes.
    as_bits = lambda t: (t.to(dt).view(torch.int16) if dt == torch.bfloat16 else t.to(dt))
    cache = [helper.make_tensor(n, _ONNX_TYPE[dt], [s, d // 2],
                                as_bits(t.contiguous()).numpy().tobytes(), raw=True)
             for n, t in (("cos_cache", cos), ("sin_cache", sin))]
    pids = helper.make_tensor("position_ids", TensorProto.INT64, [b, s],
                              pos.to(torch.int64).expand(b, s).flatten().tolist())
    attrs = dict(interleaved=0)
    if not bnsh:
        attrs["num_heads"] = h
    ins, nodes = {}, []
    for n in ("q", "k"):
        t = inputs[n].to(dt)
        ins[n] = t.contiguous() if bnsh else _bsnh(t)
        if onnx_op:
            args, domain = [n, "cos_cache", "sin_cache", "position_ids"], ""
        else:
            args, domain = [n, "position_ids", "cos_cache", "sin_cache"], _MS
        nodes.append(helper.make_node("RotaryEmbedding", args, [n + "_out"], domain=domain,
                                      **attrs))
    shape = [b, h, s, d] if bnsh else [b, s, h * d]

    def result(o):
        if bnsh:
            return {"q": o["q_out"].float(), "k": o["k_out"].float()}
        return {"q": _from_bsnh(o["q_out"], h), "k": _from_bsnh(o["k_out"], h)}

    return _Graph(nodes, ins, [("q_out", shape, "result"), ("k_out", shape, "result")], result,
                  ("RotaryEmbedding-23" if onnx_op else "com.microsoft RotaryEmbedding")
                  + " x2 (q, k)",
                  ("q/k BNSH" if bnsh else "q/k BSNH") + ", cos/sin [S, D/2]",
                  initializers=cache + [pids])


# --------------------------------------------------------------------------------------------
# The candidates: name -> (op, builder(case, inputs, torch dtype)); _DEFAULTS picks one per
# case, BENCH_PEERS_ORT_VARIANT another.
# --------------------------------------------------------------------------------------------

CANDIDATES = {
    "gqa":                  ("attention", lambda c, i, t, **kw: _gqa(c, i, t, packed=False, **kw)),
    "gqa_packed":           ("attention", lambda c, i, t, **kw: _gqa(c, i, t, packed=True, **kw)),
    "mha":                  ("attention", lambda c, i, t, **kw: _mha(c, i, t, kv_bnsh=False)),
    "mha_kv_bnsh":          ("attention", lambda c, i, t, **kw: _mha(c, i, t, kv_bnsh=True)),
    "onnx_attention":       ("attention", lambda c, i, t, **kw: _onnx_attention(c, i, t, True)),
    "onnx_attention_bsnh":  ("attention", lambda c, i, t, **kw: _onnx_attention(c, i, t, False)),
    "simplified_layernorm": ("rmsnorm", lambda c, i, t, **kw: _rmsnorm(c, i, t, False)),
    "onnx_rmsnorm":         ("rmsnorm", lambda c, i, t, **kw: _rmsnorm(c, i, t, True)),
    "split_sigmoid_mul":    ("silu_and_mul", lambda c, i, t, **kw: _silu_and_mul(c, i, t, "split")),
    "slice_sigmoid_mul":    ("silu_and_mul", lambda c, i, t, **kw: _silu_and_mul(c, i, t, "slice")),
    "split_scaledsilu_mul": ("silu_and_mul",
                             lambda c, i, t, **kw: _silu_and_mul(c, i, t, "scaledsilu")),
    "split_swish_mul":      ("silu_and_mul", lambda c, i, t, **kw: _silu_and_mul(c, i, t, "swish")),
    "ms_rotary":            ("rotary", lambda c, i, t, **kw: _rotary(c, i, t, False, True)),
    "ms_rotary_bsnh":       ("rotary", lambda c, i, t, **kw: _rotary(c, i, t, False, False)),
    "onnx_rotary":          ("rotary", lambda c, i, t, **kw: _rotary(c, i, t, True, True)),
    "onnx_rotary_bsnh":     ("rotary", lambda c, i, t, **kw: _rotary(c, i, t, True, False)),
}
# Every candidate also exists as "<name>_via_f32": for bfloat16, the graph takes and returns
# bf16 tensors but casts to float32 around the op (Cast nodes inside the graph, timed), as an
# exporter does for a bf16 model on ORT's CPU EP; for float32 it is the plain candidate.
_VIA_F32 = "_via_f32"

# (op, kind, dtype) -> candidate: the fastest correct one measured (module docstring), each
# side's best way. For bfloat16 that is a *_via_f32 graph everywhere: ORT has a native bf16
# kernel only for SimplifiedLayerNormalization, and it measured 20-35% slower than casting.
_DEFAULTS = {
    ("attention", "prefill", "float32"): "onnx_attention",
    ("attention", "decode", "float32"): "gqa",
    ("rmsnorm", "", "float32"): "onnx_rmsnorm",
    ("silu_and_mul", "", "float32"): "split_sigmoid_mul",
    ("rotary", "", "float32"): "onnx_rotary_bsnh",
    ("attention", "prefill", "bfloat16"): "onnx_attention_via_f32",
    ("attention", "decode", "bfloat16"): "onnx_attention_via_f32",
    ("rmsnorm", "", "bfloat16"): "onnx_rmsnorm_via_f32",
    ("silu_and_mul", "", "bfloat16"): "split_sigmoid_mul_via_f32",
    ("rotary", "", "bfloat16"): "onnx_rotary_bsnh_via_f32",
}


def _kind(case):
    if case["op"] != "attention":
        return ""
    return "decode" if case["q_len"] == 1 and case["kv_len"] > 1 else "prefill"


def _parse(name):
    """"gqa" -> ("gqa", False), "gqa_via_f32" -> ("gqa", True)."""
    via_f32 = name.endswith(_VIA_F32)
    base = name[:-len(_VIA_F32)] if via_f32 else name
    if base not in CANDIDATES:
        raise ValueError(f"{_ENV}: unknown ONNX Runtime variant {name!r}; one of "
                         f"{', '.join(CANDIDATES)} (each also as <name>{_VIA_F32})")
    return base, via_f32


def _choose(case, dtype):
    """(candidate, via_f32) for this case: BENCH_PEERS_ORT_VARIANT (comma-separated names; the
    one for this case's op wins, names of other ops are ignored) or the measured default."""
    op = case["op"]
    for w in os.environ.get(_ENV, "").split(","):
        if w.strip():
            base, via_f32 = _parse(w.strip())
            if CANDIDATES[base][0] == op:
                return base, via_f32
    name = _DEFAULTS.get((op, _kind(case), dtype))
    if name is None:
        raise Unsupported(f"no ONNX Runtime graph for op {op} in {dtype}")
    return _parse(name)


# --------------------------------------------------------------------------------------------
# Model, session and binding.
# --------------------------------------------------------------------------------------------

def _float(t):
    return t.is_floating_point()


def _model(g, io_type, compute_type):
    """The ModelProto of a _Graph: float inputs/outputs in io_type, with Cast nodes to and from
    compute_type around the graph when they differ (the *_via_f32 variants)."""
    cast = io_type != compute_type
    rename = {}
    pre, post, vin, vout = [], [], [], []
    for name, t in g.inputs.items():
        if _float(t) and cast:
            rename[name] = name + "_c"
            pre.append(helper.make_node("Cast", [name], [name + "_c"], to=compute_type))
        et = io_type if _float(t) else _ONNX_TYPE[t.dtype]
        vin.append(helper.make_tensor_value_info(name, et, list(t.shape)))
    for name, shape, role in g.outputs:
        if cast and role == "result":
            rename[name] = name + "_c"
            post.append(helper.make_node("Cast", [name + "_c"], [name], to=io_type))
            et = io_type
        else:
            et = compute_type
        vout.append(helper.make_tensor_value_info(name, et, shape))
    nodes = []
    for n in g.nodes:
        n = onnx.NodeProto.FromString(n.SerializeToString())
        n.input[:] = [rename.get(x, x) for x in n.input]
        n.output[:] = [rename.get(x, x) for x in n.output]
        nodes.append(n)
    graph = helper.make_graph(pre + nodes + post, "peer", vin, vout, initializer=g.initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", g.opset),
                                                   helper.make_opsetid(_MS, 1)])


def _session_options(threads, optimized_path=None):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3        # errors only: nothing printed while timing
    if optimized_path:
        so.optimized_model_filepath = optimized_path
    return so                       # spinning: ORT's default (session.intra_op.allow_spinning)


def _session(model, threads, optimized_path=None):
    return ort.InferenceSession(model.SerializeToString(),
                                _session_options(threads, optimized_path),
                                providers=["CPUExecutionProvider"])


def _not_implemented(err):
    """The abbreviated ORT error when a kernel is missing, else None."""
    m = re.search(r"Could not find an implementation for (\S+\(\d+\))", str(err))
    return m.group(1) if m else None


def _optimized_ops(model):
    """The op types ORT runs after its graph optimizations (a throwaway 1-thread session)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "optimized.onnx")
        _session(model, 1, path)
        return [n.op_type for n in onnx.load(path, load_external_data=False).graph.node]


class _OrtSide:
    """run_out: IOBinding with every input and output bound once to the side's own torch
    buffers (element type, shape, data_ptr), then run_with_iobinding. run_alloc: a second
    IOBinding whose result outputs are bound to the CPU device without a buffer, so ORT
    allocates them (from its CPU arena) in the run; binding them again after the run drops
    those outputs (left bound, ORT would reuse them on the next run)."""

    def __init__(self, g, model, threads, label):
        self.threads = threads
        self.label = label
        self._g = g
        self._sess = _session(model, threads)
        out_types = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}
        self._buffers = {}
        for name, shape, role in g.outputs:
            if name in g.alias:
                self._buffers[name] = g.inputs[g.alias[name]]
            else:
                dt = next(k for k, v in _ONNX_TYPE.items() if v == out_types[name])
                self._buffers[name] = torch.empty(shape, dtype=dt)
        in_types = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
        self._io = self._bind(in_types, out_types, alloc=False)
        self._io_alloc = self._bind(in_types, out_types, alloc=True)
        self._fresh = [n for n, _, role in g.outputs if role == "result"]

    def _bind(self, in_types, out_types, alloc):
        io = self._sess.io_binding()
        for name, t in self._g.inputs.items():
            io.bind_input(name, "cpu", 0, in_types[name], list(t.shape), t.data_ptr())
        for name, shape, role in self._g.outputs:
            if alloc and role == "result":
                io.bind_output(name, "cpu")
            else:
                buf = self._buffers[name]
                io.bind_output(name, "cpu", 0, out_types[name], list(buf.shape), buf.data_ptr())
        return io

    def run_out(self):
        self._sess.run_with_iobinding(self._io)

    def run_alloc(self):
        self._sess.run_with_iobinding(self._io_alloc)
        for name in self._fresh:
            self._io_alloc.bind_output(name, "cpu")

    def result(self):
        return self._g.result(self._buffers)


def build(case, dtype, threads, inputs):
    if dtype not in ("float32", "bfloat16"):
        raise Unsupported(f"dtype {dtype}")
    name, via_f32 = _choose(case, dtype)
    dt = getattr(torch, dtype)
    via_f32 = via_f32 and dt != torch.float32
    compute_dt = torch.float32 if via_f32 else dt
    g = CANDIDATES[name][1](case, inputs, compute_dt, shared=not via_f32)
    if via_f32:   # the graph takes the inputs in bf16 (the side's own copies)
        g.inputs = {n: (t.to(dt) if _float(t) else t) for n, t in g.inputs.items()}
    model = _model(g, _ONNX_TYPE[dt], _ONNX_TYPE[compute_dt])
    authored = [n.op_type for n in model.graph.node]
    try:
        ran = _optimized_ops(model)
    except Exception as e:  # noqa: BLE001 - ORT raises its own pybind exception types
        missing = _not_implemented(e)
        if missing is None:
            raise
        # ORT expands an ONNX function op that has no kernel for the type (RMSNormalization-23,
        # Attention-23, RotaryEmbedding-23) into its body; the error then names a body node.
        body = "" if missing.split("(")[0] in authored else " (a node of its ONNX function body)"
        raise Unsupported(f"{g.op}: no CPU kernel for {dtype} in ORT {ort.__version__}: "
                          f"'Could not find an implementation for {missing}'{body}") from None
    label = f"{g.op} ({_SHORT[dt]}; {g.layout})"
    if via_f32:
        label = (f"Cast bf16->f32, {g.op} in f32, Cast f32->bf16 (casts in the graph, timed; "
                 f"{g.layout})")
    if sorted(ran) != sorted(authored):   # ORT fused or rewrote something
        label += f" [ORT ran: {', '.join(ran)}]"
    return _OrtSide(g, model, threads, label)
