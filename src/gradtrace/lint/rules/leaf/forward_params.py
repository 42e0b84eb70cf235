"""GT485: a module's forward puts a computed tensor (a non-leaf) into its parameters.

# NOTE [a non-leaf put in a module's parameters]
Weight dropout and similar reparametrisations recompute a weight from a raw parameter on every
forward and store it with ``module._parameters[name] = F.dropout(raw, ...)``. The entry is
then a tensor computed from a parameter, a non-leaf: ``model.parameters()`` yields it, and an
optimizer built from ``model.parameters()`` after the model ran once raises ``ValueError:
can't optimize a non-leaf Tensor`` (checked on torch 2.13; an optimizer built before the first
forward holds the original weight, which forward no longer reads). The facts: the write is in
``forward`` of a module class of the file or in a method ``forward`` calls through ``self``;
the value is the result of a ``torch`` function or arithmetic (not ``nn.Parameter``, not under
``no_grad``); and the file calls an instance of that class (or of a class of the file that
holds one, through ``__init__`` attributes) before it builds a ``torch.optim`` optimizer over
that instance's ``.parameters()`` in the same scope. A write elsewhere (a meta-learning step
that swaps in updated weights on purpose) is left alone, and so is a file that builds the
optimizer before any forward. Setting the computed weight as a plain attribute (`delattr`
then `setattr`) keeps the raw parameter the only registered one.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.grad_modes import grad_mode_of
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


class ComputedTensorInParameters(Rule):
    """A module's forward stores a computed tensor in `module._parameters[...]`.

    Why: the stored value (`F.dropout(raw_w, p)`, `w * mask`) is a non-leaf computed from a
    parameter; once the model has run, `model.parameters()` yields it and an optimizer built
    from them raises `ValueError: can't optimize a non-leaf Tensor`
    (NOTE [a non-leaf put in a module's parameters]). Remove the entry from the parameters
    once (`del module._parameters[name]`) and set the computed weight as a plain attribute
    (`setattr(module, name, F.dropout(raw_w, p))`).
    Known limits: the write must be in `forward` or a method it calls through `self`, and the
    file must call the model before it builds the optimizer over its `.parameters()`, in one
    scope.
    """

    code = "GT485"
    name = "computed-tensor-in-parameters"
    message = ("`{target}` is set to a tensor computed on every forward (a non-leaf): after "
               "the model ran (line {ran}), `{model}.parameters()` yields it and the optimizer "
               "built at line {line} raises `ValueError: can't optimize a non-leaf Tensor`; "
               "delete the entry from `_parameters` and set the computed weight as a plain "
               "attribute")
    triggers = ("_parameters",)
    # the write's target `<module>._parameters[...]` spells the word on the statement's lines
    gate_statements = True
    examples = [
        Bad("""
            import torch
            from torch import nn
            class Masked(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)
                    self.raw = nn.Parameter(self.lin.weight.detach().clone())
                def forward(self, x):
                    self.lin._parameters["weight"] = self.raw * (torch.rand(4, 4) > 0.2)
                    return self.lin(x)
            net = Masked()
            net(torch.randn(2, 4))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            """, at=(9, 8)),
        Good("""
            import torch
            from torch import nn
            class Masked(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)
                    self.raw = nn.Parameter(self.lin.weight.detach().clone())
                def forward(self, x):
                    self.lin._parameters["weight"] = self.raw * (torch.rand(4, 4) > 0.2)
                    return self.lin(x)
            net = Masked()
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            net(torch.randn(2, 4))
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        if len(node.targets) != 1 or not _parameters_entry(node.targets[0]) \
                or not _computed(node.value, ctx) or ctx.grad_disabled is not None:
            return
        fn = ctx.function
        cls = file_parents(ctx).get(id(fn)) if fn is not None else None
        if not isinstance(cls, ast.ClassDef) or not _run_by_forward(cls, fn):
            return
        hit = _built_after_run(ctx, cls.name)
        if hit is None:
            return
        ran, build, model = hit
        yield self.report(node, ctx, related=(
            Related(ctx.path, ran.lineno, "the model runs here", ctx.column(ran)),
            Related(ctx.path, build.lineno, "the optimizer is built here", ctx.column(build))),
            target=ctx.source(node.targets[0]), ran=ran.lineno, model=model, line=build.lineno)


def _parameters_entry(t: ast.expr) -> bool:
    return isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) \
        and t.value.attr == "_parameters"


def _computed(v: ast.expr, ctx: Context) -> bool:
    """A torch function's result (not a Parameter constructor) or arithmetic."""
    if isinstance(v, ast.BinOp):
        return True
    if not isinstance(v, ast.Call):
        return False
    q = ctx.qualified_name(v.func) or ""
    return q.startswith("torch.") and not q.endswith("Parameter") and bool(v.args)


def _run_by_forward(cls: ast.ClassDef, fn: ast.AST) -> bool:
    """``fn`` is ``forward`` of ``cls`` or a method ``forward`` calls as ``self.<fn>()``."""
    name = getattr(fn, "name", "")
    if name == "forward":
        return True
    fwd = next((m for m in cls.body if isinstance(m, DEFS) and m.name == "forward"), None)
    return fwd is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name
        and isinstance(n.func.value, ast.Name) and n.func.value.id == "self" for n in walk(fwd))


def _holders(ctx: Context, cls: str) -> set[str]:
    """``cls`` and the classes of the file whose methods assign ``self.x = cls(...)``, to
    any depth."""
    classes = {c.name: c for c in walk(ctx.tree) if isinstance(c, ast.ClassDef)}
    out, todo = {cls}, [cls]
    while todo:
        inner = todo.pop()
        for name, c in classes.items():
            if name not in out and any(
                    isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                    and n.func.id == inner for n in walk(c)):
                out.add(name)
                todo.append(name)
    return out


def _built_after_run(ctx: Context, cls: str) -> tuple[ast.Call, ast.Call, str] | None:
    """(the model call, the optimizer call, the model's name): in one scope, an instance of a
    class holding ``cls`` is called, then an optimizer is built over its ``.parameters()``."""
    holders = _holders(ctx, cls)
    for scope in [ctx.tree, *(n for n in walk(ctx.tree) if isinstance(n, DEFS))]:
        stmts = scope.body  # type: ignore[attr-defined]
        made: set[str] = set()
        ran: dict[str, ast.Call] = {}
        for s in stmts:
            if isinstance(s, (*DEFS, ast.ClassDef)):
                continue  # defined here, not run here
            for n in walk(s):
                if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(
                        n.value.func, ast.Name) and n.value.func.id in holders:
                    made.update(t.id for t in n.targets if isinstance(t, ast.Name))
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                        and n.func.id in made and n.func.id not in ran:
                    ran[n.func.id] = n
                if is_optimizer_call(n, ctx) and n.args:  # type: ignore[union-attr]
                    for a in walk(n.args[0]):  # type: ignore[union-attr]
                        if isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) \
                                and a.func.attr == "parameters" and isinstance(
                                    a.func.value, ast.Name) and a.func.value.id in ran:
                            return ran[a.func.value.id], n, a.func.value.id  # type: ignore
    return None
