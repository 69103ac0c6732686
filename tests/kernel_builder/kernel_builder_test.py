#!/usr/bin/env python3
"""The kernel-builder packages of kernels/kernel_builder under the real `kernels` library.

Usage: kernel_builder_test.py <build>/kernel-builder/backplane <variant>[,<variant>]
                              [unittest options]
The cpu variant (torch215-cxx11-cpu-x86_64-linux) and, when built, a cuda one
(torch215-cxx11-cu130-x86_64-linux: CPU and CUDA implementations).

For each package (rmsnorm, activation, rotary), in <root>/<name>/build/<variant>/:
  * the extension's ELF: no libpython NEEDED, PyModule_Create2 undefined (the interpreter's),
    PyInit_<id> the one export, BIND_NOW, no RPATH (readelf and nm, binutils);
  * kernels loads it: get_local_kernel(<root>/<name>, backend="cpu"), and get_kernel(
    "backplane/<name>", version=1, backend="cpu") through LOCAL_KERNELS (HF_HUB_OFFLINE=1);
    Metadata.read_from_file reads metadata.json; Digest.hash_variant equals its digest and
    Digest.validate (the digest step of kernels.verify) passes, and fails on a changed file;
  * with a cuda variant: kernels' default backend (cuda, with a CUDA torch) picks it, and its
    CPU implementations pass the op tests below; its CUDA ones too where a GPU is visible;
  * every op against the formula of the kernel's header computed in float64: float32 within
    1e-5 relative, bfloat16 and float16 within one ulp of the dtype (the kernels compute in
    float32 and round once), plus float32 noise on the magnitudes a result is made of (2^-20
    of them: a rotation's difference, or gelu's 1 + erf in the far left tail, cancels);
    leading dims with strides; bad arguments raise RuntimeError "<op>: <argument> ...";
  * the layers against what they replace: RMSNorm against LlamaRMSNorm for each weight and
    input dtype (the output dtype torch's promotion gives, within two ulps of the input
    dtype), apply_rotary_transformers against apply_rotary_pos_emb (unsqueeze_dim 1 and 2,
    float32 tables with bfloat16 q and k; q and k left as they were);
  * kernelize (Mode.INFERENCE, cpu) of a tiny random LlamaForCausalLM ("RMSNorm" and
    "rotary_pos_emb" mapped to LocalLayerRepository) gives the plain model's logits (float32:
    1e-4 of the largest logit; bfloat16: no farther from the float64 model than twice the
    plain bfloat16 model is), and the packages' ops are seen dispatched; the activation
    layers through kernelize of modules marked SiluAndMul, GeluAndMul, GeluTanhAndMul.

transformers' LlamaMLP uses ACT2FN["silu"], SiLUActivation, hub name "SiLU": a plain silu,
which the gated ops (silu_and_mul: [..., 2d] -> [..., d]) cannot replace; it stays unmapped.
"""

import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    ROOT = Path(sys.argv[1]).resolve()
    VARIANTS = sys.argv[2].split(",")
    del sys.argv[1:3]
else:
    ROOT = Path(os.environ.get("BACKPLANE_KERNEL_BUILDER_ROOT", ".")).resolve()
    VARIANTS = os.environ.get("BACKPLANE_KERNEL_BUILDER_VARIANTS", "").split(",")
VARIANT = next(v for v in VARIANTS if "-cpu-" in v)  # the cpu variant
CUDA_VARIANT = next((v for v in VARIANTS if re.search(r"-cu\d+-", v)), None)

# Before huggingface_hub is imported (it reads these once); the build tree stays free of
# __pycache__ (the digest skips it, but the folder is then exactly what was built).
os.environ["HF_HUB_OFFLINE"] = "1"
sys.dont_write_bytecode = True

import torch  # noqa: E402


def enable_transformers_kernels():
    """transformers 5.24 asks for kernels >= 0.18.2 and otherwise leaves its layers unmarked;
    0.17.2's decorators are the same API (tests/python/kernel_layers_check.py). Before the
    modeling files are imported."""
    import transformers.utils as utils
    import transformers.utils.import_utils as import_utils

    import_utils.is_kernels_available = utils.is_kernels_available = lambda *a, **k: True
    from transformers.integrations import hub_kernels

    if not hub_kernels._kernels_enabled:
        raise SystemExit("kernel_builder_test: transformers' kernels integration is off "
                         "(USE_HUB_KERNELS?)")


enable_transformers_kernels()

import kernels  # noqa: E402
from kernels import (KernelizeFallback, LayerRepository, LocalLayerRepository, Mode,  # noqa: E402
                     kernelize, use_kernel_forward_from_hub, use_kernel_mapping)
from kernels._rust import (Backend, Digest, DigestAlgorithm, DigestValidationError,  # noqa: E402
                           DigestViolation, Metadata)

NAMES = ("rmsnorm", "activation", "rotary")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
MANTISSA_BITS = {torch.float32: 23, torch.bfloat16: 7, torch.float16: 10}
MIN_EXPONENT = {torch.float32: -126, torch.bfloat16: -126, torch.float16: -14}


def variant_dir(name, variant=VARIANT):
    return ROOT / name / "build" / variant


def metadata(name, variant=VARIANT):
    return Metadata.read_from_file(variant_dir(name, variant) / "metadata.json")


def load(name, backend="cpu"):
    """The package through kernels: backend "cpu" loads the cpu variant, "cuda" the cuda one."""
    return kernels.get_local_kernel(ROOT / name, backend=backend)


def extension(name, variant=VARIANT):
    return variant_dir(name, variant) / f"{metadata(name, variant).id}.abi3.so"


def cuda_visible():
    return CUDA_VARIANT is not None and torch.cuda.is_available()


def torch_cuda_takes(variant):
    """Whether kernels' default backend with this torch (cuda <major>.<minor>) takes a
    cu<major><minor> variant: the same major, a minor no higher."""
    match = re.search(r"-cu(\d+)(\d)-", variant or "")
    if match is None or torch.version.cuda is None:
        return False
    major, minor = (int(p) for p in torch.version.cuda.split(".")[:2])
    return int(match.group(1)) == major and int(match.group(2)) <= minor


# ---- tolerances ----------------------------------------------------------------------------

def ulp(magnitude, dtype):
    """The spacing of `dtype`'s values at float64 magnitudes (subnormals: the smallest)."""
    _, exponent = torch.frexp(magnitude)
    exponent = torch.where(magnitude == 0, MIN_EXPONENT[dtype], exponent - 1)
    exponent = torch.clamp(exponent, min=MIN_EXPONENT[dtype])
    return torch.ldexp(torch.ones_like(magnitude), exponent - MANTISSA_BITS[dtype])


def assert_close(test, got, reference, dtype, what, ulps=1, terms=None):
    """got (dtype) against a float64 reference rounded to dtype: float32 within 1e-5
    relative, bfloat16 and float16 within `ulps` ulps; plus, where `terms` (the float64 sum
    of the magnitudes a result is computed from) is given, float32 arithmetic's error on them
    (a rotation's difference can cancel)."""
    test.assertEqual(got.dtype, dtype, what)
    test.assertEqual(tuple(got.shape), tuple(reference.shape), what)
    g = got.cpu().double()
    r = reference.cpu().to(dtype).double()
    if terms is not None:
        terms = terms.cpu()
    largest = torch.maximum(g.abs(), r.abs())
    if dtype == torch.float32:
        tolerance = 1e-5 * largest
    else:
        tolerance = ulps * ulp(largest, dtype)
    if terms is not None:
        tolerance = tolerance + 2.0**-20 * terms
    error = (g - r).abs()
    bad = error > tolerance
    if bool(bad.any()):
        index = int(torch.argmax((error - tolerance).flatten()))
        test.fail(f"{what} ({dtype}): {int(bad.sum())} of {g.numel()} elements off; worst at "
                  f"{index}: got {g.flatten()[index].item()!r}, want "
                  f"{r.flatten()[index].item()!r} "
                  f"(tolerance {tolerance.flatten()[index].item():g})")


def strided(shape, dtype, scale=1.0):
    """A tensor of `shape` (on torch's default device) whose leading dims have gaps (every
    other row of a wider tensor) and whose last dim is contiguous."""
    wide = (scale * torch.randn((shape[0], 2 * shape[1]) + tuple(shape[2:]))).to(dtype)
    view = wide[:, ::2]
    assert not view.is_contiguous() and view.stride(-1) == 1
    return view


# ---- 1. the ELF files ----------------------------------------------------------------------

@unittest.skipUnless(shutil.which("readelf") and shutil.which("nm"), "needs binutils")
class ExtensionElf(unittest.TestCase):
    def run_tool(self, *args):
        return subprocess.run(args, check=True, stdout=subprocess.PIPE, text=True).stdout

    def test_elf(self):
        for name in NAMES:
            for variant in VARIANTS:
                with self.subTest(package=name, variant=variant):
                    self.check(name, variant)

    def check(self, name, variant):
        so = extension(name, variant)
        self.assertTrue(so.is_file(), so)
        dynamic = self.run_tool("readelf", "-d", str(so))
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
        self.assertIn("libtorch_cpu.so", needed)
        self.assertIn("libc10.so", needed)
        if variant == CUDA_VARIANT:
            self.assertIn("libc10_cuda.so", needed)
        self.assertFalse([n for n in needed if n.startswith("libpython")], needed)
        self.assertRegex(dynamic, r"\(FLAGS\)\s+.*BIND_NOW")
        self.assertRegex(dynamic, r"\(FLAGS_1\)\s+Flags:.*\bNOW\b")
        self.assertNotRegex(dynamic, r"\((RPATH|RUNPATH)\)")
        undefined = self.run_tool("nm", "-D", "--undefined-only", str(so)).split()
        self.assertIn("PyModule_Create2", undefined)
        defined = self.run_tool("nm", "-D", "--defined-only", str(so)).splitlines()
        exports = [line.split()[-1] for line in defined if line.strip()]
        self.assertEqual(exports, [f"PyInit_{metadata(name, variant).id}"])


# ---- 2. what kernels makes of the packages -------------------------------------------------

class Packages(unittest.TestCase):
    def test_layout_and_metadata(self):
        for name in NAMES:
            for variant in VARIANTS:
                with self.subTest(package=name, variant=variant):
                    self.check_layout(name, variant)

    def check_layout(self, name, variant):
        cuda = variant == CUDA_VARIANT
        meta = metadata(name, variant)
        self.assertEqual(str(meta.name), name)
        kind = "cuda" if cuda else "cpu"
        self.assertRegex(meta.id, rf"^_{name}_{kind}_[0-9a-f]{{7}}$")
        self.assertEqual(meta.version, 1)
        self.assertIsNotNone(meta.license)
        self.assertEqual(meta.backend.backend_type, Backend.CUDA if cuda else Backend.CPU)
        if cuda:  # compute capabilities, as kernels reads them
            self.assertTrue(meta.backend.archs)
            for arch in meta.backend.archs:
                self.assertRegex(arch, r"^\d+\.\d+a?(\+PTX)?$")
        else:
            self.assertIsNone(meta.backend.archs)
        self.assertEqual(meta.python_depends, [])
        self.assertEqual(meta.kernel_depends, [])
        folder = variant_dir(name, variant)
        files = sorted(p.name for p in folder.iterdir() if p.name != "__pycache__")
        self.assertEqual(files, sorted(["__init__.py", "_ops.py", "layers.py",
                                        f"{meta.id}.abi3.so", "metadata.json"]))
        ops_py = (folder / "_ops.py").read_text()
        self.assertIn(f"from . import {meta.id}\n", ops_py)
        self.assertIn(f"ops = torch.ops.{meta.id}\n", ops_py)

    def test_digest(self):
        from kernels.verify import VerificationResult, verify_variant

        for name in NAMES:
            for variant in VARIANTS:
                with self.subTest(package=name, variant=variant):
                    folder = variant_dir(name, variant)
                    meta = metadata(name, variant)
                    self.assertIsNotNone(meta.digest)
                    self.assertEqual(meta.digest.algorithm, DigestAlgorithm.SHA256)
                    actual = Digest.hash_variant(DigestAlgorithm.SHA256, folder)
                    self.assertEqual(actual.files, meta.digest.files)
                    meta.digest.validate(actual)  # raises DigestValidationError if it differs
                    # kernels.verify checks the signature first: these builds are not signed.
                    self.assertIsInstance(verify_variant(folder),
                                          VerificationResult.SignatureBundleMissing)

    def test_digest_sees_a_change(self):
        with tempfile.TemporaryDirectory() as tmp:
            copy_dir = Path(tmp) / VARIANT
            shutil.copytree(variant_dir("activation"), copy_dir)
            with open(copy_dir / "layers.py", "a") as f:
                f.write("# changed\n")
            (copy_dir / "extra.py").write_text("")
            meta = Metadata.read_from_file(copy_dir / "metadata.json")
            with self.assertRaises(DigestValidationError) as caught:
                meta.digest.validate(Digest.hash_variant(DigestAlgorithm.SHA256, copy_dir))
            violations = caught.exception.violations
            self.assertEqual([v.path for v in violations
                              if isinstance(v, DigestViolation.HashMismatch)], ["layers.py"])
            self.assertEqual([v.path for v in violations
                              if isinstance(v, DigestViolation.UnknownFile)], ["extra.py"])

    def test_get_local_kernel(self):
        for name in NAMES:
            with self.subTest(package=name):
                module = load(name)
                meta = metadata(name)
                self.assertEqual(module.__name__, meta.id)
                self.assertEqual(Path(module.__file__).parent, variant_dir(name))
                self.assertTrue(hasattr(module, "layers"))
                self.assertIs(module.ops, getattr(torch.ops, meta.id))
                self.assertEqual(module.add_op_namespace_prefix("x"), f"{meta.id}::x")
                self.assertTrue(module.cpu_target())  # the Highway target, "AVX2", ...
                loaded = {k.module.__name__ for k in kernels.get_loaded_kernels()}
                self.assertIn(meta.id, loaded)

    @unittest.skipUnless(CUDA_VARIANT, "no cuda variant was built")
    def test_get_local_kernel_cuda_variant(self):
        for name in NAMES:
            with self.subTest(package=name):
                module = load(name, backend="cuda")
                meta = metadata(name, CUDA_VARIANT)
                self.assertEqual(module.__name__, meta.id)
                self.assertIsNot(module, load(name))  # its own op namespace, beside the cpu one
                op = next(n for n in ("rms_norm", "silu_and_mul", "rotary_embedding")
                          if hasattr(module, n))
                qualified = module.add_op_namespace_prefix(op)
                for key in ("CPU", "CUDA"):
                    self.assertTrue(torch._C._dispatch_has_kernel_for_dispatch_key(qualified,
                                                                                   key), key)
                if torch_cuda_takes(CUDA_VARIANT):  # kernels' default backend: this one
                    self.assertIs(kernels.get_local_kernel(ROOT / name), module)

    def test_get_kernel_through_local_kernels(self):
        saved = os.environ.get("LOCAL_KERNELS")
        os.environ["LOCAL_KERNELS"] = ":".join(f"backplane/{n}={ROOT / n}" for n in NAMES)
        try:
            for name in NAMES:
                with self.subTest(package=name):
                    module = kernels.get_kernel(f"backplane/{name}", version=1, backend="cpu")
                    self.assertIs(module, load(name))
                    self.assertTrue(kernels.has_kernel(f"backplane/{name}", version=1,
                                                       backend="cpu"))
        finally:
            if saved is None:
                os.environ.pop("LOCAL_KERNELS", None)
            else:
                os.environ["LOCAL_KERNELS"] = saved

    def test_variant_resolution(self):
        from kernels.variants import VariantAccepted, get_variants_local, resolve_variant

        for name in NAMES:
            with self.subTest(package=name):
                variants = get_variants_local(ROOT / name / "build")
                chosen, trace = resolve_variant(variants, backend="cpu")
                self.assertIsNotNone(chosen, trace)
                self.assertEqual(chosen.variant_str, VARIANT)
                if torch.version.cuda is not None:
                    # A CUDA torch makes cuda kernels' default backend: the cpu variant is
                    # then rejected unless backend="cpu" (why LocalLayerRepository, which
                    # passes none, is given the variant folder below), and a cuda variant of
                    # the same CUDA major version is taken.
                    chosen, trace = resolve_variant(variants, backend=None)
                    accepted = [d.variant.variant_str for d in trace
                                if isinstance(d, VariantAccepted)]
                    if torch_cuda_takes(CUDA_VARIANT):
                        self.assertEqual(chosen.variant_str, CUDA_VARIANT)
                        self.assertEqual(accepted, [CUDA_VARIANT])
                    else:
                        self.assertIsNone(chosen)
                        self.assertEqual(accepted, [])


# ---- 3. the ops against their formulas -----------------------------------------------------

def gated_terms(x):
    """|a| |b| per output: what float32 noise in act(a) * b scales with (1 + erf(a) cancels
    in the far left tail of gelu)."""
    x = x.double()
    d = x.shape[-1] // 2
    return x[..., :d].abs() * x[..., d:].abs()


def gated_reference(kind, x):
    x = x.double()
    d = x.shape[-1] // 2
    a, b = x[..., :d], x[..., d:]
    if kind == "silu":
        act = a / (1 + torch.exp(-a))
    elif kind == "gelu":
        act = a / 2 * (1 + torch.erf(a / 2**0.5))
    else:
        act = a / 2 * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (a + 0.044715 * a**3)))
    return act * b


def rms_norm_reference(x, weight, epsilon):
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + epsilon) * weight.double()


def rotary_reference(x, cos, sin, interleaved):
    """x [batch, heads, seq, head_dim]; cos, sin [seq, half] or [batch or 1, seq, half]: the
    rotated x and, per element, the magnitudes its value is computed from."""
    x = x.double()
    c = cos.double()
    s = sin.double()
    if c.dim() == 2:
        c, s = c[None], s[None]
    c, s = c[:, None], s[:, None]  # [batch or 1, 1, seq, half]
    half = cos.shape[-1]
    out = x.clone()
    terms = x.abs().clone()
    first = slice(0, 2 * half, 2) if interleaved else slice(0, half)
    second = slice(1, 2 * half, 2) if interleaved else slice(half, 2 * half)
    x1, x2 = x[..., first], x[..., second]
    out[..., first] = x1 * c - x2 * s
    out[..., second] = x2 * c + x1 * s
    terms[..., first] = (x1 * c).abs() + (x2 * s).abs()
    terms[..., second] = (x2 * c).abs() + (x1 * s).abs()
    return out, terms


class Ops(unittest.TestCase):
    """The cpu variant's ops on cpu tensors; the subclasses below run the same tests on the
    cuda variant, on cpu tensors (its CPU implementations) and on a GPU where one is seen.
    Tensors are made on torch's default device, set to `device` for each test."""

    backend = "cpu"
    device = "cpu"

    @classmethod
    def setUpClass(cls):
        cls.rmsnorm = load("rmsnorm", cls.backend)
        cls.activation = load("activation", cls.backend)
        cls.rotary = load("rotary", cls.backend)

    def setUp(self):
        torch.manual_seed(1234)
        torch.set_default_device(self.device)
        self.addCleanup(torch.set_default_device, "cpu")

    def test_gated_activations(self):
        ops = {"silu": self.activation.silu_and_mul, "gelu": self.activation.gelu_and_mul,
               "gelu_tanh": self.activation.gelu_tanh_and_mul}
        for dtype in DTYPES:
            for shape in ((7, 64), (3, 5, 96), (2, 3, 4, 1030), (1, 2)):
                for kind, op in ops.items():
                    with self.subTest(dtype=dtype, shape=shape, op=kind):
                        x = (3 * torch.randn(shape)).to(dtype)
                        out = torch.empty(shape[:-1] + (shape[-1] // 2,), dtype=dtype)
                        self.assertIs(op(out, x), out)
                        assert_close(self, out, gated_reference(kind, x), dtype, kind,
                                     terms=gated_terms(x))
            for kind, op in ops.items():
                with self.subTest(dtype=dtype, layout="strided", op=kind):
                    x = strided((4, 6, 128), dtype, scale=3)
                    out = strided((4, 6, 64), dtype)
                    op(out, x)
                    assert_close(self, out, gated_reference(kind, x), dtype, kind + " strided",
                                 terms=gated_terms(x))

    def test_rms_norm(self):
        for dtype in DTYPES:
            for shape in ((4, 64), (2, 3, 256), (5, 100), (1, 4096)):
                with self.subTest(dtype=dtype, shape=shape):
                    x = (2 * torch.randn(shape)).to(dtype)
                    weight = (1 + 0.5 * torch.randn(shape[-1])).to(dtype)
                    out = torch.empty(shape, dtype=dtype)
                    self.assertIs(self.rmsnorm.rms_norm(out, x, weight, 1e-6), out)
                    assert_close(self, out, rms_norm_reference(x, weight, 1e-6), dtype,
                                 "rms_norm")
            with self.subTest(dtype=dtype, layout="strided"):
                x = strided((3, 8, 192), dtype, scale=2)
                weight = (1 + 0.5 * torch.randn(192)).to(dtype)
                out = strided((3, 8, 192), dtype)
                self.rmsnorm.rms_norm(out, x, weight, 1e-5)
                assert_close(self, out, rms_norm_reference(x, weight, 1e-5), dtype,
                             "rms_norm strided")
            with self.subTest(dtype=dtype, layout="in place"):
                x = torch.randn(6, 128).to(dtype)
                weight = torch.rand(128).to(dtype)
                reference = rms_norm_reference(x, weight, 1e-6)
                self.rmsnorm.rms_norm(x, x, weight, 1e-6)
                assert_close(self, x, reference, dtype, "rms_norm in place")

    def test_fused_add_rms_norm(self):
        for dtype in DTYPES:
            for layout in ("contiguous", "strided"):
                with self.subTest(dtype=dtype, layout=layout):
                    make = strided if layout == "strided" else (
                        lambda shape, dt, scale=1.0: (scale * torch.randn(shape)).to(dt))
                    x = make((3, 5, 160), dtype, 2.0)
                    residual = make((3, 5, 160), dtype, 2.0)
                    weight = (1 + 0.5 * torch.randn(160)).to(dtype)
                    out = make((3, 5, 160), dtype)
                    added = residual.double() + x.double()
                    self.rmsnorm.fused_add_rms_norm(out, x, residual, weight, 1e-6)
                    assert_close(self, residual, added, dtype, "residual += input")
                    assert_close(self, out, rms_norm_reference(residual, weight, 1e-6), dtype,
                                 "fused_add_rms_norm")

    def test_rotary_embedding(self):
        batch, seq, head_dim = 2, 7, 64
        tables = {"[seq, half]": (seq,), "[batch, seq, half]": (batch, seq),
                  "[1, seq, half]": (1, seq)}
        for dtype in DTYPES:
            for table_name, lead in tables.items():
                for interleaved in (False, True):
                    for half in (head_dim // 2, 8):  # rotary_dim = head_dim, and a part of it
                        for table_dtype in {dtype, torch.float32}:
                            with self.subTest(dtype=dtype, table=table_name, half=half,
                                              interleaved=interleaved, table_dtype=table_dtype):
                                angle = torch.rand(lead + (half,)) * 6.3
                                cos = angle.cos().to(table_dtype)
                                sin = angle.sin().to(table_dtype)
                                q = torch.randn(batch, 4, seq, head_dim).to(dtype)
                                k = torch.randn(batch, 2, seq, head_dim).to(dtype)
                                q_ref, q_terms = rotary_reference(q, cos, sin, interleaved)
                                k_ref, k_terms = rotary_reference(k, cos, sin, interleaved)
                                self.rotary.rotary_embedding(q, k, cos, sin, interleaved)
                                assert_close(self, q, q_ref, dtype, "query", terms=q_terms)
                                assert_close(self, k, k_ref, dtype, "key", terms=k_terms)
            with self.subTest(dtype=dtype, layout="[batch, seq, heads, head_dim] transposed"):
                angle = torch.rand(batch, seq, head_dim // 2) * 6.3
                cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)
                q = torch.randn(batch, seq, 4, head_dim).to(dtype).transpose(1, 2)
                k = torch.randn(batch, seq, 2, head_dim).to(dtype).transpose(1, 2)
                q_ref, q_terms = rotary_reference(q, cos, sin, False)
                k_ref, k_terms = rotary_reference(k, cos, sin, False)
                self.rotary.rotary_embedding(q, k, cos, sin, False)
                assert_close(self, q, q_ref, dtype, "query transposed", terms=q_terms)
                assert_close(self, k, k_ref, dtype, "key transposed", terms=k_terms)

    def test_bad_arguments(self):
        f32 = torch.float32
        x = torch.randn(4, 64)
        a = self.activation
        r = self.rmsnorm
        q = torch.randn(1, 2, 3, 16)
        k = torch.randn(1, 2, 3, 16)
        cos = torch.randn(3, 8)
        cases = [
            (lambda: a.silu_and_mul(torch.empty(4, 32), x.double()),
             r"^silu_and_mul: input has dtype float64"),
            (lambda: a.silu_and_mul(torch.empty(4, 33), x), r"^silu_and_mul: output shape"),
            (lambda: a.gelu_and_mul(torch.empty(4, 32, dtype=torch.bfloat16), x),
             r"^gelu_and_mul: output has dtype bfloat16"),
            (lambda: a.gelu_tanh_and_mul(torch.empty(4, 32), torch.randn(4, 64).t()),
             r"^gelu_tanh_and_mul: input must be contiguous in its last dim"),
            (lambda: a.silu_and_mul(torch.empty(4, 32), torch.randn(4, 63)),
             r"^silu_and_mul: input's last dim must be even"),
            (lambda: a.silu_and_mul(torch.empty(2, dtype=torch.complex64), x),
             r"^silu_and_mul: out has dtype ComplexFloat"),
            (lambda: r.rms_norm(torch.empty(4, 64), x, torch.ones(32), 1e-6),
             r"^rms_norm: weight shape \[32\] must be \[hidden\] = \[64\]"),
            (lambda: r.rms_norm(torch.empty(4, 64), x, torch.ones(64, dtype=torch.half), 1e-6),
             r"^rms_norm: weight has dtype float16 but input has float32"),
            (lambda: r.rms_norm(torch.empty(4, 64), x, torch.ones(64), -1.0),
             r"^rms_norm: epsilon must be finite and >= 0"),
            (lambda: r.fused_add_rms_norm(torch.empty(4, 64), x, torch.empty(4, 32),
                                          torch.ones(64), 1e-6),
             r"^fused_add_rms_norm: rms_norm: residual shape \[4, 32\] must equal input's"),
            (lambda: r.fused_add_rms_norm(torch.empty(4, 64), x, torch.empty(4, 64, dtype=f32)
                                          .to(torch.int32), torch.ones(64), 1e-6),
             r"^fused_add_rms_norm: rms_norm: residual has dtype int32"),
            (lambda: self.rotary.rotary_embedding(q, k, torch.randn(4, 8), torch.randn(4, 8)),
             r"^rotary_embedding: cos shape \[4, 8\] must be \[seq, rotary_dim / 2\]"),
            (lambda: self.rotary.rotary_embedding(q[0], k, cos, cos.clone()),
             r"^rotary_embedding: query must have 4 dims"),
            (lambda: self.rotary.rotary_embedding(q.to(torch.int32), k, cos, cos.clone()),
             r"^rotary_embedding: query has dtype int32"),
            (lambda: self.rotary.rotary_embedding(q, k.half(), cos, cos.clone()),
             r"^rotary_embedding: key has dtype float16 but query has float32"),
            (lambda: self.rotary.rotary_embedding(q, k, cos, torch.randn(3, 4)),
             r"^rotary_embedding: sin shape \[3, 4\] must equal cos's \[3, 8\]"),
            (lambda: self.rotary.rotary_embedding(q, q, cos, cos.clone()),
             r"^rotary_embedding: query and key overlap"),
        ]
        for call, pattern in cases:
            with self.subTest(pattern=pattern):
                with self.assertRaisesRegex(RuntimeError, pattern):
                    call()


@unittest.skipUnless(CUDA_VARIANT, "no cuda variant was built")
class OpsCudaVariantOnCpu(Ops):
    backend = "cuda"


@unittest.skipUnless(cuda_visible(), "no cuda variant, or no GPU visible")
class OpsCuda(Ops):
    backend = "cuda"
    device = "cuda"

    def test_mixed_devices(self):
        x = torch.randn(4, 64)
        with self.assertRaisesRegex(RuntimeError, r"^silu_and_mul: out is on cpu"):
            self.activation.silu_and_mul(torch.empty(4, 32, device="cpu"), x)


# ---- 4. the layers, and kernelize ----------------------------------------------------------

def restore_forwards(*models):
    """kernelize binds forwards per instance (and the rotary function is one shared instance):
    drop what it bound so that later tests see the original layers."""
    for model in models:
        for module in model.modules():
            module.__dict__.pop("forward", None)
            for func in getattr(module, "_kernel_funcs", {}).values():
                func.__dict__.pop("forward", None)


def op_counts(run):
    """{"namespace::op": calls} of every op `run` dispatches (a TorchDispatchMode sees each
    call on its way to the CPU kernel; the profiler would do, with more noise)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    counts = {}

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            counts[name] = counts.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    with Count():
        run()
    return counts


class Layers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from transformers.models.llama import modeling_llama

        cls.llama = modeling_llama
        cls.rmsnorm = load("rmsnorm")
        cls.activation = load("activation")
        cls.rotary = load("rotary")

    def setUp(self):
        torch.manual_seed(99)

    def test_rms_norm_layer_dtypes(self):
        original = self.llama.LlamaRMSNorm.forward
        ours = self.rmsnorm.layers.RMSNorm.forward
        cases = [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
                 (torch.float16, torch.float16), (torch.float32, torch.bfloat16),
                 (torch.float32, torch.float16), (torch.bfloat16, torch.float32),
                 (torch.float64, torch.float64)]
        for weight_dtype, input_dtype in cases:
            with self.subTest(weight=weight_dtype, input=input_dtype):
                norm = self.llama.LlamaRMSNorm(96, eps=1e-5)
                with torch.no_grad():
                    norm.weight.copy_(1 + 0.5 * torch.randn(96))
                norm.to(weight_dtype)
                x = strided((3, 4, 96), input_dtype, scale=3)
                want = original(norm, x)
                got = ours(norm, x)
                self.assertEqual(got.dtype, want.dtype)
                if input_dtype == torch.float64:  # not the kernel's: the original way
                    self.assertTrue(torch.equal(got, want))
                else:
                    self._close_in(got, want, input_dtype)

    def _close_in(self, got, want, input_dtype):
        """got and want (the output dtype) within two ulps of the input dtype (where the
        rounding happens) at the output's magnitude."""
        g, w = got.double(), want.double()
        tolerance = 2 * ulp(torch.maximum(g.abs(), w.abs()), input_dtype)
        if input_dtype == torch.float32:
            tolerance = 1e-5 * torch.maximum(g.abs(), w.abs())
        self.assertTrue(bool(((g - w).abs() <= tolerance).all()),
                        f"max difference {(g - w).abs().max().item():g}")

    def test_rotary_layer(self):
        original = type(self.llama.apply_rotary_pos_emb).forward  # the function's own module
        layer = self.rotary.layers.apply_rotary_transformers()
        batch, seq, head_dim = 2, 9, 32
        for dtype, table_dtype in ((torch.float32, torch.float32),
                                   (torch.bfloat16, torch.bfloat16),
                                   (torch.float16, torch.float16),
                                   (torch.bfloat16, torch.float32)):
            for unsqueeze_dim in (1, 2):
                with self.subTest(dtype=dtype, table=table_dtype, unsqueeze_dim=unsqueeze_dim):
                    freqs = torch.rand(batch, seq, head_dim // 2) * 6
                    emb = torch.cat((freqs, freqs), dim=-1)
                    cos, sin = emb.cos().to(table_dtype), emb.sin().to(table_dtype)
                    heads = (4, 2)
                    if unsqueeze_dim == 1:
                        q = torch.randn(batch, seq, heads[0], head_dim).to(dtype).transpose(1, 2)
                        k = torch.randn(batch, seq, heads[1], head_dim).to(dtype).transpose(1, 2)
                    else:
                        q = torch.randn(batch, seq, heads[0], head_dim).to(dtype)
                        k = torch.randn(batch, seq, heads[1], head_dim).to(dtype)
                    q_before, k_before = q.clone(), k.clone()
                    want_q, want_k = original(self.llama.apply_rotary_pos_emb, q, k, cos, sin,
                                              unsqueeze_dim)
                    got_q, got_k = layer(q, k, cos, sin, unsqueeze_dim)
                    self.assertTrue(torch.equal(q, q_before) and torch.equal(k, k_before),
                                    "q and k must be left as they are")
                    self.assertEqual(got_q.dtype, want_q.dtype)
                    # The original rounds each product and the sum in low precision.
                    self._close_in_terms(got_q, want_q, q, cos, sin, unsqueeze_dim, dtype)
                    self._close_in_terms(got_k, want_k, k, cos, sin, unsqueeze_dim, dtype)

    def _close_in_terms(self, got, want, x, cos, sin, unsqueeze_dim, dtype):
        terms = (x.double().abs() * cos.double().unsqueeze(unsqueeze_dim).abs()
                 + x.double().abs() * sin.double().unsqueeze(unsqueeze_dim).abs())
        g, w = got.double(), want.double()
        # Three roundings in the original, one here: two ulps of the terms' magnitude.
        unit = 2.0**-MANTISSA_BITS[dtype] if dtype != torch.float32 else 2.0**-20
        tolerance = 2 * unit * (terms + terms.amax())
        self.assertTrue(bool(((g - w).abs() <= tolerance).all()),
                        f"max difference {(g - w).abs().max().item():g}")

    def test_activation_layers_through_kernelize(self):
        import torch.nn.functional as F
        from torch import nn

        @use_kernel_forward_from_hub("SiluAndMul")
        class SiluAndMul(nn.Module):
            def forward(self, x):
                d = x.shape[-1] // 2
                return F.silu(x[..., :d]) * x[..., d:]

        @use_kernel_forward_from_hub("GeluAndMul")
        class GeluAndMul(nn.Module):
            def forward(self, x):
                d = x.shape[-1] // 2
                return F.gelu(x[..., :d]) * x[..., d:]

        @use_kernel_forward_from_hub("GeluTanhAndMul")
        class GeluTanhAndMul(nn.Module):
            def forward(self, x):
                d = x.shape[-1] // 2
                return F.gelu(x[..., :d], approximate="tanh") * x[..., d:]

        classes = {"SiluAndMul": SiluAndMul, "GeluAndMul": GeluAndMul,
                   "GeluTanhAndMul": GeluTanhAndMul}
        kinds = {"SiluAndMul": "silu", "GeluAndMul": "gelu", "GeluTanhAndMul": "gelu_tanh"}
        folder = variant_dir("activation")
        # Through a local folder, and through a Hub repo id that LOCAL_KERNELS points here
        # (LayerRepository gives get_kernel no backend: the variant folder itself).
        saved = os.environ.get("LOCAL_KERNELS")
        os.environ["LOCAL_KERNELS"] = f"backplane/activation={folder}"
        try:
            for how in ("LocalLayerRepository", "LayerRepository + LOCAL_KERNELS"):
                def repo(layer_name):
                    if how == "LocalLayerRepository":
                        return LocalLayerRepository(repo_path=folder, layer_name=layer_name)
                    return LayerRepository("backplane/activation", layer_name=layer_name,
                                           revision="main")

                mapping = {n: {"cpu": {Mode.INFERENCE: repo(n)}} for n in classes}
                model = nn.ModuleDict({n: c() for n, c in classes.items()})
                x = (2 * torch.randn(3, 5, 128)).to(torch.bfloat16)
                with use_kernel_mapping(mapping, inherit_mapping=False):
                    kernelize(model, mode=Mode.INFERENCE, device="cpu",
                              use_fallback=KernelizeFallback.NONE)
                for layer_name, module in model.items():
                    with self.subTest(how=how, layer=layer_name):
                        ours = getattr(self.activation.layers, layer_name)
                        self.assertIs(module.forward.__func__, ours.forward)
                        counts = op_counts(lambda: module(x))
                        op = kinds[layer_name] + "_and_mul"
                        self.assertEqual(counts.get(f"{metadata('activation').id}::{op}"), 1)
                        assert_close(self, module(x), gated_reference(kinds[layer_name], x),
                                     torch.bfloat16, layer_name, terms=gated_terms(x))
        finally:
            if saved is None:
                os.environ.pop("LOCAL_KERNELS", None)
            else:
                os.environ["LOCAL_KERNELS"] = saved


class LlamaKernelize(unittest.TestCase):
    def test_cpu_variant_folders(self):
        """LocalLayerRepository given the cpu variant folders (it passes kernels no backend)."""
        self.check_llama("cpu", {n: variant_dir(n) for n in NAMES}, VARIANT)

    @unittest.skipUnless(torch_cuda_takes(CUDA_VARIANT),
                         "no cuda variant that kernels' default backend takes")
    def test_package_roots_default_backend(self):
        """LocalLayerRepository given the package roots: kernels' default backend (cuda, with
        a CUDA torch) picks the cuda variant, whose CPU implementations run on cpu."""
        self.check_llama("cpu", {n: ROOT / n for n in NAMES}, CUDA_VARIANT)

    @unittest.skipUnless(cuda_visible(), "no cuda variant, or no GPU visible")
    def test_on_gpu(self):
        self.check_llama("cuda", {n: ROOT / n for n in NAMES}, CUDA_VARIANT)

    def check_llama(self, device, repo_paths, variant):
        from transformers import LlamaConfig, LlamaForCausalLM
        from transformers.activations import SiLUActivation
        from transformers.models.llama import modeling_llama

        self.assertEqual(modeling_llama.LlamaRMSNorm.kernel_layer_name, "RMSNorm")
        self.assertEqual(modeling_llama.apply_rotary_pos_emb.kernel_layer_name, "rotary_pos_emb")
        self.assertEqual(SiLUActivation.kernel_layer_name, "SiLU")

        config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                             max_position_embeddings=64, rms_norm_eps=1e-6,
                             initializer_range=0.1, attn_implementation="eager")

        def build(dtype):
            """The same random model in `dtype`. Built, not deep-copied: a copy would get its
            own copy of the rotary function's module in _kernel_funcs, which kernelize binds,
            while LlamaAttention.forward calls the module-level one."""
            torch.manual_seed(0)
            m = LlamaForCausalLM(config)
            with torch.no_grad():  # RMSNorm weights other than ones
                for module in m.modules():
                    if isinstance(module, modeling_llama.LlamaRMSNorm):
                        module.weight.uniform_(0.5, 1.5)
            return m.to(device=device, dtype=dtype).eval()

        models = {torch.float32: build(torch.float32), torch.bfloat16: build(torch.bfloat16)}
        exact = build(torch.float64)
        torch.manual_seed(1)
        ids = torch.randint(0, config.vocab_size, (2, 16)).to(device)

        def logits(m):
            with torch.inference_mode():
                return m(input_ids=ids).logits

        truth = logits(exact).double()
        plain = {dtype: logits(m) for dtype, m in models.items()}

        rmsnorm_id = metadata("rmsnorm", variant).id
        rotary_id = metadata("rotary", variant).id
        mapping = {
            "RMSNorm": {device: {Mode.INFERENCE: LocalLayerRepository(
                repo_path=repo_paths["rmsnorm"], layer_name="RMSNorm")}},
            "rotary_pos_emb": {device: {Mode.INFERENCE: LocalLayerRepository(
                repo_path=repo_paths["rotary"], layer_name="apply_rotary_transformers")}},
        }
        quiet = logging.getLogger("kernels.layer.layer")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # "No kernel mapping found for layer `SiLU`", on purpose
        try:
            with use_kernel_mapping(mapping, inherit_mapping=False):
                for m in models.values():
                    # Fall back only where a layer has no mapping (SiLU).
                    kernelize(m, mode=Mode.INFERENCE, device=device,
                              use_fallback=KernelizeFallback.NO_LAYER)
            backend = "cuda" if variant == CUDA_VARIANT else "cpu"
            rms_layer = load("rmsnorm", backend).layers.RMSNorm
            rotary_layer = load("rotary", backend).layers.apply_rotary_transformers
            for m in models.values():
                norms = [x for x in m.modules() if isinstance(x, modeling_llama.LlamaRMSNorm)]
                self.assertEqual(len(norms), 2 * config.num_hidden_layers + 1)
                for norm in norms:
                    self.assertIs(norm.forward.__func__, rms_layer.forward)
                for layer in m.model.layers:
                    # use_kernelized_func files the function under its layer name (a module
                    # has no __name__).
                    func = layer.self_attn._kernel_funcs["rotary_pos_emb"]
                    self.assertIs(func, modeling_llama.apply_rotary_pos_emb)
                    self.assertIs(func.forward.__func__, rotary_layer.forward)
                    self.assertIs(layer.mlp.act_fn.forward.__func__, SiLUActivation.forward)

            for dtype, m in models.items():
                with self.subTest(dtype=dtype):
                    counts = op_counts(lambda: logits(m))
                    self.assertEqual(counts.get(f"{rmsnorm_id}::rms_norm"),
                                     2 * config.num_hidden_layers + 1, counts)
                    self.assertEqual(counts.get(f"{rotary_id}::rotary_embedding"),
                                     config.num_hidden_layers)
                    got = logits(m)
                    self.assertEqual(got.dtype, dtype)
                    scale = plain[dtype].double().abs().max().item()
                    difference = (got.double() - plain[dtype].double()).abs().max().item()
                    error = (got.double() - truth).abs().max().item()
                    plain_error = (plain[dtype].double() - truth).abs().max().item()
                    print(f"\n  tiny Llama {device} {dtype} ({variant}): max |logit| {scale:.4g}, "
                          f"kernelized vs plain {difference:.3g}, vs float64: kernelized "
                          f"{error:.3g}, plain {plain_error:.3g}", file=sys.stderr)
                    if dtype == torch.float32:
                        self.assertLessEqual(difference, 1e-4 * scale)
                    else:
                        self.assertLessEqual(error, 2 * plain_error + 1e-3 * scale)
        finally:
            quiet.setLevel(level)
            restore_forwards(*models.values())
        # The original forwards are back.
        self.assertTrue(torch.equal(logits(models[torch.float32]), plain[torch.float32]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
