"""GT428: a holder class keeps the module it is given (no copy) and freezes it, while the
caller trains that very module."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.trained_abroad import trained_abroad
from gradtrace.lint.analysis.trained_methods import runs_with_graph
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import function_scopes, of_types
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call
from gradtrace.lint.rules.registration._grad_flags import GradFlag, flag_statement, grad_flags


@dataclass(frozen=True)
class _Holder:
    """A class whose ``__init__`` freezes its parameter ``param`` (position ``pos``)."""

    cls: str
    param: str
    pos: int
    flag: GradFlag


class SharedModuleFrozenByHolder(Rule):
    """A class keeps the module it is given as-is and freezes it, while the caller trains it.

    Why: `self.model = model` stores a reference, not a copy; `self.model.requires_grad_(False)`
    (or a loop setting `p.requires_grad = False` over its parameters) then freezes the caller's
    module itself. An EMA or teacher wrapper written so and handed the student encoder
    (`EMA(self.encoder)`) freezes the student from construction on: its forward builds no graph
    through the encoder, `backward()` reaches only the other layers, and the encoder never
    trains, with no error (data2vec-pytorch#8). Keep a copy (`copy.deepcopy(model)`) before
    freezing.
    Known limits: the class is of this file and freezes, at the top level of its `__init__`,
    the parameter it keeps (not rebound first); the module handed is a `self` attribute of a
    module class of the file whose trained methods call it with grad, an instance of which an
    optimizer of the file holds (or another file trains), or a name the same function both
    gives to an optimizer and calls with grad; no module's flag is set back on in the file.
    """

    code = "GT428"
    name = "shared-module-frozen-by-holder"
    message = ("`{cls}.__init__` freezes the module it is given, kept as-is (not a copy): "
               "`{arg}`, handed at line {line}, is the module its owner trains, so it is "
               "frozen too and never learns; freeze a `copy.deepcopy(...)` of it")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Teacher:
                def __init__(self, net, momentum=0.99):
                    self.net = net
                    for p in self.net.parameters():
                        p.requires_grad = False
                    self.momentum = momentum
            class Student(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.backbone = nn.Linear(4, 4)
                    self.teacher = Teacher(self.backbone)
                def forward(self, x):
                    return self.backbone(x)
            model = Student()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """, at=(7, 12)),
        Good("""
            import copy
            import torch
            import torch.nn as nn
            class Teacher:
                def __init__(self, net, momentum=0.99):
                    self.net = copy.deepcopy(net)
                    for p in self.net.parameters():
                        p.requires_grad = False
                    self.momentum = momentum
            class Student(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.backbone = nn.Linear(4, 4)
                    self.teacher = Teacher(self.backbone)
                def forward(self, x):
                    return self.backbone(x)
            model = Student()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        holders = _holders(ctx)
        if not holders or _unfreezes(ctx):
            return
        told: set[str] = set()
        for fn in function_scopes(node):  # the script too: `ema = EMA(model)` then its loop
            for call in _own_calls(fn):
                h = holders.get(call.func.id) if isinstance(call.func, ast.Name) else None
                if h is None or h.cls in told:
                    continue
                arg = call.args[h.pos] if h.pos < len(call.args) else next(
                    (k.value for k in call.keywords if k.arg == h.param), None)
                d = dotted(arg) if arg is not None else None
                if d is None or not _trained(d, call, fn, ctx):
                    continue
                told.add(h.cls)
                yield self.report(flag_statement(h.flag.stmt), ctx, related=[Related(
                    ctx.path, call.lineno, f"`{d}` is handed to `{h.cls}` here",
                    ctx.column(call))], cls=h.cls, arg=d, line=call.lineno)


def _own_calls(fn: ast.AST) -> list[ast.Call]:
    """The calls of ``fn``; of the module, those of its statements outside any def or class."""
    if not isinstance(fn, ast.Module):
        return of_types(fn, (ast.Call,))  # type: ignore[return-value]
    return [c for s in fn.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                     ast.ClassDef))
            for c in of_types(s, (ast.Call,))]  # type: ignore[misc]


def _holders(ctx: Context) -> dict[str, _Holder]:
    out: dict[str, _Holder] = {}
    for name, info in ctx.analysis.classes.items():
        init = info.methods.get("__init__")
        if init is None or "requires_grad" not in ctx.code_of(init):
            continue
        params = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]
        live = set(params)
        held: dict[str, str] = {}  # self attribute -> the parameter it holds
        flags = {id(f.stmt): f for f in grad_flags(ctx.scope(init))
                 if not f.value and not f.conditional}
        for s in init.body:
            if isinstance(s, ast.Assign) and len(s.targets) == 1:
                t = s.targets[0]
                if isinstance(t, ast.Name):
                    live.discard(t.id)  # `model = copy.deepcopy(model)`
                elif isinstance(t, ast.Attribute) and dotted(t.value) == "self":
                    if isinstance(s.value, ast.Name) and s.value.id in live:
                        held[t.attr] = s.value.id
                    else:
                        held.pop(t.attr, None)
                continue
            f = flags.get(id(s))
            if f is None:
                continue
            p = held.get(f.root[5:]) if f.root.startswith("self.") else (
                f.root if f.root in live and f.root in held.values() else None)
            if p is not None:
                out[name] = _Holder(name, p, params.index(p), f)
                break
    return out


def _unfreezes(ctx: Context) -> bool:
    """Whether the file sets a module's flag back on anywhere (a later unfreeze may undo it)."""
    for fn in function_scopes(ctx.tree):
        for f in grad_flags(ctx.scope(fn)):
            if f.value and (isinstance(f.stmt, (ast.For, ast.AsyncFor))
                            or f.root == "self" or f.root.startswith("self.")):
                return True
            if f.value:
                k = ctx.analysis.kind(ast.Name(id=f.root, ctx=ast.Load()), ctx.scope(fn),
                                      f.stmt.lineno) if f.root.isidentifier() else None
                if k is None or k.is_module:
                    return True
    return False


def _trained(d: str, call: ast.Call, fn: ast.AST, ctx: Context) -> bool:
    """Whether the module ``d`` handed at ``call`` (in ``fn``) is trained by its owner."""
    cls = ctx.analysis.class_of(fn)
    if d.startswith("self.") and d.count(".") == 1 and cls is not None and cls.is_module:
        return _runs_with_grad(d, cls, ctx) and _class_trained(cls.name, ctx)
    scope = ctx.scope(fn)
    held = any(is_optimizer_call(c, ctx) and c.args and _params_of(c.args[0]) in (d, *(
        d.rsplit(".", i)[0] for i in range(1, d.count(".") + 1)))
        for c in of_types(fn, (ast.Call,)))
    return held and any(isinstance(c, ast.Call) and dotted(c.func) == d
                        and scope.grad_off_at(c) is None and c.lineno > call.lineno
                        for c in of_types(fn, (ast.Call,)))


def _params_of(e: ast.expr) -> str | None:
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and not e.args \
            and e.func.attr == "parameters":
        return dotted(e.func.value)
    return None


def _runs_with_grad(d: str, cls, ctx: Context) -> bool:  # type: ignore[no-untyped-def]
    for m, fn in cls.methods.items():
        if m == "__init__" or not runs_with_graph(ctx, cls.name, m):
            continue
        scope = ctx.scope(fn)
        if any(dotted(c.func) == d and scope.grad_off_at(c) is None
               for c in of_types(fn, (ast.Call,))):
            return True
    return False


def _class_trained(name: str, ctx: Context) -> bool:
    """An optimizer of the file holds the parameters of an instance of class ``name``."""
    for fn in function_scopes(ctx.tree):
        scope = ctx.scope(fn)
        for c in of_types(fn, (ast.Call,)):
            if not is_optimizer_call(c, ctx) or not c.args:
                continue
            e = c.args[0]
            if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                    and e.func.attr == "parameters":
                k = ctx.analysis.kind(e.func.value, scope, c.lineno)
                if k is not None and k.is_module and (k.cls or "").rpartition(".")[2] == name:
                    return True
    return trained_abroad(ctx, name)
