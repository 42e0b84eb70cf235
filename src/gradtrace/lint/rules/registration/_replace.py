"""Functions of the file that swap submodules of a module they are given for new ones
(``setattr(module, name, nn.GroupNorm(...))`` while walking ``module.named_children()``): after
such a call the module holds new parameter objects, like ``model.fc = nn.Linear(...)``."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.registration._modules import module_ctor

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

WALKS = ("named_children", "named_modules", "children", "modules")
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def called_function(call: ast.Call, scope: Scope, line: int
                    ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The file's function a call runs: ``helper(...)``, ``self.method(...)``, or
    ``Class.method(...)`` (a static method of a class of the file)."""
    an = scope.ctx.analysis
    fn = an.local_callee(call, scope, line)
    if fn is not None:
        return fn
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        cls = an.classes.get(f.value.id)
        b = scope.binding_before(f.value.id, line)
        if cls is not None and (b is None or isinstance(b.stmt, ast.ClassDef)):
            m = cls.methods.get(f.attr)
            if m is not None and any(dotted(d) == "staticmethod" for d in m.decorator_list):
                return m
    return None


def replaced_params(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> frozenset[str]:
    """Parameters of ``fn`` whose submodules it replaces with newly built modules."""
    def make() -> frozenset[str]:
        a = fn.args
        params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        # loop variables walking a parameter's submodules stand for that parameter
        alias: dict[str, str] = {}
        for n in walk(fn):
            if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.iter, ast.Call) \
                    and isinstance(n.iter.func, ast.Attribute) and n.iter.func.attr in WALKS:
                owner = (dotted(n.iter.func.value) or "").partition(".")[0]
                if owner in params:
                    for t in walk(n.target):
                        if isinstance(t, ast.Name):
                            alias[t.id] = owner
        out: set[str] = set()
        for n in walk(fn):
            target, value = None, None
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                    and n.func.id == "setattr" and len(n.args) == 3:
                target, value = n.args[0], n.args[2]
            elif isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Attribute):
                target, value = n.targets[0].value, n.value
            root = (dotted(target) or "").partition(".")[0] if target is not None else ""
            root = alias.get(root, root)
            if root in params and value is not None and module_ctor(value, ctx):
                out.add(root)
        return frozenset(out)
    return ctx.memo("gt4-replaced-params", fn, make)


def replaces_submodules_of(call: ast.Call, scope: Scope, line: int) -> str | None:
    """The dotted argument of ``call`` whose submodules the called function replaces."""
    fn = called_function(call, scope, line)
    if fn is None:
        return None
    got = replaced_params(fn, scope.ctx)
    if not got:
        return None
    for p, v in scope.ctx.analysis.arguments(fn, call).items():
        if p in got and dotted(v):
            return dotted(v)
    if isinstance(call.func, ast.Attribute) and fn.args.args:  # static method: no `self`
        names = [x.arg for x in fn.args.args]
        for p, v in zip(names, call.args):
            if p in got and dotted(v):
                return dotted(v)
    return None
