#!/usr/bin/env python3
"""Build-variant resolution of the `kernels` library, the oracle of variant_differential_test
(run by ctest: hub_variant_oracle).

For every system of CASES, the library's own functions decide over the whole variant pool:
kernels.variants.parse_variant (a name it cannot parse is "parse"), and
_resolve_variant_for_system, its pure resolver that takes the system as arguments (what
resolve_variants calls after reading torch, platform and tvm-ffi). For each variant the output
holds whether it is accepted and, when refused, the rule its reason names. Preference: for each
pair of accepted variants, the library resolves [a, b] and [b, a]; when both put a first, a is
strictly preferred ("before": [a, b]); when the input order decides, the pair is a tie, which
the C++ side may order either way.

Usage: variant_oracle.py CASES OUT
"""

import json
import sys

from packaging.version import Version

import kernels
from kernels import variants as kv
from kernels.backends import parse_backend

# The library's reasons start with these words (variants.py, _check_variants).
RULES = [
    ("CPU (", "cpu"),
    ("OS (", "os"),
    ("Torch version (", "torch_version"),
    ("Torch CXX11 ABI (", "torch_cxx_abi"),
    ("Torch stable ABI version (", "stable_abi"),
    ("tvm-ffi version (", "tvm_ffi"),
    ("CUDA version (", "cuda_version"),
    ("backend (", "backend"),
    ("Metal kernels require", "metal_macos"),
]


def rule_of(reason):
    for prefix, rule in RULES:
        if reason.startswith(prefix):
            return rule
    raise SystemExit(f"variant_oracle: a reason this oracle does not know: {reason!r}")


def version(text):
    return None if text is None else Version(text)


def resolve(variants, system):
    accepted, trace = kv._resolve_variant_for_system(
        variants=variants,
        selected_backend=parse_backend(system["backend"]),
        cpu=system["cpu"],
        os=system["os"],
        torch_version=version(system.get("torch")),
        torch_cxx11_abi=system.get("torch_cxx11_abi"),
        tvm_ffi_version=version(system.get("tvm_ffi")),
        macos_version=version(system.get("macos")),
    )
    return [v.variant_str for v in accepted], trace


def main():
    cases_path, out_path = sys.argv[1], sys.argv[2]
    with open(cases_path) as f:
        cases = json.load(f)
    parsed = {}
    unparsed = []
    for name in cases["variants"]:
        try:
            variant = kv.parse_variant(name)
        except ValueError:
            unparsed.append(name)
            continue
        # The library names a variant by variant_str; a name that does not round-trip would be
        # looked up under another folder name.
        assert variant.variant_str == name, (name, variant.variant_str)
        parsed[name] = variant

    systems = []
    for system in cases["systems"]:
        accepted, trace = resolve(list(parsed.values()), system)
        decisions = {name: {"accepted": False, "rule": "parse"} for name in unparsed}
        for d in trace:
            name = d.variant.variant_str
            if isinstance(d, kv.VariantAccepted):
                decisions[name] = {"accepted": True}
            else:
                decisions[name] = {"accepted": False, "rule": rule_of(d.reason), "reason": d.reason}
        before = []
        for i, a in enumerate(accepted):
            for b in accepted[i + 1 :]:
                ab, _ = resolve([parsed[a], parsed[b]], system)
                ba, _ = resolve([parsed[b], parsed[a]], system)
                if ab[0] == ba[0]:
                    first = ab[0]
                    before.append([first, b if first == a else a])
        systems.append(
            {"system": system, "accepted": accepted, "decisions": decisions, "before": before}
        )
    with open(out_path, "w") as f:
        json.dump({"kernels_version": kernels.__version__, "systems": systems}, f, indent=1)
    print(
        f"variant_oracle: kernels {kernels.__version__}, {len(cases['variants'])} variants "
        f"({len(unparsed)} it cannot parse) x {len(systems)} systems"
    )


if __name__ == "__main__":
    main()
