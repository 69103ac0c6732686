"""What a config class refuses, as descriptor data: each of its `@strict` class validators
(validate_architecture, validate_layer_type, validate_rope, ...) read from its source and
written as `checks` in the descriptor expression language (core/src/model/architectures/README.md).

A validator is a run of `if <condition>: raise ValueError(<message>)`, local names, early
returns and `super().validate_x()`: those become `{"if", "error", "by"}` entries whose
condition holds when the config is refused and whose error is the message with `{expr}` holes.
The base class's layer_types and rope validators become `{"standard": ..., "by"}` entries that
the C++ side implements once. A validator that is not of that shape (loops, set operations,
reads of rope_parameters, which the class standardizes first) is listed in `unchecked`: the
C++ side says it is not checked rather than pass it over.
Validators that only warn (validate_token_ids, validate_output_attentions) refuse nothing.
"""

import ast
import inspect
import json
import textwrap


# The base validators the C++ side implements itself (architecture_descriptor.cpp).
STANDARD = {
    "PreTrainedConfig.validate_layer_type": "layer_types",
    "RotaryEmbeddingConfigMixin.validate_rope": "rope",
}
# Base validators that warn or read what a config.json does not set (the attention
# implementation chosen at load time): nothing for a descriptor to check.
WARN_ONLY = {"PreTrainedConfig.validate_token_ids", "PreTrainedConfig.validate_output_attentions"}

EXCEPTIONS = {"ValueError", "TypeError", "NotImplementedError"}
COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
           ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}


class Untranslatable(Exception):
    pass


class Translator:
    """Python AST of one validator -> descriptor expressions over the class's fields."""

    def __init__(self, config_class, fields, aliases, prefix=""):
        self.config_class = config_class
        self.fields = fields  # field name -> spec, as the descriptor lists them
        self.aliases = aliases  # attribute_map: key -> field
        self.prefix = prefix  # a sub-config's fields are named text_config__hidden_size
        self.default = None

    def instance(self):
        if self.default is None:
            self.default = self.config_class()
        return self.default

    def attribute(self, name):
        if name == "is_heterogeneous":  # a property of per-layer configs; constant per class
            value = getattr(self.instance(), name)
            if isinstance(value, bool) and "per_layer_config" not in self.fields:
                return repr(value)
        name = self.field(name)
        if name in self.fields:
            return name
        raise Untranslatable(f"reads self.{name}, which is not a field")

    def field(self, name):
        name = self.prefix + name
        return name if name in self.fields else self.aliases.get(name, name)

    def has(self, name):
        return self.field(name) in self.fields or hasattr(self.instance(), name)

    def expr(self, node, env):
        e = lambda n: self.expr(n, env)  # noqa: E731
        if isinstance(node, ast.Constant):
            if node.value is None or isinstance(node.value, (bool, int, str)):
                return repr(node.value)
            raise Untranslatable(f"constant {node.value!r}")
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            raise Untranslatable(f"name {node.id}")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return self.attribute(node.attr)
        if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
            return f"({e(node.left)} {BINARY[type(node.op)]} {e(node.right)})"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return f"(not {e(node.operand)})"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return f"(-{e(node.operand)})"
        if isinstance(node, ast.BoolOp):
            # hasattr and is_heterogeneous are constants of the class: fold them away, and
            # what a constant short-circuits is never read (so not translated).
            absorbing, neutral = ("False", "True") if isinstance(node.op, ast.And) else ("True", "False")
            values = []
            for value in node.values:
                text = e(value)
                if text == absorbing:
                    return absorbing
                if text != neutral:
                    values.append(text)
            values = values or [neutral]
            joiner = " and " if isinstance(node.op, ast.And) else " or "
            return values[0] if len(values) == 1 else "(" + joiner.join(values) + ")"
        if isinstance(node, ast.IfExp):
            return f"({e(node.body)} if {e(node.test)} else {e(node.orelse)})"
        if isinstance(node, ast.Compare):
            parts, left = [], node.left
            for op, right in zip(node.ops, node.comparators):
                parts.append(self.compare(left, op, right, env))
                left = right
            return parts[0] if len(parts) == 1 else "(" + " and ".join(parts) + ")"
        if isinstance(node, ast.Subscript):
            return f"{e(node.value)}[{e(node.slice)}]"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            name, args = node.func.id, node.args
            if name in ("len", "int") and len(args) == 1:
                return f"{name}({e(args[0])})"
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords
                and (node.func.attr, len(node.args)) in (("split", 1), ("get", 1), ("get", 2))):
            arguments = ", ".join(e(a) for a in node.args)
            return f"{e(node.func.value)}.{node.func.attr}({arguments})"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            return f"of_kind({e(node.args[0])}, {kinds_of(node.args[1])!r})"
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "all"
                and len(node.args) == 1 and isinstance(node.args[0], ast.GeneratorExp)):
            # all(isinstance(x, T) for x in xs): each entry of a list of one kind.
            generator = node.args[0]
            loop = generator.generators[0] if len(generator.generators) == 1 else None
            test = generator.elt
            if (loop is not None and not loop.ifs and isinstance(loop.target, ast.Name)
                    and isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
                    and test.func.id == "isinstance" and isinstance(test.args[0], ast.Name)
                    and test.args[0].id == loop.target.id):
                return f"all_of_kind({e(loop.iter)}, {kinds_of(test.args[1])!r})"
            raise Untranslatable("all() over something else than isinstance of each entry")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            name, args = node.func.id, node.args
            if name in ("getattr", "hasattr") and args and isinstance(args[0], ast.Name) and args[0].id == "self":
                if len(args) < 2 or not isinstance(args[1], ast.Constant):
                    raise Untranslatable(f"{name} of a computed name")
                key = args[1].value
                if name == "hasattr":
                    return repr(self.has(key))
                if self.field(key) in self.fields:
                    return self.attribute(key)
                if len(args) == 3:
                    return e(args[2])
                raise Untranslatable(f"getattr(self, {key!r}) without a default")
        raise Untranslatable(ast.dump(node)[:80])

    def compare(self, left, op, right, env):
        symbol = COMPARE.get(type(op))
        if symbol is None:
            raise Untranslatable("comparison")
        if symbol in ("is", "is not"):
            if not (isinstance(right, ast.Constant) and right.value is None):
                raise Untranslatable("`is` with something other than None")
            return f"({self.expr(left, env)} {symbol} None)"
        if symbol in ("in", "not in") and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
            # A literal collection: membership as a chain of comparisons.
            value = self.expr(left, env)
            items = [self.expr(item, env) for item in right.elts]
            if not items:
                return "False" if symbol == "in" else "True"
            if symbol == "in":
                return "(" + " or ".join(f"{value} == {item}" for item in items) + ")"
            return "(" + " and ".join(f"{value} != {item}" for item in items) + ")"
        return f"({self.expr(left, env)} {symbol} {self.expr(right, env)})"

    def message(self, node, env):
        """A raise's message as a template: literal text with `{expression}` holes."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value.replace("{", "{{").replace("}", "}}")
        if isinstance(node, ast.JoinedStr):
            out = ""
            for part in node.values:
                if isinstance(part, ast.Constant):
                    out += part.value.replace("{", "{{").replace("}", "}}")
                elif part.conversion != -1 or part.format_spec is not None:
                    raise Untranslatable("a formatted hole with a conversion or format")
                else:
                    out += "{" + self.expr(part.value, env) + "}"
            return out
        raise Untranslatable("a message that is not a string")

    def body(self, statements, guard, env, by, out):
        """Appends the checks of `statements`, reached when `guard` holds. Returns the guard
        after them: RAISED when they always raise, None when they always return. The checks
        are tried in order and the first that holds refuses, so a check need not repeat that
        the ones before it did not hold."""
        env = dict(env)
        for statement in statements:
            if guard is None or guard is RAISED:
                return guard
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                continue  # a docstring
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(
                    statement.targets[0], ast.Name):
                env[statement.targets[0].id] = self.expr(statement.value, env)
                continue
            if isinstance(statement, ast.Return) and statement.value is None:
                return None
            if isinstance(statement, ast.Raise):
                call = statement.exc
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                        and call.func.id in EXCEPTIONS and len(call.args) == 1):
                    raise Untranslatable("a raise of something else")
                out.append({"if": guard, "error": self.message(call.args[0], env), "by": by})
                return RAISED
            if isinstance(statement, ast.If):
                test = self.expr(statement.test, env)
                if test in ("True", "False"):  # a constant of the class: one branch only
                    taken = statement.body if test == "True" else statement.orelse
                    guard = self.body(taken, guard, env, by, out)
                    continue
                then = self.body(statement.body, both(guard, test), env, by, out)
                # Past a branch that always raises, its test is known false.
                other_guard = guard if then is RAISED else both(guard, negate(test))
                other = self.body(statement.orelse, other_guard, env, by, out)
                if then is RAISED and other is RAISED:
                    return RAISED
                if not any(isinstance(n, ast.Return) for n in ast.walk(statement)):
                    continue  # both ways on, neither excluded by a return: the guard as before
                if then is RAISED:
                    guard = other
                elif other is RAISED:
                    guard = then if then is None else both(then, test)
                else:
                    guard = either(then, other)
                continue
            if isinstance(statement, ast.Expr) and is_super_call(statement.value):
                name = statement.value.func.attr
                for entry in self.checks_of(self.parent_method(by, name), guard):
                    out.append(entry)
                continue
            if isinstance(statement, ast.Expr) and is_logger_call(statement.value):
                continue  # a warning refuses nothing
            raise Untranslatable(type(statement).__name__)
        return guard

    def parent_method(self, by, name):
        owner = by.split(".")[0]
        mro = self.config_class.__mro__
        start = next(i for i, k in enumerate(mro) if k.__name__ == owner) + 1
        for klass in mro[start:]:
            if name in vars(klass):
                return vars(klass)[name]
        raise Untranslatable(f"super().{name} not found")

    def checks_of(self, function, guard="True"):
        by = function.__qualname__
        if by in STANDARD:
            return [{"standard": STANDARD[by], "by": by}]
        if by in WARN_ONLY:
            return []
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        out = []
        self.body(tree.body[0].body, guard, {}, by, out)
        for entry in out:
            if "rope_parameters" in entry.get("if", "") + entry.get("error", ""):
                # The class standardizes rope_parameters first (rope_scaling folded in, keys
                # filled in, per class: Phi-3 has its own): a check reading them here would
                # read them unstandardized.
                raise Untranslatable("reads rope_parameters, which the class standardizes first")
        return out


def kinds_of(node):
    """isinstance's second argument (int, or (int, float)) as of_kind's names: 'int float'."""
    names = node.elts if isinstance(node, ast.Tuple) else [node]
    if not all(isinstance(n, ast.Name) and n.id in ("bool", "int", "float", "str", "list", "dict")
               for n in names):
        raise Untranslatable("isinstance of a class other than bool, int, float, str, list, dict")
    return " ".join(n.id for n in names)


RAISED = object()  # a run of statements that always raises


def negate(test):
    inner = test[5:-1] if test.startswith("(not ") and test.endswith(")") else None
    if inner is not None and balanced(inner):
        return inner
    return f"(not {test})"


def balanced(text):
    depth = 0
    for c in text:
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


def both(a, b):
    return b if a == "True" else f"({a} and {b})"


def either(a, b):
    if a is None or a is RAISED:
        return b
    if b is None or b is RAISED:
        return a
    return "True" if "True" in (a, b) else f"({a} or {b})"


def is_super_call(node):
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Call) and isinstance(node.func.value.func, ast.Name)
            and node.func.value.func.id == "super")


def is_logger_call(node):
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id in ("logger", "warnings"))


def config_checks(config_class, fields, aliases, subs=None):
    """(checks, unchecked) of config_class and of its sub-configs `subs` ({name: class}, whose
    fields are named name__field): their class validators as descriptor entries, and those
    that cannot be written so ({"by": qualified name, "because"})."""
    checks, unchecked = [], []
    classes = [(config_class, "")] + [(k, name + "__") for name, k in (subs or {}).items()]
    for klass, prefix in classes:
        translator = Translator(klass, fields, aliases, prefix)
        for validator in getattr(klass, "__class_validators__", []):
            try:
                found = translator.checks_of(validator)
            except Untranslatable as e:
                unchecked.append({"by": validator.__qualname__, "because": str(e)})
                continue
            for entry in found:
                if prefix:
                    entry["of"] = prefix[:-2]  # the sub-config it checks
                checks.append(entry)
    return checks, unchecked


def refusal(config_class, raw):
    """(validator name, message, raised_by_python) of the class validator that refuses `raw`;
    None when it is accepted, or refused by something else than a class validator.
    raised_by_python: the validator did not raise the error itself (None * 2 in a condition)."""
    import traceback

    from huggingface_hub.errors import StrictDataclassClassValidationError

    try:
        config_class(**raw)
    except StrictDataclassClassValidationError as e:
        cause = e.__cause__
        if cause is None:
            return None
        frame = traceback.extract_tb(cause.__traceback__)[-1]
        by_python = not (frame.line or "").lstrip().startswith("raise")
        validator = str(e).split("'")[1]  # "Class validation error for validator 'validate_x':"
        return validator, str(cause), by_python
    except Exception:
        return None
    return None


# The Python side of the expression language's isinstance builtins (descriptor_expression.hpp).
KIND_NAMES = {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict",
              type(None): "NoneType"}


def of_kind(value, kinds):
    wanted = kinds.split()
    kind = KIND_NAMES.get(type(value))
    return kind in wanted or (kind == "bool" and "int" in wanted)


def all_of_kind(values, kinds):
    return all(of_kind(v, kinds) for v in values)


def format_message(template, evaluate):
    """A check's error with its {expression} holes evaluated (str() of each, as an f-string)."""
    out, i = "", 0
    while i < len(template):
        c = template[i]
        if c in "{}" and template[i + 1:i + 2] == c:
            out += c
            i += 2
        elif c == "{":
            end = template.index("}", i)
            out += str(evaluate(template[i + 1:end]))
            i = end + 1
        else:
            out += c
            i += 1
    return out


__all__ = ["config_checks", "config_rules", "refusal"]


def validator_source(config_class):
    """The source text of the class's validators, to see which fields they read."""
    texts = []
    for validator in getattr(config_class, "__class_validators__", []):
        try:
            texts.append(inspect.getsource(validator))
        except (OSError, TypeError):
            pass
    return "\n".join(texts)


def refusal_candidates(config_class):
    """Configs one or two fields away from the class defaults, as config.json gives them, for
    finding what the class's validators refuse: each int field moved by one, doubled, zeroed,
    negated; each pair of the fields its validators read set equal and one apart; strings given
    an extra part; lists cut and given an unknown entry; layer_types of the wrong length."""
    import dataclasses

    default = config_class()
    source = validator_source(config_class)
    ints, out = {}, []
    for f in dataclasses.fields(config_class):
        try:
            value = getattr(default, f.name)
        except Exception:
            continue
        if isinstance(value, bool):
            out.append({f.name: not value})
        elif isinstance(value, int):
            ints[f.name] = value
            out += [{f.name: v} for v in sorted({value + 1, value - 1, 2 * value + 1, 0, 1, -1})]
        elif isinstance(value, str) and f.name in source:
            out += [{f.name: value + "-x"}, {f.name: "x-" + value}, {f.name: "gated-" + value + "-x"}]
        elif isinstance(value, list) and value and f.name in source:
            out += [{f.name: value[:-1]}, {f.name: value + ["nope"]}]
        if value is not None and f.name in source:
            out.append({f.name: None})
    read = [name for name in ints if name in source]
    for a in read:
        for b in read:
            if a != b:
                out += [{a: ints[b]}, {a: ints[b] + 1}]
    layers = ints.get("num_hidden_layers")
    if layers and "layer_types" in {f.name for f in dataclasses.fields(config_class)}:
        out += [{"layer_types": ["full_attention"] * (layers + 1)}, {"layer_types": ["nope"] * layers}]
    return out


def refusals(config_class, most=16):
    """Up to `most` configs near the defaults that a class validator refuses:
    [{"config": the changed fields, "error": transformers' message}], one per distinct message
    first. A composite's sub-configs (Gemma 3's text_config) are changed inside their key."""
    found, messages = [], set()
    subs = {}
    for name in getattr(config_class, "sub_configs", None) or {}:
        value = getattr(config_class(), name, None)
        if value is not None and not getattr(type(value), "sub_configs", None):
            subs[name] = type(value)
    candidates = refusal_candidates(config_class)
    for name, sub_class in subs.items():
        candidates += [{name: raw} for raw in refusal_candidates(sub_class)]
    seen = set()
    for raw in candidates:
        key = json.dumps(raw, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        refused = refusal(config_class, raw)
        if refused is None:
            continue
        validator, message, by_python = refused
        found.append((message in messages, {"config": raw, "error": message, "validator": validator,
                                            "raised_by_python": by_python}))
        messages.add(message)
    found.sort(key=lambda entry: entry[0])  # new messages first, each in candidate order
    return [entry for _, entry in found[:most]]


def config_rules():
    """What PreTrainedConfig does for every config class, as data for the C++ side
    (core/src/model/config_rules.json): the layer types validate_layer_type accepts per list,
    and the legacy names __post_init__ renames in layer_types and mtp_layer_types; and the
    quant_method names from_pretrained knows in a quantization_config (AUTO_QUANTIZER_MAPPING, in
    the order its messages list them)."""
    import transformers
    from transformers import configuration_utils as cu
    from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING

    return {
        "generated_from": "transformers " + transformers.__version__,
        "validated_layer_lists": [["layer_types", list(cu.ALLOWED_ATTN_LAYER_TYPES)],
                                  ["mlp_layer_types", list(cu.ALLOWED_MLP_LAYER_TYPES)]],
        "layer_type_renames": dict(cu._LEGACY_LAYER_TYPE_REMAP),
        "renamed_layer_lists": ["layer_types", "mtp_layer_types"],
        "quantization_methods": list(AUTO_QUANTIZER_MAPPING.keys()),
    }


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: config_checks.py OUT.json (core/src/model/config_rules.json)")
    with open(sys.argv[1], "w") as f:
        json.dump(config_rules(), f, indent=1)
        f.write("\n")
