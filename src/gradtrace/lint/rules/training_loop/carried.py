"""GT506-GT507: a graph built on one pass of the loop is backwarded again on the next."""
from __future__ import annotations

import ast
import re
from dataclasses import replace
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.flow import MODULE, Binding
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.registration.identity import role
from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.analysis.model_calls import model_calls, module_like
from gradtrace.lint.analysis.graph_deps import Graphs, graphs, loads
from gradtrace.lint.rules.training_loop._foreign import foreign_call
from gradtrace.lint.rules.training_loop._reach import known_reach
from gradtrace.lint.rules.training_loop._loop import Backward, LoopFacts, _owners, _stepped_expr
from gradtrace.lint.rules.training_loop._base import BACKWARD_CALLS, LoopRule, related_at
from gradtrace.lint.rules.training_loop._dists import caching_distributions
from gradtrace.lint.nodes import bfs_walk

DETACH_RE = re.compile(r"\.detach_?\(")
MODULE_ONLY = frozenset({"parameters", "named_parameters", "train", "eval", "state_dict"})
FREEZE_RE = re.compile(r"requires_grad_\(\s*False|requires_grad\s*=\s*False|freeze",
                       re.IGNORECASE)


def loop_backwards(f: LoopFacts, stepped: bool = False) -> Iterator[tuple[Backward, ast.stmt]]:
    """Backward calls that run inside a loop and free their graph, with that loop;
    ``stepped``: also those that keep it (``retain_graph=True``) in a loop that steps an
    optimizer, whose in-place update breaks the kept graph instead."""
    for b in f.backwards:
        loops = f.loops_of(b.stmt)
        if loops and b.loss is not None and (not b.retains or stepped and _step_in(
                f, loops[-1])):
            yield b, loops[-1]


def _step_in(f: LoopFacts, loop: ast.stmt) -> ast.Call | None:
    """An ``opt.step()`` of the loop (it updates the weights in place on every pass)."""
    return next((s.call for s in f.steps if f.inside(s.stmt, loop)), None)


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
    `encoder`, `netG`, `self.rnn`).
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
        return g.carries(r)


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
    pass yields fresh values, and several discriminator steps on one generated batch are left
    to GT508 (the detach is often inside the discriminator's loss callback); values count as
    carrying a graph when they come from a call of something bound to an `nn.Module` in this
    file or spelled like one (`model`, `encoder`, `netG`, `self.rnn`), of a same-file helper
    whose `return` makes such a call, or from a tensor made with `requires_grad=True` through an
    operation that saves tensors for backward (`@`, `torch.mm`, `log`, `Categorical(p)`:
    NOTE [caching distributions]...; reported once per backward, on the value nearest to it); a
    method other than the forward of an object whose class is not in this file
    (`model.embed(x)`), when the loop steps optimizers and none of them trains that object, is
    trusted to return what a probe can train on (its code is out of sight).
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
        if not any(f.loops_of(b.stmt) for b in f.backwards) or ctx.memo(
                "gt5-freeze", ctx.tree, lambda: FREEZE_RE.search(ctx.code) is not None):
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
                        or _called(f, t.name) or _unseen_method(f, module, t.line, loop) \
                        or _makes_layers(f, t):
                    continue
                done.add(id(t.stmt))
                leaf_reported = leaf_reported or leaf is not None
                source = f"by `{module}(...)`" if module else f"from `{leaf}`, which requires grad,"
                yield self.report(t.stmt, ctx, related=(
                    related_at(ctx, b.call, "backward runs here on every pass"),),
                    name=t.name, module=module or leaf, source=source,
                    backward_line=b.call.lineno)


def _plain_helper(f: LoopFacts, g: Graphs, t: Binding, callee: str) -> bool:
    """``callee`` is a function of this file (``corr2d(X, K)``, spelled like a layer) whose
    body calls nothing module-like and whose arguments here are constants or names bound to a
    torch constructor's fresh tensor (``torch.ones(6, 8)``, no ``requires_grad``): its result
    has no history, however it is spelled."""
    fn = f.ctx.analysis.functions.get(callee)
    v = value_of(t)
    call = next((c for name, c in model_calls(v) if name == callee), None) if v else None
    if fn is None or call is None or call.keywords:
        return False
    inner = f.ctx.scope(fn)
    if any(module_like(f.ctx, inner, c, n.lineno) for s in fn.body
           for c, n in model_calls(s)):
        return False
    for a in call.args:
        if not isinstance(a, (ast.Name, ast.Constant)):
            return False
        if isinstance(a, ast.Name):
            b = f.scope.binding_before(a.id, t.line)
            v = value_of(b) if b is not None else None
            made = dotted(v.func) or "" if isinstance(v, ast.Call) else ""
            if not made.startswith("torch.") or _requires_grad_leaf(v) or g.carries(b) \
                    or any(k.arg == "requires_grad" for k in v.keywords):  # type: ignore[union-attr]
                return False
    return True


def _makes_layers(f: LoopFacts, t: Binding) -> bool:
    """``t`` is bound to the result of a function of this file whose every ``return`` gives
    back a list of new ``torch.nn`` layers (tab-ddpm's ``layers_D =
    determine_layers_disc(...)``: ``layers_D = []``, ``layers_D += [Conv2d(...), ...]``,
    ``return layers_D``), read later to build a model: layers hold no graph."""
    v = value_of(t)
    fn = f.ctx.analysis.functions.get(dotted(v.func) or "") if isinstance(v, ast.Call) else None
    if fn is None:
        return False
    rets = [r.value for r in bfs_walk(fn) if isinstance(r, ast.Return)]
    made: dict[str, list[ast.expr]] = {}
    for n in bfs_walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            made.setdefault(n.targets[0].id, []).append(n.value)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            made.setdefault(n.target.id, []).append(n.value)
    lists = [x for r in rets for x in (made.get(r.id, [None]) if isinstance(r, ast.Name)
                                       else [r])]
    return bool(lists) and all(isinstance(x, ast.List) and all(
        isinstance(e, ast.Call) and (f.ctx.qualified_name(e.func) or "").startswith(
            "torch.nn.") for e in x.elts) for x in lists)


def _advanced_each_pass(name: str, loop: ast.stmt) -> bool:
    """Every read of ``name`` in the loop is ``next(name)``: an iterator (a generator of
    forward passes) that yields a fresh value, with a fresh graph, on each pass."""
    reads = [n for n in bfs_walk(loop) if isinstance(n, ast.Name) and n.id == name
             and isinstance(n.ctx, ast.Load)]
    nexts = [n for n in bfs_walk(loop) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == "next" and n.args
             and isinstance(n.args[0], ast.Name) and n.args[0].id == name]
    return bool(reads) and len(reads) == len(nexts)


def _called(f: LoopFacts, name: str) -> bool:
    """``name`` is called in the function (``model(data)``), or a method only an
    ``nn.Module`` has (``model_con.parameters()``, tabsyn's CoDi) is: a model (ppnp's
    ``model = model_class(...).to(device)``), no tensor with a graph of its own."""
    def make() -> set[str]:
        return {n.func.id if isinstance(n.func, ast.Name) else n.func.value.id  # type: ignore
                for n in bfs_walk(f.node) if isinstance(n, ast.Call) and (
                    isinstance(n.func, ast.Name) or isinstance(n.func, ast.Attribute)
                    and n.func.attr in MODULE_ONLY and isinstance(n.func.value, ast.Name))}
    return name in f.ctx.memo("gt507-called", f.node, make)


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


def _discriminator_steps(f: LoopFacts, g: Graphs, t: Binding, loop: ast.stmt) -> bool:
    """Several discriminator steps on one generated batch (`fake = G(z)` before a loop that
    steps only the discriminator's optimizer): detaching the fake is the discriminator loss's
    job, often inside a loss callback this function cannot see; GT508 covers the visible case."""
    module = g.first_module_call(t)
    steps = [s for s in f.steps if f.inside(s.stmt, loop)]
    return module is not None and role(module) == "g" and bool(steps) and all(
        role(s.optimizer) == "d" for s in steps)


# operations whose backward reads saved tensors: a second backward through them raises
SAVING_FUNCS = frozenset({"mm", "matmul", "bmm", "einsum", "exp", "log", "pow", "sqrt",
                          "softmax", "log_softmax", "sigmoid", "tanh", "mul", "div", "linear",
                          "conv1d", "conv2d", "conv3d", "norm", "cross_entropy", "mse_loss"})


def _saving_ops(v: ast.AST) -> list[ast.AST]:
    """The operations in ``v`` whose backward reads saved tensors (``a @ b``, ``x.exp()``,
    ``torch.mm(a, b)``, ``a / b`` of two tensors); a slice, a sum or a scaling by a number
    saves nothing."""
    out: list[ast.AST] = []
    for n in bfs_walk(v):
        if isinstance(n, ast.BinOp) and (isinstance(n.op, ast.MatMult) or isinstance(
                n.op, (ast.Mult, ast.Div, ast.Pow)) and not isinstance(n.left, ast.Constant)
                and not isinstance(n.right, ast.Constant)):
            out.append(n)
        elif isinstance(n, ast.Call):
            f = n.func
            last = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(
                f, ast.Name) else ""
            if last in SAVING_FUNCS:
                out.append(n)
    return out


def _requires_grad_leaf(v: ast.AST | None) -> bool:
    """``torch.randn(..., requires_grad=True)``, ``nn.Parameter(t)``, ``t.requires_grad_()``."""
    if not isinstance(v, ast.Call):
        return False
    if any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value
           is True for k in v.keywords):
        return True
    name = dotted(v.func) or ""
    return name.rpartition(".")[2] == "Parameter" or name.endswith(".requires_grad_") and not (
        v.args and isinstance(v.args[0], ast.Constant) and v.args[0].value is False)


def _leaf_graph(g: Graphs, t: Binding) -> str | None:
    """The requires-grad leaf ``t``'s value is computed from through a saving operation
    (``Y = torch.mm(X, true_W)``, ``loss = (xenc @ W).exp()...``), if any; a leaf that is an
    operand of the saving operation is named first."""
    v = value_of(t)
    if t.no_grad or v is None or _requires_grad_leaf(v):
        return None
    ops = _saving_ops(v) + caching_distributions(v, g.scope.ctx)  # `Bernoulli(p)`
    if not ops:
        return None
    leaves = [d.name for d in g.deps(v, t.line).bindings
              if not d.no_grad and _requires_grad_leaf(value_of(d))]
    operands = {n.id for op in ops for n in bfs_walk(op) if isinstance(n, ast.Name)}
    return next((x for x in leaves if x in operands), leaves[0] if leaves else None)


def _helper_graph(f: LoopFacts, t: Binding) -> str | None:
    """The same-file helper ``t``'s value calls whose ``return`` runs a module
    (``def embed(ids): return text_encoder(ids).mean(1)``), one call away."""
    v = value_of(t)
    if t.no_grad or v is None:
        return None
    helpers = f.ctx.analysis.functions
    for callee, _ in model_calls(v):
        fn = helpers.get(callee)
        if fn is not None and f.ctx.memo("gt507-helper", fn, lambda: _returns_module(f, fn)):
            return callee
    return None


def _returns_module(f: LoopFacts, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Some ``return`` of ``fn`` (outside no-grad) calls a name bound to an ``nn.Module``
    in ``fn`` or at module level."""
    scope = f.ctx.scope(fn)
    top = f.ctx.scope(f.ctx.tree)
    for s in scope.stmts:
        if not isinstance(s, ast.Return) or s.value is None or scope.grad_off_at(s) is not None:
            continue
        for callee, _ in model_calls(s.value):
            b = scope.binding_before(callee, s.lineno) or top.binding_before(callee, s.lineno)
            if b is not None and b.kind == MODULE:
                return True
    return False
