"""GT508-GT509: two backward passes through one graph without ``retain_graph``."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.unpacked_graphless import unpacked_graphless
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Binding
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.analysis.reach import called_function, reaching, value_of
from gradtrace.lint.analysis.graph_deps import Deps, graphs
from gradtrace.lint.analysis.disjoint_passes import needed_by, separate_terms
from gradtrace.lint.analysis.proven_graph import proven_link
from gradtrace.lint.rules.training_loop._reach import known_reach
from gradtrace.lint.analysis.steps import Step
from gradtrace.lint.analysis.settings import exclusive_settings
from gradtrace.lint.analysis.inherited_callers import callee_or_inherited
from gradtrace.lint.rules.training_loop._loop import Backward, LoopFacts, facts
from gradtrace.lint.rules.training_loop._unstepped import _read_into_unstepped
from gradtrace.lint.rules.training_loop._selector import switched_passes
from gradtrace.lint.rules.training_loop._unknown_pair import (
    disjoint_arguments, handed_in, unknown_split)
from gradtrace.lint.rules.training_loop._graphless_entries import name_reads, reads_without_graph
from gradtrace.lint.rules.training_loop._base import (
    BACKWARD_CALLS, LoopRule, related_at, script_body)
from gradtrace.lint.rules.training_loop._gan import gan_call, helper_pairs, step_mates
from gradtrace.lint.rules.training_loop._gan_losses import loss_helper_finding, loss_helper_gan
from gradtrace.lint.nodes import bfs_walk, function_scopes


def shared_pairs(f: LoopFacts) -> Iterator[tuple[Backward, Backward, Binding, Deps, Deps]]:
    """(first, second, shared binding, deps of first, deps of second) for backward passes
    that run one after the other through a graph-carrying value, the first freeing it."""
    g = graphs(f.scope)
    bws = [b for b in f.backwards if b.loss is not None]
    if len(bws) < 2:
        return
    deps = {id(b.call): g.deps(b.loss, b.stmt.lineno) for b in bws}  # type: ignore[arg-type]
    # a name unpacked from one call whose element carries no history (the int64 code indices
    # beside a VQ layer's loss) does not put the reader on that call's graph
    keys = {k: {_graph_key(x, f) for x in d.bindings
                if _graph_key(x, f) == id(x) or not g.plain_result(x)} for k, d in deps.items()}
    sharing: dict[int, list[int]] = {}  # graph key -> the backward passes reading it, in order
    for i, b in enumerate(bws):
        for key in keys[id(b.call)]:
            sharing.setdefault(key, []).append(i)
    for b1 in bws:
        if b1.retains:
            continue
        # only the passes that share a graph key with b1, in order (a script's module body
        # holds hundreds of backward passes: every pair was quadratic)
        for j in sorted({j for key in keys[id(b1.call)] for j in sharing[key]}):
            b2 = bws[j]
            if b2 is b1 or not f.before(b1.stmt, b2.stmt) \
                    or exclusive_settings(f.scope, b1.stmt, b2.stmt):
                continue
            d1, d2, ids2 = deps[id(b1.call)], deps[id(b2.call)], keys[id(b2.call)]
            shared = [t for t in d1.bindings if _graph_key(t, f) in ids2 and g.carries(t)
                      and g.freed_by(b1, t) and needed_by(g, b2, t)  # NOTE [passes over separate inputs]
                      and not separate_terms(g, t, b1, b2)
                      and not _split_heads(f, t, b1, b2, d1, d2)
                      and not switched_passes(f, t, b1, b2, d1, d2)
                      and not unknown_split(f, t, d1, d2)  # NOTE [unknown pair]
                      and known_reach(g, b1.loss, b1.stmt.lineno, t)  # type: ignore[arg-type]
                      and not reads_without_graph(f, t, b2, d2)]  # NOTE [entries read without the graph]
            if shared:
                yield b1, b2, shared[0], d1, d2
                break


def _split_heads(f: LoopFacts, t: Binding, b1: Backward, b2: Backward, d1: Deps,
                 d2: Deps) -> bool:
    """Two losses that read different entries of one model output (``out['log_pi']`` and
    ``out['v']``, or ``loss_a`` and ``loss_b`` of ``loss_a, loss_b = pair_loss(ya, yb, t)``),
    each stepped by its own optimizer (one step between the backward passes, another after
    the second; or no step between and two optimizers stepped after both): an actor and a
    critic on separate branches, or two models, whose graphs need not meet;
    whether they share a trunk is decided by the model, not here."""
    if not _split_reads(f, t, d1, d2, b1, b2, 0):
        return False
    between = [s for s in f.steps if f.before(b1.stmt, s.stmt) and f.before(s.stmt, b2.stmt)]
    after = [s for s in f.steps if f.before(b2.stmt, s.stmt)]
    if not between:  # both passes first, then one step per optimizer (GDSS's two models)
        return len({a.optimizer for a in after}) > 1
    return any(a.optimizer not in {s.optimizer for s in between} for a in after)


def _split_reads(f: LoopFacts, t: Binding, d1: Deps, d2: Deps, b1: Backward, b2: Backward,
                 depth: int) -> bool:
    """The two losses read disjoint entries of ``t``: other keys, other names unpacked from
    one call; or they read ``t`` only whole into the same container whose entries they split
    (``outs`` in ``named = dict(zip(keys, outs))``, then ``named['d_real']`` and
    ``named['g_adv']``), or into the call whose unpacked names they split (``ya`` in
    ``loss_a, loss_b = pair_loss(ya, yb, t)``, a function from elsewhere: a helper or module of
    this file is read by :func:`_separate_results` instead)."""
    if _graph_key(t, f) == id(t.stmt) and \
            called_function(t.stmt.value, f.scope, t.line) is None:  # type: ignore
        # names unpacked from a call whose body is elsewhere: which of them each loss reads
        n1 = {x.name for x in d1.bindings if x.stmt is t.stmt}
        n2 = {x.name for x in d2.bindings if x.stmt is t.stmt}
        if n1 and n2 and not n1 & n2:
            return True
    keys1, keys2 = _entries(f, t, b1, d1), _entries(f, t, b2, d2)
    if not keys1 or not keys2:
        return False
    if keys1 == keys2 == {None}:
        c1, c2 = _carriers(f, t, b1, d1), _carriers(f, t, b2, d2)
        if depth >= 3 or not c1 or not c2 or -1 in c1 | c2:
            return False
        xs1 = [x for x in d1.bindings if id(x) in c1]
        xs2 = [x for x in d2.bindings if id(x) in c2]
        if c1 == c2:
            return all(_split_reads(f, x, d1, d2, b1, b2, depth + 1) for x in xs1)
        return len({id(x.stmt) for x in xs1 + xs2}) == 1 and \
            _split_reads(f, xs1[0], d1, d2, b1, b2, depth + 1)
    return None not in keys1 | keys2 and not keys1 & keys2


def _carriers(f: LoopFacts, t: Binding, b: Backward, d: Deps) -> set[int]:
    """ids of the bindings of ``d`` whose values read ``t``; -1 when the loss itself reads it."""
    out: set[int] = set()
    exprs = [(None, b.loss, b.stmt.lineno)] + [(x, value_of(x), x.line) for x in d.bindings]
    for x, e, line in exprs:
        if e is not None and any(isinstance(n, ast.Name) and n.id == t.name and
                                 f.scope.binding_before(t.name, line) is t for n in bfs_walk(e)):
            out.add(-1 if x is None else id(x))
    return out


def _entries(f: LoopFacts, t: Binding, b: Backward, d: Deps) -> set[str | None]:
    """The constant keys and attributes through which a loss reads ``t`` (None: read whole)."""
    out: set[str | None] = set()
    for p, parents in name_reads(f, t, b, d):
        if isinstance(p, ast.Subscript) and isinstance(p.slice, ast.Constant):
            out.add(repr(p.slice.value))
        elif _get_call(p, parents.get(id(p))) is not None:  # `out.get('v', 0)`: entry 'v'
            out.add(repr(_get_call(p, parents.get(id(p)))))
        elif isinstance(p, ast.Attribute) and getattr(parents.get(id(p)), "func", None) \
                is not p:
            out.add(p.attr)
        else:
            out.add(None)
    return out


def _get_call(attr: ast.AST | None, call: ast.AST | None) -> object | None:
    """The constant key of ``d.get('key', default)`` when ``attr`` is its ``d.get``."""
    if isinstance(attr, ast.Attribute) and attr.attr == "get" and isinstance(call, ast.Call) \
            and call.func is attr and call.args and isinstance(call.args[0], ast.Constant):
        return call.args[0].value
    return None


def _graph_key(b: Binding, f: LoopFacts) -> int:
    """What identifies the graph a binding holds: the binding, or for the names unpacked from
    one call (``pred, feat = netD(x, True)``) that call's statement: its outputs share the
    graph of the call, unless the call is a helper of the file whose returned items share no
    graph (:func:`_separate_results`)."""
    s = b.stmt
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and \
            isinstance(s.targets[0], (ast.Tuple, ast.List)) and isinstance(s.value, ast.Call):
        return id(b) if _separate_results(f, s.value) else id(s)
    return id(b)


def _separate_results(f: LoopFacts, call: ast.Call) -> bool:
    """``q1, q2 = self.critic_losses(batch)``: a function of the file (or a base's method) whose
    every ``return`` is a tuple of names depending on no common graph-carrying value (losses
    against a ``no_grad`` target): each name holds its own graph. False when unknown."""
    octx, fn = (f.ctx, None) if handed_in(f, call) else callee_or_inherited(f.ctx, call, f.node)
    if fn is None:
        return disjoint_arguments(f, call)  # NOTE [unknown pair]
    memo: dict[int, bool] = f.ctx.memo("gt509-separate-results", f.ctx.tree, dict)
    if id(fn) not in memo:
        memo[id(fn)] = False  # (recursion guard)
        inner = facts(octx, fn)
        g = graphs(inner.scope)
        rets = [r for r in inner.scope.stmts if isinstance(r, ast.Return)]
        ok = bool(rets)
        for r in rets:
            if not (isinstance(r.value, ast.Tuple) and
                    all(isinstance(e, ast.Name) for e in r.value.elts)):
                ok = False
                break
            seen: set[int] = set()
            for e in r.value.elts:
                d = g.deps(e, r.lineno)
                mine = {_graph_key(x, inner) for x in d.bindings if g.carries(x)}
                if mine & seen:
                    ok = False
                seen |= mine
        memo[id(fn)] = ok
    return memo[id(fn)]


class GanFakeNotDetached(LoopRule):
    """The discriminator step backpropagates into the generator through an undetached fake.

    Why: `d_loss = crit(D(fake), 0)` with `fake = G(z)` makes `d_loss.backward()` run through
    G's graph and free it; the generator step `crit(D(fake), 1).backward()` then reaches the
    freed part and raises `RuntimeError: Trying to backward through the graph a second time`
    (pytorch-facts.md#backward-twice). It also puts discriminator-loss gradients into G. Use
    `D(fake.detach())` in the discriminator step.
    The two steps may be two helpers of the file called one after the other with the same
    generator output (`d_step(real, fake)`, `g_step(fake)`: NOTE [GAN steps in helpers]).
    Known limits: the two losses are built in one function from the same local name, or in two
    such helpers from their parameters; the discriminator loss must also score something else
    (the real batch); values count as carrying
    a graph when they come from a call of something bound to an `nn.Module` in this file or
    spelled like one (`model`, `encoder`, `netG`, `self.rnn`).
    """

    code = "GT508"
    gate_statements = True
    name = "gan-fake-not-detached"
    message = ("the discriminator step feeds `{fake}` to `{disc}` without `.detach()`, so two "
               "`backward()` calls (lines {first_line} and {second_line}) run through the "
               "generator's graph and the second raises 'Trying to backward through the graph a "
               "second time' ({other}); use `{disc}({fake}.detach())` here")
    triggers = BACKWARD_CALLS
    function_needs = ("backward",)
    examples = [
        Bad("""
            for real in loader:
                fake = netG(torch.randn(64, 100))
                opt_d.zero_grad()
                d_loss = bce(netD(real), ones) + bce(netD(fake), zeros)
                d_loss.backward()
                opt_d.step()
                opt_g.zero_grad()
                g_loss = bce(netD(fake), ones)
                g_loss.backward()
                opt_g.step()
            """, at=(4, 41)),
        Good("""
            for real in loader:
                fake = netG(torch.randn(64, 100))
                opt_d.zero_grad()
                d_loss = bce(netD(real), ones) + bce(netD(fake.detach()), zeros)
                d_loss.backward()
                opt_d.step()
                opt_g.zero_grad()
                g_loss = bce(netD(fake), ones)
                g_loss.backward()
                opt_g.step()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        for b1, b2, t, d1, d2 in shared_pairs(f):
            call = gan_call(t.name, t.name, d1, d2, step_mates(f, b1), step_mates(f, b2))
            if call is None:  # NOTE [GAN losses in helpers]
                yield from loss_helper_finding(self, f.scope, b1, b2, t, d1, d2, ctx)
            if call is not None:
                yield self.report(call, ctx, related=(
                    related_at(ctx, t.stmt, f"`{t.name}` is made by the generator here"),
                    related_at(ctx, b1.call, "this backward frees the generator's graph"),
                    related_at(ctx, b2.call, "this backward needs it again")),
                    fake=t.name, disc=ctx.source(call.func), first_line=b1.call.lineno,
                    second_line=b2.call.lineno, other=_other(call, b1, b2))

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from super().visit_Module(node, ctx)
        for fn in function_scopes(node):  # NOTE [GAN steps in helpers]: callers hold no
            if fn is node and not script_body(ctx, node):  # backward, so are not visited
                continue
            for h in helper_pairs(ctx, fn):
                yield self.report(h.call, ctx, related=(
                    related_at(ctx, h.shared.stmt, f"`{h.shared.name}` is made by the generator "
                               "here and handed to both steps"),
                    related_at(ctx, h.first.call, "this backward frees the generator's graph"),
                    related_at(ctx, h.second.call, "this backward needs it again")),
                    fake=ctx.source(h.call.args[0]), disc=ctx.source(h.call.func),
                    first_line=h.first.call.lineno, second_line=h.second.call.lineno,
                    other="the discriminator step frees it first" if h.disc_first
                    else "the generator step already freed that graph")


def _other(call: ast.Call, b1: Backward, b2: Backward) -> str:
    if call.lineno <= b1.call.lineno:
        return "the discriminator step frees it first"
    return "the generator step already freed that graph"


class BackwardTwiceWithoutRetainGraph(LoopRule):
    """A second `backward()` runs through a graph that the first one already freed.

    Why: `backward()` frees the saved tensors of every graph node it passes unless
    `retain_graph=True`; a later backward through any shared part raises `RuntimeError:
    Trying to backward through the graph a second time` (pytorch-facts.md#backward-twice). Sum the
    losses and call `backward()` once, or pass `retain_graph=True` to the first call.
    Known limits: only losses built from local names of one function are compared; values count
    as carrying a graph when they come from a call of something bound to an `nn.Module` in this
    file or spelled like one (`model`, `encoder`, `netG`, `self.rnn`). Two losses reading
    different entries of one output (`out['log_pi']`, `out['v']`, `out.get('v', 0)`, or two
    names unpacked from a call of another file), each stepped by its own optimizer (between
    the two passes, or both passes then two optimizers' steps), are taken as separate branches
    (whether they share a trunk is the model's). The shared value must be made in sight (a
    module bound here, `self.<attr>(x)`, a callable name, a function of the project), and each
    loss must reach it through calls that pass the graph on in sight: a method of another
    object's attribute, a function imported without its body, or a call choosing a mode by a
    constant (`loss_module(x, recon, mode="discriminator")`) may detach, and is only accepted
    when both losses go through the same such call. When the second loss
    is built, after the first `backward()`, from that very loss (`running_loss += loss`), the
    finding is on that reuse. When an optimizer steps between the first `backward()` and the
    statement that computes the second loss from a forward output of before (Sophia's sampled
    Hessian loss on the old `logits`), the finding is on that stale read: `retain_graph=True`
    would only trade this error for 'modified by an inplace operation'; run the forward again.
    When the optimizer stepped there holds only the module that read that output in the first
    loss (a critic fed the encoder's output), the finding is on that read: detach it there
    (NOTE [first pass into an unstepped producer]). A name unpacked from a helper that hands
    back one of its parameters, whole or sliced, filled with data (`pred, wav =
    match_dim(pred, wav)`) is that data (NOTE [graphless tuple element]).
    A loop whose variable is backpropagated (`for loss in losses:
    loss.backward()`) over the items of one call computed from one graph-carrying value is
    reported on the loop.
    """

    code = "GT509"
    gate_statements = True
    name = "backward-twice-without-retain-graph"
    message = ("{head} then raises 'Trying to backward through the graph a second time'; "
               "{advice}")
    triggers = BACKWARD_CALLS
    function_needs = ("backward",)
    examples = [
        Bad("""
            features = backbone(images)
            loss_cls = ce(cls_head(features), labels)
            loss_box = l1(box_head(features), boxes)
            loss_cls.backward()
            loss_box.backward()
            """, at=(4, 0)),
        Good("""
            features = backbone(images)
            loss_cls = ce(cls_head(features), labels)
            loss_box = l1(box_head(features), boxes)
            loss_cls.backward(retain_graph=True)
            loss_box.backward()
            """),
        Good("""
            features = backbone(images)
            loss = ce(cls_head(features), labels) + l1(box_head(features), boxes)
            loss.backward()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        for b, loop, src in _items_of_one_graph(f):
            yield self.report(loop, ctx, related=(
                related_at(ctx, b.call, "each pass backpropagates one item here"),
                related_at(ctx, src.stmt, f"`{src.name}` is computed once here")),
                head=(f"this loop calls `backward()` on each item of `{src.name}` (line "
                      f"{src.line}), whose items share one graph: the first pass frees it, "
                      f"and `backward()` on line {b.call.lineno} on the next item"),
                advice="sum the items and call `backward()` once, or pass `retain_graph=True`")
        for b1, b2, t, d1, d2 in shared_pairs(f):
            if gan_call(t.name, t.name, d1, d2, step_mates(f, b1), step_mates(f, b2)) is not None \
                    or loss_helper_gan(ctx, f.scope, t, d1, d2) is not None:
                continue  # GT508's (NOTE [GAN losses in helpers])
            if unpacked_graphless(ctx, f.scope, t):
                continue  # NOTE [graphless tuple element]: data handed back through a helper
            g = graphs(f.scope)  # NOTE [proven shared graph]
            if not proven_link(g, t, b1.loss, b1.stmt.lineno,  # type: ignore[arg-type]
                               b2.loss, b2.stmt.lineno):  # type: ignore[arg-type]
                continue
            related = [related_at(ctx, b2.call, "the second backward raises here"),
                       related_at(ctx, t.stmt, f"`{t.name}` is computed once here")]
            loss2 = ctx.source(b2.loss)  # type: ignore[arg-type]
            again = _backpropagated_loss_reused(f, b1, d2)
            stale = _read_after_step(f, b1, t, d2) if again is None else None
            if stale is not None:
                read, step = stale
                root = _read_into_unstepped(f, t, d1, step, ctx)
                if root is not None:  # NOTE [first pass into an unstepped producer]
                    related.append(related_at(ctx, b1.call, "this backward frees the graph"))
                    yield self.report(root, ctx, related=related, head=(
                        f"`{ctx.source(root.func)}` reads `{t.name}` (line {t.line}) without "
                        f"`.detach()` in the loss of `{ctx.source(b1.call)}` (line "
                        f"{b1.call.lineno}), which runs through and frees the graph of its "
                        f"producer although `{step.optimizer}` steps only "
                        f"`{ctx.source(root.func)}`; `{loss2}`, whose `backward()` on line "
                        f"{b2.call.lineno}, needs that graph again and"),
                        advice=f"pass `{t.name}.detach()` here")
                    continue
                related.append(related_at(ctx, step.stmt, f"`{ctx.source(step.call)}` updates "
                                          "the parameters in place here"))
                yield self.report(read, ctx, related=related, head=(
                    f"`{t.name}` (line {t.line}) was computed before `{ctx.source(b1.call)}` "
                    f"(line {b1.call.lineno}) freed its graph and `{ctx.source(step.call)}` "
                    f"(line {step.call.lineno}) updated the parameters; it is read again here "
                    f"for `{loss2}`, whose `backward()` on line {b2.call.lineno}"),
                    advice=f"run the forward again after the step and compute `{loss2}` from "
                           "the new output (`retain_graph=True` would only trade this for "
                           "'modified by an inplace operation')")
                continue
            if again is None:
                yield self.report(b1.call, ctx, related=related, head=(
                    f"this `backward()` frees the graph of `{t.name}` (line {t.line}) that "
                    f"`{loss2}` also runs through: its `backward()` on line {b2.call.lineno}"),
                    advice="sum the losses and call `backward()` once, or pass "
                           "`retain_graph=True` here")
                continue
            loss1 = ctx.source(b1.loss)  # type: ignore[arg-type]
            related.append(related_at(ctx, b1.call, f"`{loss1}` is backpropagated here"))
            yield self.report(again, ctx, related=related, head=(
                f"`{loss1}` was already backpropagated on line {b1.call.lineno}, which freed its "
                f"graph, and is used again here in `{loss2}`: `backward()` on line "
                f"{b2.call.lineno}"),
                advice=f"use `{loss1}.item()` (or `{loss1}.detach()`) here, or start a new sum")


def _read_after_step(f: LoopFacts, b1: Backward, t: Binding, d2: Deps
                     ) -> tuple[ast.stmt, Step] | None:
    """(statement, step) when an optimizer steps after ``b1`` and a value of the second loss
    is then computed from ``t`` (a forward output bound before ``b1``): Sophia's Hessian
    update samples ``loss_sampled`` from the ``logits`` of the step already taken. The mistake
    is that stale read: keeping the graph (``retain_graph=True``) would run backward through
    parameters the step changed in place. None when no step runs in between."""
    if not f.before(t.stmt, b1.stmt):
        return None
    steps = [s for s in f.steps if f.before(b1.stmt, s.stmt)]
    if not steps:
        return None
    for x in sorted(d2.bindings, key=lambda x: x.line):
        v = value_of(x)
        if x is t or v is None or not f.before(b1.stmt, x.stmt):
            continue
        step = next((s for s in steps if f.before(s.stmt, x.stmt)), None)
        if step is None:
            continue
        if any(isinstance(n, ast.Name) and n.id == t.name for n in bfs_walk(v)) and \
                any(r is t for r in reaching(f.scope, t.name, x.line)):
            return x.stmt, step
    return None


def _backpropagated_loss_reused(f: LoopFacts, b1: Backward, d2: Deps) -> ast.stmt | None:
    """``loss.backward()``, then ``running_loss += loss`` (or ``loss += loss_t`` on the second
    pass of SAM): the statement after ``b1`` that computes a value of the second loss from the
    very loss ``b1`` backpropagated, whose graph ``b1`` freed. The mistake is that reuse, not a
    missing ``retain_graph`` (None: the second loss reads only what the first was made from)."""
    if not isinstance(b1.loss, ast.Name):
        return None
    name = b1.loss.id
    first = f.scope.binding_before(name, b1.stmt.lineno)
    if first is None:
        return None
    for x in d2.bindings:
        v = value_of(x)
        if x is first or v is None or not f.before(b1.stmt, x.stmt):
            continue
        read = isinstance(x.stmt, ast.AugAssign) and x.name == name or any(
            isinstance(n, ast.Name) and n.id == name for n in bfs_walk(v))
        if read and any(r is first for r in reaching(f.scope, name, x.line)):
            return x.stmt
    return None


def _items_of_one_graph(f: LoopFacts) -> Iterator[tuple[Backward, ast.For, Binding]]:
    """``losses = self.model.loss(outputs, batch)``, then ``for loss in losses:
    loss.backward()``: a backward without ``retain_graph`` on the loop variable of a loop over
    the items of one value, which a single call (not a list filled pass by pass, nor a
    comprehension of forward passes) computed from one graph-carrying binding: every item
    shares that graph, and the second pass runs into what the first freed."""
    g = graphs(f.scope)
    for b in f.backwards:
        if b.retains or not isinstance(b.loss, ast.Name) or b.inputs is not None:
            continue
        loop = next((lp for lp in reversed(f.loops_of(b.stmt)) if isinstance(lp, ast.For)
                     and isinstance(lp.target, ast.Name) and lp.target.id == b.loss.id), None)
        if loop is None or any(x.stmt is not loop for x in f.scope.bindings.get(b.loss.id, ())
                               if f.inside(x.stmt, loop)):
            continue
        it = loop.iter
        while isinstance(it, ast.Call) and len(it.args) == 1 and not it.keywords \
                and isinstance(it.func, ast.Name):
            it = it.args[0]  # `ensure_tuple(losses)`, `list(losses)`
        if not isinstance(it, ast.Name):
            continue
        src = f.scope.binding_before(it.id, loop.lineno)
        if src is None or not isinstance(src.stmt, ast.Assign) or len(src.stmt.targets) != 1 \
                or not isinstance(src.stmt.targets[0], ast.Name) \
                or not isinstance(src.value, ast.Call) or f.inside(src.stmt, loop):
            continue
        outer = [x for x in g.deps(src.value, src.line).bindings if g.direct(x)]
        if len(outer) == 1 and isinstance(value_of(outer[0]), ast.Call):
            yield b, loop, src
