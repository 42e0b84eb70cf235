"""The library layer class a parameter's default names, called to build a module.

# NOTE [layer class given by a default]
``def __init__(self, cin, cout, activation=nn.ReLU, act_params={"inplace": True}): ...
self.act = activation(**act_params)``: the parameter holds a class, not a module, and the
call builds the module. Every instance the file builds without passing the parameter runs the
default class's layer (MobileNetV3 bottlenecks, timm-style ``act_layer=nn.GELU`` blocks), so
the call builds that layer (NOTE [module results]). Only a ``torch.nn`` layer class (the
module's behaviour is the library's, whatever the arguments unpacked with ``**``), only in
``__init__`` of a class of the file or a top-level function of the file (their call sites are
known), and only when the function never rebinds the parameter and every call site in the
file leaves it to its default (a site unpacking ``*``/``**`` arguments, or passing anything
for it, even None, makes it unknown). A class of the file subclassing this one and passing
another class through ``super().__init__`` is not a call site (a known limit).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.statement_shapes import argument_default

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def default_layer_class(name: str, fn: ast.AST | None, ctx: Context) -> str | None:
    """The qualified ``torch.nn`` class the parameter ``name`` of ``fn`` defaults to, when
    every call of ``fn`` in the file leaves it to that default; else None."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    d = argument_default(name, fn)
    if not isinstance(d, (ast.Name, ast.Attribute)):
        return None
    q = ctx.qualified_name(d) or ""
    if not q.startswith("torch.nn.") or not q.rpartition(".")[2][:1].isupper():
        return None
    method = ctx.analysis.class_of(fn) is not None
    if (method and fn.name != "__init__") or (
            not method and ctx.analysis.functions.get(fn.name) is not fn):
        return None
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del)):
            return None
    a = fn.args
    pos = [x.arg for x in (*a.posonlyargs, *a.args)][1 if method else 0:]
    i = pos.index(name) if name in pos else -1
    for call, _ in ctx.analysis.call_sites(fn):
        if any(isinstance(x, ast.Starred) for x in call.args) \
                or any(k.arg is None or k.arg == name for k in call.keywords) \
                or 0 <= i < len(call.args):
            return None
    return q
