"""What a config class's __post_init__ fills in that is no field of the class, as descriptor
`derived` rules: T5Config sets `dense_act_fn` and `is_gated_act` from `feed_forward_proj`
("gated-gelu": gelu_new, gated), and T5LayerFF builds its feed-forward from them.

Read from the source (ast), written in the descriptor expression language with
config_checks.Translator. An assignment inside an `if` becomes a conditional over the value
before it. A value set before `super().__post_init__(**kwargs)` gives way to a config.json key
of that name (the base class sets its kwargs after it: FLAN-T5's config.json says
"dense_act_fn": "gelu_new" itself), one set after it, or one whose key __post_init__ pops from
its kwargs (T5's tie_word_embeddings, always True), replaces any ("always").
An attribute the translator cannot write (read from kwargs, from a field __post_init__ has
changed, set in only one branch) is left out: the generator then does not describe it.
Also: the string constants __post_init__ compares a field with ("gated-gelu"), which the
generator tries as that field's values, so that the branches they open are probed.
"""

import ast
import inspect
import textwrap

import config_checks


class _Translator(config_checks.Translator):
    """Refuses a field __post_init__ has reassigned before the read: its value there is not
    config.json's."""

    def __init__(self, *args):
        super().__init__(*args)
        self.reassigned = set()

    def attribute(self, name):
        if self.field(name) in self.reassigned:
            raise config_checks.Untranslatable(f"reads self.{name} after __post_init__ changed it")
        return super().attribute(name)


def _own_post_init(config_class):
    function = vars(config_class).get("__post_init__")
    if function is None:
        return None
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(function))).body[0]
    except (OSError, TypeError, SyntaxError):
        return None


def _self_target(node):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _stored_attributes(node):
    return {_self_target(n) for n in ast.walk(node)
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and _self_target(n)}


class _Walk:
    UNKNOWN = object()

    def __init__(self, translator, wanted):
        self.translator = translator
        self.wanted = wanted
        self.after_super = False

    def statements(self, body, env, values):
        """Follows `body`, updating env (locals: expression or UNKNOWN) and values (wanted
        attribute: (expression, set after super) or UNKNOWN)."""
        for statement in body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
                if isinstance(target, ast.Name):
                    env[target.id] = self.value(statement.value, env)
                    continue
                name = _self_target(target)
                if name in self.wanted:
                    value = self.value(statement.value, env)
                    values[name] = value if value is self.UNKNOWN else (value, self.after_super)
                    continue
                if name is not None:
                    self.translator.reassigned.add(self.translator.field(name))
                    continue
            if isinstance(statement, ast.If):
                self.branches(statement, env, values)
                continue
            if isinstance(statement, ast.Expr) and config_checks.is_super_call(statement.value):
                self.after_super = True
                continue
            # Anything else: what it stores is no longer known.
            for name in _stored_attributes(statement):
                if name in self.wanted:
                    values[name] = self.UNKNOWN
                else:
                    self.translator.reassigned.add(self.translator.field(name))
            if isinstance(statement, (ast.For, ast.While, ast.With, ast.Try)):
                for node in ast.walk(statement):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        env[node.id] = self.UNKNOWN

    def branches(self, statement, env, values):
        test = self.value(statement.test, env)
        then_env, then_values = dict(env), dict(values)
        other_env, other_values = dict(env), dict(values)
        self.statements(statement.body, then_env, then_values)
        self.statements(statement.orelse, other_env, other_values)
        for name in set(then_env) | set(other_env):
            a, b = then_env.get(name, self.UNKNOWN), other_env.get(name, self.UNKNOWN)
            env[name] = a if a == b else self.merged(test, a, b)
        for name in set(then_values) | set(other_values):
            a, b = then_values.get(name, self.UNKNOWN), other_values.get(name, self.UNKNOWN)
            if a == b:
                values[name] = a
            elif self.UNKNOWN in (a, b) or a[1] != b[1]:
                values[name] = self.UNKNOWN
            else:
                values[name] = (self.merged(test, a[0], b[0]), a[1])

    def merged(self, test, a, b):
        if self.UNKNOWN in (test, a, b):
            return self.UNKNOWN
        if test == "True":
            return a
        if test == "False":
            return b
        return f"({a} if {test} else {b})"

    def value(self, node, env):
        if any(isinstance(n, ast.Name) and env.get(n.id, None) is self.UNKNOWN
               for n in ast.walk(node)):
            return self.UNKNOWN
        try:
            return self.translator.expr(node, env)
        except config_checks.Untranslatable:
            return self.UNKNOWN


def post_init_fills(config_class, fields, aliases, wanted):
    """{name: derived rule} for the attributes `wanted` (no fields) that config_class's own
    __post_init__ sets from its fields."""
    function = _own_post_init(config_class)
    if function is None:
        return {}
    walk = _Walk(_Translator(config_class, fields, aliases), set(wanted))
    values = {}
    walk.statements(function.body, {}, values)
    consumed = _popped_kwargs(function)
    fills = {}
    for name, value in values.items():
        if value is _Walk.UNKNOWN:
            continue
        expression, after_super = value
        replaces = after_super or name in consumed
        fills[name] = {"always": True, "expr": expression} if replaces else \
            {"when": None, "expr": expression}
    return fills


def _popped_kwargs(function):
    """The config.json keys __post_init__ takes out of its kwargs (T5's tie_word_embeddings):
    the base class never sets them, so what __post_init__ assigns them stands."""
    return {node.args[0].value for node in ast.walk(function)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "pop" and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "kwargs" and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)}


def compared_strings(config_class, fields):
    """{field: [string constants]} that config_class's __post_init__ compares the field with."""
    function = _own_post_init(config_class)
    out = {}
    if function is None:
        return out
    for node in ast.walk(function):
        if not isinstance(node, ast.Compare) or len(node.comparators) != 1:
            continue
        pair = (node.left, node.comparators[0])
        for side, other in (pair, pair[::-1]):
            name = _self_target(side)
            if name in fields and isinstance(other, ast.Constant) and isinstance(other.value, str):
                out.setdefault(name, []).append(other.value)
    return out
