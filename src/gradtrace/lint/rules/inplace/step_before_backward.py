"""GT609: an optimizer step between a loss's forward and its backward."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.graph_deps import graphs
from gradtrace.lint.analysis.head_reads import heads_apart
from gradtrace.lint.analysis.kinds import OPTIMIZER, PARAMETER
from gradtrace.lint.analysis.optimizer_owners import aliases, element_owners, stored_owners
from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.analysis.returned_reads import part_arguments
from gradtrace.lint.analysis.update_helpers import Event, node_code, update_events, update_names
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.inplace.step import _may_reach


class OptimizerStepBeforeBackward(Rule):
    """An optimizer steps after a loss was computed through its parameters and before that
    loss's backward.

    Why: `step()` updates the parameters in place. The graph of a loss built before the step
    saved them (a matmul saves its weight to compute the gradient of its input), so the
    backward after the step finds them at a newer version and raises `RuntimeError: one of
    the variables needed for gradient computation has been modified by an inplace operation`
    (pytorch-facts.md#saved-tensor-inplace). The actor-critic shape: the actor's loss runs
    through the critic (`-critic(s, actor(s))`), both losses are built first, then the critic
    steps before the actor's backward. Compute the loss after the step (or step after every
    backward). A step given as a helper that backwards and steps what it is handed
    (`update(loss, opt)`) counts as the step.
    Known limits: the optimizer's parameters must be known (built in the function or in the
    class from `<model>.parameters()`, or an element of a list of such optimizers), and the
    loss must show a call of that model among its bindings in the same function (or in a
    method of the class it calls); the step and the backward sit in one function. A backward
    only raises when the graph saved a stepped parameter: true of any model with two layers,
    not of a single `nn.Linear` on raw input; the runtime (`gradtrace run`) sees which case it
    is.
    """

    code = "GT609"
    name = "optimizer-step-before-backward"
    message = ("`{step}` updates in place the parameters of `{owner}` that the graph of `{loss}` "
               "(built on line {built}) saved; its backward on line {back} raises")
    triggers = ("backward",)
    examples = [
        Bad("""
            def update(actor, critic, actor_opt, critic_opt, s, a, y):
                actor_loss = -critic(s, actor(s)).mean()
                critic_loss = (critic(s, a) - y).pow(2).mean()
                critic_opt = torch.optim.Adam(critic.parameters())
                critic_opt.zero_grad()
                critic_loss.backward()
                critic_opt.step()
                actor_opt.zero_grad()
                actor_loss.backward()
                actor_opt.step()
            """, at=(7, 4)),
        Good("""
            def update(actor, critic, actor_opt, critic_opt, s, a, y):
                critic_loss = (critic(s, a) - y).pow(2).mean()
                critic_opt = torch.optim.Adam(critic.parameters())
                critic_opt.zero_grad()
                critic_loss.backward()
                critic_opt.step()
                actor_loss = -critic(s, actor(s)).mean()
                actor_opt.zero_grad()
                actor_loss.backward()
                actor_opt.step()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        for fn, cls in _functions(node):
            code = node_code(ctx, fn) if fn is not node else ctx.code
            if "step" not in code and "(" not in code:
                continue
            helpers = update_names(ctx, cls)
            if any(w in code for w in ("step", *helpers)) and \
                    any(w in code for w in ("backward", *helpers)):
                yield from self._check(fn, cls, ctx)

    def _check(self, node: ast.AST, cls: ast.ClassDef | None, ctx: Context
               ) -> Iterator[Finding]:
        events = update_events(ctx, node, cls)
        steps = [e for e in events if e.optimizer is not None]
        if not steps or not any(e.loss is not None for e in events):
            return
        scope = ctx.scope(node)
        via_done: set[int] = set()  # backward calls a read-before finding already names
        for st in steps:
            owners = _owners(st, scope, cls, ctx)
            if not owners:
                continue
            for later in events:
                if later.loss is None or later.line <= st.line or later.call is st.call:
                    continue
                got = self._built_before(later, st, events, owners, scope, cls, ctx)
                if got is None:
                    continue
                built, owner, via = got
                if via is not None and id(later.call) in via_done:
                    break  # the first step that breaks the value is the one named
                if via is not None:
                    via_done.add(id(later.call))
                what = f"`{via}`, which `{ctx.source(later.loss)}` is computed from," if via \
                    else f"`{ctx.source(later.loss)}`"
                yield self.report(st.call, ctx, related=(
                    Related(ctx.path, built, f"{what} is built here, before the step", 0),
                    Related(ctx.path, later.call.lineno, "its backward raises '... modified "
                            "by an inplace operation' here", ctx.column(later.call))),
                    step=ctx.source(st.call), owner=owner, loss=ctx.source(later.loss),
                    built=built, back=later.call.lineno)
                break

    @staticmethod
    def _built_before(later: Event, st: Event, events: list[Event], owners: frozenset[str],
                      scope, cls: ast.ClassDef | None, ctx: Context  # type: ignore[no-untyped-def]
                      ) -> tuple[int, str, str | None] | None:
        name = dotted(later.loss)
        if name is None:
            return None
        b = scope.binding_before(name, later.call.lineno)
        if b is None or b.no_grad or value_of(b) is None:
            return None
        if _exclusive(st.stmt, later.stmt, scope.node):
            return None
        # backwarded before the step too, or a graph kept by `retain_graph` before the step:
        # a second pass through one graph (GT601's), not this one
        if any(e.loss is not None and e.line < st.line and (dotted(e.loss) == name or e.retains)
               for e in events):
            return None
        if b.line >= st.call.lineno:  # NOTE [loss built after the step from a value before]
            done = {dotted(e.loss) for e in events if e.loss is not None and e.line < st.line}
            return _read_before(later, st, b, owners, scope, cls, ctx, done,
                                _freed_before(st, events, scope))
        if scope.loops_of(later.call) != scope.loops_of(b.stmt) and \
                scope.loops_of(st.call) != scope.loops_of(b.stmt):
            return None  # built once per outer pass, stepped in an inner loop: not read
        for o in sorted(owners):
            names = frozenset({o}) | aliases(o, scope.node, cls, ctx)
            if _never_saved(o, cls or scope.node, scope, st.call.lineno, ctx) or \
                    heads_apart(st, later, o, events, scope, cls, ctx):
                continue
            part = _returned_parts(b, cls, scope, ctx)
            args = part_arguments(ctx, b) if part is None else None
            if args is not None:  # NOTE [returned element reads]
                if any(_may_reach(a, b.line, names, scope, ctx, args_may=False, cls=cls,
                                  handed_out=False) for a in args):
                    return b.line, o, None
                continue
            if part is not None:
                m, elts = part
                inner = names | _passed_as(m, b.stmt.value, names)
                if any(_may_reach(e, e.lineno, inner, ctx.scope(m), ctx, args_may=False,
                                  cls=cls, handed_out=False) for e in elts):
                    return b.line, o, None
                continue
            if _may_reach(value_of(b), b.line, names, scope, ctx, args_may=False, cls=cls,
                          handed_out=False, apart_from=later.stmt):
                return b.line, o, None
        return None


def _freed_before(st: Event, events: list[Event], scope) -> set[int]:  # type: ignore
    """ids of the bindings whose graph a backward before the step ``st`` freed: what each
    such loss is computed from, and the values bound by the same statement as the loss
    (``loss_cl, out1, out2 = model.cal_loss_cl(batch)``: one graph). Reading one of them live
    after the step raises 'backward through the graph a second time' (GT601's), and reading
    it detached is fine: neither is this rule's error."""
    g = graphs(scope)
    out: set[int] = set()
    for e in events:
        name = dotted(e.loss) if e.loss is not None else None
        if name is None or e.line >= st.line or e.retains:
            continue
        lb = scope.binding_before(name, e.call.lineno)
        if lb is None:
            continue
        out.update(id(x) for xs in scope.bindings.values() for x in xs if x.stmt is lb.stmt)
        if value_of(lb) is not None:
            out.update(id(x) for x in g.deps(value_of(lb), lb.line).bindings)
    return out


def _read_before(later: Event, st: Event, b, owners: frozenset[str],  # type: ignore
                 scope, cls: ast.ClassDef | None, ctx: Context, done: set[str | None],
                 freed: set[int]) -> tuple[int, str, str | None] | None:
    """# NOTE [loss built after the step from a value before]
    SAC's ``q_pred = min(qf_1(s, a_new), qf_2(s, a_new))`` is computed before
    ``qf_1_optimizer.step()``, and ``actor_loss = (alpha * log_prob - (q_pred - v)).mean()``
    after it: the loss's own line is after the step, but its graph holds ``q_pred``'s, which
    saved the Q weights the step changes in place. (line, owner, name) for the first value the
    loss is computed from (its bindings, transitively, outside ``.detach()``) that was bound
    before the step, in the step's loop (the backward in it too), with grad on and not the
    result of a function run with grad off (NOTE [no-grad helpers]), not in the graph of a
    loss backpropagated before the step (:func:`_freed_before`), not
    backpropagated before the step (``running_loss += loss`` after ``loss.backward()``: a
    second pass, GT509's), and runs the stepped model. One finding per backward: the first
    step that breaks such a value (SAC's ``qf_2_optimizer.step()`` right after the first one
    is moved by the same fix)."""
    loops = scope.loops_of(st.call)
    if scope.loops_of(later.call) != loops:
        return None
    g = graphs(scope)
    for d in g.deps(value_of(b), b.line).bindings:
        v = value_of(d)
        if d.line >= st.call.lineno or d.no_grad or v is None or d.name in done \
                or scope.loops_of(d.stmt) != loops or id(d) in freed or g.plain_result(d):
            continue
        for o in sorted(owners):
            names = frozenset({o}) | aliases(o, scope.node, cls, ctx)
            if not _never_saved(o, cls or scope.node, scope, st.call.lineno, ctx) \
                    and _may_reach(v, d.line, names, scope, ctx, args_may=False, cls=cls,
                                   handed_out=False):
                return d.line, o, d.name
    return None


def _returned_parts(b, cls: ast.ClassDef | None, scope,  # type: ignore[no-untyped-def]
                    ctx: Context) -> tuple[ast.FunctionDef, list[ast.expr]] | None:
    """For ``q1_loss, q2_loss = self.calc_q_loss(...)``, a method of ``cls`` (or
    ``pol_loss, val_loss = ppo_loss(batch, policy, value)``, a function of the file) whose
    every ``return`` is a tuple of that length: the function and the element each return gives
    the bound name (``critic2_loss`` reads only ``self.critic2``, ``val_loss`` only the
    function's ``value`` argument: :func:`_passed_as`); None for other bindings."""
    s = b.stmt
    if b.value is not None or not isinstance(s, ast.Assign) or len(
            s.targets) != 1 or not isinstance(s.targets[0], ast.Tuple) or not isinstance(
            s.value, ast.Call):
        return None
    names = [t.id if isinstance(t, ast.Name) else None for t in s.targets[0].elts]
    d = dotted(s.value.func) or ""
    if b.name not in names:
        return None
    if d.startswith("self.") and d.count(".") == 1 and cls is not None:
        m = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == d[5:]),
                 None)
    elif isinstance(s.value.func, ast.Name) and ctx.analysis.class_of(
            found := ctx.analysis.callee(s.value, scope.node)) is None:
        m = found if isinstance(found, ast.FunctionDef) else None
    else:
        return None
    if m is None:
        return None
    rets = [r for r in ast.walk(m) if isinstance(r, ast.Return)]
    if not rets or any(not isinstance(r.value, ast.Tuple) or len(r.value.elts) != len(names)
                       or any(isinstance(x, ast.Starred) for x in r.value.elts) for r in rets):
        return None
    i = names.index(b.name)
    return m, [r.value.elts[i] for r in rets]  # type: ignore[union-attr]


def _passed_as(m: ast.FunctionDef, call: ast.Call, names: frozenset[str]) -> frozenset[str]:
    """The arguments of the function ``m`` of the file that ``call`` hands one of ``names``
    (``ppo_loss(batch, agent_policy, ...)`` gives ``policy``)."""
    a = m.args
    pos = [x.arg for x in (*a.posonlyargs, *a.args)]
    pairs = [*zip(pos, call.args), *((k.arg, k.value) for k in call.keywords if k.arg)]
    return frozenset(p for p, v in pairs if not isinstance(v, ast.Starred) and dotted(v) in names)


# reads of a parameter after which no graph holds the parameter itself: an op that saves its
# output (`exp`), or none of its inputs (`neg`, `+`), or reads that make no graph
OUTPUT_SAVERS = frozenset({"exp", "sigmoid", "tanh"})
NO_GRAPH_READS = frozenset({"parameters", "named_parameters", "item", "detach", "data", "grad",
                            "state_dict", "requires_grad", "requires_grad_", "zero_grad"})
VIEWS = frozenset({"view", "reshape", "squeeze", "unsqueeze", "t", "expand", "flatten"})


def _never_saved(owner: str, where: ast.AST, scope, line: int,  # type: ignore[no-untyped-def]
                 ctx: Context) -> bool:
    """Whether no graph saves the parameter ``owner`` holds: ``owner`` is a parameter, or a
    module of the file whose ``forward`` returns one of its parameters (SAC's ``Scalar``), and
    every read of it in ``where`` (its class, or the function) is consumed by an op that does
    not save it: ``log_alpha.exp()`` (exp saves its output), ``log_alpha * x.detach()`` (a
    product saves a factor only to differentiate the other one), ``-log_alpha``, ``+``.
    A step then updates it in place without invalidating any graph
    (CORL's SAC, docs/triage/unseen24.md)."""
    k = ctx.analysis.kind(ast.parse(owner, mode="eval").body, scope, line)
    built = _built_as(owner, where, ctx) if k is None else None
    called = k is not None and k.is_module or built is not None
    if called and not _returns_own_parameter(k.cls if k is not None else built, ctx):
        return False
    if not called and not (k is not None and k.what == PARAMETER):
        return False
    parent = {c: n for n in ast.walk(where) for c in ast.iter_child_nodes(n)}
    reads = 0
    for n in parent:
        if not isinstance(n, (ast.Name, ast.Attribute)) or not isinstance(n.ctx, ast.Load) \
                or dotted(n) != owner:
            continue
        reads += 1
        up = parent[n]
        if called and isinstance(up, ast.Call) and up.func is n:  # `self.log_alpha()`
            n, up = up, parent.get(up)
        if not _harmless(n, up, parent, ctx):
            return False
    return reads > 0


def _built_as(owner: str, cls: ast.AST, ctx: Context) -> str | None:
    """The module class of the file every call assigned to ``owner`` in the class builds
    (``self.log_alpha = Scalar(0.0)``; other values, ``None`` or a checkpoint's entry, left
    aside), None when none or two."""
    if not isinstance(cls, ast.ClassDef):
        return None
    made = {dotted(n.value.func) for n in ast.walk(cls) if isinstance(n, ast.Assign)
            and len(n.targets) == 1 and dotted(n.targets[0]) == owner
            and isinstance(n.value, ast.Call)}
    return made.pop() if len(made) == 1 and next(iter(made)) in ctx.analysis.classes else None


def _harmless(n: ast.AST, up: ast.AST | None, parent: dict, ctx: Context) -> bool:
    """Whether the op reading ``n`` (its parent ``up``) keeps no reference to it for backward."""
    while isinstance(up, ast.Attribute) and up.attr in VIEWS and isinstance(
            parent.get(up), ast.Call):  # a view shares the parameter's version
        n = parent[up]
        up = parent.get(n)
    if isinstance(up, ast.Attribute):
        call = isinstance(parent.get(up), ast.Call)
        return up.attr in NO_GRAPH_READS or (call and up.attr in OUTPUT_SAVERS)
    if isinstance(up, ast.Call) and n in up.args:
        q = ctx.qualified_name(up.func) or ""
        return q.startswith("torch.optim.") or q.rpartition(".")[2] in OUTPUT_SAVERS \
            and q.startswith("torch.")
    if isinstance(up, ast.UnaryOp):
        return isinstance(up.op, (ast.USub, ast.UAdd))
    if isinstance(up, ast.BinOp):
        other = up.right if up.left is n else up.left
        return isinstance(up.op, (ast.Add, ast.Sub)) or isinstance(up.op, ast.Mult) and (
            isinstance(other, ast.Constant) or _no_grad_value(other))
    if isinstance(up, (ast.List, ast.Tuple)):
        outer = parent.get(up)
        return isinstance(outer, ast.Call) and (
            ctx.qualified_name(outer.func) or "").startswith("torch.optim.")
    return isinstance(up, ast.Dict)  # a checkpoint's entry


def _no_grad_value(e: ast.AST) -> bool:
    """``x.detach()``, ``x.item()``, a constant: a factor that takes no gradient."""
    return isinstance(e, ast.Constant) or isinstance(e, ast.Call) and isinstance(
        e.func, ast.Attribute) and e.func.attr in ("detach", "item") and not e.args


def _returns_own_parameter(cls_name: str | None, ctx: Context) -> bool:
    """The module class ``cls_name`` of the file returns ``self.<p>``, a parameter it
    registers, on every ``return`` of its ``forward``."""
    info = ctx.analysis.classes.get(cls_name or "")
    fwd = info.methods.get("forward") if info is not None else None
    if fwd is None:
        return False
    rets = [r for r in ast.walk(fwd) if isinstance(r, ast.Return)]
    init = info.methods.get("__init__")
    for r in rets:
        if not (isinstance(r.value, ast.Attribute) and dotted(r.value.value) == "self"):
            return False
        k = ctx.analysis.kind_in(r.value, init, init.end_lineno or 0) if init else None
        if k is None or k.what != PARAMETER:
            return False
    return bool(rets)


def _owners(st: Event, scope, cls: ast.ClassDef | None,  # type: ignore[no-untyped-def]
            ctx: Context) -> frozenset[str]:
    """The models whose parameters the stepped optimizer holds (empty: unknown)."""
    opt = st.optimizer
    if opt is None:
        return frozenset()
    k = ctx.analysis.kind(opt, scope, st.call.lineno)
    if k is not None and k.what == OPTIMIZER and k.over:
        return stored_owners(k.over, cls)
    return element_owners(opt, st.stmt, scope, cls)


def _exclusive(a: ast.stmt, b: ast.stmt, fn: ast.AST) -> bool:
    """Whether ``a`` and ``b`` sit in different branches of one ``if``."""
    for n in ast.walk(fn):
        if isinstance(n, ast.If):
            in_body = [any(x is s for s in ast.walk(ast.Module(n.body, []))) for x in (a, b)]
            in_else = [any(x is s for s in ast.walk(ast.Module(n.orelse, []))) for x in (a, b)]
            if in_body[0] and in_else[1] or in_else[0] and in_body[1]:
                return True
    return False


def _functions(tree: ast.Module) -> Iterator[tuple[ast.AST, ast.ClassDef | None]]:
    """The module itself, its functions and the methods of its classes (one level)."""
    yield tree, None
    for s in tree.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield s, None
        elif isinstance(s, ast.ClassDef):
            for m in s.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield m, s
