"""GT506-GT507: a graph built on one pass of the loop is backwarded again on the next."""
from __future__ import annotations

import ast
import re
from dataclasses import replace
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Binding
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.analysis.fixed_loops import runs_once
from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.analysis.graph_deps import Graphs, graphs, loads
from gradtrace.lint.analysis.graphless import graphless_data, returns_data
from gradtrace.lint.analysis.proven_graph import proven_source
from gradtrace.lint.rules.training_loop._called_pass import reused_globals
from gradtrace.lint.rules.training_loop._foreign import foreign_call
from gradtrace.lint.rules.training_loop._reach import known_reach
from gradtrace.lint.rules.training_loop._loop import Backward, LoopFacts, _owners, _stepped_expr
from gradtrace.lint.rules.training_loop._base import BACKWARD_CALLS, LoopRule, related_at
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.rules.training_loop._reused_graph import (
    _advanced_each_pass, _called, _discriminator_steps, _helper_graph, _leaf_graph, _makes_layers,
    _plain_helper, declared_data)

DETACH_RE = re.compile(r"\.detach_?\(")
FREEZE_RE = re.compile(r"requires_grad_\(\s*False|requires_grad\s*=\s*False|freeze",
                       re.IGNORECASE)


def loop_backwards(f: LoopFacts, stepped: bool = False) -> Iterator[tuple[Backward, ast.stmt]]:
    """Backward calls that run inside a loop and free their graph, with that loop;
    ``stepped``: also those that keep it (``retain_graph=True``) in a loop that steps an
    optimizer, whose in-place update breaks the kept graph instead. A loop of one pass
    (``for i in range(1):``, :func:`runs_once`) is no loop here."""
    for b in f.backwards:
        loops = tuple(x for x in f.loops_of(b.stmt) if not runs_once(x))
        if loops and b.loss is not None and (not b.retains or stepped and _step_in(
                f, loops[-1])):
            yield b, loops[-1]


def _step_in(f: LoopFacts, loop: ast.stmt) -> ast.Call | None:
    """An ``opt.step()`` of the loop (it updates the weights in place on every pass)."""
    return next((s.call for s in f.steps if f.inside(s.stmt, loop)), None)


def _steps_carried(f: LoopFacts, r: Binding, step: ast.Call, ctx: Context) -> bool:
    """With ``retain_graph=True`` the carried graph only breaks when ``step`` updates a
    weight it saved: the optimizer's modules must be known and the carried value computed
    from a call of one of them in sight (test-time-adaptation's ``sampling``, from a style
    encoder that the segmentation model's optimizer, built elsewhere, is not shown to step)."""
    from gradtrace.lint.flow import OPTIMIZER
    from gradtrace.lint.rules.inplace.step import _may_reach
    recv = step.func.value if isinstance(step.func, ast.Attribute) else None
    k = ctx.analysis.kind(recv, f.scope, step.lineno) if recv is not None else None
    owners = k.over if k is not None and k.what == OPTIMIZER else frozenset()
    v = value_of(r)
    return bool(owners) and v is not None and _may_reach(v, r.line, owners, f.scope, ctx,
                                                         args_may=False)


def _is_recurrence(b: Binding) -> bool:
    """``h = f(x, h)`` / ``out, h = rnn(x, h)`` / ``total += loss`` / ``total = total + loss``."""
    if isinstance(b.stmt, ast.AugAssign):
        return True
    v = value_of(b)
    return v is not None and any(name == b.name for name, _ in loads(v))


def _recurrent(f: LoopFacts, d: Binding) -> Binding | None:
    """The binding made by ``d``'s statement that feeds on its own previous value, if any."""
    for b in f.bindings_at(d.stmt):
        if _is_recurrence(b):
            return b
    return None


class HiddenStateNotDetached(LoopRule):
    """A value is fed back into the next pass of a training loop without `.detach()`.

    Why: `out, hidden = rnn(x, hidden)` (or `total = total + loss` followed by
    `total.backward()`) links every pass's graph to the previous one. The first `backward()`
    frees the saved tensors of the old graph; the next pass backpropagates into it again and
    raises `RuntimeError: Trying to backward through the graph a second time`
    (pytorch-facts.md#backward-twice). `backward(retain_graph=True)`, the usual band-aid,
    keeps the old graphs, but the optimizer's in-place step changes the weights they saved,
    and the next backward raises 'modified by an inplace operation'. Truncated BPTT detaches
    the state once per batch: `hidden = hidden.detach()` (or a `repackage_hidden` helper).
    Known limits: only names of one function are followed; a reset or detach anywhere in the
    loop (even conditional) is trusted, as is a helper named for it (`repackage_hidden`) or
    one of this file that returns `.detach()`; values count as carrying a graph when they come
    from a call of something bound to an `nn.Module` in this file or spelled like one (`model`,
    `encoder`, `netG`, `self.rnn`), in a form the code in sight proves: a method of another
    object's attribute (`self.agent.policy.features(x)`, its class in another file) counts only
    when the loop's optimizer trains, or may train, that object (`self.model.rnn(x, h)` with
    `self.opt` over `self.model.parameters()`) (NOTE [proven shared graph]).
    """

    code = "GT506"
    gate_statements = True
    name = "hidden-state-not-detached"
    message = ("`{name}` is carried from one pass of the loop into the next without "
               "`.detach()`, so `backward()` (line {backward_line}) reaches the previous "
               "pass's freed graph and raises 'Trying to backward through the graph a second "
               "time'; detach it once per pass: `{name} = {name}.detach()`")
    message_retained = (
        "`{name}` is carried from one pass of the loop into the next without `.detach()`: "
        "`retain_graph=True` on `backward()` (line {backward_line}) keeps every earlier "
        "pass's graph alive, but `optimizer.step()` (line {step}) has since changed in place "
        "the weights that graph saved, so the next backward raises 'one of the variables "
        "needed for gradient computation has been modified by an inplace operation' (and "
        "each pass backpropagates through all earlier ones); detach it once per pass: "
        "`{name} = {name}.detach()`, and drop retain_graph")
    triggers = BACKWARD_CALLS
    function_needs = ("backward",)
    examples = [
        Bad("""
            hidden = model.init_hidden(batch_size)
            for x, y in batches:
                optimizer.zero_grad()
                output, hidden = model(x, hidden)
                loss = criterion(output, y)
                loss.backward()
                optimizer.step()
            """, at=(4, 4)),
        Bad("""
            total = 0
            for x, y in loader:
                total = total + criterion(model(x), y)
                total.backward()
            """, at=(3, 4)),
        Good("""
            hidden = model.init_hidden(batch_size)
            for x, y in batches:
                hidden = repackage_hidden(hidden)
                optimizer.zero_grad()
                output, hidden = model(x, hidden)
                criterion(output, y).backward()
                optimizer.step()
            """),
        Good("""
            for x, y in batches:
                h = torch.zeros(1, x.size(0), 64)
                for t in range(x.size(1)):
                    h = cell(x[:, t], h)
                criterion(h, y).backward()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        g = graphs(f.scope)
        done: set[int] = set()
        for b, loop in loop_backwards(f, stepped=True):
            for d in g.deps(b.loss, b.stmt.lineno).bindings:  # type: ignore[arg-type]
                if id(d.stmt) in done or not f.inside(d.stmt, loop):
                    continue
                r = _recurrent(f, d)
                if r is not None and self._carried(f, g, r, loop):
                    done.add(id(r.stmt))
                    start = _outside_binding(f, r.name, loop)
                    rel = [related_at(ctx, b.call, "backward runs here on every pass")]
                    if start is not None:
                        rel.append(related_at(ctx, start.stmt, f"`{r.name}` starts here"))
                    f_ = self.report(r.stmt, ctx, related=rel, name=r.name,
                                     backward_line=b.call.lineno)
                    step = _step_in(f, loop) if b.retains else None
                    if step is not None and not _steps_carried(f, r, step, ctx):
                        continue  # NOTE [proven shared graph]: the step is not shown to touch it
                    if step is not None:  # the band-aid: the old graph is kept, then broken
                        f_ = replace(f_, message=self.message_retained.format(
                            name=r.name, backward_line=b.call.lineno, step=step.lineno))
                    yield f_

    @staticmethod
    def _carried(f: LoopFacts, g: Graphs, r: Binding, loop: ast.stmt) -> bool:
        if _outside_binding(f, r.name, loop) is None and not r.name.startswith("self."):
            return False  # (object state lives on from before the loop)
        if _foreign_by_product(f, r):
            return False
        for other in f.scope.bindings.get(r.name, ()):
            if other.stmt is loop or not f.inside(other.stmt, loop):
                continue
            if not _is_recurrence(other) or not g.carries(other) or "detach" in \
                    f.ctx.source(value_of(other) or other.stmt) or \
                    _detaching_helper(value_of(other), f.ctx):
                return False
        for m in f.scope.method_calls:
            if m.receiver == r.name and m.method in ("detach_", "zero_", "fill_") \
                    and f.inside(m.stmt, loop):
                return False
        return g.carries(r) and (proven_source(g, r) or _trained_here(f, r, loop))


def _foreign_by_product(f: LoopFacts, r: Binding) -> bool:
    """``r`` comes from a call of a function of another file (NOTE [foreign functions]):
    its whole result, or, when the function is spelled like a loss, an element after the
    first of the result unpacked (``loss, mask, p_model = consistency_loss(...)``)."""
    v = value_of(r)
    if not isinstance(v, ast.Call):
        return False
    if foreign_call(f.ctx)(v):
        return True
    t = r.stmt.targets[0] if isinstance(r.stmt, ast.Assign) and len(r.stmt.targets) == 1 \
        else None
    return isinstance(t, ast.Tuple) and bool(t.elts) and dotted(t.elts[0]) != r.name \
        and any(dotted(e) == r.name for e in t.elts) and foreign_call(f.ctx, spelled=True)(v)


def _detaching_helper(value: ast.expr | None, ctx: Context) -> bool:
    """``hidden = self._repackage_hidden(hidden)``: a call of a helper named for detaching, or
    of a function defined in this file whose body detaches (`.detach()`, `detach_()`)."""
    if not isinstance(value, ast.Call):
        return False
    callee = (dotted(value.func) or "").rpartition(".")[2]
    if not callee:
        return False
    if "repackage" in callee.lower() or "detach" in callee.lower():
        return True
    return callee in _detaching_defs(ctx)


def _detaching_defs(ctx: Context) -> frozenset[str]:
    """Functions of this file that return detached values (``return h.detach()``)."""
    def make() -> frozenset[str]:
        return frozenset(n.name for n in bfs_walk(ctx.tree)
                         if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                         and any(isinstance(r, ast.Return) and r.value is not None
                                 and DETACH_RE.search(ctx.code_of(r.value)) for r in bfs_walk(n)))
    if not ctx.mentions("detach"):
        return frozenset()
    return ctx.memo("gt5-detaching-defs", ctx.tree, make)


def _outside_binding(f: LoopFacts, name: str, loop: ast.stmt) -> Binding | None:
    for b in f.scope.bindings.get(name, ()):
        if b.line < loop.lineno and not f.inside(b.stmt, loop):
            return b
    return None


class GraphReusedAcrossSteps(LoopRule):
    """A trainable module's output is computed once before the loop and backwarded every pass.

    Why: `feats = encoder(x)` before the loop builds one graph; the first `backward()` in the
    loop frees its saved tensors, so the second pass raises `RuntimeError: Trying to
    backward through the graph a second time` (pytorch-facts.md#backward-twice). Compute it
    inside the loop if the module should train, or under `torch.no_grad()` / with `.detach()`
    if it is a fixed feature extractor.
    Known limits: a module frozen anywhere in the file (`requires_grad_(False)`, `requires_grad
    = False`, "freeze") is trusted to be this one; an iterator advanced with `next()` on each
    pass yields fresh values, a value of data (`total = torch.tensor(0)`: no graph to free;
    backpropagated, GT122/GT125 name it) is left alone, and several discriminator steps on one
    generated batch are left
    to GT508 (the detach is often inside the discriminator's loss callback); values count as
    carrying a graph when they come from a call of something bound to an `nn.Module` in this
    file or spelled like one (`model`, `encoder`, `netG`, `self.rnn`), of a same-file helper
    whose `return` makes such a call, or from a tensor made with `requires_grad=True` through an
    operation that saves tensors for backward (`@`, `torch.mm`, `log`, `Categorical(p)`:
    NOTE [caching distributions]...; reported once per backward, on the value nearest to it); a
    method other than the forward of an object whose class is not in this file
    (`model.embed(x)`), when the loop steps optimizers and none of them trains that object, is
    trusted to return what a probe can train on (its code is out of sight), and so is a method
    of another object's attribute (`self.agent.policy.features(x)`) unless it is handed a
    module (`engine.g_inferer(z, engine.g_network)`) or the loop's optimizer trains, or may
    train, that object (NOTE [proven shared graph]).
    """

    code = "GT507"
    gate_statements = True
    name = "graph-reused-across-steps"
    message = ("`{name}` is computed once {source} before the loop, with its graph; "
               "the first `backward()` (line {backward_line}) frees that graph and the next "
               "pass raises 'Trying to backward through the graph a second time'; compute it "
               "inside the loop, or under `torch.no_grad()` if `{module}` is not trained")
    triggers = BACKWARD_CALLS
    function_needs = ("backward",)
    examples = [
        Bad("""
            feats = encoder(images)
            for step in range(100):
                optimizer.zero_grad()
                loss = criterion(head(feats), labels)
                loss.backward()
                optimizer.step()
            """, at=(1, 0)),
        Good("""
            with torch.no_grad():
                feats = encoder(images)
            for step in range(100):
                optimizer.zero_grad()
                loss = criterion(head(feats), labels)
                loss.backward()
                optimizer.step()
            """),
        Good("""
            feats = encoder(images).detach()
            for step in range(100):
                loss = criterion(head(feats), labels)
                loss.backward()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        if ctx.memo("gt5-freeze", ctx.tree, lambda: FREEZE_RE.search(ctx.code) is not None):
            return
        for t, b, loop, source in reused_globals(f, ctx):  # NOTE [reused through a per-pass function]
            yield self.report(t.stmt, ctx, related=(
                related_at(ctx, b.call, "backward runs here, on every call from the loop"),
                related_at(ctx, loop, "the loop that calls it")), name=t.name,
                module=source.split("`")[1].removesuffix("(...)"), source=source, backward_line=b.call.lineno)
        if not any(f.loops_of(b.stmt) for b in f.backwards):
            return
        g = graphs(f.scope)
        done: set[int] = set()
        for b, loop in loop_backwards(f):
            leaf_reported = False
            for t in g.deps(b.loss, b.stmt.lineno).bindings:  # type: ignore[arg-type]
                if id(t.stmt) in done or f.inside(t.stmt, loop) or t.line >= loop.lineno \
                        or _is_recurrence(t) or not g.freed_by(b, t) \
                        or not known_reach(g, b.loss, b.stmt.lineno, t):  # type: ignore[arg-type]
                    continue
                module = (g.first_module_call(t) or "module") if g.direct(t) \
                    else _helper_graph(f, t)
                leaf = None if module or leaf_reported else _leaf_graph(g, t)
                if module is None and leaf is None or module and _plain_helper(f, g, t, module):
                    continue
                if any(f.inside(o.stmt, loop) for o in f.scope.bindings.get(t.name, ())):
                    continue
                if _advanced_each_pass(t.name, loop) or _discriminator_steps(f, g, t, loop) \
                        or _entry_per_pass(t.name, loop) \
                        or declared_data(f, t.name) \
                        or _called(f, t.name) or _unseen_method(f, module, t.line, loop) \
                        or _makes_layers(f, t) or _data_helper(f, t) \
                        or _graphless_value(f, t):
                    continue
                if module and not proven_source(g, t) and not _handed_module(f, t) \
                        and not _trained_here(f, t, loop):
                    continue  # NOTE [proven shared graph]
                done.add(id(t.stmt))
                leaf_reported = leaf_reported or leaf is not None
                if module == "module":  # no module-like callee by name: show the call's own
                    v = value_of(t)  # (`self.parse_feature(x, flag)`), not a placeholder
                    module = (dotted(v.func) if isinstance(v, ast.Call) else None) or module
                source = f"by `{module}(...)`" if module else f"from `{leaf}`, which requires grad,"
                yield self.report(t.stmt, ctx, related=(
                    related_at(ctx, b.call, "backward runs here on every pass"),),
                    name=t.name, module=module or leaf, source=source,
                    backward_line=b.call.lineno)


def _graphless_value(f: LoopFacts, t: Binding) -> bool:
    """``t`` is bound to data with no graph (NOTE [graphless data]: ``torch.tensor(0)``,
    ``torch.zeros(n)``): the first ``backward()`` has no graph of it to free (when it is the
    loss, that backward raises at once: GT122/GT125 name it)."""
    v = value_of(t)
    return isinstance(t.stmt, ast.Assign) and v is not None \
        and graphless_data(v, f.scope, t.line)


def _data_helper(f: LoopFacts, t: Binding) -> bool:
    """``t`` is bound to a call of a function of the file, a nested one too (``g_values =
    g_function()``, defined in the method itself), whose every ``return`` is data without
    a graph (NOTE [graphless data]: ``torch.tensor(preds) - torch.tensor(labels)``): the
    value computed once before the loop holds no graph the first ``backward()`` frees."""
    v = value_of(t)
    if not isinstance(v, ast.Call) or not isinstance(v.func, ast.Name):
        return False
    name = v.func.id
    fn = next((d for d in bfs_walk(f.node) if isinstance(d, (ast.FunctionDef,
              ast.AsyncFunctionDef)) and d is not f.node and d.name == name), None) \
        or f.ctx.analysis.functions.get(name)
    if fn is None or not returns_data(f.ctx, fn):
        return False
    scope = f.ctx.scope(fn)  # an item written in place (`out[i] = (s * taps).sum()`) is data too
    return all(isinstance(n.value, ast.Constant) or isinstance(n.value, ast.UnaryOp)
               and isinstance(n.value.operand, ast.Constant)
               or graphless_data(n.value, scope, n.lineno)
               for n in bfs_walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign)) and any(
                   isinstance(t, ast.Subscript) or isinstance(n, ast.AugAssign)
                   for t in getattr(n, "targets", [getattr(n, "target", None)])))


def _trained_here(f: LoopFacts, t: Binding, loop: ast.stmt) -> bool:
    """``t`` is made by a method of another object's attribute (``self.model.rnn(x, h)``)
    whose owner (``self.model``) an optimizer stepped in ``loop`` trains, or may train (its
    parameters unknown): the object is trained here, so its outputs carry the trained graph
    (NOTE [proven shared graph]); ``self.agent.policy.features(x)`` with only ``self.head``
    stepped is not."""
    v = value_of(t)
    calls = [c for c in ast.walk(v) if isinstance(c, ast.Call)] if v is not None else []
    owners = {o for c in calls if isinstance(c.func, ast.Attribute)
              and (o := dotted(c.func.value)) is not None}
    if not owners:
        return False
    for s in f.steps:
        if not f.inside(s.stmt, loop):
            continue
        over = _owners(f, _stepped_expr(s), s.call.lineno)
        if not over or any(o == x or o.startswith(x + ".") or x.startswith(o + ".")
                           for o in owners for x in over):
            return True
    return False


def _handed_module(f: LoopFacts, t: Binding) -> bool:
    """``t`` is made by a call handed a module as an argument (MONAI's ``g_output =
    engine.g_inferer(g_input, engine.g_network)``: an inferer runs the network it is given),
    where the callee alone is a method of another object's attribute
    (NOTE [proven shared graph])."""
    from gradtrace.lint.analysis.model_calls import module_like
    v = value_of(t)
    return isinstance(v, ast.Call) and any(
        (d := dotted(a)) is not None and module_like(f.ctx, f.scope, d, t.line)
        for a in [*v.args, *(k.value for k in v.keywords)])


def _entry_per_pass(name: str, loop: ast.stmt) -> bool:
    """Every read of ``name`` in ``loop`` takes the entry of the pass's own key: ``out[group]``
    or ``out.distributions[group]`` with ``group`` bound by the loop's target (``for group, n
    in self.n_group_agents.items():``), as two losses reading different entries of one output
    are read apart (GT509's ``_split_heads``): each pass backpropagates through another entry
    (xuance's IPPO and IAC learners, one group's policy per pass, each group stepped by its
    own optimizer). The key bound anew inside the loop, or any other read, does not count."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    keys = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    own = {id(n) for n in ast.walk(loop.target)}
    parents = {id(c): p for p in ast.walk(loop) for c in ast.iter_child_nodes(p)}
    reads = 0
    for n in ast.walk(loop):
        if isinstance(n, ast.Name) and n.id in keys and isinstance(n.ctx, ast.Store) \
                and id(n) not in own:
            return False
        if not (isinstance(n, ast.Name) and n.id == name) or id(n) in own:
            continue
        e: ast.AST = n
        while isinstance(p := parents.get(id(e)), ast.Attribute) and p.value is e:
            e = p
        p = parents.get(id(e))
        if not (isinstance(p, ast.Subscript) and p.value is e and isinstance(p.slice, ast.Name)
                and (p.slice.id in keys or _picked_for_key(p, p.slice.id, keys, parents))):
            return False
        reads += 1
    return reads > 0


def _picked_for_key(e: ast.AST, var: str, keys: set[str], parents: dict) -> bool:
    """``out[k]`` read only in the arm of ``k == key`` (``key`` the loop's): MADDPG's
    ``{k: actions_eval[k] if k == key else actions[k] for k in agents}`` reads the pass's own
    entry of ``actions_eval``, the other agents' from the batch."""
    while (q := parents.get(id(e))) is not None and not isinstance(
            q, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.stmt)):
        if isinstance(q, ast.IfExp) and q.body is e and isinstance(t := q.test, ast.Compare) \
                and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq) and {
                    dotted(t.left), dotted(t.comparators[0])} in ({var, k} for k in keys):
            return True
        e = q
    return False


def _unseen_method(f: LoopFacts, callee: str | None, line: int, loop: ast.stmt) -> bool:
    """``callee`` is a method other than the forward (``model.embed(...)``) of an object
    whose class this file does not define, and no step of the loop trains that object: the
    method's code is out of sight, and an evaluation helper of this kind commonly returns
    detached values (DGI's ``embed`` returns ``h.detach()``) for a probe the loop steps; a
    method of this file that returns ``.detach()`` is read the same way."""
    owner, _, method = (callee or "").rpartition(".")
    if not owner or "." in owner or owner == "self" or method == "forward":
        return False
    if method in _detaching_defs(f.ctx):
        return True
    for sc in (f.scope, f.ctx.scope(f.ctx.tree)):
        b = sc.binding_before(owner, line)
        if b is not None:
            v = value_of(b)
            made = dotted(v.func) if isinstance(v, ast.Call) else None
            if made is not None and made.rpartition(".")[2] in f.ctx.analysis.classes:
                return False  # a class of this file: its method is in sight
            break
    trained = [_owners(f, _stepped_expr(s), s.call.lineno) for s in f.steps
               if f.inside(s.stmt, loop)]
    return bool(trained) and all(  # the loop trains something, and only other objects
        over and not any(o == owner or o.startswith(owner + ".") for o in over)
        for over in trained)  # (an optimizer of unknown parameters may train it)


