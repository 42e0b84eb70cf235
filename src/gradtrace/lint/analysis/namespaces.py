"""Command-line options: the attributes of an ``argparse`` namespace are values parsed from text.

# NOTE [parsed options]
``args = parser.parse_args()`` with ``parser = argparse.ArgumentParser(...)``: each attribute of
``args`` is what the option's ``type=`` made of a command-line string, or its ``default``: a
string, a number, a bool, a list of them. No tensor with history comes out of ``parse_args``
(``args.log_log_scale * torch.log(noise)`` is as free of a graph as ``noise``). The namespace
may come from a function of the file or of another file of the project (NOTE [project index])
whose every ``return`` hands one back (``args = parse_args()`` with ``def parse_args(): ...
return parser.parse_args()`` in ``utility/parser.py``), two calls deep. Not an attribute the
file assigns itself (``args.mask = torch.ones(n)``, ``setattr(args, ...)``, ``vars(args)``
written to): that one may hold anything.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

_PARSE = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args"})
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def parsed_option(ctx: Context, scope: Scope, e: ast.Attribute, line: int) -> bool:
    """``e`` (``args.lr``) reads an option of an ``argparse`` namespace
    (NOTE [parsed options])."""
    if not isinstance(e.value, ast.Name) or not ctx.mentions("parse_"):
        return False
    name = e.value.id
    if e.attr in _written(ctx).get(name, ()) or name in _written(ctx).get("", ()):
        return False
    bs = scope.bindings.get(name, ())
    if bs:
        b = scope.binding_before(name, line)
        where = scope
    else:  # a global of the module, read in a function
        where = ctx.scope(ctx.tree)
        got = where.bindings.get(name, ())
        b = got[-1] if len(got) == 1 else None
    if b is None or not isinstance(b.stmt, ast.Assign) or b.value is None:
        return False
    return _namespace(ctx, where, b.value, b.line, 0)


def _written(ctx: Context) -> dict[str, set[str]]:
    """name -> the attributes the file assigns on it; ``""`` -> names written as a whole
    (``setattr(args, ...)``, ``vars(args)[k] = v``, ``args.__dict__``)."""
    def make() -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for n in walk(ctx.tree):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and (
                    isinstance(n.ctx, (ast.Store, ast.Del)) or n.attr == "__dict__"):
                key = n.attr if n.attr != "__dict__" else None
                if key is None:
                    out.setdefault("", set()).add(n.value.id)
                else:
                    out.setdefault(n.value.id, set()).add(key)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in (
                    "setattr", "vars") and n.args and isinstance(n.args[0], ast.Name):
                out.setdefault("", set()).add(n.args[0].id)
        return out
    return ctx.memo("parsed-options-written", ctx.tree, make)


def _namespace(ctx: Context, scope: Scope, v: ast.expr, line: int, depth: int) -> bool:
    """``v`` evaluates to an ``argparse`` namespace."""
    if isinstance(v, ast.Subscript) and isinstance(v.slice, ast.Constant) and v.slice.value == 0:
        v = v.value  # `parser.parse_known_args()[0]`
    if not isinstance(v, ast.Call):
        return False
    f = v.func
    if isinstance(f, ast.Attribute) and f.attr in _PARSE:
        return _parser(ctx, scope, f.value, line)
    if depth >= 2 or not isinstance(f, (ast.Name, ast.Attribute)):
        return False
    if isinstance(f, ast.Name) and f.id in ctx.analysis.functions:
        octx, fn = ctx, ctx.analysis.functions[f.id]
    else:
        from gradtrace.lint.analysis.project import foreign_def
        got = foreign_def(ctx, f)
        if got is None or not isinstance(got[1], _FUNCS):
            return False
        octx, fn = got
    fn_node = getattr(fn, "node", fn)
    if not isinstance(fn_node, _FUNCS):
        return False
    rets = [n for n in walk(fn_node) if isinstance(n, ast.Return)]
    fscope = octx.scope(fn_node)
    return bool(rets) and all(r.value is not None and _namespace(
        octx, fscope, r.value, r.lineno, depth + 1) for r in rets)


def _parser(ctx: Context, scope: Scope, e: ast.expr, line: int) -> bool:
    """``e`` is an ``argparse.ArgumentParser`` (built in place or bound to one)."""
    if isinstance(e, ast.Name):
        b = scope.binding_before(e.id, line)
        if b is None or b.value is None:
            return False
        e = b.value
    return isinstance(e, ast.Call) and ctx.qualified_name(e.func) == "argparse.ArgumentParser"


def graphless_with_options(ctx: Context, scope: Scope, e: ast.expr, line: int,
                           depth: int = 0) -> bool:
    """``e`` holds no graph when its options (NOTE [parsed options]) are numbers: arithmetic
    of values whose flow kind is a number, NumPy, detached or a new leaf, constants, and
    options; a name is read through its binding (three deep)."""
    from gradtrace.lint.flow import DETACHED, LEAF, NUMBER, NUMPY
    if isinstance(e, ast.BinOp):
        return graphless_with_options(ctx, scope, e.left, line, depth) and \
            graphless_with_options(ctx, scope, e.right, line, depth)
    if isinstance(e, ast.UnaryOp):
        return graphless_with_options(ctx, scope, e.operand, line, depth)
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float))
    if isinstance(e, ast.Attribute) and parsed_option(ctx, scope, e, line):
        return True
    k = scope.kind(e, line)
    if k in (NUMBER, NUMPY, DETACHED, LEAF):
        return k != LEAF or not _asks_grad(scope, e, line)
    if k is None and isinstance(e, ast.Name) and depth < 3:
        b = scope.binding_before(e.id, line)
        if b is not None and isinstance(b.stmt, ast.Assign) and b.value is not None \
                and len(b.stmt.targets) == 1 and isinstance(b.stmt.targets[0], ast.Name):
            return graphless_with_options(ctx, scope, b.value, b.line, depth + 1)
    return False


def _asks_grad(scope: Scope, e: ast.expr, line: int) -> bool:
    """A new leaf made to require grad (``torch.ones(n, requires_grad=True)``,
    ``.requires_grad_()``)."""
    if not isinstance(e, ast.Name):
        return True
    b = scope.binding_before(e.id, line)
    v = b.value if b is not None else None
    return v is None or any(isinstance(n, ast.keyword) and n.arg == "requires_grad"
                            or isinstance(n, ast.Attribute) and n.attr == "requires_grad_"
                            for n in walk(v))
