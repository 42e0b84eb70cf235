"""GT401: a plain container built by mapping a lambda over values (NOTE [mapped containers])."""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.nodes import of_types

# NOTE [mapped containers]: ``self.heads = map_values(lambda d: nn.Linear(n, d), dims)`` with
# ``def map_values(fn, d): return {k: fn(v) for k, v in d.items()}`` (a function of the file
# whose every ``return`` is a dict or list display or comprehension of calls of one of its
# parameters), or ``self.heads = list(map(lambda d: nn.Linear(n, d), dims))`` (the builtin
# ``map``): the value is a plain ``dict``/``list`` whose entries are what the lambda builds.
# ``nn.Module.__setattr__`` registers only Modules and Parameters, so layers the lambda makes
# are in neither ``parameters()`` nor ``state_dict()`` (torch 2.13). A lambda's body is the
# entry; a class or function named as the mapper (``list(map(nn.Linear, dims[:-1], dims[1:]))``)
# stands for a call of it, judged like any entry (a layer class builds layers).
MAPPED_TEXT = "map"


def _mapped(fn: ast.AST) -> ast.AST | None:
    """The entry a mapper stands for: a lambda's body, or a call of a named class or function
    (a new node in a side table: the tree is never changed)."""
    if isinstance(fn, ast.Lambda):
        return fn.body
    if isinstance(fn, (ast.Name, ast.Attribute)):
        return ast.copy_location(ast.Call(func=fn, args=[], keywords=[]), fn)
    return None


def mapped_entries(value: ast.AST, ctx: Context) -> tuple[str, list[ast.AST]] | None:
    """("dict" | "list", [the lambda's body]) when ``value`` maps a lambda into a plain
    container (NOTE [mapped containers]), else None."""
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Name):
        return None
    name = value.func.id
    if name in ("list", "tuple") and len(value.args) == 1 and not value.keywords:
        inner = value.args[0]
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) \
                and inner.func.id == "map" and len(inner.args) >= 2 \
                and "map" not in ctx.analysis.functions:
            entry = _mapped(inner.args[0])
            return ("list", [entry]) if entry is not None else None
        return None
    fn = ctx.analysis.functions.get(name)
    if fn is None or isinstance(ctx.analysis.functions.get(name), ast.AsyncFunctionDef):
        return None
    got = _mapper(fn)
    if got is None:
        return None
    kind, index, param = got
    arg = value.args[index] if index < len(value.args) else next(
        (k.value for k in value.keywords if k.arg == param), None)
    entry = _mapped(arg) if arg is not None else None
    if entry is None or any(isinstance(a, ast.Starred) for a in value.args):
        return None
    return kind, [entry]


def _mapper(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, int, str] | None:
    """(kind, position, name) of the parameter ``fn`` maps over its input when every
    ``return`` of ``fn`` is a display or comprehension whose every entry calls that
    parameter."""
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    rets = [r.value for r in of_types(fn, (ast.Return,))]
    if not rets or any(r is None for r in rets):
        return None
    kinds: set[str] = set()
    called: set[str] = set()
    for r in rets:
        if isinstance(r, ast.DictComp):
            kinds.add("dict")
            entries = [r.value]
        elif isinstance(r, ast.Dict) and r.values:
            kinds.add("dict")
            entries = list(r.values)
        elif isinstance(r, (ast.ListComp, ast.List)) and getattr(r, "elts", True):
            kinds.add("list")
            entries = [r.elt] if isinstance(r, ast.ListComp) else list(r.elts)
        else:
            return None
        for e in entries:
            if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Name)
                    and e.func.id in params):
                return None
            called.add(e.func.id)
    if len(kinds) != 1 or len(called) != 1:
        return None
    param = called.pop()
    return kinds.pop(), params.index(param), param
