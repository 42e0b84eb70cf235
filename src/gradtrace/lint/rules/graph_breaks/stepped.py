"""GT109: the model an optimizer steps is cut from the loss (or from one of its terms).

# NOTE [stepped focus]
:mod:`._paths` asks whether *anything* that may carry a graph reaches a loss term. That misses
the cut that matters to the optimizer being stepped: in a GAN generator step
``G_loss = mse(D(fake.detach()), ones) + l1(fake, real)``, the first term is live through
``D``'s own weights, but ``opt_g`` only updates ``G``, and ``G`` reaches that term only through
the detach. Here the loss of a ``backward()`` is traced again with the focus on the modules
whose parameters the optimizers stepped after it update (``opt.step()``, ``scaler.step(opt)``;
their kind comes from the analysis layer: ``torch.optim.X(model.parameters(), ...)``). In that
trace a call of another module, bound in the file to its own constructor (``d =
Discriminator()``, ``self.critic = nn.Linear(...)``) and not built from the stepped model,
passes its arguments through (its own weights are not the stepped ones), and a
``nn.Parameter(...)`` of its own (``logZ``) is not the stepped model either. Everything else
keeps the tracer's conservative reading (unknown counts as live). A term that reaches the
stepped model only through cuts, while it (or the loss) is live through something else, gives
that model no gradient: that is the finding, on the first cut.
"""
from __future__ import annotations

import ast
import bisect
from typing import TYPE_CHECKING, Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import function_sites
from gradtrace.lint.analysis.facts import unpacked_value
from gradtrace.lint.analysis.kinds import MODULE, OPTIMIZER, PARAMETER
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.graph_breaks._base import worth_reporting, short
from gradtrace.lint.analysis.cuts import DEAD, LIVE, Trace
from gradtrace.lint.analysis.origins import Tracer
from gradtrace.lint.rules.graph_breaks._paths import LossPaths, loss_paths
from gradtrace.lint.rules.leaf._tensors import node_mentions

if TYPE_CHECKING:
    from gradtrace.lint.flow import MethodCall, Scope


class SteppedModelCutFromLoss(Rule):
    """A loss term reaches the model the optimizer steps only through a cut.

    Why: `backward()` fills `.grad` only along recorded paths. When the parameters an optimizer
    updates reach a loss term only through `.detach()`, `.item()`, `torch.tensor(...)`,
    `argmax` or a comparison, that term gives them no gradient, even though the term itself
    is live through another network: a GAN generator step that scores `D(fake.detach())`
    (the discriminator step's detach copied over) trains the generator on the other terms
    only; a policy whose outputs are cloned with `.detach()` before the log-probabilities
    leaves only `logZ` training. Backward runs and no error is raised. Remove the cut.
    The step may also follow, in another method of the same class, the `self.<method>()`
    call of the method that runs the backward (`backward_G` called by `optimize_parameters`,
    the pix2pix/CycleGAN layout), up to the next call of a method that runs a backward.
    One optimizer over several networks (`Adam(list(vit.parameters()) +
    list(head.parameters()))`) is read network by network: one that reaches the loss only
    through a cut is reported even when another keeps the loss live, unless another backward
    of the function reaches it live (NOTE [one owner cut]).
    Known limits: the optimizer must be built in the file over `model.parameters()`; the
    other network must be bound to its constructor in the file; a function argument or an
    unknown call counts as possibly carrying the stepped model (not a `self` attribute that
    only stores what a method is handed as data: NOTE [data attributes]).
    """

    code = "GT109"
    name = "stepped-model-cut-from-loss"
    message = ("`{expr}` cuts `{operand}` from the loss: `{model}`, which `{opt}` updates "
               "(line {step}), reaches {what} only through this cut, so it gets no gradient "
               "from it")
    triggers = ("step",)
    # a method that calls backward and whose caller steps (`backward_G`) holds no "step"
    statement_triggers = ("step", ".backward(")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F

            g, d = nn.Linear(4, 4), nn.Linear(4, 1)
            opt_g = torch.optim.Adam(g.parameters())
            fake = g(torch.randn(2, 4))
            g_adv = F.softplus(-d(fake.detach())).mean()
            g_loss = g_adv + 100 * F.l1_loss(fake, torch.zeros(2, 4))
            g_loss.backward()
            opt_g.step()
            """, at=(8, 22)),
        Good("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F

            g, d = nn.Linear(4, 4), nn.Linear(4, 1)
            opt_g = torch.optim.Adam(g.parameters())
            opt_d = torch.optim.Adam(d.parameters())
            fake = g(torch.randn(2, 4))
            d_loss = F.softplus(d(fake.detach())).mean() + F.softplus(-d(torch.randn(2, 4))).mean()
            d_loss.backward()
            opt_d.step()
            g_loss = F.softplus(-d(fake)).mean() + 100 * F.l1_loss(fake, torch.zeros(2, 4))
            g_loss.backward()
            opt_g.step()
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        if not worth_reporting(node, ctx) or not ctx.mentions("backward"):
            return
        if not isinstance(node, ast.Module) and not node_mentions(ctx, node, "step") \
                and not _stepped_by_callers(ctx.scope(node), ctx):
            return  # opened by ".backward(" alone: only a caller's step can matter
        lp = loss_paths(ctx, node)
        sinks = [s for s in lp.sinks() if s.how == "backward"]
        if not sinks:
            return
        seen: set[int] = ctx.memo("gt1-reported-" + self.code, ctx.tree, set)
        judged = {id(v.sink.node) for v in lp.verdicts if v.full}
        lines = sorted(s.node.lineno for s in sinks)  # type: ignore[attr-defined]
        for sink in sinks:
            if id(sink.node) in judged:
                continue  # the whole loss is cut: GT102-GT108 say so
            line = sink.node.lineno  # type: ignore[attr-defined]
            k = bisect.bisect_right(lines, line)
            nxt = lines[k] if k < len(lines) else 1 << 30
            steps = _stepped(lp.scope, ctx, line, nxt) or _stepped_by_callers(lp.scope, ctx)
            owners = frozenset().union(*(o for _, _, o in steps))
            if not owners:
                continue
            focus = FocusTracer(lp.scope, ctx, owners)
            use = lp.scope.statement_of(sink.node)
            terms = list(lp._terms(sink.value, use, line, 0))
            traced = [(t, lp.trace(t, use, line), focus.trace(t, use, line)) for t in terms]
            one = len(owners) > 1 and all(f.live for _, _, f in traced) and _owner_cut(
                lp, ctx, owners, sinks, terms, use, line)  # NOTE [one owner cut]
            if one:
                owners, traced = one
                traced = [(t, Trace(True), f) for t, _, f in traced]
            elif not any(f.live for _, _, f in traced):
                loose = frozenset().union(*(_loose_params(c, lp.scope) for c, _, _ in steps))
                wide = FocusTracer(lp.scope, ctx, owners, loose)
                if not loose or not wide.trace(sink.value, use, line).live:
                    continue  # the loss trains nothing these optimizers step: their wiring
                    #           is the problem (GT406), not the cut
            for t, normal, fo in traced:
                if not normal.live or fo.live or not fo.cuts:
                    continue
                if _replaces_value(fo, traced, ctx):
                    continue
                c = min(_owners_cuts(fo.cuts, focus) or fo.cuts,
                        key=lambda c: (c.node.lineno, c.node.col_offset))
                if id(c.node) in seen:
                    continue
                seen.add(id(c.node))
                step, opt, _ = steps[0]
                model = sorted(owners)[0]
                what = "this term of the loss" if len(terms) > 1 else "the loss"
                rel = [Related(ctx.path, line, f"`backward()` is called on "
                               f"`{short(ctx.source(sink.value), 40)}` here",
                               ctx.column(sink.node))]
                if len(terms) > 1:
                    rel.append(Related(ctx.path, t.lineno, f"the term `{short(ctx.source(t), 40)}`"
                                       " is live only through another network", ctx.column(t)))
                rel.extend(Related(ctx.path, ln, f"`{name}` is built from here", 0)
                           for name, ln in c.via if ln != c.node.lineno)
                yield self.report(c.node, ctx, related=rel, expr=short(ctx.source(c.node)),
                                  operand=short(ctx.source(c.operand), 40), model=model,
                                  opt=short(opt, 30), step=step.lineno, what=what)


def _owner_cut(lp: LossPaths, ctx: Context, owners: frozenset[str], sinks: list,
               terms: list, use: ast.stmt | None, line: int
               ) -> tuple[frozenset[str], list] | None:
    """# NOTE [one owner cut]
    One object the optimizer updates (``vit`` of ``Adam(list(vit.parameters()) +
    list(head.parameters()))``) that reaches the loss only through a cut,
    while another (``head``) keeps the loss live, gets no gradient from it all the same. Read
    with the focus on that owner alone; an owner any backward of the function reaches live
    (an actor-critic pair stepped by one optimizer, each loss its own backward) is left
    alone. The owner and the terms traced with the focus on it; None: no owner is cut."""
    for o in sorted(owners):
        focus = FocusTracer(lp.scope, ctx, frozenset({o}))
        traced = [(t, lp.trace(t, use, line), focus.trace(t, use, line)) for t in terms]
        if any(f.live for _, _, f in traced) or not any(f.cuts for _, _, f in traced):
            continue
        if any(focus.trace(s.value, lp.scope.statement_of(s.node), s.node.lineno).live
               for s in sinks):
            continue
        return frozenset({o}), traced
    return None


def _owners_cuts(cuts: tuple, focus: FocusTracer) -> list:
    """The cuts whose operand is computed from a call of the stepped model
    (``torch.tensor(embeds)`` with ``embeds = self.model(x)``), not those of data that never
    held its graph (``torch.FloatTensor(labels)`` of a loaded array): the line the model is
    cut at, when the loss reads both."""
    return [c for c in cuts if _calls_owner(c.operand, focus, c.node.lineno, 2)]


def _calls_owner(e: ast.AST, focus: FocusTracer, line: int, depth: int) -> bool:
    for n in walk(e):
        if isinstance(n, ast.Call) and (d := dotted(n.func)) is not None and any(
                d == o or d.startswith(o + ".") for o in focus.owners):
            return True
        if depth and isinstance(n, ast.Name):
            b = focus.scope.binding_before(n.id, line)
            v = b.stmt.value if b is not None and isinstance(b.stmt, ast.Assign) else None
            if b is not None and v is not None and b.line < line and \
                    _calls_owner(v, focus, b.line, depth - 1):
                return True
    return False


def _replaces_value(fo: Trace, traced: list, ctx: Context) -> bool:
    """``x - x.detach() + v``: a detached copy of a value also used live in the same sum."""
    live = {ctx.source(t) for t, _, f in traced if f.live}
    return any(c.kind == "detach" and ctx.source(c.operand) in live for c in fo.cuts)


def _loose_params(step: ast.Call, scope: Scope) -> frozenset[str]:
    """Names of ``nn.Parameter`` s listed one by one in the optimizer that ``step`` steps
    (``[{"params": model.parameters()}, {"params": [log_z]}]``)."""
    ctx = scope.ctx
    recv = step.func.value  # type: ignore[attr-defined]
    out: set[str] = set()
    for e in (recv, *step.args[:1]):
        k = ctx.analysis.kind(e, scope, step.lineno)
        if k is None or k.what != OPTIMIZER or not isinstance(k.node, ast.Call):
            continue
        for n in walk(k.node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                p = ctx.analysis.kind(n, scope, step.lineno)
                if p is not None and p.what == PARAMETER:
                    out.add(n.id)
    return frozenset(out)


def _stepped_by_callers(scope: Scope, ctx: Context
                        ) -> list[tuple[ast.Call, str, frozenset[str]]]:
    """The optimizer steps that follow, in another method of the same class, a
    ``self.<method>()`` call of the method ``scope`` is (the loss's backward in
    ``backward_G``, ``opt_G.step()`` after ``self.backward_G()`` in ``optimize_parameters``):
    the owners read as ``self.<attr>`` mean the same objects in both methods
    (NOTE [stepped focus]). The method must step nothing of its own."""
    fn = scope.node
    an = ctx.analysis
    cls = an.class_of(fn) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if cls is None or cls.methods.get(fn.name) is not fn:  # type: ignore[union-attr]
        return []
    out: list[tuple[ast.Call, str, frozenset[str]]] = []
    for call, where in function_sites(an, fn) or ():  # type: ignore[arg-type]
        f = call.func
        if where is fn or an.class_of(where) is not cls or not (
                isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                and f.value.id == "self"):
            continue
        caller = ctx.scope(where)
        later = [m.call.lineno for m in caller.calls_to("backward")
                 if m.call.lineno > call.lineno]
        later += [n.lineno for n in walk(where) if isinstance(n, ast.Call)
                  and n.lineno > call.lineno and _backward_method(n, cls, ctx)]
        out.extend(_stepped(caller, ctx, call.lineno, min(later, default=1 << 30)))
    return out


def _backward_method(call: ast.Call, cls: object, ctx: Context) -> bool:
    """``self.<m>(...)`` of a method of ``cls`` that calls ``backward()`` itself (the next
    step's backward: ``self.backward_G()`` after ``self.backward_D(); opt_D.step()``)."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id == "self"):
        return False
    m = cls.methods.get(f.attr)  # type: ignore[attr-defined]
    return m is not None and node_mentions(ctx, m, ".backward(")


def _stepped(scope: Scope, ctx: Context, start: int, end: int
             ) -> list[tuple[ast.Call, str, frozenset[str]]]:
    """``opt.step()`` / ``scaler.step(opt)`` calls between ``start`` and ``end``: (the call,
    the optimizer's spelling, the dotted owners of the parameters it updates)."""
    out = []
    for m in _steps_between(scope, ctx, start, end):
        ln = m.call.lineno
        recv = m.call.func.value  # type: ignore[attr-defined]
        for e in (recv, *m.call.args[:1]):
            k = ctx.analysis.kind(e, scope, ln)
            if k is not None and k.what == OPTIMIZER and k.over:
                out.append((m.call, ctx.source(e), k.over))
                break
    return out


def _steps_between(scope: Scope, ctx: Context, start: int, end: int) -> list[MethodCall]:
    """``scope.calls_to("step")`` on lines strictly between ``start`` and ``end``, in that
    order: from one line index per scope, not a scan of every step of the scope per
    ``backward`` (a script's module body holds one per training block)."""
    index: dict[int, tuple] = ctx.memo("gt109-step-lines", ctx.tree, dict)
    got = index.get(id(scope))
    if got is None or got[0] is not scope:
        calls = list(scope.calls_to("step"))
        order = sorted((m.call.lineno, i) for i, m in enumerate(calls))
        got = index[id(scope)] = (scope, calls, [ln for ln, _ in order], [i for _, i in order])
    _, calls, lines, at = got
    picked = at[bisect.bisect_right(lines, start):bisect.bisect_left(lines, end)]
    return [calls[i] for i in sorted(picked)]


class FocusTracer(LossPaths):
    """The loss-path tracer with the focus on ``owners`` (NOTE [stepped focus])."""

    def __init__(self, scope: Scope, ctx: Context, owners: frozenset[str],
                 loose: frozenset[str] = frozenset()) -> None:
        Tracer.__init__(self, scope, ctx)  # not LossPaths.__init__: no verdicts of its own
        self.owners = owners
        self.loose = loose  # names of parameters the optimizers are given one by one
        self.roots = frozenset(o.partition(".")[0] if not o.startswith("self.")
                               else ".".join(o.split(".")[:2]) for o in owners)

    def _name(self, name: str, use: ast.stmt | None, line: int) -> Trace:
        if name in self.loose:
            return LIVE
        return super()._name(name, use, line)

    def _call(self, e: ast.Call, use: ast.stmt | None, line: int) -> Trace:
        qual = self.ctx.qualified_name(e.func) or ""
        if qual == "torch.nn.Parameter":
            return DEAD  # a parameter of its own (`logZ`), not the stepped model's
        name = dotted(e.func)
        if name is not None and self._other_module(e.func, name, line):
            return self.args_trace(e, use, line)
        return super()._call(e, use, line)

    def _other_module(self, func: ast.expr, name: str, line: int) -> bool:
        """``name`` is a module bound to its own constructor, not the stepped model, not a part
        or a container of it, and not built from it."""
        for o in self.owners:
            if name == o or name.startswith(o + ".") or o.startswith(name + "."):
                return False
        k = self.ctx.analysis.kind(func, self.scope, line)
        if k is None or k.what != MODULE or not isinstance(k.node, ast.Call):
            return False
        if self._bound_value(func, name, line) is not k.node:
            return False  # `model = net.to(device)`, a function's result...: maybe the model
        for n in walk(k.node):
            d = dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
            if d is not None and (d in self.roots or d.partition(".")[0] in self.roots):
                return False  # `ema = EMA(model)`, `DDP(model)`
        return True

    def _bound_value(self, func: ast.expr, name: str, line: int) -> ast.AST | None:
        if name.startswith("self.") and name.count(".") == 1:
            cls = self.ctx.analysis.class_of(self.scope.node)
            info = cls.attrs.get(name[5:]) if cls is not None else None
            return info.value if info is not None and not info.later else None
        if "." in name:
            return None
        b = self.scope.binding_before(name, line)
        if b is None and self.scope.node is not self.ctx.tree:
            b = self.ctx.scope(self.ctx.tree).binding_before(name, 1 << 30)
        if b is None:
            return None
        return unpacked_value(b, name)


__all__ = ["SteppedModelCutFromLoss", "FocusTracer", "LIVE"]
