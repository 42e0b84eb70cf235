"""Helpers of GT501/GT503: what a same-file helper does with the optimizer it is handed, and
which module's parameters an optimizer was built from one name away."""
from __future__ import annotations

import ast
from typing import Callable

from gradtrace.lint.analysis.kinds import OPTIMIZER, SCHEDULER
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.training_loop._base import function_text
from gradtrace.lint.rules.training_loop._loop import MANUAL_ZERO_RE, LoopFacts


def only_adjusts(ctx: Context, call: ast.Call, name: str, optimizer: str) -> bool:
    """``adjust_learning_rate(optimizer, epoch)`` calls a function of this file that clears
    nothing and hands the optimizer it receives to no call (it sets ``param_groups``)."""
    defs = _defs(ctx).get(name)
    if not defs:
        return False
    for fn in defs:
        if MANUAL_ZERO_RE.search(function_text(ctx, fn)):
            return False
        a = fn.args
        params = [x.arg for x in (*a.posonlyargs, *a.args)]
        if params[:1] == ["self"] and isinstance(call.func, ast.Attribute):
            params = params[1:]
        got = {params[i] for i, x in enumerate(call.args) if i < len(params)
               and dotted(x) == optimizer}
        got |= {k.arg for k in call.keywords if k.arg and dotted(k.value) == optimizer}
        if not got or a.vararg is not None or any(
                isinstance(n, ast.Call) and any(isinstance(x, ast.Name) and x.id in got
                                                for x in (*n.args, *(k.value for k in
                                                                     n.keywords)))
                for n in walk(fn)):
            return False
    return True


def _defs(ctx: Context) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    def make() -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
        out: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        for node in walk(ctx.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(node.name, []).append(node)
        return out
    return ctx.memo("gt5-defs", ctx.tree, make)


def through_name(f: LoopFacts, scope, value: ast.expr, made: str) -> bool:
    """``Adam(params)`` with ``params = list(decoder.parameters()) + ...`` one name away."""
    for n in walk(value):
        if isinstance(n, ast.Name):
            b = scope.binding_before(n.id, value.lineno)  # type: ignore[attr-defined]
            if b is not None and b.value is not None and made in f.ctx.code_of(b.value):
                return True
    return False


def self_method_may_clear(ctx: Context, call: ast.Call, optimizer: str,
                          keeps: Callable[[str], bool]) -> bool:
    """``self.standard_loss(x, y)`` in a class holding ``self.optimizer``: a method the class
    inherits from a base of another file (its body, which can reach ``self.optimizer``, is not
    here), or a method of this file that hands ``self.optimizer`` to a call that might clear it
    (``trades_loss(self.model, x, y, self.optimizer)``; ``keeps``: calls known not to)."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and dotted(f.value) == "self"
            and optimizer.startswith("self.")):
        return False
    defs = _defs(ctx).get(f.attr)
    if not defs:
        return _foreign_base(ctx, call.lineno)
    return any(isinstance(n, ast.Call) and not keeps((dotted(n.func) or "").rpartition(".")[2])
               and any(dotted(a) == optimizer for a in (*n.args, *(k.value for k in n.keywords)))
               for fn in defs for n in walk(fn))


def _foreign_base(ctx: Context, line: int) -> bool:
    """The class around ``line`` has a base that is neither torch's, ``object``, nor a class
    of this file: its methods are defined elsewhere."""
    for node in walk(ctx.tree):
        if isinstance(node, ast.ClassDef) and node.lineno <= line <= (node.end_lineno or 0):
            own = _classes(ctx)
            return any((q := ctx.qualified_name(b)) is not None and q != "object"
                       and not q.startswith("torch.") and q not in own for b in node.bases)
    return False


def _classes(ctx: Context) -> set[str]:
    return ctx.memo("gt5-class-names", ctx.tree, lambda: {
        n.name for n in walk(ctx.tree) if isinstance(n, ast.ClassDef)})


def called_by_clearing_function(ctx: Context, name: str) -> bool:
    """A function of this file that clears gradients calls ``name`` (``self.name(...)``)."""
    def calls(ctx: Context = ctx) -> set[str]:
        clearing, out = clearing_functions(ctx), set()
        for node in walk(ctx.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.name in clearing:
                out.update((dotted(c.func) or "").rpartition(".")[2] for c in walk(node)
                           if isinstance(c, ast.Call) and not _optimizer_method(ctx, c, node))
        return out
    return name in ctx.memo("gt5-called-by-clearing", ctx.tree, calls)


def _optimizer_method(ctx: Context, call: ast.Call, where: ast.AST) -> bool:
    """``self.optimizerD.step()``: a method of an optimizer the analysis knows, not a call of
    a function of this file that happens to share its name."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    k = ctx.analysis.kind_in(func.value, where, call.lineno)
    return k is not None and k.what in (OPTIMIZER, SCHEDULER)


def clearing_functions(ctx: Context) -> set[str]:
    """Names of functions defined in this file whose body clears gradients."""
    def make() -> set[str]:
        out: set[str] = set()
        for node in walk(ctx.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    MANUAL_ZERO_RE.search(function_text(ctx, node)):
                out.add(node.name)
        return out
    return ctx.memo("gt5-clearing", ctx.tree, make)


def helper_zero_grads(ctx: Context, call: ast.Call, where: ast.AST) -> bool:
    """``results = self.outer_loop(domains)``: the call runs a function or method of this
    file that calls ``zero_grad()`` (on an optimizer or a module), itself or through the
    functions of the file it calls, three calls deep.

    # NOTE [helper clears by zero_grad]
    A MAML trainer's ``outer_loop`` runs ``inner_loop`` per task, which starts with
    ``self.model.zero_grad()``; the episode loop then backwards the meta-loss and steps: the
    gradients were cleared in the call before the backward, one method away. As a helper
    whose name says it clears is trusted, so is one whose body (or a helper's) clears."""
    seen: set[int] = set()
    todo = [(call, where, 0)]
    while todo:
        c, at, depth = todo.pop()
        fn = ctx.analysis.callee(c, at)
        if fn is None or id(fn) in seen or depth > 3:
            continue
        seen.add(id(fn))
        for n in walk(fn):
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Attribute) and n.func.attr == "zero_grad":
                    return True
                todo.append((n, fn, depth + 1))
    return False
