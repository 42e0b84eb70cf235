"""GT601: `optimizer.step()` between two backward passes through one graph."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.flow import OPTIMIZER
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.cuts import NON_TENSOR_KWARGS
from gradtrace.lint.analysis.exclusive_arms import apart
from gradtrace.lint.analysis.graphless import returns_data
from gradtrace.lint.analysis.grad_inputs import parameters_of, runs_on_output
from gradtrace.lint.analysis.linear_losses import saves_no_step
from gradtrace.lint.analysis.origins import origins
from gradtrace.lint.analysis.module_runs import NOT_RUNS
from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.inplace._step_values import (
    CUT_CALLS, _bindings_of, _built_here, _listed_tensors, _live_nodes, _made_of, _retains,
    _stale_graph_input,
)


class OptimizerStepBetweenBackwards(Rule):
    """`optimizer.step()` runs between two backward passes through one graph.

    Why: `step()` updates the parameters in place. A graph built before the step saved those
    parameters (a matmul saves its weight), so a second `backward()` through it — kept alive
    with `retain_graph=True` — finds them at a newer version and raises
    `RuntimeError: one of the variables needed for gradient computation has been modified by an
    inplace operation: [...], which is output 0 of AsStrided, ...`
    (pytorch-facts.md#saved-tensor-inplace).
    Do all backward passes first, then step (or sum the losses); in a GAN recompute
    `D(fake)` after the discriminator step. `retain_graph=True` with the step *after* the last
    backward is fine. A later pass given `inputs=` one module's parameters runs only that
    module's nodes and those after it: a step of a module that never runs on its output is
    fine (alternating passes, each restricted to its own model).
    When the later loss feeds an output of the stepped model (`fake = G(z)`) into the model
    that the optimizer stepped after it trains (`D(fake)`), and that optimizer trains none of
    the stepped model, the finding is where it enters the loss: that backward needs no
    gradient through the stepped model, and `.detach()` there is the fix.
    A loss built after the step from a value the kept graph holds (FactorVAE's `D_z`, whose
    graph runs through the stepped VAE) is the same second pass; the finding is where that
    value is read after the step (SRGAN's generator loss on the `fake_out` of the
    discriminator's loss): computing it again there, from the stepped model, is the fix.
    Another output of the forward the retained loss read (`logits, feats = D(x)`, the loss on
    `logits`, the later one on `feats`) shares its graph: the finding is at the step there
    (encodec's feature-matching loss after the discriminator's step).
    Known limits: the second loss must be built before the step in the same function (or
    before the loop whose body steps), or read such a value; such a value must show a call of
    the stepped model among its bindings in the function (one computed from an argument alone,
    or the model itself called again, is not taken for the kept graph); the later loss must call
    the stepped model in sight (or a name bound to it): a tensor made from an argument is not
    taken to run it. Backward only raises when the old graph saved a stepped
    parameter: true of any model with two layers, not of a single `nn.Linear` on raw input
    (checked on torch 2.13); the runtime (`gradtrace run`) sees which case it is.
    """

    code = "GT601"
    gate_statements = True
    name = "optimizer-step-between-backwards"
    message = ("{lead}`{step}` updates parameters in place between `{first}` (line {first_line}) and "
               "`{second}` (line {second_line}), whose graph was built before the step")
    triggers = ("step()",)
    examples = [
        Bad("""
            def train_step(model, x, opt):
                out = model(x)
                loss_a = out.sum()
                loss_b = out.pow(2).sum()
                loss_a.backward(retain_graph=True)
                opt.step()
                loss_b.backward()
            """, at=(6, 4)),
        Bad("""
            def fit(encoder, head, x, y, opt, criterion):
                feats = encoder(x)
                for epoch in range(10):
                    loss = criterion(head(feats), y)
                    loss.backward(retain_graph=True)
                    opt.step()
                    opt.zero_grad()
            """, at=(4, 8)),
        Good("""
            def train_step(model, x, opt):
                out = model(x)
                loss_a = out.sum()
                loss_b = out.pow(2).sum()
                loss_a.backward(retain_graph=True)
                loss_b.backward()
                opt.step()
            """),
        Good("""
            def gan_step(G, D, z, real, opt_d, opt_g, bce):
                fake = G(z)
                d_loss = bce(D(real), 1) + bce(D(fake), 0)
                d_loss.backward(retain_graph=True)
                opt_d.step()
                g_loss = bce(D(fake), 1)
                g_loss.backward()
                opt_g.step()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "step") or node.args or node.keywords:
            return
        if not ctx.mentions("retain_graph"):
            return
        scope = ctx.scope()
        recv = dotted(f.value) or ""
        if scope.kind(f.value) != OPTIMIZER and "opt" not in recv.rpartition(".")[2].lower():
            return
        sinks = step_calls(ctx, scope.node).losses()
        retained = [s for s in sinks if s.call.lineno < node.lineno and _retains(s.call)]
        if not retained:
            return
        loops = scope.loops_of(node)
        k = ctx.analysis.kind(f.value, scope, node.lineno)
        owners = k.over if k is not None and k.what == OPTIMIZER else frozenset()
        if not owners and k is not None and k.what == OPTIMIZER:
            owners = _listed_tensors(k.node)  # `Adam([self.log_alpha])`: the tensors
        for later in sinks:
            if later.call.lineno > node.lineno and later.loss is not None and saves_no_step(
                    ctx, scope, later.loss, later.call.lineno, scope.statement_of(later.call)):
                continue  # NOTE [a loss linear in its leaves]: nothing a step breaks
            if owners and later.call.lineno > node.lineno and \
                    not _may_reach(later.loss, later.call.lineno, owners, scope, ctx,
                                   args_may=False):
                continue  # its graph holds none of the stepped parameters in sight
                # (NOTE [proven shared graph]: an argument of unknown origin proves nothing)
            if owners and later.call.lineno > node.lineno and later.inputs is not None and \
                    not _pass_runs(later.inputs, owners, scope, ctx):
                continue  # `backward(inputs=m.parameters())` runs no node of the stepped ones
            hit = self._second(later, node, retained, loops, scope)
            if hit is not None and owners and later.call.lineno < node.lineno and \
                    not _old_graph_holds(hit, later, loops, owners, scope, ctx):
                continue  # the graph kept across passes holds none of the stepped tensors
            kept = _kept_part(later, node, retained[-1], owners, scope, ctx) if hit is None \
                and owners and later.call.lineno > node.lineno else None
            hit = kept or hit
            site = _detach_site(later, node, owners, sinks, scope, ctx) \
                if hit is not None and not kept and later.call.lineno > node.lineno else None
            if hit is not None and site is not None:
                at, stale = site
                kept, hit = True, (hit, (at, stale))
            if hit is not None:
                first, (at, stale) = hit if isinstance(hit, tuple) else (hit, (node, None))
                lead = "" if stale is None else (
                    f"`{stale}` (an output of the stepped model) enters `"
                    f"{ctx.source(later.loss)}` here without `.detach()`, although the "
                    "optimizer stepped after it trains none of that model: ") \
                    if site is not None else (
                    f"`{stale}`, part of the graph kept by `{ctx.source(first.call)}`, is read "
                    "again after the step: ") if kept else (
                    f"`{stale}` was computed before the loop, so this reuses its graph every "
                    "pass while ")
                rel = () if at is node else (Related(ctx.path, node.lineno, "`" + ctx.source(
                    node) + "` updates the parameters in place here", ctx.column(node)),)
                yield self.report(at, ctx, related=(*rel,
                    Related(ctx.path, first.call.lineno, "the graph is kept alive here",
                            ctx.column(first.call)),
                    Related(ctx.path, later.call.lineno, f"`{ctx.source(later.call)}` raises "
                            "'... modified by an inplace operation' here",
                            ctx.column(later.call))),
                    lead=lead, step=ctx.source(node), first=ctx.source(first.call),
                    first_line=first.call.lineno, second=ctx.source(later.call),
                    second_line=later.call.lineno)
                return

    @staticmethod
    def _second(later, step: ast.Call, retained, loops, scope):  # type: ignore[no-untyped-def]
        name = dotted(later.loss)
        if name is None:
            return None
        if later.call.lineno > step.lineno:
            b = scope.binding_before(name, later.call.lineno)
            if b is not None and b.line < step.lineno and retained[-1].call is not later.call:
                return retained[-1]
            return None
        # a retained backward in the loop that steps: the next iteration reuses an old graph
        if later.call.lineno < step.lineno and _retains(later.call) and loops:
            loop = loops[-1]
            if loop not in scope.loops_of(later.call):
                return None
            b = scope.binding_before(name, later.call.lineno)
            if b is not None and b.line < loop.lineno:
                return later
            if b is not None and b.value is not None:
                stale = _stale_graph_input(b, loop, scope)
                if stale is not None:
                    return later, stale
        return None


def _old_graph_holds(hit, later, loops, owners: frozenset[str], scope,  # type: ignore[no-untyped-def]
                     ctx: Context) -> bool:
    """In the loop shape (a retained backward each pass, a step after it), whether the value
    built before the loop (the stale input, or the loss itself) may hold the stepped
    parameters: MoleculeSTM steps `Adam([latent])` while the kept graph is the text encoder's
    (`text_repr`), which the step never touches."""
    name = hit[1][1] if isinstance(hit, tuple) else dotted(later.loss)  # (later, (at, name))
    if not isinstance(name, str) or not loops:
        return True
    e = ast.Name(id=name, ctx=ast.Load())
    return _may_reach(e, loops[-1].lineno, owners, scope, ctx, args_may=False)


def _may_reach(loss: ast.expr | None, line: int, owners: frozenset[str], scope,  # type: ignore[no-untyped-def]
               ctx: Context, args_may: bool = True, cls: ast.ClassDef | None = None,
               handed_out: bool = True, apart_from: ast.stmt | None = None) -> bool:
    """Whether the graph of ``loss`` may hold parameters of ``owners`` (``self.Q_net1``):
    a call of one of them (or of a method of this class that calls one, or a call handed
    one) is among the bindings it is computed from, or (``args_may``) it reads an argument of
    the function that may carry a graph (unknown; a batch of data does not, by the shared
    tracer). A value read again after the step (``_kept_part``) must show the stepped model
    among its bindings: denoising-diffusion-gan's ``real_data = x.to(device)``, from a loader
    built from the ``args`` of the function, holds none. False for SAC's ``Q2_loss`` after
    ``Q1_optimizer.step()``: built from ``self.Q_net2`` and a detached target only. ``cls``:
    the class whose methods ``self.<m>(...)`` calls run (default: the one being visited).
    ``handed_out=False``: a call handed one counts only when it runs a function of this file
    (a helper of another file given two models may build each loss from one of them).
    ``apart_from``: a binding under an ``if`` arm no pass running that statement takes
    (NOTE [arms of one flag]: ``if shared: v = policy.value(s)`` against the backward under
    ``if not shared:``) is not followed."""
    if loss is None:
        return True
    fn = scope.node
    tracer = origins(ctx, fn)
    use = next((s for s in scope.stmts if isinstance(s, ast.Expr) and s.lineno == line), None)
    todo, seen, exprs = [(loss, line, use)], set(), []
    aliases: list[ast.expr] = []  # the values of names the loss calls
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs,
                              *(x for x in (fn.args.vararg, fn.args.kwarg) if x))} - {"self"} \
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else set()
    while todo:
        e, at, where = todo.pop()
        exprs.append(e)
        nodes = _live_nodes(e)
        called = {id(c.func.value if isinstance(c.func, ast.Attribute) else c.func)
                  for c in nodes if isinstance(c, ast.Call)}  # `net(x)`, `sampler.draw(n)`
        named = {id(c.func) for c in nodes if isinstance(c, ast.Call)}  # `net(x)` only
        for n in nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                # every binding that may reach the use (one under an `if` may not have run)
                bs = tracer.bindings_at(n.id, where, at)
                if not bs and n.id in params and args_may and tracer.trace(n, None, at).live:
                    return True  # an argument that may carry a graph (not a batch of data)
                for b in bs:  # (a tuple unpacked: its whole right side)
                    if apart_from is not None and apart(b.stmt, apart_from, fn, ctx):
                        continue  # never bound in a pass that runs it
                    if value_of(b) is not None and id(b) not in seen and not b.no_grad \
                            and len(seen) < 200:
                        seen.add(id(b))
                        if id(n) in called and _built_here(value_of(b), ctx):
                            exprs.append(value_of(b))  # its settings hold no graph
                            continue
                        if id(n) in named and not isinstance(value_of(b), ast.Call):
                            aliases.append(value_of(b))  # `critic = self.critic`; `critic(x)`
                        todo.append((value_of(b), b.line, b.stmt))
    cls = cls or ctx.class_def  # (GT609 reads every function from its visit_Module)
    methods = {m.name: m for m in (cls.body if cls else ())
               if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def hits(d: str) -> bool:
        # `netD.cuda()`, `netD.apply(init)`, `netD.load_state_dict(sd)` in the method that
        # builds the model run no forward: no graph saves a parameter there
        head, _, last = d.rpartition(".")
        return any(d == o or d.startswith(o + ".") for o in owners) and not (
            last in NOT_RUNS and head in owners)
    if any(isinstance(n, (ast.Name, ast.Attribute)) and hits(dotted(n) or "")
           for v in aliases for n in walk(v)):
        return True  # a stepped module called under another name
    for e in exprs:
        for n in _live_nodes(e):
            if not isinstance(n, ast.Call) or isinstance(n.func, ast.Attribute) and \
                    n.func.attr in CUT_CALLS:
                continue  # `log_alpha.detach()` reads no graph of `log_alpha`
            d = dotted(n.func) or ""
            if hits(d) or any(hits(dotted(a) or "") for a in n.args) and (
                    handed_out or (c := ctx.analysis.callee(n, fn)) is not None
                    and not returns_data(ctx, c)):
                return True
            if d.startswith("self.") and d.count(".") == 1 and d[5:] in methods:
                for m in walk(methods[d[5:]]):
                    if isinstance(m, ast.Call):
                        md = dotted(m.func) or ""
                        if hits(md) or md.startswith("self.") and md[5:] in methods:
                            return True
    return False


def _pass_runs(inputs: ast.expr, owners: frozenset[str], scope,  # type: ignore[no-untyped-def]
               ctx: Context) -> bool:
    """Whether a pass with ``inputs=m.parameters()`` may run nodes of the stepped ``owners``:
    one of them is ``m`` or a part of it (or holds it), or is run on ``m``'s output in the
    function or the methods of its class it calls (NOTE [grad inputs])."""
    m = parameters_of(inputs)
    if m is None or any(o == m or m.startswith(o + ".") or o.startswith(m + ".")
                        for o in owners):
        return True
    cls = ctx.class_def
    methods = {f.name: f for f in (cls.body if cls else ())
               if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    fns, todo = {id(scope.node): scope.node}, [scope.node]
    while todo:
        for c in walk(todo.pop()):
            d = dotted(c.func) if isinstance(c, ast.Call) else None
            if d and d.startswith("self.") and (f := methods.get(d[5:])) is not None \
                    and id(f) not in fns:
                fns[id(f)] = f
                todo.append(f)
    return any(runs_on_output(ctx, fns.values(), m, o) for o in owners)


def _detach_site(later, step: ast.Call, owners: frozenset[str], sinks, scope,  # type: ignore[no-untyped-def]
                 ctx: Context) -> tuple[ast.stmt, str] | None:
    """(statement, name) where the loss of ``later`` (built before ``step``) feeds an output
    of the stepped model (``fake = generator(z)``) into a model that the optimizer stepped
    after ``later`` trains (``discriminator(fake)``), when that optimizer trains none of the
    stepped parameters: that backward needs no gradient through the stepped model, so the fix
    is ``.detach()`` there (a GAN's ``loss_d`` built on the generator's output before
    ``optim_g.step()``). The reverse shape (the later loss trains the upstream model through
    the stepped one: ``G_loss`` from ``D(G(z))`` after ``opt_D.step()``) needs that graph:
    None there (the fix is the order of the steps)."""
    if not owners:
        return None
    fn_steps = [c for c in walk(scope.node) if isinstance(c, ast.Call)
                and isinstance(c.func, ast.Attribute) and c.func.attr == "step"
                and not c.args and c.lineno > later.call.lineno]
    if not fn_steps:
        return None
    nxt = min(fn_steps, key=lambda c: (c.lineno, c.col_offset))
    k = ctx.analysis.kind(nxt.func.value, scope, nxt.lineno)  # type: ignore[attr-defined]
    mine = k.over if k is not None and k.what == OPTIMIZER else frozenset()

    def hits(d: str, names: frozenset[str]) -> bool:
        return bool(d) and any(d == o or d.startswith(o + ".") for o in names)
    if not mine or any(hits(o, owners) or hits(m, mine) for o in mine for m in owners):
        return None
    name = dotted(later.loss)
    b = scope.binding_before(name, later.call.lineno) if name else None
    if b is None or b.line > step.lineno or value_of(b) is None:
        return None
    chain = [b, *_bindings_of(value_of(b), b.line, scope, lambda x: True).values()]
    shared: set[int] = set()  # what a loss backpropagated with retain_graph before it reads
    for s in sinks:
        n_ = dotted(s.loss) if s.call.lineno < step.lineno and _retains(s.call) else None
        sb = scope.binding_before(n_, s.call.lineno) if n_ else None
        if sb is not None and value_of(sb) is not None:
            shared.update(_bindings_of(value_of(sb), sb.line, scope, lambda x: True))
    for x in chain:
        if id(x) in shared:  # NOTE [shared value holds the loss's own]: one D pass feeds
            continue  # both losses; detaching it would cut the first loss too: the step leads
        for n in _live_nodes(value_of(x)) if value_of(x) is not None else ():
            if not isinstance(n, ast.Call) or not hits(dotted(n.func) or "", mine):
                continue
            for a in n.args:
                if not isinstance(a, ast.Name):
                    continue
                ab = scope.binding_before(a.id, x.line)
                v = value_of(ab) if ab is not None else None
                if isinstance(v, ast.Call) and hits(dotted(v.func) or "", owners) \
                        and not ab.no_grad:
                    return x.stmt, a.id
    return None


def _kept_part(later, step: ast.Call, first, owners: frozenset[str], scope,  # type: ignore[no-untyped-def]
               ctx: Context):
    """(first, (step, name)) when the loss of ``later``, built after the step, reads a value
    bound before it that the retained loss of ``first`` was computed from and whose graph
    holds stepped parameters (FactorVAE: ``D_z = self.D(z)`` with ``z`` from ``self.VAE``,
    ``vae_loss`` from ``D_z`` backwarded with ``retain_graph=True``, ``optim_VAE.step()``,
    then ``D_tc_loss = cross_entropy(D_z, zeros)`` backwarded). A GAN's ``fake = G(z)``
    read after the discriminator's step holds none of its parameters."""
    kept = _bindings_of(first.loss, first.call.lineno, scope, lambda b: True)
    # the other outputs of one forward the retained loss reads (`logits, feats = D(x)`):
    # one graph, so a step of its weights reaches them too
    runs = {id(b.stmt) for b in kept.values() if isinstance(b.stmt, ast.Assign)
            and isinstance(b.stmt.value, ast.Call) and isinstance(b.stmt.targets[0], ast.Tuple)}
    name = dotted(later.loss)
    b = scope.binding_before(name, later.call.lineno) if name else None
    if b is None or b.line < step.lineno or value_of(b) is None:
        return None
    after = _bindings_of(value_of(b), b.line, scope, lambda x: x.line > step.lineno)
    for x in [b, *after.values()]:
        if value_of(x) is None:  # a loop's target (`for i, batch in ...`): no value to read
            continue
        nodes = _live_nodes(value_of(x))
        # not a value of the graph: the model itself, run again (``netD(x_pos, t)`` after the
        # step builds a new graph: denoising-diffusion-gan's generator step), nor a setting
        # handed by keyword (``torch.randint(..., device=device)``)
        skip = {id(c.func) for c in nodes if isinstance(c, ast.Call)} | {
            id(k.value) for c in nodes if isinstance(c, ast.Call) for k in c.keywords
            if k.arg in NON_TENSOR_KWARGS}
        for n in nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in skip:
                old = scope.binding_before(n.id, x.line)
                if old is not None and old.line < step.lineno and (
                        id(old) in kept or id(old.stmt) in runs or _derived(old, kept, scope)) \
                        and not old.no_grad and _may_reach(_made_of(old), old.line, owners,
                                                           scope, ctx, args_may=False):
                    if id(old) not in kept:  # another output of the retained loss's
                        return first, (step, n.id)  # forward, or a value computed from
                    # its graph: the step breaks what it needs
                    # (NOTE [value derived from the kept graph])
                    if x is b and value_of(b) is n:  # `info_loss = Info_xz`: a new name
                        return first, (later.call, n.id)  # only; the backward is the use
                    return first, (n, n.id)
    return None


# NOTE [value derived from the kept graph]
# Dreamer's ``lambda_value_target = lambda_return(rewards, values, ...)`` is computed from
# ``imaginated_values``, the value model's output that ``value_loss`` (backwarded with
# ``retain_graph=True``, reading the target only detached) was built from; after
# ``value_optimizer.step()`` the actor's loss reads the target live, and its backward crosses
# the kept value-model nodes whose saved weights the step changed: torch raises '... modified
# by an inplace operation'. A value bound before the step whose own bindings (a few levels)
# include one the retained loss was computed from counts as part of that graph; the step,
# which the fix moves after the later backward, is named.
def _derived(old, kept: dict, scope) -> bool:  # type: ignore[no-untyped-def]
    v = value_of(old)
    return v is not None and any(
        id(b) in kept for b in _bindings_of(v, old.line, scope, lambda b: True).values())

