"""GT203: `torch.set_grad_enabled(False)` called as a statement and never turned back on."""
from __future__ import annotations

import ast
import os
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.called_backwards import backward_through_calls, called_function
from gradtrace.lint.analysis.owners import shown_path
from gradtrace.lint.analysis.steps import backward_loss
from gradtrace.lint.nodes import bfs_walk

SETTERS = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
                     "torch.autograd.grad_mode.set_grad_enabled", "torch._C._set_grad_enabled"})


def _flag(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    for k in call.keywords:
        if k.arg in ("mode", "enabled"):
            return k.value
    return None


def _is_false(e: ast.expr | None) -> bool:
    return isinstance(e, ast.Constant) and e.value is False


def _is_true(e: ast.expr | None) -> bool:
    return isinstance(e, ast.Constant) and e.value is True


class SetGradEnabledNeverRestored(Rule):
    """`torch.set_grad_enabled(False)` is called as a statement and grad is never turned back on.

    Why: called as a plain function, `torch.set_grad_enabled(False)` switches grad mode off
    for the rest of the thread, not for a block (pytorch-facts.md#grad-mode-left-off). Every later
    forward
    records no graph, so the training step's `loss.backward()` raises
    `RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`.
    Use `with torch.no_grad():` (or `with torch.set_grad_enabled(flag):`) around the code that
    needs it, or restore the previous mode. A script that only runs inference, and a call that
    is undone later (`torch.set_grad_enabled(True)`, `set_grad_enabled(prev)`), are fine.
    Known limits: the training must be visible in the same file, or in another file of the
    project calling the function and then training (NOTE [grad left off across files]) (a
    `backward()` after the call,
    in a caller, anywhere in the file for a module-level call, or in the script after it runs a
    model whose `forward` makes the call, directly or through a method on `self`); callers and
    backward calls are followed through the functions and the methods of the file's classes,
    three calls deep (NOTE [backward through calls]). A class's `__enter__` making the call is
    followed to each `with` of the class when its `__exit__` never turns grad back on.
    """

    code = "GT203"
    gate_statements = True
    name = "set-grad-enabled-never-restored"
    message = ("`{call}` turns grad off for the rest of the thread and nothing turns it back on; "
               "`{sink}` (line {line}) then has no graph to differentiate")
    triggers = ("set_grad_enabled",)
    examples = [
        Bad("""
            import torch

            def evaluate(model, loader):
                model.eval()
                torch.set_grad_enabled(False)
                return sum((model(x).argmax(-1) == y).sum().item() for x, y in loader)

            def fit(model, train, val, opt, criterion):
                for epoch in range(10):
                    model.train()
                    for x, y in train:
                        loss = criterion(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    evaluate(model, val)
            """, at=(5, 4)),
        Bad("""
            import torch
            import torch.nn as nn

            class Denoiser(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = nn.Linear(4, 4)

                def forward(self, x):
                    torch.set_grad_enabled(True)
                    x = x.requires_grad_()
                    g, = torch.autograd.grad(self.net(x).sum(), x)
                    torch.set_grad_enabled(False)
                    return x - g

            den = Denoiser()
            clean = den(torch.randn(2, 4)).detach()
            head = nn.Linear(4, 4)
            head(clean).pow(2).mean().backward()
            """, at=(13, 8)),
        Good("""
            import torch

            def evaluate(model, loader):
                prev = torch.is_grad_enabled()
                torch.set_grad_enabled(False)
                try:
                    return sum(model(x).sum().item() for x in loader)
                finally:
                    torch.set_grad_enabled(prev)

            def fit(model, loader, opt):
                for x in loader:
                    model(x).sum().backward()
                    opt.step()
                evaluate(model, loader)
            """),
        Good("""
            import torch

            def run(model, loader, opt, is_training):
                torch.set_grad_enabled(is_training)
                for x in loader:
                    loss = model(x).sum()
                    if is_training:
                        loss.backward()
                        opt.step()
            """),
        Good("""
            import torch

            torch.set_grad_enabled(False)
            model = torch.hub.load("repo", "model")
            print(model(torch.randn(1, 3, 224, 224)).argmax())
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not isinstance(ctx.parent, ast.Expr) or ctx.qualified_name(node.func) not in SETTERS:
            return
        if not _is_false(_flag(node)) or ctx.grad_disabled is not None:
            return
        fn = ctx.function
        if _restored(fn or ctx.tree, node.lineno if fn else 0, ctx):
            return
        sink = _sink_after(fn or ctx.tree, node.lineno if fn else 0, ctx, follow=False)
        if sink is None and fn is not None:
            # a context manager's __enter__: NOTE [grad left off by a with]
            sink = _sink_in_callers(fn, ctx, _switch(fn, node, ctx)) or _sink_after_with(fn, ctx)
        if sink is None and fn is not None:
            away = foreign_training_after(fn, ctx)  # NOTE [grad left off across files]
            if away is not None:
                octx, c = away
                yield self.report(node, ctx, related=(Related(
                    shown_path(octx.path, ctx.path), c.lineno, f"`{octx.source(c)}` trains with grad still off",
                    octx.column(c)),), call=ctx.source(node), sink=octx.source(c),
                    line=f"{os.path.basename(octx.path)}:{c.lineno}")
            return
        if sink is None:
            return
        related = (Related(ctx.path, sink.lineno,
                           f"`{ctx.source(sink)}` runs with grad still off", ctx.column(sink)),)
        yield self.report(node, ctx, related=related, call=ctx.source(node),
                          sink=ctx.source(sink), line=sink.lineno)


def foreign_training_after(fn: ast.AST, ctx: Context) -> tuple[Context, ast.Call] | None:
    """# NOTE [grad left off across files]
    A top-level function of the file that leaves grad off (``def evaluate(...):
    torch.set_grad_enabled(False) ...``), called from another file of the project
    (NOTE [reverse index]) by code that never turns grad back on and, after the call (or earlier in
    a loop around it), backpropagates or calls a function of the project whose body does (and
    does not turn grad on first): that caller's file and the training call."""
    from gradtrace.lint.analysis.callers import foreign_sites
    from gradtrace.lint.analysis.project import foreign_callee, home
    from gradtrace.lint.analysis.returned_closures import returned_closure

    if fn not in ctx.tree.body:
        return None
    for s in foreign_sites(ctx, fn) or ():
        octx, owner = s.ctx, s.where
        if isinstance(owner, ast.Module):
            owner = ast.Module(body=[st for st in owner.body if not isinstance(
                st, (*FUNCTION_TYPES, ast.ClassDef))], type_ignores=[])
        if _restored(owner, 0, octx):
            continue
        loop = next((n for n in bfs_walk(owner) if isinstance(n, (ast.For, ast.While))
                     and n.lineno <= s.call.lineno <= (n.end_lineno or 0)), None)
        later = [c for c in _calls(owner) if c.lineno > s.call.lineno] + (
            [c for c in _calls(loop) if c.lineno < s.call.lineno] if loop is not None else [])
        scope = octx.scope(s.where)
        for c in later:
            if backward_loss(c, octx) is not None:
                return octx, c
            callee = foreign_callee(octx, c, scope, c.lineno) \
                if isinstance(c.func, (ast.Name, ast.Attribute)) else None
            closure = returned_closure(octx, s.where, c) if callee is None else None
            if closure is not None:  # NOTE [returned closure]
                cctx, callee = closure
            elif isinstance(callee, FUNCTION_TYPES):
                cctx = home(octx, callee)
            if isinstance(callee, FUNCTION_TYPES):
                if not _restored(callee, 0, cctx) and \
                        _sink_after(callee, 0, cctx, follow=False) is not None:
                    return octx, c
    return None


def _restored(owner: ast.AST, line: int, ctx: Context) -> bool:
    """A call after ``line`` in ``owner`` that can turn grad back on (True, a variable,
    enable_grad()); a ``finally`` counts wherever it is."""
    for n in bfs_walk(owner):
        if isinstance(n, ast.Call) and n.lineno > line:
            q = ctx.qualified_name(n.func)
            if q in SETTERS and not _is_false(_flag(n)) or q == "torch.enable_grad":
                return True
    return False


def _calls(body_owner: ast.AST) -> Iterator[ast.Call]:
    for n in bfs_walk(body_owner):
        if isinstance(n, ast.Call):
            yield n


def _sink_after(owner: ast.AST, line: int, ctx: Context, follow: bool = True) -> ast.Call | None:
    """A backward call after ``line`` in ``owner`` (or, with ``follow``, inside a function of
    the file that ``owner`` calls after ``line``)."""
    for c in sorted(_calls(owner), key=lambda c: (c.lineno, c.col_offset)):
        if c.lineno <= line:
            continue
        if backward_loss(c, ctx) is not None:
            return c
        if follow:
            inner = _local_training_sink(c, ctx) or backward_through_calls(
                ctx, c, owner if isinstance(owner, FUNCTION_TYPES) else ctx.tree,
                lambda b: backward_loss(b, ctx) is not None)
            if inner is not None:
                return inner
    return None


def _local_training_sink(call: ast.Call, ctx: Context) -> ast.Call | None:
    name = dotted(call.func) or ""
    name = name[5:] if name.startswith("self.") else name
    if not name or "." in name:
        return None
    for fn in bfs_walk(ctx.tree):
        if isinstance(fn, FUNCTION_TYPES) and fn.name == name and not _restored(fn, 0, ctx):
            return _sink_after(fn, 0, ctx, follow=False)
    return None


def _switch(fn: ast.AST, call: ast.Call, ctx: Context) -> tuple[str, int] | None:
    """# NOTE [grad switch]
    ``def set_train_mode(self, enable): if enable: ...set_grad_enabled(True) else:
    ...set_grad_enabled(False)``: the call sits in the arm an ``if`` on a parameter of ``fn``
    takes when it is false, the other arm turns grad on: a switch, which each call sets
    anew. Returns that parameter and its position in a call (after ``self``)."""
    args = [a.arg for a in getattr(getattr(fn, "args", None), "args", [])]
    for n in bfs_walk(fn):
        if not isinstance(n, ast.If):
            continue
        t, off, on = n.test, n.orelse, n.body
        if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
            t, off, on = t.operand, n.body, n.orelse
        if isinstance(t, ast.Name) and t.id in args and any(
                c is call for s in off for c in bfs_walk(s)) and any(
                isinstance(c, ast.Call) and ctx.qualified_name(c.func) in SETTERS
                and _is_true(_flag(c)) for s in on for c in bfs_walk(s)):
            return t.id, args.index(t.id) - (args[:1] in (["self"], ["cls"]))
    return None


def _switched_on(c: ast.Call, switch: tuple[str, int] | None) -> bool:
    """The call of a switch (NOTE [grad switch]) passes it a true constant: it turns grad on
    (a caller making such a call anywhere restores grad, as a setter there would)."""
    if switch is None:
        return False
    got = next((k.value for k in c.keywords if k.arg == switch[0]), None)
    if got is None and 0 <= switch[1] < len(c.args):
        got = c.args[switch[1]]
    return isinstance(got, ast.Constant) and bool(got.value)


def _sink_in_callers(fn: ast.AST, ctx: Context, switch: tuple[str, int] | None = None
                     ) -> ast.Call | None:
    """A backward call that follows a call of ``fn`` in another function of the file (one
    that never switches grad back on through ``fn``, NOTE [grad switch])."""
    name = getattr(fn, "name", "")
    for other in bfs_walk(ctx.tree):
        if not isinstance(other, FUNCTION_TYPES) or other is fn:
            continue
        calls = [c for c in _calls(other) if dotted(c.func) in (name, "self." + name) or (
            isinstance(c.func, ast.Attribute) and c.func.attr == name
            and called_function(ctx, other, c) is fn)]  # NOTE [backward through calls]
        if any(_switched_on(c, switch) for c in calls):
            continue  # the caller switches grad back on, as a setter would (`_restored`)
        for c in calls:
            if not _restored(other, 0, ctx):
                sink = _sink_after(other, c.lineno, ctx) or _sink_in_loop_before(other, c, ctx)
                if sink is not None:
                    return sink
    return _sink_in_script(name, ctx, fn) or _sink_after_model_run(fn, ctx)


def _sink_after_with(fn: ast.AST, ctx: Context) -> ast.Call | None:
    """# NOTE [grad left off by a with]
    ``fn`` is the ``__enter__`` of a class of the file whose ``__exit__`` never turns grad back
    on: each ``with Cls(...):`` leaves grad off after its block. A backward after such a ``with``
    (or earlier in a loop around it), or after a call of the function holding it (as for a
    plain call of a function that leaves grad off), runs with grad still off."""
    if getattr(fn, "name", "") != "__enter__":
        return None
    cls = next((c for c in bfs_walk(ctx.tree) if isinstance(c, ast.ClassDef) and fn in c.body),
               None)
    exit_ = next((f for f in getattr(cls, "body", ()) if isinstance(f, FUNCTION_TYPES)
                  and f.name in ("__exit__", "__aexit__")), None)
    if exit_ is None or _restored(exit_, 0, ctx):
        return None
    for owner in bfs_walk(ctx.tree):
        if not isinstance(owner, (*FUNCTION_TYPES, ast.Module)) or owner is fn:
            continue
        body = owner.body if isinstance(owner, ast.Module) else [owner]
        holder = owner if not isinstance(owner, ast.Module) else ast.Module(body=[
            s for s in body if not isinstance(s, (*FUNCTION_TYPES, ast.ClassDef))], type_ignores=[])
        for w in bfs_walk(holder):
            if not isinstance(w, (ast.With, ast.AsyncWith)) or not any(
                    isinstance(i.context_expr, ast.Call) and isinstance(i.context_expr.func, ast.Name)
                    and i.context_expr.func.id == cls.name for i in w.items):
                continue
            if _restored(holder, 0, ctx):
                continue
            end = w.end_lineno or w.lineno
            sink = _sink_after(holder, end, ctx) or _sink_in_loop_before(holder, w.items[0].context_expr, ctx)
            if sink is None and isinstance(owner, FUNCTION_TYPES):
                sink = _sink_in_callers(owner, ctx)
            if sink is not None:
                return sink
    return None


def _sink_after_model_run(fn: ast.AST, ctx: Context) -> ast.Call | None:
    """``fn`` is a class's ``forward`` or a method its ``forward`` calls on ``self``, and the
    script (module level, nothing there turning grad back on) calls an object it built and
    then backward: the model run leaves grad off for the training that follows."""
    cls = next((c for c in ctx.tree.body if isinstance(c, ast.ClassDef) and fn in c.body), None)
    if cls is None:
        return None
    name = getattr(fn, "name", "")
    if name != "forward" and not any(
            isinstance(f, FUNCTION_TYPES) and f.name == "forward" and any(
                dotted(c.func) == "self." + name for c in _calls(f)) for f in cls.body):
        return None
    top = [s for s in ctx.tree.body if not isinstance(s, (*FUNCTION_TYPES, ast.ClassDef))]
    if any(_restored(s, 0, ctx) for s in top):
        return None
    built = {t.id for s in top if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
             for t in s.targets if isinstance(t, ast.Name)}
    run = next((c for s in top for c in _calls(s)
                if isinstance(c.func, ast.Name) and c.func.id in built), None)
    if run is None:
        return None
    return _sink_after(ast.Module(body=top, type_ignores=[]), run.lineno, ctx)


def _sink_in_script(name: str, ctx: Context, fn: ast.AST | None = None) -> ast.Call | None:
    """A backward call at module level (a script) after a module-level call of ``name``
    (or of the method ``fn`` on an instance, NOTE [backward through calls]), with nothing at
    module level turning grad back on."""
    top = [s for s in ctx.tree.body if not isinstance(s, (*FUNCTION_TYPES, ast.ClassDef))]
    calls = [c for s in top for c in _calls(s)]
    first = next((c for c in calls if dotted(c.func) == name or (
        fn is not None and isinstance(c.func, ast.Attribute) and c.func.attr == name
        and called_function(ctx, ctx.tree, c) is fn)), None)
    if first is None or any(_restored(s, 0, ctx) for s in top):
        return None
    holder = ast.Module(body=top, type_ignores=[])
    return _sink_after(holder, first.lineno, ctx) or _sink_in_loop_before(holder, first, ctx)


def _sink_in_loop_before(fn: ast.AST, call: ast.Call, ctx: Context) -> ast.Call | None:
    """A backward earlier in a loop that also contains ``call`` (runs again next iteration)."""
    for loop in bfs_walk(fn):
        if isinstance(loop, (ast.For, ast.While, ast.AsyncFor)) and \
                loop.lineno <= call.lineno <= (loop.end_lineno or 0):
            for c in _calls(loop):
                if c.lineno < call.lineno:
                    sink = c if backward_loss(c, ctx) is not None else \
                        _local_training_sink(c, ctx) or backward_through_calls(
                            ctx, c, fn if isinstance(fn, FUNCTION_TYPES) else ctx.tree,
                            lambda b: backward_loss(b, ctx) is not None)
                    if sink is not None:
                        return sink
    return None
