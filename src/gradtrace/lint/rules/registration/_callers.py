"""What the file passes to a module class's ``__init__``: the layers a container on ``self``
holds when they come from the caller (``MergeLayer([nn.Linear(4, 3), nn.Linear(4, 3)])``)."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.calls import (
    BODY_FIELDS, FIND_LIMIT, ascii_code, holding, word_index, word_lines,
)
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import child_fields, children, of_types, walk


def class_calls(ctx: Context, cls: str) -> list[tuple[ast.AST, ast.Call]]:
    """(enclosing function or module, call) for every ``cls(...)`` call of a class of the
    file, in one walk order (cached per class)."""
    def make() -> list[tuple[ast.AST, ast.Call]]:
        out: list[tuple[ast.AST, ast.Call]] = []
        if cls not in ctx.analysis.classes:
            return out
        # statements whose lines never name the class hold no such call (NOTE [call sites])
        lines = word_lines(ctx, (cls,)) if ascii_code(ctx) else None
        stack: list[tuple[ast.AST, ast.AST]] = [(ctx.tree, ctx.tree)]
        while stack:
            owner, n = stack.pop()
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == cls:
                out.append((owner, n))
            inner = n if isinstance(n, FUNCTION_TYPES) else owner
            if lines is None or not isinstance(n, STATEMENTS):
                stack.extend((inner, c) for c in children(n))
                continue
            for f in child_fields(type(n)):  # children in order, quiet statements left out
                v = getattr(n, f, None)
                if f in BODY_FIELDS:
                    stack.extend((inner, c) for c in holding(ctx, n, f, lines))
                elif v.__class__ is list:
                    stack.extend((inner, c) for c in v if isinstance(c, ast.AST))
                elif isinstance(v, ast.AST):
                    stack.append((inner, v))
        return out
    return ctx.memo("gt4-class-calls:" + cls, ctx.tree, make)


def call_count(name: str, ctx: Context) -> int:
    """How often ``name(`` appears in the file's code (its ``class`` line included), counted
    once per file: a ``str.count`` per attribute made the rule quadratic in the file's size."""
    counts: dict[str, int] = ctx.memo("gt4-call-counts", ctx.tree, dict)
    got = counts.get(name)
    if got is None and len(counts) >= FIND_LIMIT and ascii_code(ctx):
        # a script with hundreds of classes: each scan of the whole text was quadratic; the
        # code's words, indexed once, give the same count (whole words followed by "(")
        code, n = ctx.code, len(name)
        got = counts[name] = sum(code.startswith("(", p + n)
                                 for p in word_index(ctx).get(name, ()))
    if got is None:  # `name(` not preceded by a word character
        code, needle, got = ctx.code, name + "(", 0
        pos = code.find(needle)
        while pos != -1:
            if pos == 0 or not (code[pos - 1].isalnum() or code[pos - 1] == "_"):
                got += 1
            pos = code.find(needle, pos + 1)
        counts[name] = got
    return got


STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case, ast.Module)


def nn_rooted(name: str, ctx: Context, depth: int = 0) -> bool:
    """Whether the file's class ``name`` derives from a ``torch.nn`` class (through classes of
    the file), not merely defines ``forward`` (a data transform does too)."""
    c = ctx.analysis.classes.get(name)
    if c is None or depth > 8:
        return False
    for b in c.node.bases:
        if (ctx.qualified_name(b) or "").startswith("torch.nn.") or (
                isinstance(b, ast.Name) and b.id != name and nn_rooted(b.id, ctx, depth + 1)):
            return True
    return False


def _from_file_class(e: ast.AST, ctx: Context) -> bool:
    """A call of a class of this file that is not an ``nn`` module (a transform)."""
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) \
        and e.func.id in ctx.analysis.classes and not nn_rooted(e.func.id, ctx)


def _param(init: ast.FunctionDef, name: str) -> bool:
    a = init.args
    return name in [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)][1:] or (
        a.vararg is not None and a.vararg.arg == name)


def _only_here(owner: ast.AST, name: str, call: ast.Call, ctx: Context) -> bool:
    """Whether ``name`` is read in ``owner`` only as an argument of ``call`` (the caller
    does not register the same layers another way, e.g. ``nn.ModuleList(layers)``)."""
    reads = _names(owner, ctx)[0].get(name, ())
    if not reads:
        return True
    inside = {id(x) for x in walk(call)}
    if all(id(x) in inside for x in reads):
        return True
    # a function of ``owner`` whose parameter has that name reads its own variable
    # (`def __init__(self, p_dnns): self.p_dnns = p_dnns` in the script that passes `p_dnns`)

    def shadowed() -> set[int]:
        out: set[int] = set()
        for fn in walk(owner):
            if fn is not owner and isinstance(fn, FUNCTION_TYPES) and name in {
                    x.arg for x in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs,
                                    fn.args.vararg, fn.args.kwarg) if x is not None}:
                out |= {id(x) for x in walk(fn)}
        return out
    own = ctx.memo("gt4-shadowed:" + name, owner, shadowed)
    return all(id(x) in inside or id(x) in own for x in reads)


def _names(owner: ast.AST, ctx: Context) -> tuple[dict[str, list[ast.Name]], set[str]]:
    """(the names read, the names assigned) in ``owner``'s body (the module, or a function,
    nested ones included), one walk per owner: a script calls a class many times, and walking
    its body per call was quadratic."""
    def make() -> tuple[dict[str, list[ast.Name]], set[str]]:
        reads: dict[str, list[ast.Name]] = {}
        stores: set[str] = set()
        body = owner.body if isinstance(owner, (ast.Module, *FUNCTION_TYPES)) else [owner]
        for s in body:
            for x in of_types(s, (ast.Name,)):
                if isinstance(x.ctx, ast.Load):
                    reads.setdefault(x.id, []).append(x)
                else:
                    stores.add(x.id)
        return reads, stores
    return ctx.memo("gt4-names", owner, make)


def _arguments(init: ast.FunctionDef, call: ast.Call) -> dict[str, ast.expr]:
    """Parameter of ``__init__`` -> argument of the constructor call ``Cls(...)``."""
    a = init.args
    names = [x.arg for x in (*a.posonlyargs, *a.args)][1:]
    out: dict[str, ast.expr] = {}
    for n, v in zip(names, call.args):
        if isinstance(v, ast.Starred):
            return out
        out[n] = v
    rest = call.args[len(names):]
    if a.vararg is not None and rest and not any(isinstance(v, ast.Starred) for v in rest):
        # `*parts` gathers the rest: the tuple the call makes (a node of its own, placed there)
        out[a.vararg.arg] = ast.copy_location(ast.Tuple(elts=list(rest), ctx=ast.Load()),
                                              rest[0])
    out.update((k.arg, k.value) for k in call.keywords if k.arg is not None)
    return out


def _may_give(init: ast.FunctionDef, owner: ast.AST, call: ast.Call, param: str | None,
              ctx: Context) -> bool:
    """Whether ``call`` may pass :func:`passed_in` something: an argument (for ``param``: a
    list or tuple, or a name assigned in the caller, which may be bound to one)."""
    args = _arguments(init, call)
    if param is None:
        return bool(args)
    arg = args.get(param)
    return isinstance(arg, (ast.List, ast.Tuple, ast.ListComp)) or (
        isinstance(arg, ast.Name) and arg.id in _names(owner, ctx)[1])


def passed_in(value: ast.AST, init: ast.FunctionDef, cls: str, ctx: Context,
              element: bool = False) -> tuple[list[ast.AST], ast.AST] | None:
    """(the expressions the callers of ``cls`` pass, where they are made) for a value of
    ``__init__`` that comes from one of its parameters: the whole list (``self.layers =
    layers``, ``list(layers)``) or, with ``element``, one entry (``for layer in layers:
    self._layers.append(layer)``, ``self._layers.append(layer)`` for a parameter ``layer``).
    None when no call of the file says."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id in ("list", "tuple") and len(value.args) == 1:
        value = value.args[0]
    if not isinstance(value, ast.Name) or call_count(cls, ctx) < 2 \
            or not nn_rooted(cls, ctx) or (not element and not _param(init, value.id)):
        return None  # not a name, the class is never called here, or it is no nn.Module
    calls = class_calls(ctx, cls)
    if not any(_may_give(init, owner, call, None if element else value.id, ctx)
               for owner, call in calls):
        return None  # no call can pass it (known before building the scope of `__init__`)
    scope = ctx.scope(init)
    whole = not element
    param = value.id
    b = scope.binding_before(param, getattr(value, "lineno", 0))
    if element and b is not None and isinstance(b.stmt, ast.For) \
            and isinstance(b.stmt.target, ast.Name) and isinstance(b.stmt.iter, ast.Name):
        param, whole = b.stmt.iter.id, True
        b = scope.binding_before(param, b.stmt.lineno)
    if b is not None or not _param(init, param):
        return None
    elts: list[ast.AST] = []
    made: ast.AST | None = None
    for owner, call in calls:
        arg = _arguments(init, call).get(param)
        if arg is None:
            continue
        where: ast.AST = arg
        if isinstance(arg, ast.Name) and arg.id in _names(owner, ctx)[1] \
                and _only_here(owner, arg.id, call, ctx):  # (a name never assigned: no scope)
            ab = ctx.scope(owner).binding_before(arg.id, call.lineno)
            if ab is not None and ab.value is not None:
                arg, where = ab.value, ab.stmt
        if whole and isinstance(arg, (ast.List, ast.Tuple)):
            elts.extend(arg.elts)
        elif whole and isinstance(arg, ast.ListComp):
            elts.append(arg.elt)  # `[nn.Sequential(...) for _ in range(n)]`
        elif not whole:
            elts.append(arg)
        else:
            continue
        made = made or where
    if any(_from_file_class(e, ctx) for e in elts):
        return None
    return (elts, made) if elts and made is not None else None
