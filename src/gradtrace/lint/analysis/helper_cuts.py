"""Helpers of the file that cut everything they return, followed from their callers.

# NOTE [helper cuts]
``def compute_loss(out, y): return torch.tensor(F.mse_loss(out, y).item(),
requires_grad=True)`` cuts whatever its caller gives it: every ``return`` traces to no live
value and to at least one cut (arguments count as live, as they do in the function itself). A
call of such a helper (``helper(...)`` or ``self.helper(...)``, found by the analysis layer),
with a live argument, is a cut at the helper's own line (the root cause), reached through the
call (the GT1 loss paths' ``_through_helper``). Helpers that return a Python number or a
NumPy value (their result has no ``.backward()``: GT101's business), that run ``backward()``
themselves (a training step returning its loss to log it), or that are decorated, are left
out. A helper's own tracer follows the helpers it calls in turn (``compute_loss`` returning
``_as_leaf(F.mse_loss(out, y))``, where ``_as_leaf`` rebuilds with ``requires_grad=True``): the
cut is the innermost helper's line, reached through every call on the way (the memo doubles as
the guard against recursion). A module of the file called through an instance (``model(x)``)
runs its ``forward``: ``return torch.round(out)`` there cuts what every caller gets; a method
called through an instance of a class of the file (``self.model.refine(h)``) runs that method.
A helper computing everything it returns under ``no_grad`` cuts too
(NOTE [grad-off returns]), and may be decorated (``@torch.no_grad()``) for that. A
type-dispatch utility that detaches every tensor of a container it is given cuts too, and its
cut is reported at the call (NOTE [type-dispatch helpers]).

# NOTE [pure methods]
A method of the file whose every result comes from its arguments only (``argument_returns``:
no layer, no parameter, no ``self`` state that may carry a graph) gives back what it is
given: ``self._compute(a.detach(), b.detach())`` in a metric's ``__call__`` is as cut as its
arguments, so the ``__call__`` cuts everything it returns. A top-level function of that kind
was already read so (``helper_is_pure``); a method (``self.score(...)``, an instance's
``__call__`` or ``forward`` resolved by ``called_function``, NOTE [inherited methods]) is read
the same way here. A method that runs a layer or reads a parameter is not pure: its result
stays live, whatever its arguments; so does one that calls anything of ``self``, opens a
``with`` block, switches grad mode or converts to a Python or NumPy value (torchattacks'
``_get_prob`` runs ``self.get_logits`` under ``no_grad`` and returns ``.numpy()``: dead by
its own doing, not made of its arguments; unseen35c Harry24k+MAIR).
"""
from __future__ import annotations

import ast
from types import SimpleNamespace
from typing import TYPE_CHECKING, NamedTuple

from gradtrace.lint.flow import NUMBER as FLOW_NUMBER
from gradtrace.lint.flow import NUMPY as FLOW_NUMPY
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.analysis.yielded import yielded
from gradtrace.lint.analysis.calls import ascii_code, span
from gradtrace.lint.analysis.cuts import (
    CUT_FUNCS, CUT_METHODS, NUMBER, NUMPY, REBUILD_FUNCS, Cut, Trace, asks_grad,
)
from gradtrace.lint.analysis.away_cuts import Away, cut_away  # noqa: F401 - re-exported
from gradtrace.lint.analysis.dispatchers import dispatch_returns
from gradtrace.lint.analysis.entry_cuts import subscript_cut
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.grad_off_returns import GRAD_OFF, grad_off_cut, grad_off_element
from gradtrace.lint.analysis.origins import Tracer, argument_returns
from gradtrace.lint.analysis.own_cuts import cuts_own_graph, one_tensor, plain_decorator
from gradtrace.lint.analysis.project import (
    foreign_callee, foreign_method, held_foreign_method, home, shown_path)
from gradtrace.lint.analysis.reach import called_function, disables_grad
from gradtrace.lint.analysis.weightless import weightless_kind

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding
    from gradtrace.lint.flow import Scope


def helper_cut(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Cut | None:
    """The cut a function of this file makes on everything it returns, or None;
    see NOTE [helper cuts]."""
    memo: dict[int, Cut | None] = ctx.memo("gt1-helper-cuts", ctx.tree, dict)
    key = id(fn)
    if key in memo:
        return memo[key]
    memo[key] = None  # recursion guard
    decos = [d for d in fn.decorator_list if not plain_decorator(d)]  # `@staticmethod`
    off_deco = bool(decos) and all(disables_grad(d, ctx) for d in decos)
    if decos and not off_deco or len(fn.body) > 60:
        return None
    scope = ctx.scope(fn)
    returns: list = [(s, s.value) for s in scope.stmts if isinstance(s, ast.Return)]
    yields = [] if returns else yielded(fn)  # NOTE [yielded values]
    if yields and not _runs_backward(ctx, fn):
        returns = yields
    elif not returns or any(v is None for _, v in returns) or _runs_backward(ctx, fn):
        return None  # (any receiver: mammoth's ``(reg_loss - dp_loss).backward()``)
    elif any(scope.kind(v) in (FLOW_NUMBER, FLOW_NUMPY) or _number_call(v, ctx)
             for _, v in returns):
        return None
    off = grad_off_cut(ctx, fn)  # NOTE [grad-off returns]
    if off is not None or off_deco:
        memo[key] = off
        return off
    t = ctx.memo("gt1-helper-tracer", fn, lambda: HelperTracer(ctx.scope(fn), ctx))
    cuts: list[Cut] = []
    dispatch = dispatch_returns(ctx, fn)  # NOTE [type-dispatch helpers]
    for s, v in returns:
        if dispatch and id(s) in dispatch:
            continue
        tr = t.trace(v, s, s.lineno)
        if tr.live or not tr.cuts:
            return None
        cuts.extend(tr.cuts)
    if not cuts:
        return None
    memo[key] = min(cuts, key=lambda c: (c.node.lineno, c.node.col_offset))
    if dispatch:
        ctx.memo("gt1-dispatchers", ctx.tree, dict)[key] = fn
    forced = _forced_grad(t, scope)
    if forced is not None:
        ctx.memo("gt1-helper-bandaids", ctx.tree, dict)[fn.name] = forced
    return memo[key]


class HelperTracer(Tracer):
    """The tracer that follows the file's functions a call runs (NOTE [helper cuts]): a
    helper's own, and the GT1 loss paths' (:class:`~gradtrace.lint.rules.graph_breaks._paths.
    LossPaths`)."""

    def _through_helper(self, e: ast.Call, use: ast.stmt | None, line: int) -> Trace | None:
        fn = called_function(e, self.scope, line)
        if fn is None:
            fn = foreign_callee(self.ctx, e, self.scope, line) or foreign_method(
                self.ctx, e, self.scope, line) or held_foreign_method(
                self.ctx, e, self.scope)  # NOTE [project index]
            if fn is None:
                return None
            got = _cut_away(self, e, fn, use, line)
            h = home(self.ctx, fn)
            if got is None and h is not self.ctx and h.analysis.class_of(fn) is not None \
                    and _made_of_arguments(fn, h):  # NOTE [pure methods], another file's
                return self.args_trace(e, use, line)
            return got
        got = through_file_function(self, e, fn, use, line)
        if got is None and self.ctx.analysis.class_of(fn) is not None \
                and _made_of_arguments(fn, self.ctx):
            # a method made of its arguments: NOTE [pure methods]
            return self.args_trace(e, use, line)
        return got

    def _subscript(self, e: ast.Subscript, use: ast.stmt | None, line: int) -> Trace:
        got = subscript_cut(self, e, use, line, lambda c, at: called_function(
            c, self.scope, at) if _plain_fn(c, self.scope, at, self.ctx) else None,
            lambda fn: lambda: HelperTracer(self.ctx.scope(fn), self.ctx))
        return got if got is not None else super()._subscript(e, use, line)

    def binding_trace(self, b: Binding) -> Trace:
        """A name unpacked from a call of the file's function, when the function makes the
        element at that place under grad-off (NOTE [unpacked grad-off element]): a cut at
        that region, reached through the call; otherwise the whole right-hand side."""
        s = b.stmt
        if b.value is None and isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Tuple) and isinstance(s.value, ast.Call):
            spots = [i for i, t in enumerate(s.targets[0].elts) if dotted(t) == b.name]
            fn = called_function(s.value, self.scope, b.line) if len(spots) == 1 else None
            cut = grad_off_element(self.ctx, fn, spots[0], len(s.targets[0].elts)) \
                if fn is not None and _plain_off(fn, self.ctx) else None
            if cut is not None:
                return Trace(False, (Cut(cut.kind, cut.node, cut.operand,
                                         ((f"{fn.name}()", s.value.lineno),)),))
            cut = element_cut(self.ctx, fn, spots[0], len(s.targets[0].elts)) \
                if fn is not None else None  # NOTE [unpacked cut element]
            if cut is not None and (fn.name == "forward" or self.args_trace(  # type: ignore
                    s.value, s, b.line).live):
                return Trace(False, (Cut(cut.kind, cut.node, cut.operand, (
                    (f"{fn.name}()", s.value.lineno),) + cut.via),))  # type: ignore[union-attr]
        return super().binding_trace(b)


def element_cut(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef, j: int,
                arity: int) -> Cut | None:
    """# NOTE [unpacked cut element]
    The cut a function of the file makes on element ``j`` of every tuple of ``arity`` values it
    returns, or None: NOTE [helper cuts] read element by element, as
    NOTE [unpacked grad-off element] reads grad-off regions. ``_, tokens = extractor(images)``
    where ``forward`` returns ``pred, self.latents`` and a forward hook keeps
    ``output.detach()`` in ``self.latents`` (NOTE [hook stores]): ``tokens`` has no graph
    whatever ``pred`` has. The same guards as
    :func:`helper_cut` (grad-off decorators only, no ``backward()``, a short body); every
    ``return`` gives a tuple of ``arity`` values whose element ``j`` traces to no live value,
    to at least one cut, and is not a Python number unless every cut made it one (``return
    sim, reg.item()`` summed by the caller into its loss: a constant term)."""
    memo: dict[tuple[int, int, int], Cut | None] = ctx.memo("gt1-element-cuts", ctx.tree, dict)
    key = (id(fn), j, arity)
    if key in memo:
        return memo[key]
    memo[key] = None  # recursion guard
    if not _plain_off(fn, ctx) or len(fn.body) > 60:
        return None
    scope = ctx.scope(fn)
    returns = [s for s in scope.stmts if isinstance(s, ast.Return)]
    t = ctx.memo("gt1-helper-tracer", fn, lambda: HelperTracer(ctx.scope(fn), ctx))
    cuts: list[Cut] = []
    for r in returns:
        v = r.value
        if one_tensor(v, scope, r.lineno, ctx):
            continue  # `return deformed` beside `return deformed, w, u`: never unpacked so
        if not isinstance(v, ast.Tuple) or len(v.elts) != arity \
                or any(isinstance(e, ast.Starred) for e in v.elts):
            return None
        e = v.elts[j]
        tr = t.trace(e, r, r.lineno)
        if tr.live or not tr.cuts:
            return None
        if scope.kind(e) in (FLOW_NUMBER, FLOW_NUMPY) or _number_call(e, ctx):
            if not all(c.kind == NUMBER for c in tr.cuts):
                return None  # a number the element is made of on purpose, not one it turns into
            numbers_handed_back(ctx).update(id(c.node) for c in tr.cuts)
        cuts.extend(tr.cuts)
    if cuts:
        memo[key] = min(cuts, key=lambda c: (c.node.lineno, c.node.col_offset))
    return memo[key]


def numbers_handed_back(ctx: Context) -> set[int]:
    """``id`` of the cuts that make an element a function of the file returns a Python number
    (:func:`element_cut`): a loss made of nothing else has no ``backward`` (GT101's)."""
    return ctx.memo("gt1-number-elements", ctx.tree, set)  # type: ignore[no-any-return]


def _cut_away(t: Tracer, e: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef,
              use: ast.stmt | None, line: int) -> Trace | None:
    """:func:`cut_through` for a function of another file (NOTE [project index]): the cut is
    that file's, so the finding is at the call, naming the other file's line."""
    home_ctx = home(t.ctx, fn)
    cut = helper_cut(home_ctx, fn)
    if cut is None:
        return None
    cls = home_ctx.analysis.class_of(fn) if fn.name == "forward" or cut.kind == GRAD_OFF \
        else None
    if not (cls is not None and cls.is_module) and not t.args_trace(e, use, line).live \
            and not cuts_own_graph(home_ctx, fn, cut):  # NOTE [own graph cut]
        return Trace(False, ())
    node = cut.node
    path = shown_path(home_ctx.path, t.ctx.path)
    code = home_ctx.source(node)
    if home_ctx.line_text(node.lineno).lstrip().startswith("@" + code):
        code = "@" + code  # a grad-off decorator
    away = cut_away(home_ctx, node) or Away(path, node.lineno, code,
                                            home_ctx.source(cut.operand), fn.name)
    t.ctx.memo("project-away-cuts", t.ctx.tree, dict)[id(e)] = (e, away)
    forced = helper_band_aid(home_ctx, fn.name)
    if forced is not None:  # "forced at line 6 of utils.py"
        t.ctx.memo("gt1-helper-bandaids", t.ctx.tree, dict)[fn.name] = SimpleNamespace(
            lineno=f"{forced.lineno} of {path}")
    return Trace(False, (Cut(cut.kind, e, e, ((f"{fn.name}()", e.lineno),)),))


def through_file_function(t: Tracer, e: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                          use: ast.stmt | None, line: int) -> Trace | None:
    """:func:`cut_through`, and for a function of the file that does not cut: live when an
    argument was cut by a grad-off region. The caller's tracer reads such a call as handing
    its arguments through, but the function's own body (``self.forwarder.compute_error(...,
    target=q_next)``) may run layers: a target computed under ``no_grad`` handed to it is
    not the whole loss (NOTE [grad-off returns])."""
    got = cut_through(t, e, fn, use, line)
    if got is None and any(c.kind == GRAD_OFF for c in t.args_trace(e, use, line).cuts):
        return Trace(True)
    return got


def _made_of_arguments(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> bool:
    """NOTE [pure methods]: every result of the method ``fn`` comes from its arguments (its
    tracer with the arguments dead finds neither a graph nor a cut of its own), and its body
    runs nothing of ``self`` (``self.get_logits(x)``: a model run, dead only because it is
    under ``no_grad``), switches no grad mode and converts nothing to Python or NumPy."""
    memo: dict[int, bool] = ctx.memo("gt1-pure-methods", ctx.tree, dict)
    if id(fn) not in memo:
        own = argument_returns(ctx, fn)
        memo[id(fn)] = own is not None and not own.cuts and not any(
            isinstance(n, ast.Call) and (_on_self(n.func) and not _weightless_held(n, fn, ctx)
                                         or disables_grad(n, ctx) or _number_call(n, ctx))
            or isinstance(n, (ast.With, ast.AsyncWith)) for n in walk(fn))
    return memo[id(fn)]


def _weightless_held(n: ast.Call, fn: ast.AST, ctx: Context) -> bool:
    """``self.criterion(out, y)`` where the instance's ``criterion`` is a module without
    weights (a torch loss: NOTE [weightless callee]): it computes from its arguments only."""
    f = n.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id == "self"):
        return False
    k = ctx.analysis.kind_in(f, fn, n.lineno)
    return k is not None and k.what == MODULE and weightless_kind(k.cls, ctx)


def _on_self(f: ast.expr) -> bool:
    """``self.x(...)``, ``self.x.y(...)``: a call of something the instance holds."""
    while isinstance(f, ast.Attribute):
        f = f.value
    return isinstance(f, ast.Name) and f.id == "self"


def _plain_off(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> bool:
    """``fn`` has no decorator but grad-off ones and runs no ``backward()`` (as
    :func:`helper_cut` asks)."""
    return all(disables_grad(d, ctx) or plain_decorator(d) for d in fn.decorator_list) \
        and not _runs_backward(ctx, fn)


def _plain_fn(c: ast.Call, scope: Scope, line: int, ctx: Context) -> bool:
    """The function ``c`` runs is the file's and has no decorator but grad-off ones and no
    ``backward()`` (:func:`_plain_off`)."""
    fn = called_function(c, scope, line)
    return fn is not None and _plain_off(fn, ctx)


def _runs_backward(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``fn`` (decorators included) calls ``<anything>.backward()`` or ``.manual_backward()``;
    once per function, and only when its lines spell ``backward`` (NOTE [code text]: ASCII
    code names attributes as parsed), a look at the text instead of a walk of the body."""
    def make() -> bool:
        if ascii_code(ctx):
            first, last = span(fn)
            if not any("backward" in line for line in ctx.code_lines[first - 1:last]):
                return False
        return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                   and c.func.attr in ("backward", "manual_backward") for c in walk(fn))
    return ctx.memo("gt1-runs-backward", fn, make)


def helper_band_aid(ctx: Context, name: str) -> ast.AST | None:
    """Where a cutting helper called ``name`` forces ``requires_grad`` on what it returns."""
    return ctx.memo("gt1-helper-bandaids", ctx.tree, dict).get(name)


def _forced_grad(t: Tracer, scope: Scope) -> ast.AST | None:
    """``torch.tensor(v, requires_grad=True)`` / ``v.requires_grad_()`` on a value of the
    helper that came from the graph (a band-aid: NOTE [helper cuts])."""
    for s in scope.stmts:
        for n in walk(s):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr == "requires_grad_":
                arg = f.value
            elif (t.ctx.qualified_name(f) or "") in REBUILD_FUNCS and n.args and asks_grad(n):
                arg = n.args[0]
            else:
                continue
            tr = t.trace(arg, s, s.lineno)
            if tr.live or tr.cuts:
                return n
    return None


def _number_call(e: ast.expr, ctx: Context) -> bool:
    """``x.item()``, ``float(x)``, ``x.tolist()``, ``x.numpy()``: a Python or NumPy value."""
    if not isinstance(e, ast.Call):
        return False
    if isinstance(e.func, ast.Attribute):
        return CUT_METHODS.get(e.func.attr) in (NUMBER, NUMPY)
    return CUT_FUNCS.get(ctx.qualified_name(e.func) or "") in (NUMBER, NUMPY)


def cut_through(t: Tracer, e: ast.Call, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                use: ast.stmt | None, line: int) -> Trace | None:
    """What the call ``e`` of the file's function ``fn`` is when ``fn`` cuts everything it
    returns (NOTE [helper cuts]); None: ``fn`` is not such a helper."""
    cut = helper_cut(t.ctx, fn)
    if cut is None:
        return None
    cls = t.ctx.analysis.class_of(fn) if fn.name == "forward" or cut.kind == GRAD_OFF \
        else None  # a module's method under no_grad cuts its own layers' outputs too
    if not (cls is not None and cls.is_module) and not t.args_trace(e, use, line).live \
            and not cuts_own_graph(t.ctx, fn, cut):  # NOTE [own graph cut]
        return Trace(False, ())  # it cuts whatever it is given: given data, it returns data
    if t.ctx.memo("gt1-dispatchers", t.ctx.tree, dict).get(id(fn)) is fn:
        # a utility that detaches whatever it is given: the call is what to change
        t.ctx.memo("project-away-cuts", t.ctx.tree, dict)[id(e)] = (e, Away(
            t.ctx.path, cut.node.lineno, t.ctx.source(cut.node), t.ctx.source(cut.operand),
            fn.name))
        return Trace(False, (Cut(cut.kind, e, e, ((f"{fn.name}()", e.lineno),)),))
    # the helper's own cut, reached through this call
    return Trace(False, (Cut(cut.kind, cut.node, cut.operand,
                             ((f"{fn.name}()", e.lineno),) + cut.via),))
