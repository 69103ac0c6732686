#!/usr/bin/env python3
"""Writes the architecture descriptors of core/src/model/architectures/ from transformers itself.

For each causal-LM architecture of the pinned transformers (and T5), the model is built on the
meta device from probe configs: the config class's defaults (layers cut to a few), then one probe per
field with that field changed (sizes doubled, flags flipped, per-layer lists rotated). What the
probes show is turned into data that backplane's C++ evaluates without Python:
  - every integer a tensor shape, a layer count or a hyperparameter holds, as the smallest
    expression over the config's fields (`num_attention_heads * head_dim`) that gives it in
    every probe; none or two equally small ones: the architecture is not written;
  - every module, tensor, tied pair and tp-plan entry that comes and goes, with the condition
    over fields (and the layer index `i` inside repeated blocks, `j` that of the block around)
    that says when;
  - the numbered children of a container (decoder layers) as a repeat with per-layer variants;
  - the fields a config class fills in when config.json leaves them null (head_dim from
    hidden_size // num_attention_heads, layer_types from a period), as expressions too;
  - what __post_init__ sets beside the fields (T5's dense_act_fn and is_gated_act from
    feed_forward_proj), translated from its source (post_init_fills.py);
  - a module whose class follows an activation name (hidden_act) as that name, built as
    transformers' ACT2CLS builds it;
  - a composite config's sub-configs (Gemma 3's text_config, vision_config) as fields named
    text_config__hidden_size.
Each descriptor is checked here before it is written: evaluated on every probe, it must give the
tree tools/export-module-tree writes for that probe, byte for byte; then on configs with several
fields changed at once (each change that brings tensors of its own crossed with each size, and
random combinations): the ones it misses become probes and it is synthesized again, and a
held-out set of random combinations must then all be right. The C++ side is checked by the
differential test (architecture_oracle.py, tests/planner/differential_test.cpp) on configs no
probe used.

Expressions are Python syntax (a subset: names, integers, strings, + - * // %, comparisons,
in, not in, is None, and/or/not, x[i], rope(x)); core/src/model/descriptor_expression.cpp
evaluates them with Python's meaning.

Usage: architecture_descriptors.py [--time-limit SECONDS] OUT_DIR [MODEL_TYPE...]
(default: the 196 causal LMs and T5, architecture_oracle.model_types())
--time-limit: the search budget per architecture (default 180 s: a full regeneration skips the
architectures whose search does not converge); 0 means none, for the currency check, which
regenerates committed descriptors and must not depend on how busy the machine is.
Writes OUT_DIR/<model_type>.json for each architecture that passes, and prints a report line
per architecture ("ok" or why not) and the count.
"""

import dataclasses
import functools
import itertools
import json
import logging
import os
import random
import re
import sys
import time
import warnings
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
FORMAT = "backplane-architecture"
VERSION = 1
TIME_LIMIT = 180  # seconds of search and checks per architecture
LAYERS = 16  # probe depth: per-layer patterns of period up to 16 show (Jamba: every 8th from the 4th)

import torch  # noqa: E402
from transformers.activations import ACT2CLS, ACT2FN  # noqa: E402
from transformers import CONFIG_MAPPING, PreTrainedConfig  # noqa: E402


SEP = "__"  # text_config__hidden_size: a field of a composite config's sub-config, flattened


def is_layer_key(name):
    """A layer count (num_hidden_layers), of the config or of one of its sub-configs."""
    return name.split(SEP)[-1] in oracle.LAYER_KEYS


def sibling(name, key):
    """`key` beside `name`: in the same sub-config (text_config__layer_types beside
    text_config__num_hidden_layers), or at the top."""
    return name.rsplit(SEP, 1)[0] + SEP + key if SEP in name else key


class Unsupported(Exception):
    pass


class SearchTimeout(BaseException):
    """Past TIME_LIMIT: not an Exception, so that no probe's `except Exception` swallows it."""


sys.path.insert(0, HERE)
import architecture_oracle as oracle  # noqa: E402  (its tool loading and edge configs)
import config_checks  # noqa: E402  (the config class's validators as checks)
import post_init_fills  # noqa: E402  (what __post_init__ fills in beside the fields)

TOOLMOD = oracle.load_tool()
BASE_FIELDS = {f.name for f in dataclasses.fields(PreTrainedConfig)}
# Base-class fields that do shape models, declared again by most classes.
KEPT_BASE = {"tie_word_embeddings", "pad_token_id", "dtype"}


# ---------------------------------------------------------------- config fields and probes

def kind_of(annotation):
    """(kind, nullable) of a config field's annotation: int, bool, float (int or float), str,
    list, dict, or any (a union of several: eos_token_id is int | list[int])."""
    names = {int: "int", bool: "bool", float: "float", str: "str", list: "list", dict: "dict"}
    members = set()
    nullable = False
    for part in str(annotation).split("|"):
        part = part.strip()
        if part in ("None", "NoneType", "<class 'NoneType'>"):
            nullable = True
            continue
        kind = next((k for t, k in names.items() if part in (t.__name__, f"<class '{t.__name__}'>")
                     or part.startswith(t.__name__ + "[")), "any")
        members.add(kind)
    if annotation in names:
        members = {names[annotation]}
    if members == {"int", "float"}:
        return "float", nullable
    return (members.pop() if len(members) == 1 else "any"), nullable


def class_fields(config_class):
    fields = {}
    for f in dataclasses.fields(config_class):
        if f.name in BASE_FIELDS and f.name not in KEPT_BASE:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            continue
        kind, nullable = kind_of(f.type)
        fields[f.name] = {"default": default, "kind": kind, "nullable": nullable}
    return fields


def jsonable(value):
    try:
        json.dumps(value)
        return True
    except TypeError:
        return False


def base_probe(fields):
    raw = {name: spec["default"] for name, spec in fields.items() if jsonable(spec["default"])}
    raw.pop("dtype", None)
    for key in [k for k in raw if is_layer_key(k)]:
        if isinstance(raw.get(key), int) and not isinstance(raw[key], bool) and raw[key] > LAYERS:
            raw[key] = LAYERS
    for key, value in list(raw.items()):
        if isinstance(value, list) and len(value) > LAYERS and all(isinstance(v, (str, int)) for v in value):
            raw[key] = value[:LAYERS]
    return raw


def variations(name, value, spec):
    """Values to try for one field in its own probe, best first."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        if value == 0:
            return [1, 2]
        # A multiple, then a value few sizes divide (4096 + 1365): a // b * c and a * c // b,
        # equal on multiples, come apart.
        return ([value * 2, value + max(1, value // 3), value + 1, value * 3, value - 1]
                if value > 0 else [value - 1])
    if value is None and spec["kind"] == "int":
        return [24, 48, 6, 2]  # and a count of a few (Falcon's num_ln_in_parallel_attn)
    if value is None and spec["kind"] == "bool":
        return [True, False]
    if value is None and spec["kind"] == "list":
        return [[0], [1, 2]]
    if isinstance(value, list) and value and all(isinstance(v, (str, int)) for v in value):
        if all(isinstance(v, str) for v in value):
            seen = sorted(set(value))
            if len(seen) > 1:
                return [value[1:] + value[:1], list(reversed(value))]
        elif all(isinstance(v, int) for v in value):
            return [[v + 1 for v in value], value[:-1] or [0]]
    if isinstance(value, list) and not value:
        return [[0], [1, 2]]
    if isinstance(value, str) and value in ACT2CLS:
        # Another activation, of a class no other name has: the module it builds follows.
        return [name for name in ("quick_gelu", "relu2", "laplace") if name != value][:2]
    return []


class Builder:
    def __init__(self, model_type):
        self.model_type = model_type
        self.config_class = CONFIG_MAPPING[model_type]
        self.task, self.auto = oracle.auto_class(model_type)
        self.fields = class_fields(self.config_class)
        self.extra = set()
        self.private = {}  # kwarg field -> the private attribute __post_init__ keeps it in
        self.fills = {}  # field __post_init__ fills in -> its derived rule (post_init_fills)
        # A composite config (Gemma 3: text_config, vision_config): each sub-config's fields
        # join under its name, with the defaults the composite gives them.
        self.subs = {}
        for sub in getattr(self.config_class, "sub_configs", None) or {}:
            try:
                value = getattr(self.config_class(), sub, None)
            except Exception as e:
                raise Unsupported(f"composite config: the defaults do not build ({e})"[:160])
            if not isinstance(value, PreTrainedConfig) or getattr(type(value), "sub_configs", None):
                raise Unsupported(f"composite config ({sub} has no default, or has sub-configs)")
            self.subs[sub] = type(value)
            self.fields.pop(sub, None)
            for name, spec in class_fields(type(value)).items():
                default = getattr(value, name, spec["default"])
                self.fields[sub + SEP + name] = dict(spec, default=default if jsonable(default)
                                                     else spec["default"])

    def aliases(self):
        """attribute_map of the config and of each sub-config, flattened."""
        out = dict(getattr(self.config_class, "attribute_map", {}) or {})
        for sub, sub_class in self.subs.items():
            for source, target in (getattr(sub_class, "attribute_map", {}) or {}).items():
                out[sub + SEP + source] = sub + SEP + target
        return out

    def nested(self, raw):
        """A flat probe as config.json nests it."""
        out = {k: v for k, v in raw.items() if SEP not in k}
        for sub in self.subs:
            out[sub] = {k[len(sub) + len(SEP):]: v for k, v in raw.items() if k.startswith(sub + SEP)}
        return out

    def read(self, config, name):
        """The resolved value of (flattened) field `name` of a built config."""
        if SEP in name:
            sub, name = name.split(SEP, 1)
            return getattr(getattr(config, sub), name)
        if name in self.private:
            return getattr(config, self.private[name])
        return getattr(config, name, None) if name in self.extra else getattr(config, name)

    def build(self, raw, dtype=torch.float32):
        config = self.config_class.from_dict(dict(self.nested(raw), model_type=self.model_type))
        with torch.device("meta"):
            model = self.auto.from_config(config, dtype=dtype)
        tree = TOOLMOD.describe(model, config, self.task, "probe")
        resolved = {}
        for name in self.fields:
            try:
                value = self.read(config, name)
            except Exception:
                continue
            if jsonable(value):
                resolved[name] = value
        return tree, resolved, config

    def probe_into(self, out, raw):
        """Appends (raw, tree, resolved) of config `raw` to `out`: True, or False where
        transformers refuses it (such a config is not a case)."""
        try:
            tree, resolved, _ = self.build(raw)
        except Exception:
            return False
        out.append((raw, tree, resolved))
        return True

    def find_extras(self, base):
        """Attributes the model reads that are no field of the class: set by __post_init__
        (Mamba's intermediate_size = expand * hidden_size, which config.json may also give) or
        read with a fallback (getattr(config, "head_dim", ...)). They join the fields as
        `int | None`, absent meaning None."""
        _, _, config = self.build(base)
        aliases = getattr(self.config_class, "attribute_map", {}) or {}
        mapped = set(aliases) | set(aliases.values())  # a field under another name
        extra = [k for k, v in vars(config).items()
                 if k not in self.fields and k not in BASE_FIELDS and not k.startswith("_")
                 and k not in mapped and isinstance(v, int) and not isinstance(v, bool)]
        if "head_dim" not in self.fields and "head_dim" not in extra and "head_dim" not in mapped:
            base_tree, _, _ = self.build(base)
            try:
                tree, _, _ = self.build(dict(base, head_dim=24))
                if tree["parameters"] != base_tree["parameters"]:
                    extra.append("head_dim")
            except Exception:
                pass
        for name in extra:
            self.fields[name] = {"default": None, "kind": "int", "nullable": True}
        self.extra = set(extra)
        # Names and flags __post_init__ fills in from fields (T5's dense_act_fn and
        # is_gated_act from feed_forward_proj), where its source says how: fields whose rule
        # is that code; config.json may give them (null it may not: the model reads a value).
        kinded = {k: ("bool" if isinstance(v, bool) else "str") for k, v in vars(config).items()
                  if isinstance(v, (bool, str)) and k not in self.fields and k not in BASE_FIELDS
                  and not k.startswith("_") and k not in mapped}
        self.fills = post_init_fills.post_init_fills(self.config_class, self.fields, aliases, kinded)
        for name, rule in self.fills.items():
            self.fields[name] = {"default": None, "kind": kinded[name],
                                 "nullable": bool(rule.get("always"))}
        self.extra |= set(self.fills)
        # Keys __post_init__ reads from its kwargs into a private attribute (Gemma 3's
        # sliding_window_pattern, kept as _sliding_window_pattern): fields with that default.
        for private, value in vars(config).items():
            public = private[1:]
            if not private.startswith("_") or private.startswith("__") or public in self.fields \
                    or public in BASE_FIELDS or not isinstance(value, int) or isinstance(value, bool):
                continue
            try:
                _, _, moved = self.build(dict(base, **{public: value + 1}))
            except Exception:
                continue
            if getattr(moved, private, None) == value + 1:
                self.fields[public] = {"default": value, "kind": "int", "nullable": False}
                self.private[public] = private

    def probes(self):
        base = base_probe(self.fields)
        try:
            self.find_extras(base)
            tree, resolved, _ = self.build(base)
        except Exception as e:
            raise Unsupported(f"the class defaults do not build: {type(e).__name__}: {str(e)[:120]}")
        probes = [(base, tree, resolved)]
        compared = post_init_fills.compared_strings(self.config_class, self.fields)
        for name, spec in self.fields.items():
            if name not in base and spec["default"] is not None:
                continue
            value = base.get(name)
            # An extra is given as config.json would give it: its value, changed.
            candidates = variations(name, resolved[name], spec) if name in self.extra and \
                isinstance(resolved.get(name), (int, str)) else variations(name, value, spec)
            # And the strings __post_init__ compares it with: the branches they open.
            candidates += [c for c in compared.get(name, []) if c != value and c not in candidates]
            built = 0
            for candidate in candidates:
                if not self.probe_into(probes, dict(base, **{name: candidate})):
                    continue
                built += 1
                # Integers get three: a multiple and two odd steps, so that a // b * c and
                # a * c // b, or floor and ceiling division, equal on multiples, come apart;
                # activation names two, so that the rest of an alternative shows its class.
                if built == (4 if value is None else 3) or not isinstance(candidate, (int, str)) \
                        or isinstance(candidate, bool):
                    break
            if is_layer_key(name) and isinstance(value, int) and not isinstance(value, bool):
                # Shallow too: what only some layer types bring (OLMo 3's full-attention rotary
                # buffers, every 4th layer) is absent from a 1- or 3-layer model.
                for shallow in (1, 3):
                    raw = dict(base, **{name: shallow})
                    for key in [sibling(name, k) for k in oracle.LIST_KEYS]:
                        if isinstance(raw.get(key), list):
                            raw[key] = raw[key][:shallow]
                    self.probe_into(probes, raw)
            if spec["nullable"] and isinstance(value, int) and not isinstance(value, bool):
                # `int | None` with a default: None too (DeepSeek's q_lora_rank None: q_proj
                # instead of the LoRA pair).
                self.probe_into(probes, dict(base, **{name: None}))
        # A size the config class refuses to change alone (Mamba-2 checks hidden_size * expand
        # against num_heads * head_dim): doubled with another size doubled too.
        ints = [n for n in self.fields if isinstance(base.get(n), int)
                and not isinstance(base.get(n), bool) and base[n] > 0 and not is_layer_key(n)]
        moved = {k for raw, _, _ in probes[1:] for k in raw if raw[k] != base.get(k)}
        for name in [n for n in ints if n not in moved]:
            coupled = 0
            for other in ints:
                if other == name or coupled == 2:
                    continue
                doubled = dict(base, **{name: base[name] * 2, other: base[other] * 2})
                if self.probe_into(probes, doubled):
                    coupled += 1
        # Each flag flipped with each size changed: what a flag adds (a bias) gets its shapes
        # from probes that move the sizes too, not from the base probe's values alone.
        flags = [n for n, s in self.fields.items() if isinstance(base.get(n), bool)]
        sizes = [(raw, n) for raw, _, _ in probes[1:] for n in raw
                 if isinstance(raw[n], int) and not isinstance(raw[n], bool) and raw[n] != base.get(n)]
        base_tensors = {row[0] for row in probes[0][1]["parameters"] + probes[0][1]["buffers"]}
        adds = set()  # the flags whose flip brings tensors the base probe lacks
        for raw, tree, _ in probes[1:]:
            changed = [n for n in flags if raw.get(n) != base.get(n)]
            names = {row[0] for row in tree["parameters"] + tree["buffers"]}
            if len(changed) == 1 and names - base_tensors:
                adds.add(changed[0])
        for flag in [n for n in flags if n in adds]:
            for raw, _ in sizes:
                self.probe_into(probes, dict(raw, **{flag: not base[flag]}))
        # Pairs of flags: conditions of two fields (a bias only with attention_bias and not X).
        for a, b in itertools.combinations(flags, 2):
            self.probe_into(probes, dict(base, **{a: not base[a], b: not base[b]}))
        return probes


# ---------------------------------------------------------------- expression synthesis

def ints_of(namespace):
    return {k: v for k, v in namespace.items() if isinstance(v, int) and not isinstance(v, bool)}


def int_candidates(names, most):
    """(expression, complexity) in order of complexity, up to `most`."""
    for n in names:
        yield n, 1
    for a in names:
        for b in names:
            yield f"{a} * {b}", 2
            if a != b:
                yield f"{a} // {b}", 2
                yield f"{a} + {b}", 2
                yield f"{a} - {b}", 2
    if most < 3:
        return
    for a, b, c in itertools.product(names, repeat=3):
        yield f"{a} * {b} // {c}", 3
        yield f"{a} // {b} * {c}", 3
        yield f"{a} * {b} * {c}", 3
        yield f"({a} + {b}) * {c}", 3
        yield f"{a} * {b} + {c}", 3


_compiled = {}


def evaluate(expression, namespace):
    code = _compiled.get(expression)
    if code is None:
        code = _compiled[expression] = compile(expression, "<descriptor>", "eval")
    functions = {"__builtins__": {}, "len": len, "int": int, "of_kind": config_checks.of_kind,
                 "all_of_kind": config_checks.all_of_kind}
    if "rope(" in expression or "rotary(" in expression:
        functions["rope"] = lambda dim: rope_length(dim, namespace, False)
        functions["rotary"] = lambda dim: rope_length(dim, namespace, True)
    return eval(code, functions, namespace)  # noqa: S307


def rope_length(head_dim, space, partial_always):
    """inv_freq's length for a head of head_dim, default rope type: rope() as Llama's rotary
    embedding computes it (the whole head), rotary() as those that rotate
    int(head_dim * partial_rotary_factor) of it (Phi). Other rope types are the C++ side's
    (config_loader.cpp read_rope), checked by the differential test."""
    parameters = space.get("rope_parameters") or {}
    if parameters.get("rope_type", "default") != "default":
        raise Unsupported("a probe with a rope type other than default")
    if not partial_always:
        return (head_dim + 1) // 2
    partial = parameters.get("partial_rotary_factor", space.get("partial_rotary_factor")) or 1.0
    return (int(head_dim * partial) + 1) // 2


def dependence(values, namespaces):
    """The fields whose change, probe against base probe, comes with a change of the value."""
    base = namespaces[0]
    names = set()
    for ns, v in zip(namespaces[1:], values[1:]):
        if v != values[0]:
            names |= {k for k in set(ns) | set(base) if ns.get(k) != base.get(k)}
    return names


def solve_int(values, namespaces, what):
    """The simplest expression giving values[k] in namespaces[k] for every k."""
    return solve_int_uncached(values, namespaces, what)


def solve_int_uncached(values, namespaces, what, split=2):
    if all(v == values[0] for v in values):
        return str(values[0])
    depends = dependence(values, namespaces)
    common = set.intersection(*(set(ints_of(ns)) for ns in namespaces))
    names = sorted(depends & common)
    tables = namespaces
    found, level = [], None
    # Sizes, products and quotients over every field (a change can cancel out: 2x the heads
    # and half the head_dim); three-field forms over the fields the value moved with.
    wide = sorted(common)
    narrow = wide if len(wide) <= 14 else names
    candidates = itertools.chain(
        ((e, c) for e, c in int_candidates(wide, 2)), scaled(wide, values, tables),
        ((e, c) for e, c in int_candidates(narrow + ["2", "3", "4"], 3) if c == 3),
        # A grid of patches (a vision tower's positions: (image_size // patch_size) ** 2).
        ((f"({a} // {b}) * ({a} // {b})", 3) for a in narrow for b in narrow if a != b),
        # Rounding: up to even (sinusoids of torch.arange(0, d, 2)), ceiling division.
        ((f"({a} + 1) // 2 * 2", 3) for a in narrow),
        ((f"-(-{a} // {b})", 3) for a in narrow for b in narrow + ["2", "4", "8", "16"]),
        # A fused q/k/v projection: (heads + 2 * kv_heads) * head width.
        ((f"({a} + 2 * {b}) * {c}", 4) for a, b, c in itertools.product(narrow, repeat=3)),
        # A fused convolution over x, B and C (Mamba-2: intermediate + 2 * groups * state,
        # the intermediate size heads * head_dim).
        ((f"{a} + 2 * {b} * {c}", 4) for a, b, c in itertools.product(narrow, repeat=3)),
        # Over q, k and v heads of their own widths (Qwen3-Next's linear attention), of the
        # fields the value moved with only.
        ((form.format(a, b, c, d), 5) for a, b, c, d in itertools.product(names, repeat=4)
         for form in ("2 * {} * {} + {} * {}", "2 * {} * {} + 2 * {} * {}",
                      "{} * {} + 2 * {} * {}")),
        # Mamba-2's in_proj: gate and x (2 * intermediate), B and C, and one dt per head.
        (("2 * {} * {} + 2 * {} * {} + {}".format(*five), 6)
         for five in itertools.product(names, repeat=5)))
    for expression, complexity in candidates:
        if level is not None and complexity > level:
            break
        try:
            if all(evaluate(expression, t) == v for t, v in zip(tables, values)):
                found.append(expression)
                level = complexity
        except (ZeroDivisionError, TypeError, NameError):
            continue
    if found:
        # A field over a literal the base probe happens to give (22528 * n): only when no
        # expression of fields alone fits.
        of_fields = [e for e in found if not re.search(r"\d{2,}", e)]
        found = of_fields or found
        # Two that agree on every probe transformers builds agree on the configs it accepts
        # as far as the probes can tell; the differential test's configs check the choice.
        # Preferred: the fewest characters, then the head width computed first (a // b * c).
        return min(found, key=lambda e: (len(e), e.find("//") if "//" in e else 99))
    # A field typed `int | None` the model reads "if set, else", or a flag that picks one of
    # two formulas (Falcon's multi_query): split the probes on it.
    for name in sorted(depends) if split > 0 else []:
        flag = all(isinstance(ns.get(name), bool) for ns in namespaces)
        test = (lambda ns: ns.get(name)) if flag else (lambda ns: ns.get(name) is not None)
        if len({bool(test(ns)) for ns in namespaces}) != 2:
            continue
        given = [(v, ns) for v, ns in zip(values, namespaces) if test(ns)]
        unset = [(v, ns) for v, ns in zip(values, namespaces) if not test(ns)]
        try:
            when_given = solve_int_uncached([v for v, _ in given], [ns for _, ns in given], what,
                                            split - 1)
            when_unset = solve_int_uncached([v for v, _ in unset], [ns for _, ns in unset], what,
                                            split - 1)
        except Unsupported:
            continue
        return f"({when_given} if {name}{'' if flag else ' is not None'} else {when_unset})"
    raise Unsupported(f"{what}: no expression over the config fields gives {values[:6]}")


def scaled(names, values, tables):
    base = tables[0]
    for n in names:
        if base[n] and values[0] % base[n] == 0 and values[0] // base[n] > 1:
            yield f"{values[0] // base[n]} * {n}", 2
        if base[n] and base[n] % max(values[0], 1) == 0 and values[0] and base[n] // values[0] > 1:
            yield f"{n} // {base[n] // values[0]}", 2
        if values[0] - base[n] and abs(values[0] - base[n]) < 16:
            delta = values[0] - base[n]
            yield (f"{n} + {delta}" if delta > 0 else f"{n} - {-delta}"), 2


def atoms(namespaces, with_layer):
    """Conditions a presence can hang on: flags, None checks, per-layer patterns."""
    keys = set.intersection(*(set(ns) for ns in namespaces))
    out = []
    for k in sorted(keys):
        if k == "j":  # the outer index: only compared with 0, below
            continue
        values = [ns[k] for ns in namespaces]
        if all(isinstance(v, bool) for v in values):
            out += [k, f"not {k}"]
        if all(isinstance(v, str) for v in values) and len(set(values)) > 1:
            out += [f"{k} == {json.dumps(v)}" for v in sorted(set(values))]
        if any(v is None for v in values):
            out += [f"{k} is None", f"{k} is not None"]
        if all(v is None or isinstance(v, int) and not isinstance(v, bool) for v in values) \
                and any(v in (1, 2) for v in values):
            # A count of a few (Falcon's layer norms: 1 or 2).
            out += [f"{k} == 1", f"{k} == 2", f"{k} != 1", f"{k} != 2"]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            out += [f"{k} > 0"]
            if with_layer:
                out += [f"i < {k}", f"i >= {k}", f"(i + 1) % {k} == 0", f"i % {k} == 0"]
        if not with_layer and all(isinstance(v, list) for v in values):
            seen = {x for v in values for x in v if isinstance(x, str)}
            out += [f"{json.dumps(x)} in {k}" for x in sorted(seen)]
        if with_layer and all(isinstance(v, list) for v in values):
            seen = {x for v in values for x in v}
            if all(isinstance(x, str) for x in seen):
                out += [f"{k}[i] == {json.dumps(x)}" for x in sorted(seen)]
                out += [f"{json.dumps(x)} in {k}" for x in sorted(seen)]
            elif all(isinstance(x, int) and not isinstance(x, bool) for x in seen):
                out += [f"i in {k}", f"i not in {k}"]
                if seen <= {0, 1}:  # a flag per layer (Llama 4's no_rope_layers)
                    out += [f"{k}[i] == 1", f"{k}[i] == 0"]
    if with_layer:
        # The index itself first: of atoms true on the same probed layers, the first listed
        # stays (T5's self-attention sublayer is `i == 0`, not `i % d_ff == 0`).
        out = ["i == 0", "i > 0"] + out
    if with_layer and "j" in keys:
        out += ["j == 0", "j > 0"]
    if with_layer:
        ints = [k for k in sorted(keys) if k != "j"
                and all(isinstance(ns[k], int) and not isinstance(ns[k], bool) for ns in namespaces)]
        out += [f"i % {a} == {b}" for a in ints for b in ints if a != b]
        # A period the class fixes (OLMo 3's full attention every 4th layer).
        out += [f"(i + 1) % {n} == 0" for n in range(2, 9)] + [f"i % {n} == 0" for n in range(2, 9)]
    return out


def solve_condition(cases, what, with_layer=False):
    """cases: [(namespace, present)]; the simplest condition true exactly when present."""
    if all(p for _, p in cases):
        return None
    if not any(p for _, p in cases):
        return "False"
    namespaces = [ns for ns, _ in cases]
    # Layer atoms need every probe's namespace to share the keys; cases repeat per layer.
    candidates = atoms(namespaces, with_layer)
    # Each atom's truth over the cases as the bits of an int: combinations are then single
    # and/or operations, and only atoms true wherever the thing is present can be part of a
    # conjunction (false wherever it is absent, of a disjunction).
    truth, twins = {}, {}
    for atom in candidates:
        try:
            mask = 0
            for k, ns in enumerate(namespaces):
                if evaluate(atom, ns):
                    mask |= 1 << k
        except Exception:
            continue
        kept = next((a for a, m in truth.items() if m == mask), None)
        if kept is None:
            truth[atom] = mask
        else:  # equal on every case: the simpler, listed first, stays; the other is its twin
            twins.setdefault(kept, []).append(atom)
    want = sum(1 << k for k, (_, p) in enumerate(cases) if p)
    conjunct = [a for a, m in truth.items() if m & want == want]
    disjunct = [a for a, m in truth.items() if m & ~want == 0]
    for size in (1, 2, 3):
        for combo in itertools.combinations(conjunct, size):
            mask = -1
            for a in combo:
                mask &= truth[a]
            if mask == want:
                check_twins(combo, twins, namespaces, what, with_layer)
                return " and ".join(wrap(a) for a in combo)
        if size == 1:
            continue
        for combo in itertools.combinations(disjunct, size):
            mask = 0
            for a in combo:
                mask |= truth[a]
            if mask == want:
                check_twins(combo, twins, namespaces, what, with_layer)
                return " or ".join(wrap(a) for a in combo)
    raise Unsupported(f"no condition over the config fields says when {what} is there")


def check_twins(combo, twins, namespaces, what, with_layer):
    """A per-layer atom that agrees with another on every probed layer may still differ on
    deeper models (i % attn_layer_period against i % head_dim below 8 layers): each pair is
    evaluated on layers 0-63 of the probes' configs, and any that differ there are refused.
    A repeat of a fixed count (`with_layer` is the count: T5's sublayers) has no deeper
    index than the probes show."""
    if with_layer is not True:
        return
    sample = namespaces[:: max(1, len(namespaces) // 40)]
    for atom in combo:
        for twin in twins.get(atom, []):
            for ns in sample:
                for i in range(64):
                    space = dict(ns, i=i)
                    try:
                        differ = bool(evaluate(atom, space)) != bool(evaluate(twin, space))
                    except Exception:  # past a per-layer list's end: no layer to compare
                        continue
                    if differ:
                        raise Unsupported(f"{what}: the probes cannot tell {atom} from {twin} "
                                          f"(they differ at layer {i})")


def wrap(atom):
    return f"({atom})" if " or " in atom else atom


# ---------------------------------------------------------------- module trees

def nest(tree):
    """The flat tree file as nested nodes: {name, class, tensors: {name: (shape, dtype, kind)}, children}."""
    nodes = {}
    root = None
    for name, class_name in tree["modules"]:
        node = {"name": name.rsplit(".", 1)[-1] if name else "", "class": class_name,
                "tensors": {}, "children": []}
        if name in nodes:  # a shared module listed again: it is the same place twice
            continue
        nodes[name] = node
        if name == "":
            root = node
        else:
            parent = name.rsplit(".", 1)[0] if "." in name else ""
            nodes[parent]["children"].append(node)
    for kind, rows in (("p", tree["parameters"]), ("b", tree["buffers"])):
        for row in rows:
            full, shape, dtype = row[0], row[1], row[2]
            owner, local = (full.rsplit(".", 1) if "." in full else ("", full))
            tensor_kind = kind if kind == "p" else ("b" if row[3] else "bn")
            nodes[owner]["tensors"][local] = (shape, dtype, tensor_kind)
    return root


@functools.lru_cache(maxsize=None)
def activation_state(name):
    """{tensor: (shape, dtype or "model", kind)} of the module activation `name` builds."""
    module = ACT2FN[name]
    float32 = torch.get_default_dtype()
    state = {}
    for local, p in module.named_parameters(recurse=False):
        state[local] = (list(p.shape), "model" if p.dtype == float32 else str(p.dtype)[6:], "p")
    for local, b in module.named_buffers(recurse=False):
        kind = "bn" if local in module._non_persistent_buffers_set else "b"
        state[local] = (list(b.shape), "model" if b.dtype == float32 else str(b.dtype)[6:], kind)
    return state


def follows(node, space, field):
    """Whether `node` is the module (class and state) activation space[field] builds."""
    name = space.get(field)
    if not isinstance(name, str) or name not in ACT2CLS or node["children"]:
        return False
    state = {k: (shape, "float32" if dtype == "model" else dtype, kind)
             for k, (shape, dtype, kind) in activation_state(name).items()}
    return type(ACT2FN[name]).__name__ == node["class"] and state == node["tensors"]


def activation_fields(here):
    """The string fields that name an activation in every space of `here`."""
    common = set.intersection(*(set(s) for _, s in here))
    return [f for f in sorted(common)
            if all(isinstance(s[f], str) and s[f] in ACT2CLS for _, s in here)]


def activation_field(here):
    """The string field whose activation (ACT2CLS) every node of `here` is, if one is: its
    class and state follow that field, as the C++ side builds them from its name."""
    if len({n["class"] for n, _ in here}) < 2:
        return None  # one class: hard-coded, or the field never moved it
    for field in activation_fields(here):
        if all(follows(n, s, field) for n, s in here):
            return field
    return None


def is_repeat(node):
    return node["children"] and all(c["name"].isdigit() for c in node["children"]) and \
        [c["name"] for c in node["children"]] == [str(k) for k in range(len(node["children"]))]


class Synthesizer:
    """One descriptor from the probes' trees."""

    def __init__(self, probes):
        self.probes = probes  # [(raw, tree, resolved)]
        self.roots = [nest(tree) for _, tree, _ in probes]
        self.lets, self.spaces = helpers_for([resolved for _, _, resolved in probes])

    def template(self, nodes, spaces, path, layer):
        """nodes[k]: the node at `path` in probe k, or None where it is absent."""
        present = [n is not None for n in nodes]
        here = [(n, s) for n, s in zip(nodes, spaces) if n is not None]
        first = here[0][0]
        classes = {n["class"] for n, _ in here}
        condition = solve_condition(list(zip(spaces, present)), path or "the root", layer)
        activation = activation_field(here)
        if activation:
            out = {"name": first["name"], "activation": activation}
            if condition:
                out["if"] = condition
            return out
        split = self.activation_split(here, path, layer) if len(classes) > 1 else None
        if split:
            # The activation a field names, but for the values a branch builds otherwise
            # (Apertus's xIELU in the model's dtype).
            out = {"name": first["name"], "alternatives": split}
            if condition:
                out["if"] = condition
            return out
        if len(classes) > 1:
            # One place, several classes (a decoder layer's mlp: MoE here, dense there).
            out = {"name": first["name"],
                   "alternatives": self.alternatives(here, path, layer)}
            if condition:
                out["if"] = condition
            return out
        out = {"name": first["name"], "class": first["class"]}
        if condition:
            out["if"] = condition
        # Tensors, in the first order seen.
        tensor_names = []
        for n, _ in here:
            for t in n["tensors"]:
                if t not in tensor_names:
                    tensor_names.append(t)
        tensors = []
        for t in tensor_names:
            cases = [(s, n is not None and t in n["tensors"]) for n, s in zip(nodes, spaces)]
            cases = [(s, p) for (s, p), n in zip(cases, nodes) if n is not None]
            with_t = [(n["tensors"][t], s) for n, s in here if t in n["tensors"]]
            kinds = {v[2] for v, _ in with_t}
            if len(kinds) > 1:
                raise Unsupported(f"{path}.{t} changes between parameter and buffer")
            ranks = {len(v[0]) for v, _ in with_t}
            if len(ranks) > 1:
                raise Unsupported(f"{path}.{t} changes rank with the config")
            shape = [self.dimension([v[0][a] for v, _ in with_t], [s for _, s in with_t],
                                    f"{path}.{t} dim {a}", t)
                     for a in range(ranks.pop())]
            entry = {"name": t, "shape": shape, "kind": kinds.pop(), "dtype": self.dtype_of(path, t)}
            cond = solve_condition(cases, f"{path}.{t}", layer)
            if cond:
                entry["if"] = cond
            tensors.append(entry)
        if tensors:
            out["tensors"] = tensors
        if any(is_repeat(n) for n, _ in here) and all(is_repeat(n) or not n["children"] for n, _ in here):
            out["repeat"] = self.dimension([len(n["children"]) for n, _ in here],
                                           [s for _, s in here], f"the number of {path}", None)
            # Inside another repeat, the outer index is j (T5's relative attention bias: in the
            # first block's self-attention sublayer only).
            layers = [(child, dict(s, i=int(child["name"]), **({"j": s["i"]} if "i" in s else {})))
                      for n, s in here for child in n["children"]]
            # A fixed count (T5's two or three sublayers per block) bounds the index: no
            # deeper model can tell apart conditions the probes agree on.
            bound = int(out["repeat"]) if out["repeat"].isdigit() and int(out["repeat"]) else True
            out["node"] = self.template([c for c, _ in layers], [sp for _, sp in layers],
                                        f"{path}.*", bound)
            return out
        # One order all probes agree with: a child seen first in a later probe goes right
        # after the child it follows there (Qwen3-Next's self_attn where linear_attn was).
        child_names = []
        for n, _ in here:
            previous = None
            for c in n["children"]:
                if c["name"] not in child_names:
                    at = child_names.index(previous) + 1 if previous is not None else 0
                    child_names.insert(at, c["name"])
                previous = c["name"]
        self.check_order(here, child_names, path)
        children = []
        for c in child_names:
            sub = [next((x for x in n["children"] if x["name"] == c), None) if n else None
                   for n in nodes]
            keep = [(x, s) for x, s, n in zip(sub, spaces, nodes) if n is not None]
            children.append(self.template([x for x, _ in keep], [s for _, s in keep],
                                          f"{path}.{c}" if path else c, layer))
        if children:
            out["children"] = children
        return out

    def check_order(self, here, names, path):
        for n, _ in here:
            order = [c["name"] for c in n["children"]]
            if order != [x for x in names if x in order]:
                raise Unsupported(f"{path}: children change order with the config")

    def activation_split(self, here, path, layer):
        for field in activation_fields(here):
            following = [follows(n, s, field) for n, s in here]
            followers = {n["class"] for (n, _), f in zip(here, following) if f}
            if all(following) or len(followers) < 2:
                continue
            rest = [(n, s) for (n, s), f in zip(here, following) if not f]
            try:
                condition = solve_condition([(s, not f) for (_, s), f in zip(here, following)],
                                            f"{path} is not the activation {field} names", layer)
            except Unsupported:
                continue
            node = self.template([n for n, _ in rest], [s for _, s in rest], path, layer)
            return [{"if": condition, "node": node},
                    {"node": {"name": here[0][0]["name"], "activation": field}}]
        return None

    def alternatives(self, here, path, layer):
        """The classes one place takes, each with its condition; the last is the rest."""
        groups = []
        for n, _ in here:
            if n["class"] not in groups:
                groups.append(n["class"])
        last_error = None
        for order in itertools.permutations(groups):
            try:
                out, left = [], here
                for rank, class_name in enumerate(order):
                    members = [(n, sp) for n, sp in left if n["class"] == class_name]
                    entry = {}
                    if rank < len(order) - 1:
                        entry["if"] = solve_condition(
                            [(sp, n["class"] == class_name) for n, sp in left],
                            f"{path} is a {class_name}", layer)
                    entry["node"] = self.template([n for n, _ in members],
                                                  [sp for _, sp in members], path, layer)
                    out.append(entry)
                    left = [(n, sp) for n, sp in left if n["class"] != class_name]
                return out
            except Unsupported as e:
                last_error = e
            if len(groups) > 4:
                break
        raise last_error

    def dimension(self, values, spaces, what, tensor_name):
        if (tensor_name or "").endswith("inv_freq"):  # inv_freq, original_inv_freq, full_attention_inv_freq
            # The head width the rotary embedding is built for, then how it reads it.
            common = sorted(set.intersection(*(set(ints_of(s)) for s in spaces)))
            heads = [e for e, _ in int_candidates(common, 2)]
            heads += [f"(head_dim if head_dim is not None else {e})" for e in heads
                      if "head_dim" in common or all(s.get("head_dim", 0) is None for s in spaces)]
            for function in ("rope", "rotary"):
                for inner in heads:
                    expression = f"{function}({inner})"
                    try:
                        if all(evaluate(expression, s) == v for s, v in zip(spaces, values)):
                            return expression
                    except (ZeroDivisionError, TypeError, NameError, Unsupported):
                        continue
        return solve_int(values, spaces, what)

    def dtype_of(self, path, tensor):
        return self.dtypes.get(f"{path}.{tensor}" if path else tensor, "model")


def tensor_dtypes(builder, raw):
    """Which tensors keep a dtype of their own when the model is built in bfloat16."""
    tree, _, _ = builder.build(raw, dtype=torch.bfloat16)
    fixed = {}
    for row in tree["parameters"] + tree["buffers"]:
        if row[2] != "bfloat16":
            fixed[row[0]] = row[2]
    return fixed


def layer_pattern(name):
    """model.layers.3.mlp -> model.layers.*.mlp: keys of per-layer things."""
    return ".".join("*" if part.isdigit() else part for part in name.split("."))


def listed(probes, key, spaces):
    """Entries of a list-valued tree key with the condition on each."""
    entries = []
    for _, tree, _ in probes:
        for entry in tree[key]:
            if entry not in entries:
                entries.append(entry)
    out = []
    for entry in entries:
        cases = [(s, entry in tree[key]) for (_, tree, _), s in zip(probes, spaces)]
        cond = solve_condition(cases, f"{key} {entry}")
        out.append({"value": entry, "if": cond} if cond else {"value": entry})
    return out


def synthesize(model_type, builder, probes):
    if len(probes) < 3:
        raise Unsupported("too few configs build to tell fields apart")
    base_raw, base_tree, _ = probes[0]
    for _, tree, _ in probes:
        for group in tree["tied"]:
            if any(part.split(".")[-2:-1] and any(p.isdigit() for p in part.split(".")) for part in group):
                raise Unsupported("per-layer tied weights")
    synth = Synthesizer(probes)
    fixed = tensor_dtypes(builder, base_raw)
    # Keyed by the template's path (layers as *), as dtype_of looks them up.
    synth.dtypes = {layer_pattern(full): dtype for full, dtype in fixed.items()}
    root = synth.template(synth.roots, synth.spaces, "", False)
    hyper = {}
    for key in sorted(base_tree["hyperparameters"]):
        values = [tree["hyperparameters"].get(key) for _, tree, _ in probes]
        if any(v is None for v in values):
            continue
        hyper[key] = solve_int(values, synth.spaces, f"hyperparameter {key}")
    derived = in_fill_order(dict(derive_fields(builder, probes), **builder.fills))
    descriptor = {
        "format": FORMAT,
        "version": VERSION,
        "model_type": model_type,
        "architecture": base_tree["architecture"],
        "generated_from": "transformers " + __import__("transformers").__version__,
        "fields": {name: {"default": spec["default"], "kind": spec["kind"], "nullable": spec["nullable"]}
                   for name, spec in builder.fields.items() if jsonable(spec["default"])},
        "aliases": builder.aliases(),
        "derived": derived,
        "lets": synth.lets,
        "tree": root,
        "no_split_modules": listed(probes, "no_split_modules", synth.spaces),
        "tied": listed(probes, "tied", synth.spaces),
        "tied_weights_keys": listed_pairs(probes, synth.spaces),
        "tp_plan": listed(probes, "tp_plan", synth.spaces),
        "keep_in_fp32_modules": listed(probes, "keep_in_fp32_modules", synth.spaces),
        "hyperparameters": hyper,
        "kernel_layers": kernel_layers_of(probes),
    }
    if builder.subs:
        descriptor["sub_configs"] = sorted(builder.subs)  # config.json nests their fields
    return descriptor


def add_checks(descriptor, builder):
    """The config class's validators as `checks` (those that cannot be written so as
    `unchecked`), last in the descriptor; then each checked against transformers on configs
    its validators refuse (config_checks.refusals) and on the class defaults."""
    for key in ("checks", "unchecked"):
        descriptor.pop(key, None)
    checks, unchecked = config_checks.config_checks(builder.config_class, descriptor["fields"],
                                                    descriptor["aliases"], builder.subs)
    for entry in checks:
        if entry.get("standard") == "rope":
            rope_head_dim(entry, descriptor, builder)
    descriptor["checks"] = checks + padding_checks(descriptor, builder)
    if unchecked:
        descriptor["unchecked"] = unchecked
    defaults = refused_by_checks(descriptor, {})
    if defaults is not None:
        raise Unsupported(f"the checks refuse the class defaults: {defaults}")
    for case in config_checks.refusals(builder.config_class):
        by = case["validator"]
        if any(entry["by"].endswith("." + by) for entry in unchecked):
            continue  # not written as a check: the C++ side says it is not checked
        if any(entry["by"].endswith("." + by) and "standard" in entry for entry in checks):
            continue  # implemented by the C++ side, compared by the differential test
        got = refused_by_checks(descriptor, case["config"])
        if got != case["error"] and not (got is not None and case["raised_by_python"]):
            raise Unsupported(f"the checks give {got!r} for {case['config']}, transformers "
                              f"{case['error']!r}")


def rope_head_dim(entry, descriptor, builder):
    """validate_rope reads getattr(config, "head_dim", None): where that is no field of the
    class but an attribute it sets or a property (Falcon's hidden_size // num_heads), the
    expression for it, the hyperparameter the tree reports, checked on the class defaults."""
    prefix = entry["of"] + SEP if "of" in entry else ""
    if prefix + "head_dim" in descriptor["fields"]:
        return
    config = builder.config_class()
    if prefix:
        config = getattr(config, entry["of"])
    value = getattr(config, "head_dim", None)
    if value is None:
        return
    expression = descriptor["hyperparameters"].get("head_dim")
    if prefix or expression is None or evaluate(expression, resolve(descriptor, {})) != value:
        raise Unsupported(f"validate_rope reads head_dim = {value}, which no field or "
                          "hyperparameter of the descriptor gives")
    entry["head_dim"] = expression


def padding_checks(descriptor, builder):
    """nn.Embedding's own refusal, made when the model is built: a padding_idx (the config's
    pad_token_id) outside the embedding. One check per embedding built with it, its size the
    descriptor's expression for the embedding's rows."""
    if "pad_token_id" not in descriptor["fields"]:
        return []
    try:
        config = builder.config_class.from_dict(dict(builder.nested({"pad_token_id": 0}),
                                                     model_type=builder.model_type))
        with torch.device("meta"):
            model = builder.auto.from_config(config, dtype=torch.float32)
    except Exception:
        return []
    checks = []
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Embedding) or module.padding_idx != 0:
            continue
        node = descriptor["tree"]
        for part in name.split("."):
            node = next((c for c in node.get("children", []) if c["name"] == part), None)
            if node is None:
                break
        weight = node and next((t for t in node.get("tensors", []) if t["name"] == "weight"), None)
        if weight is None:
            raise Unsupported(f"{name} pads with pad_token_id but the descriptor has no rows for it")
        rows = weight["shape"][0]
        entry = {"if": f"(pad_token_id is not None) and (pad_token_id >= {rows} or pad_token_id < -({rows}))",
                 "error": "Padding_idx must be within num_embeddings", "by": f"nn.Embedding of {name}"}
        if entry["if"] not in [c["if"] for c in checks]:
            checks.append(entry)
    return checks


def refused_by_checks(descriptor, raw):
    """The message of the first own check refusing config.json `raw` (its standard checks are
    the C++ side's), or None."""
    try:
        space = resolve(descriptor, raw)
    except Exception:  # a derived rule Python cannot evaluate on this config
        return None
    for entry in descriptor["checks"]:
        if "standard" in entry:
            continue
        try:
            if not evaluate(entry["if"], space):
                continue
        except Exception as e:  # the validator raises on these values too
            return f"{type(e).__name__}: {e}"
        return config_checks.format_message(entry["error"], lambda hole: evaluate(hole, space))
    return None


def listed_pairs(probes, spaces):
    pairs = []
    for _, tree, _ in probes:
        for k, v in tree["tied_weights_keys"].items():
            if [k, v] not in pairs:
                pairs.append([k, v])
    out = []
    for pair in pairs:
        cases = [(s, tree["tied_weights_keys"].get(pair[0]) == pair[1])
                 for (_, tree, _), s in zip(probes, spaces)]
        cond = solve_condition(cases, f"tied key {pair[0]}")
        out.append({"value": pair, "if": cond} if cond else {"value": pair})
    return out


def derive_fields(builder, probes):
    """Fields the class fills in from others when config.json leaves them at a marker value
    (null, or "auto" as Mamba's time_step_rank): name -> {when, expr or value}."""
    derived = {}
    for name, spec in builder.fields.items():
        marker = spec["default"]
        rewritten = [(raw, res) for raw, _, res in probes
                     if name in raw and name in res and raw[name] != res[name]
                     and raw[name] != marker]
        if rewritten and all(isinstance(res[name], int) and not isinstance(res[name], bool)
                             for _, _, res in probes if name in res):
            # A value the class always replaces (DeepSeek-V2's head_dim = qk_rope_head_dim).
            cases = [(raw, res) for raw, _, res in probes if name in res]
            spaces = [{k: v for k, v in res.items() if k != name} for _, res in cases]
            try:
                derived[name] = {"always": True, "expr": solve_int(
                    [res[name] for _, res in cases], spaces, f"`{name}`")}
                continue
            except Unsupported:
                pass
        if marker is not None and not isinstance(marker, str):
            continue
        cases = [(raw, res) for raw, _, res in probes
                 if raw.get(name, spec["default"]) == marker and name in res]
        values = [res[name] for _, res in cases]
        if not values or all(v == marker for v in values):
            continue
        rule = {"when": marker}
        if all(v == values[0] for v in values):
            rule["value"] = values[0]
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            spaces = [{k: v for k, v in raw.items() if k != name and v is not None}
                      for raw, _ in cases]
            try:
                rule["expr"] = solve_int(values, spaces, f"the default of `{name}`")
            except Unsupported:
                continue  # not described: a shape that reads it fails check_descriptor
        elif all(v is None or isinstance(v, int) and not isinstance(v, bool) for v in values):
            # Filled in only on some configs (Falcon's num_ln_in_parallel_attn: 2 with the
            # new decoder architecture, else left None).
            spaces = [{k: v for k, v in raw.items() if k != name} for raw, _ in cases]
            given = [(v, sp) for v, sp in zip(values, spaces) if v is not None]
            try:
                condition = solve_condition([(sp, v is not None) for v, sp in zip(values, spaces)],
                                            f"the default of `{name}`")
                value = solve_int([v for v, _ in given], [sp for _, sp in given],
                                  f"the default of `{name}`")
            except Unsupported:
                continue
            rule["expr"] = f"({value} if {condition} else None)"
        elif all(isinstance(v, list) for v in values):
            try:
                rule.update(per_layer_rule(cases, name))
            except Unsupported:
                continue
        else:
            continue
        derived[name] = rule
    return in_fill_order(derived)


def rule_reads(rule):
    names = set()
    for key in ("expr", "per_layer", "layers_where", "count"):
        if isinstance(rule.get(key), str):
            names |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", rule[key]))
    return names


def in_fill_order(derived):
    """The rules in an order where each comes after the rules filling in what it reads (Llama
    4's layer_types reads no_rope_layers, itself filled in): resolve() applies them in turn."""
    out, left = {}, dict(derived)
    while left:
        ready = [n for n, r in left.items() if not (rule_reads(r) & (set(left) - {n}))]
        for name in ready or list(left)[:1]:  # a cycle: as found
            out[name] = left.pop(name)
    return out


def per_layer_rule(cases, name):
    """A list the class fills in per layer: one entry per layer (layer_types from a period:
    "full_attention" every 6th layer) as {"count": the layer-count field, "per_layer": the
    entry as an expression over the layer index i}, or the indices of some layers (Llama 4's
    moe_layers, every interleave_moe_layer_step-th) as {"count", "layers_where": condition}."""
    def layer_count(fits):
        return next((key for key in [sibling(name, k) for k in oracle.LAYER_KEYS]
                     if all(isinstance(res.get(key), int) and fits(res[name], res[key])
                            for _, res in cases)), None)

    count = layer_count(lambda listed, n: len(listed) == n)
    key = "per_layer"
    if count is None:
        count = layer_count(lambda listed, n: all(isinstance(x, int) and not isinstance(x, bool)
                                                  for x in listed)
                            and listed == sorted(set(listed)) and all(0 <= x < n for x in listed))
        key = "layers_where"
    if count is None:
        raise Unsupported(f"`{name}`: neither one entry per layer nor layer indices")

    def entries_of(res):  # what each layer holds: its entry, or whether it is listed
        listed = res[name]
        return listed if key == "per_layer" else [k in listed for k in range(res[count])]

    # Solved on the defaults and the cases whose list is not theirs (enough to tell the
    # pattern, few enough to search); a case the rule then misses joins them.
    base = cases[0][1][name]
    chosen = [cases[0]] + [c for c in cases[1:] if c[1][name] != base][:11]
    for _ in range(8):
        rule = per_layer_solve([(res, entries_of(res)) for _, res in chosen], name, count, key)
        wrong = [c for c in cases if layer_values(rule, c[1], name) != c[1][name]]
        if not wrong:
            return rule
        chosen.append(wrong[0])
    raise Unsupported(f"`{name}`: no rule over the layer index fits every probe")


def layer_values(rule, res, name):
    """The list a per-layer rule gives in `res`, as resolve() fills it in; None if it fails."""
    space = {k: v for k, v in res.items() if k != name}
    try:
        layers = range(evaluate(rule["count"], space))
        if "per_layer" in rule:
            return [evaluate(rule["per_layer"], dict(space, i=k)) for k in layers]
        return [k for k in layers if evaluate(rule["layers_where"], dict(space, i=k))]
    except Exception:
        return None


def per_layer_solve(chosen, name, count, key):
    def literal(v):  # as the expression language (Python) writes it
        return repr(v) if isinstance(v, bool) else json.dumps(v)

    entries = [(dict({k: v for k, v in res.items() if k != name}, i=k), literal(v))
               for res, values in chosen for k, v in enumerate(values)]
    distinct = sorted({v for _, v in entries})
    if key == "layers_where":
        condition = solve_condition([(space, v == "True") for space, v in entries],
                                    f"which layers `{name}` lists", with_layer=True)
        return {"count": count, key: condition or "True"}
    if len(distinct) == 1:
        return {"count": count, key: distinct[0]}
    if len(distinct) != 2:
        raise Unsupported(f"`{name}`: more than two kinds of entry")
    for a, b in (distinct, distinct[::-1]):
        try:
            condition = solve_condition([(space, v == a) for space, v in entries],
                                        f"`{name}` entry {a}", with_layer=True)
        except Unsupported:
            continue
        return {"count": count, key: f"{a} if {condition} else {b}"}
    raise Unsupported(f"`{name}`: no condition over the layer index gives its entries")


# Sizes many architectures compute the same way, tried as names of their own: the head width
# (head_dim when set, else hidden_size // num_attention_heads) and the key/value head count.
HELPERS = [
    ("_head", "head_dim if head_dim is not None else hidden_size // num_attention_heads"),
    ("_head", "hidden_size // num_attention_heads"),
    ("_kv", "num_key_value_heads if num_key_value_heads is not None else num_attention_heads"),
]


def helpers_for(spaces):
    """The helpers every space can compute, and the spaces with them added."""
    lets = {}
    for name, expression in HELPERS:
        if name in lets:
            continue
        try:
            values = [evaluate(expression, s) for s in spaces]
        except Exception:
            continue
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            lets[name] = expression
    extended = []
    for s in spaces:
        e = dict(s)
        for name, expression in lets.items():
            e[name] = evaluate(expression, e)
        extended.append(e)
    return lets, extended


# ---------------------------------------------------------------- the check: evaluate as C++ will

def field_name(descriptor, key):
    """The field a config.json key sets: itself, else through the class's attribute_map
    (GPT-2's hidden_size is n_embd), either way round (Qwen3-MoE's field num_experts is
    attribute_map's source, num_local_experts its target)."""
    fields, aliases = descriptor["fields"], descriptor["aliases"]
    if key in fields:
        return key
    if key in aliases:
        return aliases[key]
    for source, target in aliases.items():
        if target == key and source in fields:
            return source
    return key


def resolve(descriptor, raw):
    space = {}
    for name, spec in descriptor["fields"].items():
        space[name] = spec["default"]
    for key, value in raw.items():
        if key in descriptor.get("sub_configs", []):
            for sub_key, sub_value in (value or {}).items():
                space[field_name(descriptor, key + SEP + sub_key)] = sub_value
            continue
        space[field_name(descriptor, key)] = value
    for name, rule in descriptor["derived"].items():
        if rule.get("always") or space.get(name) == rule["when"]:
            if "count" in rule:
                space[name] = layer_values(rule, dict(space), None)
            else:
                space[name] = rule["value"] if "value" in rule else evaluate(rule["expr"], space)
    for name, expression in descriptor["lets"].items():
        try:
            space[name] = evaluate(expression, space)
        except Exception:  # C++ evaluates a let when an expression reads it, and fails then
            pass
    return space


def expand(node, space, prefix, out):
    if "if" in node and not evaluate(node["if"], space):
        return
    if "alternatives" in node:
        for alternative in node["alternatives"]:
            if "if" not in alternative or evaluate(alternative["if"], space):
                chosen = dict(alternative["node"], name=node["name"])
                chosen.pop("if", None)
                expand(chosen, space, prefix, out)
                return
        return
    name = f"{prefix}.{node['name']}" if prefix and node["name"] else (node["name"] or prefix)
    if "activation" in node:
        activation = evaluate(node["activation"], space)
        out["modules"].append([name, type(ACT2FN[activation]).__name__])
        for local, (shape, dtype, kind) in activation_state(activation).items():
            row = [f"{name}.{local}", shape, out["dtype"] if dtype == "model" else dtype]
            (out["parameters"] if kind == "p" else out["buffers"]).append(
                row if kind == "p" else row + [kind == "b"])
        return
    out["modules"].append([name, node["class"]])
    for t in node.get("tensors", []):
        if "if" in t and not evaluate(t["if"], space):
            continue
        shape = [evaluate(d, space) for d in t["shape"]]
        dtype = out["dtype"] if t["dtype"] == "model" else t["dtype"]
        full = f"{name}.{t['name']}" if name else t["name"]
        if t["kind"] == "p":
            out["parameters"].append([full, shape, dtype])
        else:
            out["buffers"].append([full, shape, dtype, t["kind"] == "b"])
    if "repeat" in node:
        for i in range(evaluate(node["repeat"], space)):
            inner = dict(space, i=i, **({"j": space["i"]} if "i" in space else {}))
            expand(dict(node["node"], name=str(i)), inner, name, out)
        return
    for child in node.get("children", []):
        expand(child, space, name, out)


def evaluate_descriptor(descriptor, raw, dtype="float32"):
    space = resolve(descriptor, raw)
    out = {"modules": [], "parameters": [], "buffers": [], "dtype": dtype}
    expand(descriptor["tree"], space, "", out)

    def chosen(key):
        return [e["value"] for e in descriptor[key] if "if" not in e or evaluate(e["if"], space)]

    out["no_split_modules"] = chosen("no_split_modules")
    out["tied"] = chosen("tied")
    out["tied_weights_keys"] = dict(chosen("tied_weights_keys"))
    out["tp_plan"] = chosen("tp_plan")
    out["keep_in_fp32_modules"] = chosen("keep_in_fp32_modules")
    out["hyperparameters"] = {k: evaluate(e, space) for k, e in descriptor["hyperparameters"].items()}
    out["kernel_layers"] = present_kernel_layers(descriptor, out["modules"])
    return out


def activation_layer_names():
    """{ACT2CLS class name: its Hub layer name}: what the C++ activation table holds."""
    out = {}
    for cls in ACT2CLS.values():
        cls = cls[0] if isinstance(cls, tuple) else cls
        name = TOOLMOD.class_layer_name(cls)
        if name is not None:
            out[cls.__name__] = name
    return out


def present_kernel_layers(descriptor, modules):
    """The descriptor's kernel_layers (activations' from ACT2CLS) for the classes in `modules`,
    as export-module-tree writes them."""
    classes = {cls for _, cls in modules}
    known = dict(activation_layer_names(), **descriptor["kernel_layers"]["layers"])
    return {"layers": {c: known[c] for c in sorted(classes) if c in known},
            "functions": {c: names for c, names in sorted(descriptor["kernel_layers"]["functions"].items())
                          if c in classes}}


def kernel_layers_of(probes):
    """The union of the probes' kernel_layers, activations left to the activation table."""
    activations = {(c[0] if isinstance(c, tuple) else c).__name__ for c in ACT2CLS.values()}
    layers, functions = {}, {}
    for _, tree, _ in probes:
        for cls, name in tree["kernel_layers"]["layers"].items():
            if cls not in activations:
                layers[cls] = name
        functions.update(tree["kernel_layers"]["functions"])
    return {"layers": dict(sorted(layers.items())), "functions": dict(sorted(functions.items()))}


COMPARED = ["modules", "parameters", "buffers", "no_split_modules", "tied", "tied_weights_keys",
            "tp_plan", "keep_in_fp32_modules", "hyperparameters", "kernel_layers"]


def first_difference(expected, got):
    for key in COMPARED:
        if expected[key] != got[key]:
            a, b = expected[key], got[key]
            if isinstance(a, list):
                for k, (x, y) in enumerate(zip(a, b)):
                    if x != y:
                        return f"{key}[{k}]: transformers {x}, descriptor {y}"
                return f"{key}: transformers has {len(a)}, descriptor {len(b)}"
            return f"{key}: transformers {a}, descriptor {b}"
    return None


def check_descriptor(descriptor, probes):
    for raw, tree, _ in probes:
        got = evaluate_descriptor(descriptor, raw)
        diff = first_difference(tree, got)
        if diff:
            raise Unsupported(f"the descriptor misses a probe ({probe_label(raw, probes[0][0])}): {diff}")


def check_edges(descriptor, builder):
    """The oracle's configs (tests/python/architecture_oracle.py: as save_pretrained writes the
    class defaults, in full, and its small edges), which no probe is: evaluated here as well."""
    config = oracle.small_config(builder.model_type)
    for variant in oracle.config_variants(config, TOOLMOD, builder.model_type):
        got = evaluate_descriptor(descriptor, variant["config"],
                                  variant["tree"]["dtype"])
        diff = first_difference(variant["tree"], got)
        if diff:
            raise Unsupported(f"the descriptor misses the oracle's config {variant['label']}: {diff}")


JOINT_CONFIGS = 48  # configs with 2-5 fields changed at once, the missed ones made probes
HELD_OUT_CONFIGS = 24  # and more, held out
JOINT_ROUNDS = 4  # re-syntheses with the drawn configs a descriptor missed added as probes


def tried_values(probes):
    """field -> the values its own probes gave it."""
    base = probes[0][0]
    tried = {}
    for raw, _, _ in probes[1:]:
        for key, value in raw.items():
            if value != base.get(key) and jsonable(value):
                tried.setdefault(key, [])
                if value not in tried[key]:
                    tried[key].append(value)
    return tried


def triggers_of(probes):
    """The changes (one field, or a pair of flags transformers only takes together, as
    InternLM3's qkv_bias with bias) that bring tensors the defaults lack: cross-attention, q_proj
    without LoRA, an attention layer where an MoE one sits. Each is seen with the default sizes
    only, so its tensors' shapes could be read as literals."""
    base = probes[0][0]
    base_names = {row[0] for row in probes[0][1]["parameters"] + probes[0][1]["buffers"]}
    out = []
    for raw, tree, _ in probes[1:]:
        changed = {k: raw[k] for k in raw if raw[k] != base.get(k)}
        names = {row[0] for row in tree["parameters"] + tree["buffers"]}
        flags = all(isinstance(v, bool) for v in changed.values())
        if (len(changed) == 1 or len(changed) == 2 and flags) \
                and not any(is_layer_key(k) for k in changed) \
                and names - base_names and all(set(t) != set(changed) for t in out):
            out.append(changed)  # the first value of each field: one attention-layer offset
    return out


def size_changes(probes):
    """One change per integer or activation field with a probe of its own (what a trigger
    brings may be sized by a field no tensor of the defaults reads: Qwen3-Next's dense MLP by
    intermediate_size, where every default layer is MoE; DeepSeek-V2's dense MLP's act_fn
    follows hidden_act)."""
    base_raw = probes[0][0]
    out = {}
    for raw, _, _ in probes[1:]:
        changed = [k for k in raw if raw[k] != base_raw.get(k)]
        if len(changed) != 1 or changed[0] in out or is_layer_key(changed[0]):
            continue
        value = raw[changed[0]]
        if isinstance(value, int) and not isinstance(value, bool) or \
                isinstance(value, str) and value in ACT2CLS:
            out[changed[0]] = value
    return out


def list_variations(builder, probes):
    """Each list field the config holds (given or filled in: layers_block_type, per-layer rope
    thetas) one entry longer, one shorter, and with its entries varied (numbers doubled at odd
    places, 0/1 flags flipped there, strings shifted by one place): a tree that counts a list's
    entries or its distinct values is seen to change (Nemotron-H's layers are its block types;
    Granite-SWA has one rotary embedding per distinct theta)."""
    base, resolved = probes[0][0], probes[0][2]
    out = []
    for key, value in sorted(resolved.items()):
        if SEP in key or not isinstance(value, list) or not value or key not in builder.fields:
            continue
        flags = all(v in (0, 1) and not isinstance(v, bool) for v in value)  # no_rope_layers
        varied = [(1 - v if flags else v * 2)
                  if isinstance(v, (int, float)) and not isinstance(v, bool) and k % 2 else v
                  for k, v in enumerate(value)]
        if all(isinstance(v, str) for v in value):
            varied = value[1:] + value[:1]
        for changed in (value + value[-1:], value[:-1], varied):
            if changed != value:
                builder.probe_into(out, dict(base, **{key: changed}))
    return out


def crossed_configs(builder, probes):
    """Each trigger with each size change: the shapes of what a trigger brings; and the list
    fields varied (list_variations)."""
    base = probes[0][0]
    out = list_variations(builder, probes)
    for trigger in triggers_of(probes):
        for key, value in size_changes(probes).items():
            if key in trigger:
                continue
            builder.probe_into(out, dict(base, **trigger, **{key: value}))
    return out


def drawn_configs(builder, base, plans, tried, rng, most):
    """For each fixed change in plans, one config with `most` (a range) other fields changed
    to values their probes used, as transformers builds it; combinations it refuses are
    drawn again a few times, then left out."""
    keys = sorted(tried)
    out = []
    for fixed in plans:
        others = [k for k in keys if k not in fixed]
        if not others:
            continue
        for _ in range(3):
            chosen = rng.sample(others, min(len(others), rng.randint(*most)))
            if builder.probe_into(out, dict(base, **{key: rng.choice(tried[key]) for key in chosen},
                                            **fixed)):
                break
    return out


def missed(descriptor, cases):
    """The cases the descriptor does not reproduce (one that fails to evaluate is missed)."""
    out = []
    for case in cases:
        try:
            got = evaluate_descriptor(descriptor, case[0])
        except Exception:
            out.append(case)
            continue
        if first_difference(case[1], got):
            out.append(case)
    return out


def difference(descriptor, case):
    try:
        return first_difference(case[1], evaluate_descriptor(descriptor, case[0]))
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def literal_tensors(node, path=""):
    """(layer pattern of a tensor, its literals of two digits or more) for each tensor whose
    shape holds such a literal: a size read off probes that never changed it."""
    out = []
    here = f"{path}.{node['name']}" if path and node.get("name") else (node.get("name") or path)
    for t in node.get("tensors", []):
        literals = {int(x) for dim in t["shape"] for x in re.findall(r"\b\d{2,}\b", dim)}
        if literals:
            out.append((f"{here}.{t['name']}" if here else t["name"], literals))
    if "node" in node:
        out += literal_tensors(dict(node["node"], name="*"), here)
    for alternative in node.get("alternatives", []):
        out += literal_tensors(dict(alternative["node"], name=node["name"]), path)
    for child in node.get("children", []):
        out += literal_tensors(child, here)
    return out


def literal_guards(builder, probes, descriptor, guarded):
    """A literal in a shape (a bias only some layers of some configs have, read at the default
    sizes: DeepSeek-V2's dense-MLP bias; a branch taken by a single probe) is checked with
    the sizes changed: the first probes whose tensor holds that value, each crossed with each
    size change. `guarded` keeps the probes already crossed."""
    out = []
    sizes = size_changes(probes)
    for pattern, literals in literal_tensors(descriptor["tree"]):
        holders = [raw for raw, tree, _ in probes
                   if any(layer_pattern(row[0]) == pattern and set(row[1]) & literals
                          for row in tree["parameters"] + tree["buffers"])]
        for raw in holders[:3]:
            key = json.dumps(raw, sort_keys=True)
            if key in guarded:
                continue
            guarded.add(key)
            for name, value in sizes.items():
                if raw.get(name) == probes[0][0].get(name):
                    builder.probe_into(out, dict(raw, **{name: value}))
    return out


def synthesize_checked(model_type):
    """synthesize(), then two checks on configs no single-field probe is, drawn with a seed of
    the model type (a rerun writes the same descriptor):
      - each trigger change with each size changed too, the probes behind a literal in a
        shape likewise (literal_guards), and JOINT_CONFIGS configs with 2-5 fields changed
        at once: those missed join the probes and the descriptor is synthesized again, up to
        JOINT_ROUNDS times;
      - HELD_OUT_CONFIGS more such configs, held out: one missed and the architecture is not
        written."""
    builder = Builder(model_type)
    probes = builder.probes()
    base = probes[0][0]
    tried = tried_values(probes)
    rng = random.Random(zlib.crc32(model_type.encode()))
    crossed = crossed_configs(builder, probes)
    crossed += drawn_configs(builder, base, [{}] * JOINT_CONFIGS, tried, rng, (2, 5))
    held_out = drawn_configs(builder, base, [{}] * HELD_OUT_CONFIGS, tried, rng, (2, 5))
    guarded = set()
    for _ in range(JOINT_ROUNDS):
        descriptor = synthesize(model_type, builder, probes)
        check_descriptor(descriptor, probes)
        crossed += literal_guards(builder, probes, descriptor, guarded)
        wrong = missed(descriptor, crossed)
        if not wrong:
            break
        probes = probes + wrong
        crossed = [case for case in crossed if case not in wrong]
    else:
        raise Unsupported(f"the descriptor still misses {len(wrong)} configs, such as "
                          f"{probe_label(wrong[0][0], base)}")
    wrong = missed(descriptor, held_out)
    if wrong:
        raise Unsupported(f"the descriptor misses {len(wrong)} of {len(held_out)} held-out "
                          f"configs, such as {probe_label(wrong[0][0], base)}: "
                          f"{difference(descriptor, wrong[0])}")
    add_checks(descriptor, builder)  # once: the checks do not depend on the synthesis rounds
    return descriptor, probes, len(held_out)


def probe_label(raw, base):
    changed = [f"{k}={raw[k]!r}" for k in raw if raw.get(k) != base.get(k)]
    return ", ".join(changed) or "class defaults"


def node_classes(node, out):
    """The class names a descriptor tree names, alternatives and repeats included."""
    if "class" in node:
        out.add(node["class"])
    for alternative in node.get("alternatives", []):
        node_classes(alternative["node"], out)
    if "node" in node:
        node_classes(node["node"], out)
    for child in node.get("children", []):
        node_classes(child, out)
    return out


def kernel_layers_by_name(builder, classes):
    """kernel_layers_of for the classes named `classes`, found in the modules transformers
    defines them in (the model's own, those it imports from, torch.nn), without probes."""
    _, _, config = builder.build(base_probe(builder.fields))
    with torch.device("meta"):
        model = builder.auto.from_config(config, dtype=torch.float32)
    found = {type(m).__name__: type(m) for m in model.modules()}
    namespaces = [vars(sys.modules[type(model).__module__]), vars(torch.nn)]
    activations = {(c[0] if isinstance(c, tuple) else c).__name__ for c in ACT2CLS.values()}
    layers, functions = {}, {}
    for name in sorted(classes - activations):
        cls = found.get(name) or next((n[name] for n in namespaces if name in n), None)
        if cls is None:
            raise Unsupported(f"class {name} is not found where transformers defines the model")
        layer = TOOLMOD.class_layer_name(cls)
        if layer is not None:
            layers[name] = layer
        names = TOOLMOD.declared_function_layer_names(cls)
        if names:
            functions[name] = names
    return {"layers": layers, "functions": functions}


def with_kernel_layers(descriptor, kernel_layers):
    """The descriptor with its kernel_layers where a full run writes them (after
    hyperparameters)."""
    out = {}
    for key, value in descriptor.items():
        if key != "kernel_layers":
            out[key] = value
        if key == "hyperparameters":
            out["kernel_layers"] = kernel_layers
    return out


def refresh_checks(folder, wanted):
    """--checks: what descriptors already in `folder` hold from transformers' source (the
    checks, the kernel layers) written again, the rest of each file as it is, as a full run
    writes them."""
    for model_type in wanted:
        path = os.path.join(folder, model_type + ".json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            descriptor = json.load(f)
        try:
            builder = Builder(model_type)
            add_checks(descriptor, builder)
            descriptor = with_kernel_layers(descriptor, kernel_layers_by_name(
                builder, node_classes(descriptor["tree"], set())))
        except Unsupported as e:
            print(f"{model_type}: checks not written: {e}", flush=True)
            continue
        write_descriptor(path, descriptor)
        own = sum("standard" not in entry for entry in descriptor["checks"])
        print(f"{model_type}: {own} checks, {len(descriptor.get('unchecked', []))} unchecked",
              flush=True)


def write_descriptor(path, descriptor):
    with open(path, "w") as f:
        # float("inf") as transformers writes it ({"__float__": "Infinity"}): JSON has none.
        json.dump(PreTrainedConfig._encode_special_floats(descriptor), f, indent=1,
                  sort_keys=False, allow_nan=False)
        f.write("\n")


def main():
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    if sys.argv[1] == "--checks":
        refresh_checks(sys.argv[2], sys.argv[3:] or oracle.model_types())
        return
    args = sys.argv[1:]
    time_limit = TIME_LIMIT
    if args[:1] == ["--time-limit"]:
        time_limit = int(args[1])
        args = args[2:]
    out_dir = args[0]
    wanted = args[1:] or oracle.model_types()
    os.makedirs(out_dir, exist_ok=True)
    passed = 0
    import signal

    def too_slow(*_):
        raise SearchTimeout()

    signal.signal(signal.SIGALRM, too_slow)
    for model_type in wanted:
        started = time.time()
        signal.alarm(time_limit)
        try:
            descriptor, probes, joint = synthesize_checked(model_type)
            check_edges(descriptor, Builder(model_type))
            signal.alarm(0)
        except SearchTimeout:
            print(f"{model_type}: not written: the search took more than {time_limit} s", flush=True)
            continue
        except Unsupported as e:
            signal.alarm(0)
            print(f"{model_type}: not written: {e}", flush=True)
            continue
        except Exception as e:  # transformers itself failed on a probe it should build
            signal.alarm(0)
            import traceback

            where = traceback.extract_tb(e.__traceback__)[-1]
            print(f"{model_type}: not written: {type(e).__name__}: {str(e)[:160]} "
                  f"({os.path.basename(where.filename)}:{where.lineno})", flush=True)
            continue
        write_descriptor(os.path.join(out_dir, model_type + ".json"), descriptor)
        passed += 1
        print(f"{model_type}: ok ({len(probes)} probes, {joint} held-out configs, "
              f"{time.time() - started:.1f} s)", flush=True)
    print(f"{passed} of {len(wanted)} architectures written to {out_dir}")


if __name__ == "__main__":
    main()
