"""Whether a module's output serves a loss only as the target it fits (NOTE [output only a target]).

# NOTE [output only a target]
A module run in the training loop whose every output reaches the loss only as the *target* of a
fitting loss (the second argument of ``F.mse_loss(pred, target)``, ``F.kl_div``,
``F.cross_entropy`` with soft targets, a call of such a loss module, or one side of a squared
difference ``(q - y) ** 2``), the other side holding another module's output (a prediction, not
data: ``(guide(x) - y) ** 2`` with ``y`` a label fits the guide itself), plays a teacher's or a
target network's role: the value the trained module is pulled towards. Left out of the optimizer,
it is fixed on purpose, and the flaw is that it runs with grad on: backward fills its ``.grad``
(and keeps its graph) for nothing. The fix is ``torch.no_grad()`` around its call or
``.detach()`` on its output, not "add it to the optimizer" (GT438's message follows this).
The values are followed through the loop's simple assignments (``y = r + g * target(s2).max(1)[0]``);
and into a function of the file or a module's ``forward`` it is handed to (two calls down);
any other read (a prediction side, a loss of its own, a value handed on) keeps the plain reading.
"""
from __future__ import annotations

import ast
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.regressions import operands
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted

# `torch.nn.functional` losses whose second parameter is the target the first is fitted to
FITS = frozenset({"mse_loss", "smooth_l1_loss", "huber_loss", "l1_loss", "kl_div", "cross_entropy",
                  "binary_cross_entropy", "binary_cross_entropy_with_logits"})
FIT_MODULES = frozenset({"torch.nn.MSELoss", "torch.nn.SmoothL1Loss", "torch.nn.HuberLoss",
                         "torch.nn.L1Loss", "torch.nn.KLDivLoss", "torch.nn.CrossEntropyLoss",
                         "torch.nn.BCELoss", "torch.nn.BCEWithLogitsLoss"})
COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try,
            ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _squared(n: ast.Call) -> bool:
    return isinstance(n.func, ast.Attribute) and n.func.attr in ("pow", "square")


def _target_side(n: ast.AST, ctx: Context, scope: Scope) -> tuple[ast.expr, ast.expr] | None:
    """(target, prediction) when ``n`` fits one value to another."""
    if isinstance(n, ast.Call) and not _squared(n):
        tgt = n.args[1] if len(n.args) >= 2 else next(
            (k.value for k in n.keywords if k.arg == "target"), None)
        if tgt is None or not n.args:
            return None
        q = ctx.qualified_name(n.func) or ""
        if q.startswith("torch.nn.functional.") and q.rpartition(".")[2] in FITS:
            return tgt, n.args[0]
        if isinstance(n.func, (ast.Name, ast.Attribute)):
            k = ctx.analysis.kind(n.func, scope, n.lineno)
            if k is not None and k.what == MODULE and (k.cls or "") in FIT_MODULES:
                return tgt, n.args[0]
        return None
    return operands(n)  # a squared difference: either side, judged by the caller


def only_a_target(name: str, loop: ast.AST, ctx: Context, scope: Scope,
                  seed: frozenset[str] = frozenset(), depth: int = 0,
                  made: frozenset[str] = frozenset()) -> bool:
    """NOTE [output only a target]: every value made from a call ``name(...)`` (or the names
    ``seed``) in ``loop`` reaches a fitting loss as its target (on the side opposite the
    prediction), at least once, and is read nowhere else; a value handed to a function of the
    file, or to a module of a class of the file, is followed into it (its ``forward``)."""
    derived: set[str] = set(seed)
    preds: set[str] = set(made)  # names bound to another module's output: a prediction
    seen = False

    def predicted(e: ast.AST) -> bool:
        return any(isinstance(x, ast.Name) and x.id in preds or isinstance(x, ast.Call)
                   and isinstance(x.func, (ast.Name, ast.Attribute)) and dotted(x.func) != name
                   and ctx.analysis.is_module(x.func, scope, x.lineno) for x in ast.walk(e))

    def ours(e: ast.AST) -> list[ast.AST]:
        return [x for x in ast.walk(e) if isinstance(x, ast.Call) and dotted(x.func) == name
                or isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load) and x.id in derived]

    stmts = sorted((s for s in ast.walk(loop) if isinstance(s, ast.stmt) and s is not loop
                    and not isinstance(s, COMPOUND)), key=lambda s: (s.lineno, s.col_offset))
    for s in stmts:
        found = ours(s)
        if isinstance(s, ast.Assign) and not found and predicted(s.value):
            preds |= {x.id for t in s.targets for x in ast.walk(t) if isinstance(x, ast.Name)}
        if not found:
            continue
        covered: set[int] = set()
        for n in ast.walk(s):
            sides = _target_side(n, ctx, scope)
            if sides is None:
                if isinstance(n, ast.Call) and depth < 2:
                    covered |= _into_forward(n, ours, predicted, ctx, scope, depth)
                continue
            tgt, pred = sides
            if isinstance(n, ast.Call) and not _squared(n):
                if ours(pred):
                    return False
                if predicted(pred):
                    covered |= {id(x) for x in ours(tgt)}
                continue
            for a, b in ((tgt, pred), (pred, tgt)):  # a squared difference
                if ours(a) and not ours(b) and predicted(b):
                    covered |= {id(x) for x in ours(a)}
        rest = [x for x in found if id(x) not in covered and not _inert(x, s)]
        if covered:
            seen = True
        if not rest:
            continue
        if isinstance(s, ast.Assign) and not covered and all(
                isinstance(t, ast.Name) for t in s.targets):
            derived |= {t.id for t in s.targets if isinstance(t, ast.Name)}
            continue
        return False
    return seen


# reads of a tensor that give no value a graph: its metadata, a number, text
META = frozenset({"grad_fn", "shape", "dtype", "device", "requires_grad", "is_leaf", "item",
                  "tolist", "size", "dim", "numel"})


def _inert(x: ast.AST, stmt: ast.stmt) -> bool:
    """``x`` is read in ``stmt`` only as metadata (``y.shape``, ``y.grad_fn``), as a number
    (``y.item()``) or as text (inside an f-string)."""
    parents = {id(c): n for n in ast.walk(stmt) for c in ast.iter_child_nodes(n)}
    up = parents.get(id(x))
    if isinstance(up, ast.Attribute) and up.value is x and up.attr in META:
        return True
    while up is not None:
        if isinstance(up, ast.FormattedValue):
            return True
        up = parents.get(id(up))
    return False


def _into_forward(call: ast.Call, ours, predicted, ctx: Context,  # type: ignore
                  scope: Scope, depth: int) -> set[int]:
    """The arguments of ``call`` (a function of the file, or a module of a class of the file:
    its ``forward``) made from our values that it uses only as a fitting target."""
    if not isinstance(call.func, (ast.Name, ast.Attribute)):
        return set()
    an = ctx.analysis
    fwd = an.local_callee(call, scope, call.lineno)  # a function of the file
    if not isinstance(fwd, (ast.FunctionDef, ast.AsyncFunctionDef)):
        k = an.kind(call.func, scope, call.lineno)
        info = an.classes.get(k.cls or "") if k is not None and k.is_module else None
        fwd = info.method("forward") if info is not None else None
        if fwd is None:
            return set()
    params = [a.arg for a in (*fwd.args.posonlyargs, *fwd.args.args)]
    params = params[1:] if params[:1] in (["self"], ["cls"]) else params
    bound = {**dict(zip(params, call.args)), **{k.arg: k.value for k in call.keywords if k.arg}}
    out: set[int] = set()
    made = frozenset(p for p, v in bound.items() if not ours(v) and predicted(v))
    for p, v in bound.items():
        if isinstance(v, ast.Starred) or not ours(v):
            continue
        if only_a_target("", fwd, ctx, ctx.scope(fwd), frozenset({p}), depth + 1, made):
            out |= {id(x) for x in ours(v)}
    return out
