"""What a module call gives back: the value every ``return`` of its class's ``forward`` makes.

# NOTE [module outputs]
``probs = model(x)`` is a softmax when the ``forward`` of ``model``'s class (a class of the
file) ends in one on every ``return`` (``return self.softmax(logits)``, ``p = torch.sigmoid(h);
return p.squeeze(-1)``), or when ``model`` is an ``nn.Sequential`` whose last layer is one.
What a rule looks for (a softmax, a sigmoid, a Linear layer) is its own recogniser; this
module only finds, for a call, the expressions that make its result, each with the scope it
is read in, so that ``self.softmax`` inside ``forward`` is read as the ``nn.Softmax`` that
``__init__`` assigned (NOTE [kinds]), not at the caller's place.
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Callable, Optional

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.module_results import (  # noqa: F401 - bound_value re-exported
    SEQUENTIAL, constructor_flags, reachable_returns, sequential_last, bound_value, forward_of,
)
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.nodes import scope_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

Strip = Callable[[ast.AST], ast.AST]


def returned(fn: ast.AST, ctx: Context, strip: Strip) -> list[ast.AST] | None:
    """What every ``return`` of ``fn`` gives back (under ``strip``'s views, through one
    local name); None when one returns nothing or there is none."""
    scope = ctx.scope(fn)
    rets = [n for n in scope_nodes(fn) if isinstance(n, ast.Return)]
    if not rets or any(r.value is None for r in rets):
        return None
    return [strip(bound_value(strip(r.value), scope, r.lineno))  # type: ignore[arg-type]
            for r in rets]


def _returned(fn: ast.AST, ctx: Context, strip: Strip,
              flags: dict[str, object]) -> list[ast.AST] | None:
    """:func:`returned`, without the returns on the arms of an ``if`` the constructor's
    ``flags`` decide against (NOTE [module results])."""
    if not flags:
        return returned(fn, ctx, strip)
    scope = ctx.scope(fn)
    rets = reachable_returns(fn, flags)
    return [strip(bound_value(strip(r.value), scope, r.lineno))  # type: ignore[arg-type]
            for r in rets] or None


def module_output(call: ast.AST, scope: Scope, ctx: Context,
                  strip: Strip) -> tuple[Scope | None, list[ast.AST]] | None:
    """When ``call`` runs a module: (the scope of its class's ``forward``, what each of its
    ``return`` gives back), or (None, [the last layer]) for an ``nn.Sequential`` built in
    place from layers; None when not known (NOTE [module outputs])."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, (ast.Name, ast.Attribute)):
        return None
    runs = call.func.value if isinstance(call.func, ast.Attribute) and \
        call.func.attr == "forward" else call.func  # `self.forward(x)`, `model.forward(x)`
    k = ctx.analysis.kind(runs, scope, call.lineno)  # `def train(model): model(x)` too
    if k is None or k.what != MODULE or not k.cls:
        return None
    own = ctx.analysis.classes.get(k.cls)
    if own is not None:  # the returns its constructor leaves possible (NOTE [module results])
        fwd = forward_of(own)
        flags = constructor_flags(own, k.node) if isinstance(k.node, ast.Call) else {}
        got = _returned(fwd, ctx, strip, flags) if fwd is not None else None
        return (ctx.scope(fwd), got) if got else None
    if k.cls in SEQUENTIAL and isinstance(k.node, ast.Call):
        last = k.node
        while isinstance(last, ast.Call) and (ctx.qualified_name(last.func) or "") in SEQUENTIAL:
            last = sequential_last(last, ctx, None) if not any(  # type: ignore[assignment]
                isinstance(a, ast.Starred) for a in last.args) else None
        return (None, [last]) if isinstance(last, ast.Call) else None
    return None


def output_made_by(call: ast.AST, scope: Scope, ctx: Context, strip: Strip,
                   made: Callable[[ast.AST, Context, Scope | None], ast.AST | None],
                   ) -> ast.AST | None:
    """The one node ``made`` recognises in what every return of the module ``call`` runs
    gives back (the same node on every return), or None."""
    got = module_output(call, scope, ctx, strip)
    return None if got is None else same_made(got[1], made, ctx, got[0])


def same_made(values: list[ast.AST], made: Callable[[ast.AST, Context, Scope | None],
                                                    ast.AST | None],
              ctx: Context, fscope: Scope | None) -> ast.AST | None:
    """The one node ``made`` recognises in every value (the same node for all), or None."""
    found: ast.AST | None = None
    for v in values:
        m = made(v, ctx, fscope)
        if m is None or (found is not None and found is not m):
            return None
        found = m
    return found


def unpacked_output(e: ast.AST, scope: Scope, ctx: Context, strip: Strip
                    ) -> tuple[Scope | None, list[ast.AST]] | None:
    """``edge_out, cs = net(x)`` then ``e`` = ``edge_out``: (the scope of the class's
    ``forward``, the element at ``e``'s place in the tuple each of its ``return`` gives back,
    read there through one local name); None when a return is not a tuple of that width
    (NOTE [module outputs])."""
    if not isinstance(e, ast.Name):
        return None
    b = scope.binding_before(e.id, getattr(e, "lineno", 0) + 1)
    s = b.stmt if b is not None else None
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Tuple) and isinstance(s.value, ast.Call)):
        return None
    names = [x.id if isinstance(x, ast.Name) else None for x in s.targets[0].elts]
    if e.id not in names:
        return None
    got = module_output(s.value, scope, ctx, lambda x: x)
    if got is None or got[0] is None:
        return None
    fscope, values = got
    i, out = names.index(e.id), []
    for v in values:
        if not (isinstance(v, ast.Tuple) and len(v.elts) == len(names)):
            return None
        line = getattr(v, "lineno", 0)
        out.append(strip(bound_value(strip(v.elts[i]), fscope, line)))
    return fscope, out


Accept = Callable[[ast.Call, "Scope"], Optional[str]]
Holders = dict[int, tuple[str, ast.AST]]  # id(function) -> (`helper(` / `self.method(`, it)


def holders_of(fns: list[ast.AST], ctx: Context) -> Holders:
    """The functions and methods among ``fns`` (those holding a loss line), each with the
    spelling that calls it from the file (``helper(``) or from its class (``self.method(``)."""
    return {id(f): (("self." if ctx.analysis.class_of(f) is not None else "")
                    + getattr(f, "name", "") + "(", f) for f in fns}


def argument_sink(fn: ast.AST, ctx: Context, strip: Strip, accept: Accept,
                  lines: frozenset[int], holders: Holders, depth: int = 0) -> str | None:
    """What ``accept`` says of the call on one of ``lines`` that ``fn`` (a function, or a
    method: after ``self``) hands its first parameter to as first argument, unchanged but for
    ``strip``'s views, directly or through one of ``holders`` (the functions holding those
    lines) that it passes it to the same way (``JointEdgeSegLoss.forward(edgein, ...)`` ->
    ``self.bce2d(edgein, ...)`` -> ``F.binary_cross_entropy_with_logits(edgein.view(1, -1),
    ...)``): the loss a loss class or function of the file computes on its prediction. None
    when no such call is accepted. The code text sifts the functions first
    (:func:`_may_hand_over`): most build no scope."""
    args = getattr(getattr(fn, "args", None), "args", None)
    if not args or depth > 3:
        return None
    first = 1 if args[0].arg in ("self", "cls") else 0
    if len(args) <= first:
        return None
    param = args[first].arg
    if not _may_hand_over(fn, param, ctx, lines, holders):
        return None
    scope = ctx.scope(fn)
    for n in scope_nodes(fn):
        if not isinstance(n, ast.Call) or not n.args:
            continue
        a0 = strip(bound_value(strip(n.args[0]), scope, n.lineno))
        if not (isinstance(a0, ast.Name) and a0.id == param) \
                or scope.binding_before(param, a0.lineno + 1) is not None:
            continue  # not the parameter, or rebound first
        got = accept(n, scope) if n.lineno in lines else None
        if got is None:
            callee = called_function(n, scope, n.lineno)
            if callee is not None and callee is not fn and id(callee) in holders:
                got = argument_sink(callee, ctx, strip, accept, lines, holders, depth + 1)
        if got is not None:
            return got
    return None


def _may_hand_over(fn: ast.AST, param: str, ctx: Context, lines: frozenset[int],
                   holders: Holders) -> bool:
    """From the code text alone (NOTE [code text]): ``param`` is spelled on one of ``lines``
    inside ``fn`` (or a name assigned from it on one line is), or ``fn`` spells a call of one
    of ``holders`` (a method: of its own class). Most functions of a model file that computes
    a loss are ruled out here without walking them."""
    start, end = fn.lineno, fn.end_lineno or fn.lineno  # type: ignore[attr-defined]
    code = ctx.code_lines
    word = re.compile(r"\b" + re.escape(param) + r"\b")
    own = [code[ln - 1] for ln in lines if start <= ln <= end]
    if any(word.search(t) for t in own):
        return True
    info = ctx.analysis.class_of(fn)
    calls = [w for w, m in holders.values() if m is not fn and (
        not w.startswith("self.") or info is not None and ctx.analysis.class_of(m) is info)]
    if not own and not calls:
        return False
    text = "\n".join(code[start - 1:end])
    if own:  # `log_p = input.view(1, -1)` then the loss of `log_p`
        said = set(re.findall(r"\w+", "\n".join(own)))
        alias = re.compile(r"^[ \t]*(\w+)[ \t]*=[^=\n][^\n]*\b" + re.escape(param) + r"\b",
                           re.MULTILINE)
        if any(m.group(1) in said for m in alias.finditer(text)):
            return True
    return any(w in text for w in calls)
