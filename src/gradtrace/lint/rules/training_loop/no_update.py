"""GT544, GT545: a training loop that clears an optimizer's gradients every pass but never
steps it, or never backpropagates anything for it to step.

# NOTE [a loop that never updates]
``opt.zero_grad()`` inside a loop says the loop means to train with ``opt``. Two calls finish
that work and neither fails when it is missing: ``backward()`` fills ``.grad`` and
``opt.step()`` applies it. A loop that backpropagates and clears but never steps leaves every
weight where it was (GT544); a loop that clears and computes a loss but backpropagates nothing
has no gradient to apply (GT545: ``zero_grad`` leaves ``.grad`` at None, so even a step moves
nothing). Both stay silent unless the optimizer is built in the same function from
``torch.optim`` (or, for GT544, is a parameter every caller, in the file or another file of
the project, hands one: NOTE [kinds by the callers]) and used
there only through its own methods: an optimizer handed to another call, stored, returned or
read as a value may be stepped elsewhere. Whatever a caller does after the loop, a loop that
clears the gradients on every pass keeps only the last pass's.
"""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.cuts import is_functional_loss
from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.held_optimizers import held_unstepped
from gradtrace.lint.analysis.handed_optimizers import handed_optimizer, stepped_by_a_caller
from gradtrace.lint.analysis.kinds import OPTIMIZER, SCHEDULER, is_torch_loss
from gradtrace.lint.analysis.module_optimizers import module_unstepped
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import says_all

# methods of an optimizer that neither step it nor hand it to code that might
OWN_METHODS = frozenset({"zero_grad", "state_dict", "load_state_dict", "add_param_group",
                         "param_groups", "state", "defaults"})
BACKWARD_WORDS = ("backward", "autograd")
SCHEDULERS = "torch.optim.lr_scheduler."


def _built_here(scope: Scope, name: str, line: int) -> bool:
    b = scope.binding_before(name, line)
    return b is not None and b.kind == OPTIMIZER and isinstance(b.value, ast.Call)


def _only_own_uses(fn: ast.AST, name: str, ctx: Context,
                   own: frozenset[str] = OWN_METHODS, elements: bool = False) -> bool:
    """Every read of ``name`` in ``fn`` is ``name.<one of own>`` (``elements``: also
    ``name[i].<one of own>``), or the optimizer handed to a learning-rate scheduler (which
    never steps it)."""
    parents = file_parents(ctx)
    for n in walk(fn):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
            p = parents.get(id(n))
            if elements and isinstance(p, ast.Subscript) and p.value is n:
                p = parents.get(id(p))
            if isinstance(p, ast.Attribute) and p.attr in own or isinstance(p, ast.Call) \
                    and (ctx.qualified_name(p.func) or "").startswith(SCHEDULERS):
                continue
            return False
        if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return False
    return True


def _cleared_in_loops(scope: Scope, fn: ast.AST, ctx: Context,  # type: ignore[no-untyped-def]
                      own: frozenset[str] = OWN_METHODS):
    """(zero_grad call, its innermost loop, optimizer name) for each optimizer of the function
    cleared inside a loop, built there and used there only through its own methods."""
    seen: set[str] = set()
    for z in step_calls(ctx, fn).zero_grads:
        name, index = z.receiver, False
        f = z.call.func
        if not name and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Subscript) \
                and isinstance(f.value.value, ast.Name):  # `alpha_optim[level]`: one of a list
            name, index = f.value.value.id, True
        loops = scope.loops_of(z.stmt)
        if not loops or not name or name in seen or "." in name or "[" in name:
            continue
        seen.add(name)
        root = name
        if not index and (_built_here(scope, name, z.stmt.lineno) or _handed_optimizer(
                scope, z, ctx) and not stepped_by_a_caller(ctx, fn, name)) \
                and _only_own_uses(fn, name, ctx, own):  # NOTE [parameter kinds]
            yield z, loops[-1], name
        elif not index and module_unstepped(ctx, fn, name, own):
            yield z, loops[-1], name  # NOTE [a module optimizer never stepped]
        elif index and scope.binding_before(root, z.stmt.lineno) is None \
                and _only_own_uses(fn, root, ctx, own, True) \
                and handed_optimizer(ctx, fn, root):  # NOTE [optimizers handed in]
            yield z, loops[-1], ctx.source(f.value)  # type: ignore[union-attr]


def _handed_optimizer(scope: Scope, z, ctx: Context) -> bool:  # type: ignore[no-untyped-def]
    """The cleared name is a parameter of the function that every caller of the file hands
    a ``torch.optim`` optimizer (NOTE [parameter kinds])."""
    recv = z.call.func.value
    if not isinstance(recv, ast.Name) or scope.bindings.get(recv.id):
        return False
    return _param_is(recv, scope, z.stmt.lineno, ctx, OPTIMIZER)


def _param_is(recv: ast.expr, scope: Scope, line: int, ctx: Context, what: str) -> bool:
    """``recv`` is a parameter of the function that every caller, in this file or another of
    the project, hands a value of kind ``what`` (NOTE [parameter kinds])."""
    if not isinstance(recv, ast.Name) or scope.bindings.get(recv.id):
        return False
    k = ctx.analysis.kind(recv, scope, line)
    return k is not None and k.what == what


class OptimizerNeverStepped(Rule):
    """A loop backpropagates and clears an optimizer's gradients every pass but never steps it.

    Why: `backward()` only fills `.grad`; `optimizer.step()` is what changes the weights. A loop
    that calls `opt.zero_grad()` and `loss.backward()` but never `opt.step()` computes every
    gradient and throws it away: the loss never goes down and nothing fails
    (NOTE [a loop that never updates]). Call `opt.step()` after the backward.
    When the loop steps a learning-rate scheduler instead (`scheduler.step()` where
    `opt.step()` belongs), that call is the line reported.
    The optimizer (or a list of them, cleared one element at a time) may be handed in by every
    caller of the file, which built it and reads it nowhere else (NOTE [optimizers handed in]),
    or be a parameter every call of the function, in this file or another of the project,
    passes one for (NOTE [kinds by the callers]), or a script's module-level optimizer read
    as a global that nothing in the file steps (NOTE [a module optimizer never stepped]).
    Known limits: the optimizer must be built in the same function from `torch.optim` (or so
    handed in) and used there only through its own methods (not passed to a call, stored or
    returned); a loop that steps another optimizer that may hold its weights (one not known
    to be built over other modules: NOTE [an optimizer over other modules]) or reads a
    `.grad` (an update by hand) is left alone.
    """

    code = "GT544"
    name = "optimizer-never-stepped"
    message = ("`{call}` fills `.grad` on every pass and `{opt}.zero_grad()` (line {zero}) clears "
               "it, but `{opt}.step()` is never called: the weights never change; call "
               "`{opt}.step()` after this backward")
    message_sched = ("`{sched}` steps the learning-rate schedule where `{opt}.step()` belongs: "
                     "`{call}` (line {line}) fills `.grad` on every pass and `{opt}.zero_grad()` "
                     "(line {zero}) clears it, but `{opt}` is never stepped, so the weights never "
                     "change")
    triggers = ("zero_grad",)
    examples = [
        Bad("""
            import torch
            def train(model, loader):
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in loader:
                    opt.zero_grad()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    loss.backward()
                    print(loss.item())
            """, at=(7, 8)),
        Bad("""
            import torch
            def train(model, loader):
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                sched = torch.optim.lr_scheduler.StepLR(opt, 10)
                for x, y in loader:
                    opt.zero_grad()
                    torch.nn.functional.mse_loss(model(x), y).backward()
                    sched.step()
            """, at=(8, 8)),
        Good("""
            import torch
            def train(model, loader):
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in loader:
                    opt.zero_grad()
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    loss.backward()
                    opt.step()
            """),
        Good("""
            import torch
            def train(model, loader, scaler):
                opt = torch.optim.AdamW(model.parameters())
                for x, y in loader:
                    opt.zero_grad()
                    scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()
                    scaler.step(opt)
                    scaler.update()
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if says_all(ctx, node, ("zero_grad", "backward")):
            yield from self._check(node, ctx)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if says_all(ctx, node, ("zero_grad", "backward")):
            yield from self._check(node, ctx)

    def _check(self, fn: ast.AST, ctx: Context) -> Iterator[Finding]:
        scope = ctx.scope(fn)
        calls = step_calls(ctx, fn)
        yield from self._per_batch(fn, scope, calls, ctx)
        for z, loop, name in _cleared_in_loops(scope, fn, ctx):
            end = loop.end_lineno or loop.lineno
            if any(s.optimizer == name for s in calls.steps) or _other_step(loop, scope, ctx,
                                                                            name) \
                    or _reads_grad(loop):
                continue  # something else may train here, or `.grad` is applied by hand
            b = next((b for b in calls.backwards if b.accumulates
                      and loop.lineno <= b.stmt.lineno <= end), None)
            if b is None:
                continue
            sched = _scheduler_step(loop, scope, ctx)
            related = [Related(ctx.path, z.stmt.lineno, f"`{name}` is cleared here",
                               ctx.column(z.stmt))]
            if sched is not None:  # the schedule stepped where the optimizer belongs
                related.append(Related(ctx.path, b.call.lineno, "the gradients are filled here",
                                       ctx.column(b.call)))
            f = self.report(sched or b.call, ctx, call=ctx.source(b.call.func) + "()", opt=name,
                            zero=z.stmt.lineno, related=related)
            yield f if sched is None else replace(f, message=self.message_sched.format(
                sched=ctx.source(sched), opt=name, call=ctx.source(b.call.func) + "()",
                line=b.call.lineno, zero=z.stmt.lineno))

    def _per_batch(self, fn: ast.AST, scope: Scope, calls, ctx: Context  # type: ignore[no-untyped-def]
                   ) -> Iterator[Finding]:
        """A method run once per batch clears ``self.<opt>`` and backpropagates, and nothing
        in the file steps that optimizer (NOTE [a held optimizer never stepped])."""
        if calls.steps or _other_step(fn, scope, ctx) or _reads_grad(fn):
            return
        for z in calls.zero_grads:
            recv = z.call.func.value if isinstance(z.call.func, ast.Attribute) else None
            if recv is None or scope.loops_of(z.stmt) or not held_unstepped(
                    ctx, fn, recv, OWN_METHODS):
                continue
            b = next((b for b in calls.backwards if b.accumulates
                      and b.stmt.lineno >= z.stmt.lineno), None)
            if b is None:
                return
            name = ctx.source(recv)
            sched = _scheduler_step(fn, scope, ctx, b.stmt.lineno)
            related = [Related(ctx.path, z.stmt.lineno, f"`{name}` is cleared here",
                               ctx.column(z.stmt))]
            if sched is not None:
                related.append(Related(ctx.path, b.call.lineno, "the gradients are filled here",
                                       ctx.column(b.call)))
            f = self.report(sched or b.call, ctx, call=ctx.source(b.call.func) + "()", opt=name,
                            zero=z.stmt.lineno, related=related)
            yield f if sched is None else replace(f, message=self.message_sched.format(
                sched=ctx.source(sched), opt=name, call=ctx.source(b.call.func) + "()",
                line=b.call.lineno, zero=z.stmt.lineno))
            return


class LossNeverBackpropagated(Rule):
    """A loop clears an optimizer's gradients and computes a loss every pass, and nothing in
    its function ever runs `backward()`.

    Why: `opt.zero_grad()` and a loss say the loop means to train, but without `backward()`
    no gradient is ever computed: `.grad` stays None (or zero) and the optimizer, stepped or
    not, changes nothing; the printed loss looks like training and the model stays as it was
    (NOTE [a loop that never updates]). Call `loss.backward()` and `opt.step()` after the loss.
    Known limits: the optimizer must be built in the same function from `torch.optim` and used
    there only through its own methods; the loss is a `torch.nn.*Loss` or
    `torch.nn.functional` loss called in the loop; a function that mentions `backward` or
    `autograd`, or calls a `grad` function, anywhere is trusted; a function that switches a
    module to eval mode (`model.eval()`) and never back to `train()` is an evaluation pass.
    """

    code = "GT545"
    name = "loss-never-backpropagated"
    message = ("`{loss}` is computed on every pass of this loop and `{opt}.zero_grad()` (line "
               "{zero}) clears the gradients, but nothing in this function runs `backward()`: "
               "no gradient is ever computed and `{opt}` changes no weight; call "
               "`{loss}.backward()` and `{opt}.step()` here")
    triggers = ("zero_grad",)
    examples = [
        Bad("""
            import torch
            def fine_tune(model, loader):
                opt = torch.optim.SGD(model.parameters(), lr=0.01)
                ce = torch.nn.CrossEntropyLoss()
                for x, y in loader:
                    model.train()
                    opt.zero_grad()
                    loss = ce(model(x), y)
                    print(f"{loss:.4f}")
            """, at=(8, 8)),
        Good("""
            import torch
            def fine_tune(model, loader):
                opt = torch.optim.SGD(model.parameters(), lr=0.01)
                ce = torch.nn.CrossEntropyLoss()
                for x, y in loader:
                    opt.zero_grad()
                    loss = ce(model(x), y)
                    loss.backward()
                    opt.step()
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, fn: ast.AST, ctx: Context) -> Iterator[Finding]:
        if not says_all(ctx, fn, ("zero_grad",)) or any(
                says_all(ctx, fn, (w,)) for w in BACKWARD_WORDS):
            return
        if any(isinstance(n, ast.Call) and (getattr(n.func, "attr", None) == "grad"
                                             or getattr(n.func, "id", None) == "grad")
               for n in walk(fn)):
            return  # `grad(loss, params)` imported from torch.autograd
        if _evaluates(fn):
            return
        scope = ctx.scope(fn)
        for z, loop, name in _cleared_in_loops(scope, fn, ctx, OWN_METHODS | {"step"}):
            loss = _loss_in(loop, scope, ctx)
            if loss is not None:
                yield self.report(loss, ctx, loss=ctx.source(loss.targets[0]), opt=name,
                                  zero=z.stmt.lineno, related=[Related(
                                      ctx.path, z.stmt.lineno, f"`{name}` is cleared here",
                                      ctx.column(z.stmt))])


def _evaluates(fn: ast.AST) -> bool:
    """The function switches a module to eval mode (``model.eval()``) and never back
    (no ``.train(...)``): an evaluation pass, where a copied ``zero_grad()``/``step()`` moves
    nothing (``.grad`` is None) and a ``backward()`` would train on the evaluation data."""
    calls = [n for n in walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    return any(c.func.attr == "eval" and not c.args and not c.keywords for c in calls) \
        and not any(c.func.attr == "train" for c in calls)


def _other_step(loop: ast.stmt, scope: Scope, ctx: Context, name: str | None = None) -> bool:
    """The loop calls some ``x.step(...)`` other than a learning-rate scheduler's: another
    optimizer, a wrapper or a trainer that may step this one. With ``name`` (the cleared
    optimizer), a ``torch.optim`` optimizer over other modules than ``name``'s does not count
    (NOTE [an optimizer over other modules]: a GAN's ``optF.step()`` moves none of
    ``netG``'s weights)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "step" and not is_scheduler(n.func.value, scope, n.lineno, ctx)
               and not (name is not None and _apart_owners(n.func.value, name, scope, n.lineno,
                                                           ctx))
               for n in walk(loop))


def _apart_owners(recv: ast.expr, name: str, scope: Scope, line: int, ctx: Context) -> bool:
    """# NOTE [an optimizer over other modules]
    ``recv`` and the optimizer ``name`` are both ``torch.optim`` optimizers whose owners are
    known (``Kind.over``: the modules whose parameters each was built over) and share none:
    no owner of one is, holds or sits inside an owner of the other. A step of ``recv`` then
    moves no weight ``name`` holds."""
    a = ctx.analysis.kind(recv, scope, line)
    b = ctx.analysis.kind_in(ast.Name(id=name, ctx=ast.Load()), scope.node, line)
    if a is None or b is None or a.what != OPTIMIZER or b.what != OPTIMIZER \
            or not a.over or not b.over:
        return False
    return not any(x == y or x.startswith(y + ".") or y.startswith(x + ".")
                   for x in a.over for y in b.over)


def is_scheduler(recv: ast.expr, scope: Scope, line: int, ctx: Context) -> bool:
    """``recv`` is a learning-rate scheduler, read from the code (NOTE [kinds]): built in the
    function from ``torch.optim.lr_scheduler`` or a class of the file deriving from one, a
    parameter every caller hands one (NOTE [parameter kinds]), or an attribute (``self.sched``)
    its class sets to one. The one answer GT544's three questions share."""
    k = ctx.analysis.kind(recv, scope, line)
    return k is not None and k.what == SCHEDULER


def _scheduler_step(body: ast.AST, scope: Scope, ctx: Context, after: int = 0
                    ) -> ast.Call | None:
    """The first learning-rate scheduler's ``step()`` inside ``body`` (after line ``after``)."""
    for n in sorted((n for n in walk(body) if isinstance(n, ast.Call)),
                    key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(n.func, ast.Attribute) and n.func.attr == "step" and n.lineno > after \
                and is_scheduler(n.func.value, scope, n.lineno, ctx):
            return n
    return None


def _reads_grad(loop: ast.stmt) -> bool:
    """The loop reads some ``.grad`` (a manual update, a learned optimizer, PGD's sign step)."""
    return any(isinstance(n, ast.Attribute) and n.attr == "grad" and isinstance(n.ctx, ast.Load)
               for n in walk(loop))


def _loss_in(loop: ast.stmt, scope: Scope, ctx: Context) -> ast.Assign | None:
    """The first ``name = <torch loss call>`` of the loop."""
    for s in walk(loop):
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Call)):
            continue
        f = s.value.func
        q = ctx.qualified_name(f) or ""
        if is_functional_loss(q):
            return s
        if isinstance(f, ast.Name):
            b = scope.binding_before(f.id, s.lineno)
            if b is not None and isinstance(b.value, ast.Call) and \
                    is_torch_loss(ctx.qualified_name(b.value.func)):
                return s
    return None
