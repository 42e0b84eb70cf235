"""Helpers of GT430-GT433: misspellings of the flag, loops over a module's parameters, the
statement that sets the flag, and what may change which parameters a module has."""
from __future__ import annotations

import ast
import bisect

from gradtrace.lint.analysis.calls import ascii_code, span, word_lines
from gradtrace.lint.analysis.params import FLAG, param_loop_var
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.registration._grad_flags import GradFlag
from gradtrace.lint.rules.registration._modules import covers
from gradtrace.lint.rules.leaf._tensors import is_false

PARAM_ITERS = ("parameters", "named_parameters")
# calls that read a model without changing which parameters it has
HARMLESS = frozenset({"print", "len", "isinstance", "id", "type", "str", "repr", "sum",
                      "list", "filter", "map", "enumerate", "sorted", "zip", "hasattr",
                      "getattr", "vars", "dir"})


def _distance(a: str, b: str) -> int:
    """Levenshtein distance (small strings only)."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def misspells_flag(attr: str) -> bool:
    """``require_grad``, ``requires_grads``, ``requires_grad_``, ``requieres_grad``: an
    attribute one or two edits away from ``requires_grad`` (not the flag itself)."""
    return attr != FLAG and not attr.startswith("_") and 10 <= len(attr) <= 16 and "grad" in attr.lower() \
        and _distance(attr.lower(), FLAG) <= 2


def _loop_of_var(scope: Scope, stmt: ast.stmt, var: str) -> ast.stmt | None:
    for loop in reversed(scope.loops_of(stmt)):
        got = param_loop_var(loop)
        if got is not None and got[0] == var:
            return loop
    return None


def _inner_flag_stmt(f: GradFlag) -> ast.stmt:
    """The statement setting the flag: the assignment inside a freeze loop, or the call."""
    if isinstance(f.stmt, (ast.For, ast.AsyncFor)):
        got = param_loop_var(f.stmt)
        var = got[0] if got else None
        first: ast.stmt | None = None
        for s in walk(f.stmt):
            if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                    and isinstance(s.targets[0], ast.Attribute) \
                    and s.targets[0].attr == FLAG and dotted(s.targets[0].value) == var:
                if f.conditional or (is_false(s.value) if not f.value else not is_false(s.value)):
                    return s
                first = first or s  # the other arm's write: an arm a setting skips
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                    and isinstance(s.value.func, ast.Attribute) \
                    and s.value.func.attr == "requires_grad_" \
                    and dotted(s.value.func.value) == var:
                return s
        if first is not None:
            return first
    return f.stmt


def _touches(stmt: ast.stmt, root: str) -> bool:
    """Whether ``stmt`` may change which parameters ``root`` has: assigns under it, rebinds it,
    or hands it (or a part of it) to a call that is not a plain read."""
    base = root.partition(".")[0]
    for n in walk(stmt):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                for e in walk(t):
                    name = dotted(e) if isinstance(e, (ast.Name, ast.Attribute)) else None
                    if name and (covers(name, root) or covers(root, name)) \
                            and isinstance(getattr(e, "ctx", None), ast.Store):
                        return True
        elif isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name) and f.id in HARMLESS:
                continue
            if isinstance(f, ast.Attribute) and f.attr in ("add_module", "register_module",
                                                          "register_parameter", "apply") \
                    and covers(base, dotted(f.value) or "~"):
                return True
            for a in [*n.args, *(k.value for k in n.keywords)]:
                name = dotted(a)
                if name and (covers(name, root) or covers(root, name)
                             or name.partition(".")[0] == base):
                    return True
    return False


def _own_touches(s: ast.stmt, root: str) -> bool:
    """:func:`_touches` on the statement's own expressions (not its nested body)."""
    if isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith,
                      ast.Try)):
        head = [getattr(s, "iter", None), getattr(s, "test", None),
                *[i.context_expr for i in getattr(s, "items", ())]]
        return any(h is not None and _touches(ast.Expr(value=h), root) for h in head)
    return _touches(s, root)


PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def _frozen_declaration(cls: ast.ClassDef, ctx) -> ast.Call | None:  # type: ignore[no-untyped-def]
    """The first ``nn.Parameter(..., requires_grad=False)`` the class makes.

    The keyword is written in the class's code: a class whose lines (decorators included) do
    not hold the word ``requires_grad`` makes none, and is not walked (NOTE [call sites])."""
    lines = ctx.memo("gt433-flag-lines", ctx.tree,
                     lambda: word_lines(ctx, (FLAG,)) if ascii_code(ctx) else None)
    if lines is not None:
        first, last = span(cls)
        i = bisect.bisect_left(lines, first)
        if i == len(lines) or lines[i] > last:
            return None
    for n in walk(cls):
        if isinstance(n, ast.Call) and (ctx.qualified_name(n.func) or "") in PARAMETER_CLASSES \
                and any(k.arg == FLAG and isinstance(k.value, ast.Constant)
                        and k.value.value is False for k in n.keywords):
            return n
    return None


def declares_frozen(ctx) -> bool:  # type: ignore[no-untyped-def]
    """Some class of the file declares a frozen ``nn.Parameter``."""
    return ctx.memo("gt433-declares", ctx.tree, lambda: any(
        _frozen_declaration(c.node, ctx) is not None for c in ctx.analysis.classes.values()))


def declared_frozen(owner: str, scope: Scope, line: int, ctx) -> ast.Call | None:  # type: ignore[no-untyped-def]
    """The ``nn.Parameter(..., requires_grad=False)`` declared by a class of the file when the
    module ``owner`` is an instance of it, holds one (an ``nn.Sequential(...)`` built with
    it), or is a class of the file that builds one in its methods."""
    try:
        expr = ast.parse(owner, mode="eval").body
    except SyntaxError:
        return None
    k = ctx.analysis.kind(expr, scope, line)
    if k is None or not k.is_module:
        return None
    classes = ctx.analysis.classes
    names = [k.cls] if k.cls in classes else []
    if isinstance(k.node, ast.Call):
        names += [a.func.id for a in k.node.args if isinstance(a, ast.Call)
                  and isinstance(a.func, ast.Name) and a.func.id in classes]
    for name in names:
        got = _frozen_declaration(classes[name].node, ctx)
        if got is not None:
            return got
        for sub in walk(classes[name].node):  # one level down: parts built from the file's classes
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) \
                    and sub.func.id in classes and sub.func.id != name:
                got = _frozen_declaration(classes[sub.func.id].node, ctx)
                if got is not None:
                    return got
    return None


def unguarded_grad_use(loop: ast.stmt, var: str,
                       guards: tuple[str, ...] = ("grad", FLAG)) -> ast.stmt | None:
    """The first statement of ``loop`` that dereferences ``var.grad`` (``var.grad.data``,
    ``var.grad /= n``, ``var.grad.mul_()``) with no test of ``grad``/``requires_grad`` on the
    way (a test naming one of ``guards`` guards what follows)."""
    return _unguarded_in(loop.body, var, guards)  # type: ignore[attr-defined]


def _unguarded_in(body: list[ast.stmt], var: str, guards: tuple[str, ...]) -> ast.stmt | None:
    for s in body:
        if isinstance(s, (ast.If, ast.While, ast.Try, ast.With)):
            test = getattr(s, "test", None)
            if test is not None and any(isinstance(n, ast.Attribute) and n.attr in guards
                                        for n in walk(test)):
                return None  # guarded (and anything after it may rely on the guard)
            if isinstance(s, ast.Try):
                continue
            got = _unguarded_in(s.body, var, guards)
            if got is not None:
                return got
            continue
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                          ast.For, ast.AsyncFor)):
            continue
        if _derefs_grad(s, var):
            return s
    return None


def _derefs_grad(s: ast.stmt, var: str) -> bool:
    if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Attribute) \
            and s.target.attr == "grad" and dotted(s.target.value) == var:
        return True
    nodes = list(walk(s))
    if any(isinstance(n, (ast.BoolOp, ast.IfExp, ast.Compare)) and any(
            isinstance(x, ast.Attribute) and x.attr == "grad" for x in walk(n)) for n in nodes):
        return False  # `p.grad is not None and ...` inline
    for n in nodes:
        if isinstance(n, ast.BinOp) and any(  # `lr * p.grad`: arithmetic on None
                isinstance(x, ast.Attribute) and x.attr == "grad" and dotted(x.value) == var
                for x in (n.left, n.right)):
            return True
        if isinstance(n, (ast.Attribute, ast.Subscript)) and not (
                isinstance(n, ast.Attribute) and n.attr == "grad"):
            v = n.value
            if isinstance(v, ast.Attribute) and v.attr == "grad" and dotted(v.value) == var:
                return True
    return False
