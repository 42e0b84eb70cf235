"""An optimizer a method builds once, lazily (``if self.opt is None:``), over a tensor another
method re-creates: used by GT404 across the methods of a class."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.leaf._tensors import grad_factory, is_optimizer_call

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def new_leaf(value: ast.AST, ctx: Context) -> bool:
    """A new tensor that requires grad: ``torch.randn(.., requires_grad=True)``,
    ``x.detach().to(dev).requires_grad_()``, ``x.clone().requires_grad_()``."""
    if grad_factory(value, ctx) is not None:
        return True
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr == "requires_grad_" and not value.args):
        return False
    e = value.func.value
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        if e.func.attr in ("detach", "clone"):
            return True
        e = e.func.value
    return False


def _lazy_build(m: ast.AST, target: str, ctx: Context) -> tuple[str, ast.stmt] | None:
    """``(self.opt, build)`` for ``if self.opt is None: self.opt = Optim([... target ...])``
    in method ``m``."""
    for s in walk(m):
        if not (isinstance(s, ast.If) and isinstance(s.test, ast.Compare)
                and len(s.test.ops) == 1 and isinstance(s.test.ops[0], ast.Is)
                and isinstance(s.test.comparators[0], ast.Constant)
                and s.test.comparators[0].value is None):
            continue
        opt = dotted(s.test.left)
        for b in s.body:
            if isinstance(b, ast.Assign) and len(b.targets) == 1 and opt \
                    and opt.startswith("self.") and dotted(b.targets[0]) == opt \
                    and is_optimizer_call(b.value, ctx) and any(
                        dotted(n) == target for n in walk(b.value)
                        if isinstance(n, ast.Attribute)):
                return opt, b
    return None


def stale_lazy_optimizer(ctx: Context, fn: ast.AST, target: str
                         ) -> tuple[ast.stmt, ast.Call, ast.Call] | None:
    """For ``self.x = <new tensor>`` in method ``fn``: ``(build, later_call, reuse_call)`` when
    another method builds the optimizer over ``self.x`` once, lazily, ``fn`` does not reset
    it, and the file calls that method, then ``fn``, then that method again on one object."""
    cls = ctx.analysis.class_of(fn)
    if cls is None or getattr(fn, "name", "") == "__init__":
        return None
    for a in cls.methods.values():
        if a is fn or a.name == "__init__":
            continue
        got = _lazy_build(a, target, ctx)
        if got is None:
            continue
        opt, build = got
        if any(isinstance(n, ast.Assign) and any(dotted(t) == opt for t in n.targets)
               for n in walk(fn)):
            return None  # `fn` resets the optimizer
        seq = _call_sequence(ctx, cls.name, a.name, getattr(fn, "name", ""))
        if seq is not None:
            return build, seq[0], seq[1]
    return None


def _call_sequence(ctx: Context, cls: str, builder: str, changer: str
                   ) -> tuple[ast.Call, ast.Call] | None:
    """``(obj.changer(), obj.builder())`` where an object of ``cls`` in one scope (the module
    or a function) runs ``builder`` before ``changer`` and again after it."""
    scopes = [ctx.tree, *ctx.analysis.functions.values()]
    for node in scopes:
        sc = ctx.scope(node)
        calls: dict[str, list[tuple[str, ast.Call]]] = {}
        for mc in sc.method_calls:
            if mc.method in (builder, changer) and "." not in mc.receiver:
                calls.setdefault(mc.receiver, []).append((mc.method, mc.call))
        for recv, seq in calls.items():
            k = ctx.analysis.kind_in(ast.Name(id=recv, ctx=ast.Load()), node, seq[-1][1].lineno)
            if k is None or k.cls != cls:
                continue
            names = [m for m, _ in seq]
            if builder in names:
                i = names.index(builder)
                j = next((j for j in range(i + 1, len(names)) if names[j] == changer), None)
                if j is not None:
                    r = next((r for r in range(j + 1, len(names)) if names[r] == builder), None)
                    if r is not None:
                        return seq[j][1], seq[r][1]
    return None
