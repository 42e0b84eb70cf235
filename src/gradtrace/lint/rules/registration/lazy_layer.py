"""GT464: an optimizer built before the first forward of a module that creates a layer lazily."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis import ClassInfo
from gradtrace.lint.analysis.cuts import self_assignments
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call
from gradtrace.lint.rules.registration._first_call import flag_guarded_build
from gradtrace.lint.rules.registration._modules import owns_params


def _lazy_layer(cls: ClassInfo, ctx: Context) -> tuple[str, ast.stmt] | None:
    """``(attr, statement)`` for ``if self.<attr> is None: self.<attr> = nn.Linear(...)`` (a
    layer with parameters) in ``forward`` or a method it calls: built at the first call."""
    fwd = cls.methods.get("forward")
    if fwd is None:
        return None
    fns = [fwd] + [m for n in walk(fwd) if isinstance(n, ast.Call)
                   and (m := ctx.analysis.callee(n, fwd)) is not None and m is not fwd]
    for fn in fns:
        for s in walk(fn):
            if not isinstance(s, ast.If):
                continue
            guarded = {d for n in walk(s.test) if (d := dotted(n)) and d.startswith("self.")}
            for b in s.body:
                if isinstance(b, ast.Assign) and len(b.targets) == 1 \
                        and (t := dotted(b.targets[0])) in guarded \
                        and t.count(".") == 1 and owns_params(b.value, ctx):
                    return t[5:], b
    return flag_guarded_build(cls, fns, ctx)  # NOTE [built behind a first-call flag]


def _params_of(call: ast.Call) -> str | None:
    """``model`` for an optimizer call given ``model.parameters()`` (first argument, or the
    ``params`` keyword)."""
    for a in [*call.args[:1], *(k.value for k in call.keywords if k.arg == "params")]:
        if isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) \
                and a.func.attr == "parameters" and not a.args:
            return dotted(a.func.value)
    return None


def _optimizer_like(call: ast.Call, fn: ast.AST, cls: ast.ClassDef | None, ctx: Context) -> bool:
    """A ``torch.optim`` class, called directly, through an argument whose default is one
    (``optimizer_class=th.optim.Adam``), or through ``self.<x>`` set only from such an
    argument."""
    if is_optimizer_call(call, ctx):
        return True
    f = call.func
    names: list[str] = []
    if isinstance(f, ast.Name):
        names = [f.id]
    elif isinstance(f, ast.Attribute) and dotted(f.value) == "self" and cls is not None:
        names = [v.id for v in self_assignments(cls, f"self.{f.attr}", ctx)
                 if isinstance(v, ast.Name)]
        if len(names) != len(self_assignments(cls, f"self.{f.attr}", ctx)):
            return False
    if not names or not isinstance(fn, FUNCTION_TYPES):
        return False
    a = fn.args
    pos = [*a.posonlyargs, *a.args]
    pairs = [*zip(pos[len(pos) - len(a.defaults):], a.defaults), *zip(a.kwonlyargs, a.kw_defaults)]
    defaults = {arg.arg: d for arg, d in pairs if d is not None}
    return all(n in defaults and (q := ctx.qualified_name(defaults[n]) or "").startswith(
        "torch.optim.") and q.rpartition(".")[2][:1].isupper() for n in names)


class OptimizerBeforeLazyLayer(Rule):
    """An optimizer is built over a module's `parameters()` before its first forward, and that
    forward creates a layer lazily (`if self.net is None: self.net = nn.Linear(...)`).

    Why: `torch.optim` copies the list of parameters it is given when it is built. A layer
    that `forward` creates on its first call (its input size known only then) is registered
    on the module afterwards, so `model.parameters()` holds it, but the optimizer built before
    does not: `step()` never updates it, and it keeps its random initial weights while its
    gradient grows (stable-baselines3#1271, checked on torch 2.13). Build the optimizer after a
    first forward (a dry run on a dummy batch), build the layer in `__init__`, or
    `add_param_group` the new layer's parameters when it is made.
    The finding sits on the line that creates the layer when the code that uses the class
    builds the optimizer the usual way (the class is what breaks it: NOTE [lazy layer line]),
    on the optimizer when the class builds its own in `__init__`.
    Also a first-call flag: `if not self._built: self._built = True; self._make_weights()`,
    with the method creating `nn.Parameter`s (NOTE [built behind a first-call flag]).
    Known limits: the class is of this file and builds the layer under an `if` that tests
    that attribute (or a flag the block sets), in `forward` or a method it calls; the
    optimizer is built in that class's `__init__` (over `self.parameters()`), or over
    `m.parameters()` for an instance `m` of it made in the same function with no call of `m`
    before the optimizer.
    """

    code = "GT464"
    name = "optimizer-before-lazy-layer"
    message = ("`{opt}` (line {opt_line}) is built over `{owner}.parameters()` before the first "
               "forward of `{cls}`, which creates `self.{attr}` lazily (line {line}): the "
               "optimizer never holds that layer's parameters, so it never trains; {remedy}")
    # no optimizer in the file: nothing built too early; every class of a file that has one
    triggers = ("optim",)
    gate_statements = False
    examples = [
        Bad("""
            import torch
            from torch import nn

            class LazyHead(nn.Module):
                def __init__(self, n_out):
                    super().__init__()
                    self.n_out = n_out
                    self.proj = None

                def forward(self, x):
                    if self.proj is None:
                        self.proj = nn.Linear(x.shape[-1], self.n_out)
                    return self.proj(x)

            net = LazyHead(2)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            """, at=(12, 12)),
        Good("""
            import torch
            from torch import nn

            class LazyHead(nn.Module):
                def __init__(self, n_out):
                    super().__init__()
                    self.n_out = n_out
                    self.proj = None

                def forward(self, x):
                    if self.proj is None:
                        self.proj = nn.Linear(x.shape[-1], self.n_out)
                    return self.proj(x)

            net = LazyHead(2)
            net(torch.zeros(1, 4))  # a dry run builds the layer
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        cls = ctx.analysis.classes.get(node.name)
        if cls is None or cls.node is not node or not cls.is_module:
            return
        got = _lazy_layer(cls, ctx)
        if got is None:
            return
        attr, build = got
        init = cls.methods.get("__init__")
        if init is not None:
            for n in walk(init):
                if isinstance(n, ast.Call) and _params_of(n) == "self" \
                        and _optimizer_like(n, init, node, ctx):
                    yield self._found(n, "self", cls, attr, build, ctx)
                    return
        for call, owner in self._instances(cls, ctx):
            yield self._found(call, owner, cls, attr, build, ctx)
            return

    def _found(self, call: ast.Call, owner: str, cls: ClassInfo, attr: str, build: ast.stmt,
               ctx: Context) -> Finding:
        """# NOTE [lazy layer line]
        A class whose forward creates a layer, used by code that builds the optimizer over
        the model's parameters before a first call (the usual order), is fixed in the class:
        the layer's line leads, the optimizer is context. A class that builds its own
        optimizer in ``__init__`` before its forward ever ran is fixed at that optimizer."""
        fields = dict(opt=ctx.source(call.func) + "(...)", opt_line=call.lineno, owner=owner,
                      cls=cls.name, attr=attr, line=build.lineno)
        if owner == "self":
            return self.report(call, ctx, related=(Related(
                ctx.path, build.lineno, f"`self.{attr}` is created here, at the first forward",
                ctx.column(build)),), remedy="build the optimizer after a first forward, or the "
                "layer in `__init__`", **fields)
        return self.report(build, ctx, related=(Related(
            ctx.path, call.lineno, "the optimizer is built here, before the first forward",
            ctx.column(call)),), remedy="build the layer in `__init__` (or the optimizer after a "
            "first forward)", **fields)

    @staticmethod
    def _instances(cls: ClassInfo, ctx: Context) -> Iterator[tuple[ast.Call, str]]:
        """``(optimizer call, name)`` where a scope binds ``name = Cls(...)`` and builds an
        optimizer over ``name.parameters()`` before any call ``name(...)``."""
        for fn in [ctx.tree, *(n for n in walk(ctx.tree) if isinstance(n, FUNCTION_TYPES))]:
            scope = ctx.scope(fn)
            made: dict[str, int] = {}
            called: set[str] = set()
            for s in scope.stmts:
                if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                        and isinstance(s.value, ast.Call) \
                        and dotted(s.value.func) == cls.name and (t := dotted(s.targets[0])):
                    made[t] = s.lineno
                    continue
                for n in walk(s):
                    if not isinstance(n, ast.Call):
                        continue
                    name = dotted(n.func)
                    if name in made:
                        called.add(name)
                    owner = _params_of(n)
                    info = ctx.analysis.class_of(fn)
                    if owner in made and owner not in called and _optimizer_like(
                            n, fn, info.node if info is not None else None, ctx):
                        yield n, owner
                        return
