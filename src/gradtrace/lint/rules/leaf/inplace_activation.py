"""GT133: an activation module that works in place is applied to a module's own parameter.

# NOTE [in-place activation on a parameter]
``nn.ReLU(inplace=True)(w)`` runs ``relu_`` on ``w``: on a leaf that requires grad (a
registered ``nn.Parameter``) with grad on, torch raises "a leaf Variable that requires grad is
being used in an in-place operation" (pytorch-facts.md#leaf-inplace). A module's ``forward`` that
applies its activation module straight to one of its parameters (a fast-fusion weight
``self.weight_relu(self.weight)``, EfficientDet's BiFPN) is safe only while that module is out
of place. The module is in place when it is built with ``inplace=True`` (the finding is on the
call), or when a pass of the file over a model's ``modules()``/``children()`` sets ``m.inplace =
True`` on modules of its class (YOLOv5's ``initialize_weights``: ``elif t in [nn.ReLU, ...]:
m.inplace = True``), in a branch whose tests name that class or name no ``torch.nn`` class
(every module): the finding is on that assignment, the cause, with the application as related.
Silent when the activation is applied to anything else than the bare ``self.<parameter>`` (an
expression such as ``self.weight.clone()`` or ``self.weight * 1`` is a new tensor), when the
parameter is built with ``requires_grad=False``, when the attribute is assigned more than once
in the class, and when the pass sits in a function the file never calls.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

ACTIVATIONS = frozenset(f"torch.nn.{c}" for c in (
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "CELU", "SELU", "SiLU", "Mish", "Hardswish",
    "Hardsigmoid", "Hardtanh", "RReLU", "Threshold", "Dropout", "Dropout1d", "Dropout2d",
    "Dropout3d", "AlphaDropout"))
WALKS = frozenset({"modules", "named_modules", "children", "named_children"})


def _self_attr(e: ast.AST) -> str | None:
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        return e.attr
    return None


def _is_true(e: ast.AST | None) -> bool:
    return isinstance(e, ast.Constant) and e.value is True


def _attrs(cls: ast.ClassDef) -> dict[str, ast.AST]:
    """``self.<x>`` assigned exactly once in the class: the value."""
    seen: dict[str, list[ast.AST]] = {}
    for n in walk(cls):
        targets = n.targets if isinstance(n, ast.Assign) else \
            [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            a = _self_attr(t)
            if a is not None:
                seen.setdefault(a, []).append(n.value if isinstance(n, ast.Assign) else None)
    return {a: v[0] for a, v in seen.items() if len(v) == 1 and v[0] is not None}


def _applications(ctx: Context) -> Iterator[tuple[ast.Call, str, str, ast.Call]]:
    """``self.<act>(self.<param>)`` in a module class of the file: (the call, the class's
    name, the torch class of the activation, the activation's constructor call)."""
    for info in ctx.analysis.classes.values():
        if not info.is_module:
            continue
        attrs = _attrs(info.node)
        for n in walk(info.node):
            if not (isinstance(n, ast.Call) and len(n.args) == 1 and not n.keywords):
                continue
            act, param = _self_attr(n.func), _self_attr(n.args[0])
            made, weight = attrs.get(act or ""), attrs.get(param or "")
            if not (isinstance(made, ast.Call) and isinstance(weight, ast.Call)):
                continue
            q = ctx.call_name(made) or ""
            if q in ACTIVATIONS and ctx.call_name(weight) == "torch.nn.Parameter" and not any(
                    k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
                    and not k.value.value for k in weight.keywords):
                yield n, info.name, q, made


def _flag_sets(body: list[ast.stmt], var: str, tests: tuple[ast.AST, ...]
               ) -> Iterator[tuple[ast.Assign, tuple[ast.AST, ...]]]:
    """``<var>.inplace = True`` in ``body``, with the ``if`` tests that lead to it."""
    for s in body:
        if isinstance(s, ast.Assign) and _is_true(s.value) and any(
                isinstance(t, ast.Attribute) and t.attr == "inplace"
                and isinstance(t.value, ast.Name) and t.value.id == var for t in s.targets):
            yield s, tests
        elif isinstance(s, ast.If):
            yield from _flag_sets(s.body, var, (*tests, s.test))
            yield from _flag_sets(s.orelse, var, tests)
        elif isinstance(s, (ast.For, ast.While, ast.With, ast.Try)):
            for part in ("body", "orelse", "finalbody"):
                yield from _flag_sets(getattr(s, part, []), var, tests)


def _passes(ctx: Context) -> Iterator[tuple[ast.Assign, frozenset[str] | None]]:
    """Each ``m.inplace = True`` of a loop over ``X.modules()`` (or the other walks) the file
    runs, with the torch classes its branch names (None: every module)."""
    called = {n.func.id for n in walk(ctx.tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name)}
    called |= {n.func.attr for n in walk(ctx.tree) if isinstance(n, ast.Call)
               and isinstance(n.func, ast.Attribute)}
    for fn in [ctx.tree, *(n for n in walk(ctx.tree) if isinstance(n, ast.FunctionDef))]:
        if isinstance(fn, ast.FunctionDef) and fn.name not in called:
            continue
        for loop in fn.body if isinstance(fn, ast.Module) else walk(fn):
            if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                    and isinstance(loop.iter.func, ast.Attribute)
                    and loop.iter.func.attr in WALKS):
                continue
            t = loop.target
            if isinstance(t, ast.Tuple) and len(t.elts) == 2:
                t = t.elts[1]
            if not isinstance(t, ast.Name):
                continue
            for flag, tests in _flag_sets(loop.body, t.id, ()):
                named = {q for test in tests for n in walk(test)
                         if isinstance(n, (ast.Name, ast.Attribute))
                         and (q := ctx.qualified_name(n) or "").startswith("torch.nn.")}
                yield flag, frozenset(named) if named else None


class InplaceActivationOnParameter(Rule):
    """An activation module that works in place (`nn.ReLU(inplace=True)`, or made in place by a
    pass over `model.modules()`) is applied to a module's own parameter.

    Why: the module runs `relu_` (or another in-place op) on the `nn.Parameter`, a leaf that
    requires grad; with grad on torch raises "a leaf Variable that requires grad is being used
    in an in-place operation" at the first forward. A weight-initialisation pass that sets
    `m.inplace = True` on every ReLU-type module (YOLOv5's `initialize_weights`) turns a
    fusion-weight `nn.ReLU()` of another class into exactly that. Apply the activation out of
    place there (`F.relu(self.weight)`), to a copy (`self.weight.clone()`), or leave that
    module out of the pass.
    Known limits: only `self.<act>(self.<param>)` with both attributes assigned once in a
    module class of the file; a pass counts when it loops over `modules()`/`children()` (or
    the named ones) in a function the file calls; whether the pass reaches an instance of
    that class is not followed.
    """

    code = "GT133"
    name = "inplace-activation-on-parameter"
    message = ("`{what}` makes `{cls}.{act}` (`{torch}`) work in place, and `{cls}` applies it "
               "to its parameter `self.{param}`: an in-place op on a leaf that requires grad "
               "raises in forward")
    triggers = ("inplace",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            class Fuse(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = nn.Parameter(torch.ones(2))
                    self.act = nn.ReLU()

                def forward(self, a, b):
                    w = self.act(self.w)
                    return w[0] * a + w[1] * b

            def init_layers(model):
                for m in model.modules():
                    if isinstance(m, (nn.ReLU, nn.LeakyReLU)):
                        m.inplace = True

            fuse = Fuse()
            init_layers(fuse)
            """, at=(17, 12)),
        Bad("""
            import torch
            import torch.nn as nn

            class Gate(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.alpha = nn.Parameter(torch.zeros(1))
                    self.act = nn.ReLU(inplace=True)

                def forward(self, x):
                    return x * self.act(self.alpha)
            """, at=(11, 19)),
        Good("""
            import torch
            import torch.nn as nn

            class Fuse(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = nn.Parameter(torch.ones(2))
                    self.act = nn.ReLU()

                def forward(self, a, b):
                    w = self.act(self.w.clone())
                    return w[0] * a + w[1] * b

            def init_layers(model):
                for m in model.modules():
                    if isinstance(m, nn.ReLU):
                        m.inplace = True

            class Tail(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = nn.Parameter(torch.ones(2))
                    self.act = nn.SiLU()

                def forward(self, x):
                    return x * self.act(self.w)

            def make_fast(model):
                for m in model.modules():
                    if isinstance(m, nn.LeakyReLU):
                        m.inplace = True

            fuse, tail = Fuse(), Tail()
            init_layers(fuse)
            make_fast(tail)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        apps = list(_applications(ctx))
        if not apps:
            return
        passes = list(_passes(ctx))  # NOTE [in-place activation on a parameter]
        for call, cls, q, made in apps:
            act, param = _self_attr(call.func), _self_attr(call.args[0])
            rel = Related(ctx.path, call.lineno, f"`{cls}` applies it to `self.{param}`: raises here",
                          ctx.column(call))
            if any(k.arg == "inplace" and _is_true(k.value) for k in made.keywords) or (
                    q in ("torch.nn.ReLU", "torch.nn.ReLU6", "torch.nn.SELU", "torch.nn.SiLU")
                    and made.args and _is_true(made.args[0])):
                yield self.report(call, ctx, what=ctx.source(made), cls=cls, act=act,
                                  torch=q.replace("torch.", ""), param=param)
                continue
            for flag, named in passes:
                if named is None or q in named:
                    yield self.report(flag, ctx, related=[rel], what=ctx.source(flag).strip(),
                                      cls=cls, act=act, torch=q.replace("torch.", ""),
                                      param=param)
                    break
