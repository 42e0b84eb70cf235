"""GT580: an optimizer steps a model whose every output in the pass was detached where it was
made, so the backward before the step reaches it only through that detach.

# NOTE [handed detach]
A step function of the file that runs none of the stepped model (``def g_step(fake):
opt_g.zero_grad(); bce(D(fake), ones).backward(); opt_g.step()``) trains it only through what
its loss reads from its arguments. When every call of it in the file passes, for such an
argument, the model's output detached where it was made (``fake = G(z).detach()`` in the
caller, or returned by a function of the file every return of which is that detach:
``fake = d_step(real)``), the backward never reaches the model: the detach is reported. The same when the pass hands
the model to a function of the file that runs it only detached (NOTE [detach in a helper]).
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.project import foreign_callee, home, shown_path
from gradtrace.lint.analysis.calls import named_calls
from gradtrace.lint.analysis.graph_deps import graphs
from gradtrace.lint.analysis.returned_terms import returns
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import (
    Backward, LoopFacts, Step, _owners, _stepped_expr,
)
from gradtrace.lint.rules.training_loop.zero_grad import covers

# methods of a model that run no forward: a call of one is not a use of the model's output
_HOUSEKEEPING = frozenset({
    "zero_grad", "train", "eval", "parameters", "named_parameters", "requires_grad_", "to",
    "cuda", "cpu", "state_dict", "modules", "children", "named_modules", "apply", "float",
    "half", "double", "register_forward_hook"})


# the expressions of a compound statement outside its body
_HEADERS = ("test", "iter", "target", "subject")


def _owner_of(name: str | None, owners: frozenset[str]) -> bool:
    return bool(name) and any(name == o or name.startswith(o + ".") for o in owners)


def _cut_call(n: ast.Call, owners: frozenset[str]) -> ast.Call | None:
    """``n`` is ``owner(...).detach()`` (or ``owner.sub(...).detach()``): the owner's call."""
    f = n.func
    if isinstance(f, ast.Attribute) and f.attr in ("detach", "detach_") and not n.args \
            and isinstance(f.value, ast.Call) and _owner_of(dotted(f.value.func), owners):
        return f.value
    return None


def _uses(stmts: list[ast.AST], owners: frozenset[str], helpers: Helpers | None = None,
          depth: int = 0) -> tuple[list[ast.Call], bool]:
    """The detached calls of the owners in ``stmts``, and whether the owners are used in any
    other way there (a live call, read as a value, passed to a helper that uses them so):
    then the model may get a gradient this file does not show us, and nothing is said.
    A function of the file handed an owner (``g_loss(G, D, z)``) is read with its parameter
    as the owner (NOTE [detach in a helper]); ``helpers`` then maps the call to its detach."""
    cuts: list[ast.Call] = []
    stack: list[ast.AST] = list(stmts)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return cuts, True
        if isinstance(n, ast.Call) and helpers is not None:
            inner_cuts = _helper_cuts(n, owners, helpers, depth)
            if inner_cuts is False:
                return cuts, True
            if inner_cuts is not None:
                cuts += inner_cuts
                stack.extend(a for a in (*n.args, *(k.value for k in n.keywords))
                             if not _owner_of(dotted(a), owners))
                continue
        if isinstance(n, ast.Call):
            inner = _cut_call(n, owners)
            if inner is not None:
                cuts.append(n)
                stack.extend(inner.args)
                stack.extend(k.value for k in inner.keywords)
                continue
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr in _HOUSEKEEPING and \
                    _owner_of(dotted(f.value), owners):
                stack.extend(n.args)
                stack.extend(k.value for k in n.keywords)
                continue
        if isinstance(n, (ast.Name, ast.Attribute)) and _owner_of(dotted(n), owners):
            return cuts, True
        stack.extend(child_nodes(n))
    return cuts, False


class Helpers:
    """Where ``_uses`` reads functions of the file: the context, the function making the
    calls, and each helper call found to use an owner only detached -> that detach."""

    def __init__(self, ctx: Context, where: ast.AST) -> None:
        self.ctx, self.where = ctx, where
        self.site: dict[int, ast.Call] = {}


def _helper_cuts(n: ast.Call, owners: frozenset[str], h: Helpers, depth: int
                 ) -> list[ast.Call] | bool | None:
    """# NOTE [detach in a helper]
    ``g_loss(G, D, z)`` of a function of the file whose parameter ``G`` receives an owner:
    the detached calls of that parameter in its body when it runs it only detached
    (``fake = G(z).detach()``); False when it uses it otherwise (or too deep to read); None
    when the call hands it no owner."""
    if not any(_owner_of(dotted(a), owners) for a in (*n.args, *(k.value for k in n.keywords))):
        return None
    fn = h.ctx.analysis.callee(n, h.where) if depth < 2 else None
    if fn is None and depth < 2:  # a function of another file (NOTE [project index])
        fn = foreign_callee(h.ctx, n, h.ctx.scope(h.where), n.lineno)
    octx = home(h.ctx, fn) if fn is not None else h.ctx
    if fn is None or octx.analysis.class_of(fn) is not None:
        return False
    args = h.ctx.analysis.arguments(fn, n)
    mine = frozenset(p for p, a in args.items() if _owner_of(dotted(a), owners))
    if not mine or any(_owner_of(dotted(k.value), owners) for k in n.keywords if k.arg is None):
        return False
    inner = h if octx is h.ctx else Helpers(octx, fn)
    cuts, other = _uses(list(fn.body), mine, inner, depth + 1)
    if other or not cuts:
        return False
    h.site[id(n)] = cuts[0]
    if octx is not h.ctx:  # reported at this call, naming the other file's detach
        h.ctx.memo("gt580-away", h.ctx.tree, dict)[id(cuts[0])] = (cuts[0], n, octx)
    return cuts


def detached_step(f: LoopFacts, s: Step) -> tuple[ast.Call, Backward, str] | None:
    """The step ``s`` of a model whose outputs in the pass are all detached where made: the
    detaching call, the backward before ``s`` that reads through it, and the name it was bound
    to; None when the pass uses the model otherwise or the file does not show enough."""
    if s.closure:
        return None
    loop = f.innermost_loop(s.stmt)
    owners = _owners(f, _stepped_expr(s), s.call.lineno)
    if not owners:
        return None
    z = next((z for z in f.zero_grads if covers(f, z, s) and f.before(z.stmt, s.stmt)
              and (loop is None or f.inside(z.stmt, loop))), None)
    if z is None:
        return None
    fed = [b for b in f.backwards if b.accumulates and f.before(z.stmt, b.stmt)
           and f.before(b.stmt, s.stmt)]
    if not fed:
        return None
    stmts = f.within(loop) if loop is not None else f.scope.stmts
    region: list[ast.AST] = []
    for x in stmts:
        if x.lineno >= s.stmt.lineno or x is loop:
            continue
        if hasattr(x, "body"):  # a compound statement: its header (its body is listed)
            region += [getattr(x, a) for a in _HEADERS if getattr(x, a, None) is not None]
            region += [i.context_expr for i in getattr(x, "items", ())]
        else:
            region.append(x)
    helpers = Helpers(f.ctx, f.node)
    cuts, other = _uses(region, owners, helpers)
    if other:
        return None
    if not cuts:  # the model is not run here at all: what the loss reads was handed in
        return _handed_detach(f, fed, owners)
    return _through(f, fed, cuts, helpers.site)


def _handed_detach(f: LoopFacts, fed: list[Backward], owners: frozenset[str]
                   ) -> tuple[ast.Call, Backward, str] | None:
    """A step function of the file (``g_step(fake)``) that runs none of the stepped model and
    whose backward reads an argument that every caller passes as the detached output of that
    model (``fake = d_step(real)``, ``d_step`` returning ``G(z).detach()``): the detach, the
    backward and the parameter's name (NOTE [handed detach])."""
    fn, ctx = f.node, f.ctx
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
            ctx.analysis.class_of(fn) is not None:
        return None
    params = {a.arg for a in fn.args.args}
    sites = [(c, w) for c, w in named_calls(ctx, fn.name) if ctx.analysis.callee(c, w) is fn]
    if not sites:
        return None
    g = graphs(f.scope)
    for b in reversed(fed):
        if b.loss is None:
            continue
        values = [b.loss] + [d.value for d in g.deps(b.loss, b.stmt.lineno).bindings
                             if d.value is not None]
        read = sorted({n.id for v in values for n in ast.walk(v)
                       if isinstance(n, ast.Name) and n.id in params})
        for p in read:
            cut = _same([_detached_value(ctx, ctx.analysis.arguments(fn, c).get(p), w,
                                         c.lineno, owners) for c, w in sites])
            if cut is not None:
                return cut, b, p
    return None


def _same(cuts: list[ast.Call | None]) -> ast.Call | None:
    """The one detach every entry names (None: one is missing, or they differ)."""
    if not cuts or any(c is None for c in cuts) or len({id(c) for c in cuts}) != 1:
        return None
    return cuts[0]


def _detached_value(ctx: Context, arg: ast.AST | None, where: ast.AST, line: int,
                    owners: frozenset[str], depth: int = 0) -> ast.Call | None:
    """The ``owner(...).detach()`` that ``arg`` holds: itself, through the name's binding
    before ``line``, or through a function of the file every return of which holds it."""
    if arg is None or depth > 4:
        return None
    if isinstance(arg, ast.Call) and _cut_call(arg, owners) is not None:
        return arg
    if isinstance(arg, ast.Name):
        b = ctx.scope(where).binding_before(arg.id, line)
        if b is None or not isinstance(b.stmt, ast.Assign) or b.value is None:
            return None
        return _detached_value(ctx, b.value, where, b.line, owners, depth + 1)
    if isinstance(arg, ast.Call):
        fn = ctx.analysis.callee(arg, where)
        rets = [r for r in returns(fn.body) if r.value is not None] if fn is not None else []
        return _same([_detached_value(ctx, r.value, fn, r.lineno, owners, depth + 1)
                      for r in rets])
    return None


def _through(f: LoopFacts, fed: list[Backward], cuts: list[ast.Call],
             site: dict[int, ast.Call] | None = None) -> tuple[ast.Call, Backward, str] | None:
    """A detach of ``cuts`` that a backward of ``fed`` reads through its loss's bindings, with
    the name it was bound to (``fake``), or through a helper call of ``site`` whose body holds
    the detach (the helper's own name for it is not known here: "output")."""
    site = site or {}
    ids = {id(c) for c in cuts}
    g = graphs(f.scope)
    for b in reversed(fed):
        if b.loss is None:
            continue
        values: list[tuple[ast.AST, str]] = [(b.loss, "output")]
        values += [(d.value, d.name) for d in g.deps(b.loss, b.stmt.lineno).bindings
                   if d.value is not None]
        for v, name in values:
            for n in ast.walk(v):
                if id(n) in ids:
                    return n, b, name  # type: ignore[return-value]
                if id(n) in site:
                    cut = site[id(n)]
                    away = f.ctx.memo("gt580-away", f.ctx.tree, dict).get(id(cut))
                    octx = away[2] if away is not None and away[0] is cut else f.ctx
                    return cut, b, _bound_name(octx, cut) or "output"
    return None


def _bound_name(ctx: Context, cut: ast.Call) -> str | None:
    """The name a helper binds the detach to (``fake = G(z).detach()``)."""
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Assign) and n.value is cut and len(n.targets) == 1 \
                and isinstance(n.targets[0], ast.Name):
            return n.targets[0].id
    return None


class SteppedModelOutputDetached(LoopRule):
    """An optimizer steps a model whose output was detached where it was made (`fake =
    G(z).detach()`), and no other use of that model's output comes between the clearing of
    its gradients and the step: the backward before the step reaches the model only through
    the detach, so the model gets no gradient at all.

    Why: a GAN loop that detaches the generator's output once, for the discriminator's step,
    and reuses the same `fake` for the generator's loss trains the discriminator twice and the
    generator never: `errG.backward()` stops at the detach, `optimizerG.step()` finds no
    gradient (None: Adam skips the parameter; zeros after `zero_grad(set_to_none=False)`).
    Detach only the discriminator's input (`netD(fake.detach())`) and keep `fake` attached.
    Known limits: the optimizer's parameters must be known (`Adam(netG.parameters())`) and the
    model used in the pass only by calls the file shows (a model passed to a helper is not
    judged, unless a function of this file or another file of the project runs it only detached:
    NOTE [detach in a helper], reported at the call for another file's). A plain function of
    the file that steps the model without running it is judged by what its callers hand it
    (NOTE [handed detach]).
    """

    code = "GT580"
    needs_step = True  # NOTE [step files]
    gate_statements = True
    name = "stepped-model-output-detached"
    message = ("`{cut}` detaches every output of `{owner}` in this pass: `{late}` (line "
               "{late_line}) reaches `{owner}` only through it, so `{step}` (line {step_line}) "
               "finds no gradient; keep `{var}` attached and detach it only in the input "
               "of a loss that must not train `{owner}` (a discriminator's: "
               "`D({var}.detach())`)")
    # a step function handed the detached output, or a loop handing the model to a helper of
    # another file that detaches it, holds no `detach` of its own
    triggers = ("detach", "zero_grad")
    statement_triggers = ("detach", "zero_grad")
    function_needs = ("backward", "step", "zero_grad")
    examples = [
        Bad("""
            import torch
            G, D = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
            opt_g = torch.optim.Adam(G.parameters())
            opt_d = torch.optim.Adam(D.parameters())
            for real, z in loader:
                fake = G(z).detach()
                opt_d.zero_grad()
                loss_d = D(fake).mean() - D(real).mean()
                loss_d.backward()
                opt_d.step()
                opt_g.zero_grad()
                loss_g = -D(fake).mean()
                loss_g.backward()
                opt_g.step()
            """, at=(6, 11)),
        Good("""
            import torch
            G, D = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
            opt_g = torch.optim.Adam(G.parameters())
            opt_d = torch.optim.Adam(D.parameters())
            for real, z in loader:
                fake = G(z)
                opt_d.zero_grad()
                loss_d = D(fake.detach()).mean() - D(real).mean()
                loss_d.backward()
                opt_d.step()
                opt_g.zero_grad()
                loss_g = -D(fake).mean()
                loss_g.backward()
                opt_g.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        for s in f.steps:
            found = detached_step(f, s)
            if found is not None:
                yield self._report(ctx, s, *found)

    def _report(self, ctx: Context, s: Step, cut: ast.Call, b: Backward, var: str
                ) -> Finding:
        owner = dotted(cut.func.value.func) or "the model"  # type: ignore[attr-defined]
        away = ctx.memo("gt580-away", ctx.tree, dict).get(id(cut))
        at, src, extra = cut, ctx.source(cut), ()
        if away is not None and away[0] is cut:  # the detach is in another file's helper
            _, at, octx = away
            src = octx.source(cut)
            extra = (Related(shown_path(octx.path, ctx.path), cut.lineno,
                             f"`{src}` detaches it here", octx.column(cut)),)
        return self.report(at, ctx, related=(
            *extra,
            related_at(ctx, b.call, "this backward stops at the detach"),
            related_at(ctx, s.call, "steps without a gradient")),
            cut=src, owner=owner, late=ctx.source(b.call),
            late_line=b.call.lineno, step=ctx.source(s.call), step_line=s.call.lineno,
            var=var)
