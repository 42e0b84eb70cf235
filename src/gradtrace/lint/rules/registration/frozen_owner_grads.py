"""GT470: a helper asks a gradient of every parameter of a module frozen in part elsewhere."""
from __future__ import annotations

import ast
from typing import Callable, Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.params import FLAG, param_iter_var, param_loop_var
from gradtrace.lint.analysis.torch_classes import optimizer_subclass
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._frozen import _derefs_grad
from gradtrace.lint.rules.registration._frozen_owners import frozen_owner

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
GUARDS = ("grad", FLAG)
READ = "reads `{var}.grad` of", "their `.grad` stays None and this raises on them"
AUTOGRAD = ("asks `torch.autograd.grad` for", "it raises `RuntimeError: One of the "
            "differentiated Tensors does not require grad`")


def _guarded(test: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in GUARDS for n in walk(test))


def _first(body: list[ast.stmt], hit: Callable[[ast.stmt], bool]) -> ast.stmt | None:
    """The first statement of ``body`` (through ``if``/``with`` bodies) where ``hit`` holds,
    before any test of ``.grad``/``.requires_grad`` (which guards what follows)."""
    for s in body:
        if isinstance(s, (ast.If, ast.While, ast.With, ast.AsyncWith, ast.Try)):
            test = getattr(s, "test", None)
            if test is not None and _guarded(test):
                return None
            if isinstance(s, ast.Try):
                continue
            got = _first(s.body, hit)
            if got is not None:
                return got
            continue
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For,
                          ast.AsyncFor)):
            continue
        if hit(s):
            return s
    return None


def _all_params(e: ast.expr | None) -> ast.expr | None:
    """``m`` for ``m.parameters()`` or ``list(m.parameters())`` (``tuple``)."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("list", "tuple") \
            and len(e.args) == 1 and not e.keywords:
        e = e.args[0]
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "parameters" and not e.args and not e.keywords:
        return e.func.value
    return None


def _group_params(loop: ast.For, ctx: Context) -> tuple[str, ast.FunctionDef] | None:
    """``(p, __init__)`` for ``for p in group["params"]`` in a method of a
    ``torch.optim.Optimizer`` subclass of the file whose ``__init__`` the file defines."""
    it = loop.iter
    if not (isinstance(it, ast.Subscript) and isinstance(it.slice, ast.Constant)
            and it.slice.value == "params" and isinstance(loop.target, ast.Name)):
        return None
    cls = ctx.class_def
    if cls is None or not optimizer_subclass(cls, ctx):
        return None
    info = ctx.analysis.classes.get(cls.name)
    init = info.methods.get("__init__") if info is not None and info.node is cls else None
    return (loop.target.id, init) if isinstance(init, ast.FunctionDef) else None


def _handed_params(init: ast.FunctionDef, ctx: Context) -> list[tuple[ast.expr, ast.AST]]:
    """``(m, where)`` for each construction ``Opt(m.parameters(), ...)`` of the file (the
    first argument after ``self`` of its ``__init__``)."""
    names = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]
    if not names:
        return []
    out = []
    for value, where in ctx.analysis.argument_values(init, names[0]):
        owner = _all_params(value)
        if owner is not None:
            out.append((owner, where))
    return out


class FrozenParamsGradElsewhere(Rule):
    """A helper reads `p.grad` or asks `torch.autograd.grad` for every parameter of a module
    whose parameters are partly frozen elsewhere in the file.

    Why: a parameter with `requires_grad=False` gets no gradient. Its `.grad` stays None, so
    `p.grad.data.norm()` raises `AttributeError`, and `torch.autograd.grad(loss, model.parameters())` raises `RuntimeError: One of the
    differentiated Tensors does not require grad` (verified on torch 2.13). The freeze is in
    the script or a class's `__init__`, the gradient code in a training helper, so the helper
    looks right on its own. Take only the parameters that require grad:
    `[p for p in model.parameters() if p.requires_grad]`.
    Known limits: the module must be the instance the file froze, followed by the kind
    analysis through names, returns and callers' arguments, or an instance of a class whose
    `__init__` freezes a part of it (NOTE [frozen instances]); nothing is said in a file that
    sets `requires_grad` to anything but False. A loop in the function of the freeze is
    GT433's; a hook registered on each parameter is GT714's.
    A custom `torch.optim.Optimizer` of the file whose method reads `p.grad` for each
    `p in group["params"]` is checked against what its constructions are handed
    (`DFW(model.parameters())` with a frozen embedding of `model`: oval-group/dfw#5).
    """

    code = "GT470"
    gate_statements = True
    name = "frozen-params-grad-elsewhere"
    message = ("this {what} every parameter of `{owner}`, and some were frozen at line {line}: "
               "{effect}; take only the parameters that require grad")
    triggers = ("grad",)
    examples = [
        Bad("""
            import torch.nn as nn
            class Agent(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.GRUCell(8, 16)
                    self.head = nn.Linear(16, 2)
                    for p in self.encoder.parameters():
                        p.requires_grad = False
            def grad_norm(model):
                return sum(p.grad.norm() ** 2 for p in model.parameters()) ** 0.5
            agent = Agent()
            print(grad_norm(agent))
            """, at=(10, 14)),
        Bad("""
            import torch
            import torch.nn as nn
            def meta_grads(net, loss):
                return torch.autograd.grad(loss, net.parameters(), retain_graph=True)
            model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
            for p in model[0].parameters():
                p.requires_grad = False
            meta_grads(model, loss_fn(model(x), y))
            """, at=(4, 11)),
        Good("""
            import torch
            import torch.nn as nn
            def meta_grads(net, loss):
                params = [p for p in net.parameters() if p.requires_grad]
                return torch.autograd.grad(loss, params, retain_graph=True)
            model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
            for p in model[0].parameters():
                p.requires_grad = False
            meta_grads(model, loss_fn(model(x), y))
            """),
        Bad("""
            import torch
            import torch.nn as nn
            class Momentum(torch.optim.Optimizer):
                def __init__(self, params, lr=0.1):
                    super().__init__(params, dict(lr=lr))
                @torch.no_grad()
                def step(self):
                    for group in self.param_groups:
                        for p in group["params"]:
                            p.sub_(group["lr"] * p.grad)
            model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
            model[0].requires_grad_(False)
            opt = Momentum(model.parameters())
            """, at=(10, 16)),
        Good("""
            import torch
            import torch.nn as nn
            class Momentum(torch.optim.Optimizer):
                def __init__(self, params, lr=0.1):
                    super().__init__(params, dict(lr=lr))
                @torch.no_grad()
                def step(self):
                    for group in self.param_groups:
                        for p in group["params"]:
                            if p.grad is not None:
                                p.sub_(group["lr"] * p.grad)
            model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
            model[0].requires_grad_(False)
            opt = Momentum(model.parameters())
            """),
        Good("""
            import torch.nn as nn
            def grad_norm(model):
                return sum(p.grad.norm() ** 2 for p in model.parameters()) ** 0.5
            student, teacher = nn.Linear(4, 2), nn.Linear(4, 2)
            teacher.requires_grad_(False)
            print(grad_norm(student))
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        got = param_loop_var(node)
        if got is None:
            yield from self._optimizer_loop(node, ctx)
            return
        var = got[0]
        grads = _first(node.body, lambda s: _derefs_grad(s, var))
        if grads is not None:  # (a hook on each parameter: GT714's)
            yield from self._check(node.iter.func.value, grads, var, READ, ctx,  # type: ignore[attr-defined]
                                   gt433=True)

    def _optimizer_loop(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        got = _group_params(node, ctx)
        if got is None:
            return
        var, init = got
        grads = _first(node.body, lambda s: _derefs_grad(s, var))
        if grads is None:
            return
        for owner, where in _handed_params(init, ctx):
            frozen = frozen_owner(ctx, owner, where, owner.lineno)
            if frozen is not None:
                yield self.report(grads, ctx, related=[Related(
                    ctx.path, frozen[0].lineno, "some of its parameters are frozen here"),
                    Related(ctx.path, owner.lineno, "its parameters are handed to the "
                            "optimizer here")], what=READ[0].format(var=var),
                    owner=dotted(owner) or "the module", line=frozen[0].lineno,
                    effect=READ[1])
                return

    def _comprehension(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        if len(node.generators) != 1:  # type: ignore[attr-defined]
            return
        gen = node.generators[0]  # type: ignore[attr-defined]
        got = param_iter_var(gen.target, gen.iter)
        if got is None or any(_guarded(c) for c in gen.ifs):
            return
        var = got[0]
        results = [node.key, node.value] if isinstance(node, ast.DictComp) \
            else [node.elt]  # type: ignore[attr-defined]
        if any(_derefs_grad(ast.Expr(r), var) for r in results):
            yield from self._check(gen.iter.func.value, node, var, READ, ctx, gt433=False)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not isinstance(node.func, ast.Attribute) or node.func.attr != "grad" \
                or ctx.qualified_name(node.func) != "torch.autograd.grad":
            return
        inputs = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "inputs"), None)
        owner = _all_params(inputs)
        if owner is not None:
            yield from self._check(owner, node, "p", AUTOGRAD, ctx, gt433=False)

    def _check(self, owner: ast.expr, use: ast.AST, var: str, kind: tuple[str, str],
               ctx: Context, gt433: bool) -> Iterator[Finding]:
        fn = ctx.function or ctx.tree
        got = frozen_owner(ctx, owner, fn, use.lineno)  # type: ignore[attr-defined]
        if got is None:
            return
        stmt, where = got
        if gt433 and where is fn:
            return  # a loop in the function of the freeze: GT433
        yield self.report(use, ctx, related=[Related(
            ctx.path, stmt.lineno, "some of its parameters are frozen here")],
            what=kind[0].format(var=var), owner=dotted(owner) or "the module",
            line=stmt.lineno, effect=kind[1])
