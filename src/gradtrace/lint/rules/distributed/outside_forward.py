"""GT134: under ``find_unused_parameters=True``, a loss built by a model method other than
``forward`` uses parameters ``forward`` never touches.

# NOTE [parameters used outside forward under DDP]
With ``find_unused_parameters=True``, DDP walks the autograd graph of ``forward``'s outputs after
each forward and marks every parameter it does not reach as ready (unused) at once. A part of
the model that only another method uses (a CRF output layer read by ``model.module.get_loss``
after ``emissions = ddp_model(tokens)``, pytext PR 497) is marked so, and when the backward of a
loss that does use it runs, its gradient hook marks it ready a second time: "Expected to mark a
variable ready only once" (torch 2.13, gloo, 2 ranks). With the flag off the reducer waits for
that gradient, which the same backward delivers, and training runs. The rule needs: the wrap
with the flag on (``_ddp.wraps``), the file's class it wraps (``_ddp.wrapped_class``), a call
``w.module.<m>(...)`` of another method of that class on the wrapper (bound to the wrap, or to
what a helper of the file returns), in a function that also runs the wrapper's forward and
backpropagates the method's result; the attributes ``<m>`` reads (its own methods followed)
that ``forward`` does not (``ClassInfo.forward_uses``) and that hold a layer with parameters
or an ``nn.Parameter``.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed._ddp import TRIGGERS, Wrap, held_wrapper, wraps, \
    wrapped_class
from gradtrace.lint.rules.registration._modules import owns_params


def _wrapper_of(e: ast.AST, fn: ast.AST, line: int, ctx: Context) -> Wrap | None:
    """The wrap ``e`` holds: :func:`held_wrapper`, or a name bound to what a function of the
    file returns when that is a wrap (``ddp = wrap_for_distributed(model)``)."""
    w = held_wrapper(e, fn, line, ctx)
    if w is not None or not isinstance(e, ast.Name):
        return w
    b = ctx.scope(fn).binding_before(e.id, line)
    if b is None or not isinstance(b.value, ast.Call):
        return None
    helper = ctx.analysis.callee(b.value, fn)
    if helper is None:
        return None
    by_call = {id(x.call): x for x in wraps(ctx)}
    rets = [r.value for r in walk(helper) if isinstance(r, ast.Return) and r.value is not None]
    got = [by_call.get(id(r)) for r in rets]
    return got[0] if got and all(g is not None and g is got[0] for g in got) else None


def _backpropagated(call: ast.Call, fn: ast.AST) -> ast.Call | None:
    """The ``.backward()`` in ``fn`` whose receiver reads what ``call`` returns (through the
    names its result is assigned to, and names computed from them)."""
    stmts = [s for s in walk(fn) if isinstance(s, ast.Assign)]
    derived: set[str] = set()
    for s in stmts:
        if any(n is call for n in walk(s.value)):
            derived.update(t.id for t in s.targets if isinstance(t, ast.Name))
    changed = bool(derived)
    while changed:
        changed = False
        for s in stmts:
            if any(isinstance(n, ast.Name) and n.id in derived for n in walk(s.value)):
                new = {t.id for t in s.targets if isinstance(t, ast.Name)} - derived
                derived |= new
                changed = changed or bool(new)
    for n in walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "backward" and (any(
                    isinstance(x, ast.Name) and x.id in derived for x in walk(n.func.value))
                    or any(x is call for x in walk(n.func.value))):
            return n
    return None


class ParameterUsedOutsideDdpForward(Rule):
    """A model wrapped with `find_unused_parameters=True` computes its loss in another method
    (`ddp_model.module.get_loss(...)`) that uses parameters `forward` never touches.

    Why: after each forward, DDP marks every parameter the outputs' graph does not reach as
    ready at once; the loss method's parameters are among them, and the backward that then
    reaches them marks them ready again: `RuntimeError: Expected to mark a variable ready only
    once` (pytext PR 497). Compute that part inside `forward`, or wrap without
    `find_unused_parameters` (the reducer then waits for their gradients, which the same
    backward delivers).
    Known limits: the wrapped model must be a class of the file; the method is called as
    `<wrapper>.module.<method>(...)` in a function that runs the wrapper and calls
    `backward()` on what the method returns; `self.<x>` read in the method counts when it
    holds a layer with parameters or an `nn.Parameter` and `forward` never reads it.
    """

    code = "GT134"
    name = "parameter-used-outside-ddp-forward"
    message = ("`find_unused_parameters=True` with `{cls}.{method}` (called at line {line}) using "
               "`self.{attr}`, which `forward` never touches: DDP marks its parameters unused "
               "after each forward, then the backward of that loss marks them ready again and "
               "raises 'Expected to mark a variable ready only once'")
    triggers = TRIGGERS
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP

            class Tagger(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = nn.Linear(8, 4)
                    self.trans = nn.Parameter(torch.zeros(4, 4))

                def forward(self, x):
                    return self.enc(x)

                def get_loss(self, scores, tags):
                    return (scores @ self.trans).gather(1, tags).mean()

            def train(loader):
                ddp = DDP(Tagger(), find_unused_parameters=True)
                for x, tags in loader:
                    loss = ddp.module.get_loss(ddp(x), tags)
                    loss.backward()
            """, at=(18, 10)),
        Good("""
            import torch
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP

            class Tagger(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = nn.Linear(8, 4)
                    self.trans = nn.Parameter(torch.zeros(4, 4))

                def forward(self, x):
                    return self.enc(x)

                def get_loss(self, scores, tags):
                    return (scores @ self.trans).gather(1, tags).mean()

            def train(loader):
                ddp = DDP(Tagger(), find_unused_parameters=False)
                for x, tags in loader:
                    loss = ddp.module.get_loss(ddp(x), tags)
                    loss.backward()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        on = [w for w in wraps(ctx) if w.finds_unused and not w.static_graph]
        if not on:  # NOTE [parameters used outside forward under DDP]
            return
        done: set[int] = set()
        for fn in walk(node):
            if not isinstance(fn, FUNCTION_TYPES):
                continue
            for call in walk(fn):
                f = call.func if isinstance(call, ast.Call) else None
                if not (isinstance(f, ast.Attribute) and f.attr != "forward"
                        and isinstance(f.value, ast.Attribute) and f.value.attr == "module"):
                    continue
                w = _wrapper_of(f.value.value, fn, call.lineno, ctx)
                if w is None or w not in on or id(w.call) in done:
                    continue
                found = self._judge(w, f.attr, call, fn, ctx)
                if found is not None:
                    done.add(id(w.call))
                    yield found

    def _judge(self, w: Wrap, method: str, call: ast.Call, fn: ast.AST, ctx: Context
               ) -> Finding | None:
        cls = wrapped_class(w, ctx)
        if cls is None or method not in cls.methods:
            return None
        inner = call.func.value.value  # type: ignore[attr-defined]
        ran = any(isinstance(n, ast.Call) and ast.dump(n.func) == ast.dump(inner)
                  for n in walk(fn))  # the wrapper's own forward runs in the function
        if not ran or _backpropagated(call, fn) is None:
            return None
        for attr in sorted(cls.uses(method) - cls.forward_uses):
            info = cls.attrs.get(attr)
            v = info.value if info is not None else None
            if v is None or not (owns_params(v, ctx) or (
                    isinstance(v, ast.Call) and ctx.call_name(v) == "torch.nn.Parameter")):
                continue
            return self.report(w.call, ctx, related=[Related(
                ctx.path, call.lineno, f"`{cls.name}.{method}` is called outside `forward` here",
                ctx.column(call))], cls=cls.name, method=method, line=call.lineno, attr=attr)
        return None
