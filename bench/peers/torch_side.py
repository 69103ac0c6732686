"""PyTorch's sides: torch.compile (Inductor, its C++ CPU code generation) and eager.

Each is PyTorch's best way for the case, as a speed-minded user writes it:
- attention: F.scaled_dot_product_attention (its fused flash kernel on the CPU; GQA through
  enable_gqa). It has no out= form: eager has no run_out; under torch.compile, run_out copies
  into the preallocated output.
- rmsnorm: F.rms_norm; silu_and_mul: F.silu(x1) * x2 (eager with out=); rotary: transformers'
  apply_rotary_pos_emb (q * cos + rotate_half(q) * sin) with full-width cos/sin made once.
- run_out under torch.compile is `out.copy_(f(x))` compiled, which Inductor lowers to one kernel
  writing into out (no temporary); run_alloc is f(x) compiled, a fresh output from PyTorch's CPU
  allocator each call.
Compiled with fullgraph=True, dynamic=False, the default mode; torch.set_num_threads(threads).
"""

import torch
import torch.nn.functional as F

from sides import Unsupported


def version():
    return f"torch {torch.__version__} (Inductor; CPU capability {torch.backends.cpu.get_cpu_capability()})"


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _functions(case, inputs):
    """(f(*args) -> outputs tuple, args, output names, label) for the case."""
    op = case["op"]
    if op == "attention":
        gqa = case["q_heads"] != case["kv_heads"]
        causal = bool(case["causal"])

        def f(q, k, v):
            return (F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa),)

        return f, (inputs["q"], inputs["k"], inputs["v"]), ("out",), \
            "F.scaled_dot_product_attention" + (" enable_gqa" if gqa else "")
    if op == "rmsnorm":
        eps = case["eps"]

        def f(x, w):
            return (F.rms_norm(x, (x.shape[-1],), w, eps),)

        return f, (inputs["x"], inputs["weight"]), ("out",), "F.rms_norm"
    if op == "silu_and_mul":
        def f(x):
            gate, up = x.chunk(2, dim=-1)
            return (F.silu(gate) * up,)

        return f, (inputs["x"],), ("out",), "F.silu(x1) * x2"
    if op == "rotary":
        cos = torch.cat((inputs["cos"], inputs["cos"]), dim=-1).to(inputs["q"].dtype)
        sin = torch.cat((inputs["sin"], inputs["sin"]), dim=-1).to(inputs["q"].dtype)

        def f(q, k, c, s):
            return (q * c + _rotate_half(q) * s, k * c + _rotate_half(k) * s)

        return f, (inputs["q"], inputs["k"], cos, sin), ("q", "k"), \
            "apply_rotary_pos_emb (cos/sin [S, D] in the input dtype)"
    raise Unsupported(f"no PyTorch way for op {op}")


class _Side:
    def __init__(self, threads, label, run_out, run_alloc, result):
        self.threads = threads
        self.label = label
        self.run_out = run_out
        self.run_alloc = run_alloc
        self.result = result


def _eager_into(case, outs):
    """Eager's out= form of the case, or None where PyTorch has none (sdpa, rms_norm, rotary:
    their eager call allocates, and the column says so)."""
    if case["op"] != "silu_and_mul":
        return None

    def into(x):
        gate, up = x.chunk(2, dim=-1)
        torch.mul(F.silu(gate), up, out=outs[0])
    return into


def _build(case, dtype, threads, inputs, compiled):
    torch.set_num_threads(threads)
    f, args, names, label = _functions(case, inputs)
    with torch.no_grad():
        expected = f(*args)
    outs = tuple(torch.empty_like(t) for t in expected)

    def into(*a):
        for out, value in zip(outs, f(*a)):
            out.copy_(value)

    if compiled:
        # Each case compiles afresh: the cases share these functions' code objects, and
        # Dynamo's recompile limit (8 per code object) would otherwise refuse the later cases.
        torch._dynamo.reset()
        f_alloc = torch.compile(f, fullgraph=True, dynamic=False)
        f_into = torch.compile(into, fullgraph=True, dynamic=False)
        label = f"torch.compile({label})"
    else:
        f_alloc, f_into = f, _eager_into(case, outs)
        label = f"eager {label}" + ("" if f_into else " (no out= form)")

    def run_alloc():
        with torch.no_grad():
            f_alloc(*args)

    def run_out():
        with torch.no_grad():
            f_into(*args)

    def result():
        if f_into is None:
            with torch.no_grad():
                return {n: t.float() for n, t in zip(names, f_alloc(*args))}
        return {n: t.float() for n, t in zip(names, outs)}

    return _Side(threads, label, run_out if f_into else None, run_alloc, result)


def build_compiled(case, dtype, threads, inputs):
    return _build(case, dtype, threads, inputs, compiled=True)


def build_eager(case, dtype, threads, inputs):
    return _build(case, dtype, threads, inputs, compiled=False)
