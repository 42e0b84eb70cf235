"""Whether another file of the project calls a layer's ``backward`` method by hand.

# NOTE [backward called elsewhere]
A normalizing flow's layer is an ``nn.Module`` whose ``backward(self, z, log_df_dz)`` is the
inverse transform, not a gradient rule: the flow that holds the layers calls it by hand
(``z, log_df_dz = layer.backward(z, log_df_dz)``), often in another file of the project. Such
a call hands ``backward`` as many positional arguments as the method takes; a tensor's
``loss.backward()`` hands none (or only the gradient seed, ``y.backward(g)``, which a
one-argument method cannot be told from: a file that does this is read as calling its
layers, as in the checked file). The project's other files whose bytes hold ``.backward(``
(NOTE [reverse index]; at most :data:`READERS` of them, more: unknown) are read for a call
``x.backward(a, b, ...)`` whose positional arguments fit the method's signature, is not made
on ``torch.autograd``, and is not a value seeded with itself (``loss.backward(loss)``).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callers import readers
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

READERS = 24  # files holding `.backward(` parsed at most; more: unknown


def called_elsewhere(ctx: Context, fn: ast.FunctionDef) -> bool:
    """Some other file of the project calls ``x.backward(...)`` with the positional
    arguments ``fn`` (a method ``backward(self, ...)``) takes; False when unknown or none
    does (NOTE [backward called elsewhere])."""
    a = fn.args
    params = [*a.posonlyargs, *a.args][1:]
    if a.vararg is not None or not params:
        return False
    least = len(params) - len(a.defaults)
    found = readers(ctx, b".backward(", limit=READERS)
    return bool(found) and any(_fits(octx, least, len(params)) for octx in found)


def _fits(octx: Context, least: int, most: int) -> bool:
    for call, _s, _outer in call_sites(octx, "backward"):
        f = call.func
        n = len(call.args)
        if not isinstance(f, ast.Attribute) or not max(least, 1) <= n <= most \
                or any(isinstance(x, ast.Starred) for x in call.args) \
                or (octx.qualified_name(f.value) or "") == "torch.autograd":
            continue
        recv = dotted(f.value)
        if n == 1 and recv is not None and recv == dotted(call.args[0]):
            continue  # `loss.backward(loss)`: a seed, not a layer's inputs
        return True
    return False


# NOTE [an inverse that mirrors forward]
# A flow layer's ``backward(self, x)`` is often its inverse written as ``forward`` with the
# inverse parameter: ``forward`` returns ``x[:, self.perm]``, ``backward`` returns
# ``x[:, self.invperm]``, and ``__init__`` computes ``invperm`` from ``perm``
# (``torch.argsort(self.perm)``, ``torch.inverse(self.w)``). Such a method is no gradient
# rule: each return of ``backward`` is the same tree as the matching return of ``forward``
# (parameters matched by position, ``self`` attributes free), they differ in at least one
# ``self`` attribute, and every attribute that differs is stored in ``__init__`` (``self.b =
# ...`` or ``self.register_buffer('b', ...)``) from a value that reads forward's attribute.
# A gradient rule differentiates: its tree differs from ``forward``'s (``-grad``, ``grad *
# mask``) or reads attributes no store derives from forward's, and stays reported.

def mirrors_forward(cls: ast.ClassDef, fn: ast.FunctionDef) -> bool:
    """``fn`` (``backward``) is ``forward`` of ``cls`` with its attributes replaced by ones
    ``__init__`` derives from them (NOTE [an inverse that mirrors forward])."""
    methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
    fwd, init = methods.get("forward"), methods.get("__init__")
    if fwd is None or init is None:
        return False
    f_rets, b_rets = _return_values(fwd), _return_values(fn)
    if not f_rets or len(f_rets) != len(b_rets):
        return False
    names = dict(zip(_params(fwd), _params(fn)))
    pairs: set[tuple[str, str]] = set()
    if not all(_same_tree(a, b, names, pairs) for a, b in zip(f_rets, b_rets)):
        return False
    swapped = {(f, b) for f, b in pairs if f != b}
    if not swapped:
        return False
    stores = _init_stores(init)
    return all(b in stores and any(_reads_attr(v, f) for v in stores[b]) for f, b in swapped)


def _params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [x.arg for x in (*a.posonlyargs, *a.args)][1:]


def _return_values(fn: ast.FunctionDef) -> list[ast.expr]:
    out: list[ast.expr] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        n = todo.pop(0)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Return):
            if n.value is None:
                return []
            out.append(n.value)
            continue
        todo.extend(ast.iter_child_nodes(n))
    return out


def _self_attr(n: ast.AST) -> str | None:
    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
        return n.attr
    return None


def _same_tree(a: ast.AST, b: ast.AST, names: dict[str, str],
               pairs: set[tuple[str, str]]) -> bool:
    if type(a) is not type(b):
        return False
    fa, fb = _self_attr(a), _self_attr(b)
    if fa is not None or fb is not None:
        if fa is None or fb is None:
            return False
        pairs.add((fa, fb))
        return True
    if isinstance(a, ast.Name):
        return names.get(a.id, a.id) == b.id  # type: ignore[attr-defined]
    if isinstance(a, ast.expr_context):
        return True
    for (field, va), (_f, vb) in zip(ast.iter_fields(a), ast.iter_fields(b)):
        if isinstance(va, list):
            if not isinstance(vb, list) or len(va) != len(vb):
                return False
            if not all(_same_tree(x, y, names, pairs) if isinstance(x, ast.AST)
                       else x == y for x, y in zip(va, vb)):
                return False
        elif isinstance(va, ast.AST):
            if not isinstance(vb, ast.AST) or not _same_tree(va, vb, names, pairs):
                return False
        elif va != vb:
            return False
    return True


def _init_stores(init: ast.FunctionDef) -> dict[str, list[ast.expr]]:
    out: dict[str, list[ast.expr]] = {}
    for n in ast.walk(init):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                name = _self_attr(t)
                if name is not None:
                    out.setdefault(name, []).append(n.value)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in ("register_buffer", "register_parameter") \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == "self" \
                and len(n.args) >= 2 and isinstance(n.args[0], ast.Constant) \
                and isinstance(n.args[0].value, str):
            out.setdefault(n.args[0].value, []).append(n.args[1])
    return out


def _reads_attr(value: ast.expr, attr: str) -> bool:
    return any(_self_attr(n) == attr for n in ast.walk(value))
