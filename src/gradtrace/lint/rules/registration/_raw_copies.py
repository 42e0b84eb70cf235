"""A parameter copied under a new name while its own slot stays registered (GT415).

# NOTE [raw copy left registered]
The weight-drop re-parametrisation (AWD-LSTM's ``WeightDrop``) copies each named weight of a
wrapped module into a new Parameter, ``m.register_parameter(name + '_raw',
Parameter(getattr(m, name).data))``, and on every forward sets the computed weight back,
``setattr(m, name, F.dropout(raw, ...))``. The original name is still registered as a
parameter unless the copy deletes it (``del m._parameters[name]``, ``delattr(m, name)``), and
``nn.Module.__setattr__`` refuses a plain tensor for a registered parameter: ``TypeError:
cannot assign 'torch.FloatTensor' as parameter 'weight'``. Read here: the registration runs in
a ``for name in <names>`` loop of a method, of ``nn.Parameter`` made from ``getattr(m,
name)`` bound in that loop, under ``name`` plus a string; another loop of the class over the
same ``<names>`` sets ``setattr(m, name2, value)`` with a value that is surely not a
Parameter; nothing in the class deletes or pops an entry.
"""
from __future__ import annotations

import ast
from typing import Callable

from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk


def _loop_of(fn: ast.AST, node: ast.AST) -> ast.For | None:
    """The innermost ``for <name> in ...`` of ``fn`` holding ``node``."""
    best = None
    for n in walk(fn):
        if isinstance(n, ast.For) and isinstance(n.target, ast.Name) and any(
                x is node for x in walk(n)):
            best = n if best is None or n.lineno > best.lineno else best
    return best


def _getattr_of(loop: ast.For, name: str, owner: str) -> set[str]:
    """Local names bound in ``loop`` to ``getattr(<owner>, <name>)``."""
    return {t.id for s in walk(loop) if isinstance(s, ast.Assign)
            and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name)
            and s.value.func.id == "getattr" and len(s.value.args) >= 2
            and dotted(s.value.args[0]) == owner and isinstance(s.value.args[1], ast.Name)
            and s.value.args[1].id == name
            for t in s.targets if isinstance(t, ast.Name)}


def _bound_in(loop: ast.For, e: ast.expr, line: int) -> ast.expr:
    """What a local name ``e`` was last set to in ``loop`` before ``line`` (else ``e``)."""
    if not isinstance(e, ast.Name):
        return e
    last = None
    for s in walk(loop):
        if isinstance(s, ast.Assign) and s.lineno < line and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Name) and s.targets[0].id == e.id \
                and (last is None or s.lineno > last.lineno):
            last = s
    return last.value if last is not None else e


def _root(e: ast.AST) -> str | None:
    while isinstance(e, (ast.Attribute, ast.Call, ast.Subscript)):
        e = e.func if isinstance(e, ast.Call) else e.value
    return e.id if isinstance(e, ast.Name) else None


def raw_copy_setattr(call: ast.Call, fn: ast.AST, cls: ast.ClassDef, ctx: Context,
                     plain: Callable[[ast.AST, ast.AST], bool]) -> ast.Call | None:
    """The ``setattr(m, name, value)`` that the registration ``call`` (a
    ``m.register_parameter(name + '_raw', ...)``) leaves to fail
    (NOTE [raw copy left registered]); ``plain(value, method)`` tells a value that is surely
    not a Parameter."""
    f = call.func
    owner = dotted(f.value) if isinstance(f, ast.Attribute) else None
    key, made = call.args[0], call.args[1]
    if owner is None or not (isinstance(key, ast.BinOp) and isinstance(key.op, ast.Add)
                             and isinstance(key.left, ast.Name)
                             and isinstance(key.right, ast.Constant)
                             and isinstance(key.right.value, str)):
        return None
    loop = _loop_of(fn, call)
    name = key.left.id
    if loop is None or loop.target.id != name or not (  # type: ignore[union-attr]
            isinstance(made, ast.Call) and ctx.call_name(made) == "torch.nn.Parameter"
            and made.args and _root(made.args[0]) in _getattr_of(loop, name, owner)):
        return None
    names = dotted(loop.iter)
    if names is None or any(isinstance(n, ast.Delete) or isinstance(n, ast.Call) and (
            isinstance(n.func, ast.Name) and n.func.id == "delattr"
            or isinstance(n.func, ast.Attribute) and n.func.attr == "pop")
            for n in walk(cls)):
        return None
    for m in cls.body:
        for other in walk(m) if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) else ():
            if not (isinstance(other, ast.For) and isinstance(other.target, ast.Name)
                    and dotted(other.iter) == names):
                continue
            for s in walk(other):
                if isinstance(s, ast.Call) and isinstance(s.func, ast.Name) \
                        and s.func.id == "setattr" and len(s.args) == 3 \
                        and dotted(s.args[0]) == owner and isinstance(s.args[1], ast.Name) \
                        and s.args[1].id == other.target.id \
                        and plain(_bound_in(other, s.args[2], s.lineno), m):
                    return s
    return None
