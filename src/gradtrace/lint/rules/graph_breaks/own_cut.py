"""GT117: a module reads its own trained Parameter only through `.data` / `.detach()`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.analysis.param_attrs import only_cut_reads, read_kind, trained_parameter
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import parent_map, walk
from gradtrace.lint.rule import Bad, Good, Rule


class ParameterReadOnlyCut(Rule):
    """A module registers a Parameter in `__init__` and its methods read it only through
    `.data` or `.detach()` (`torch.matmul(X, self.weight.data) + self.bias.data`).

    Why: `.data` and `.detach()` hand back the values without the graph. What `forward`
    computes from them has no path back to the Parameter: it never gets a gradient and the
    optimizer never moves it, silently; when every parameter of the network is read this way
    the loss has no `grad_fn` and `backward()` raises `element 0 of tensors does not require
    grad and does not have a grad_fn` (d2l-ai/d2l-en#2600, checked on torch 2.13). Use the
    Parameter itself.
    Known limits: the Parameter must be assigned once in `__init__` (`nn.Parameter(...)`,
    not `requires_grad=False`) in a file that calls `backward()` and freezes nothing; a
    class that reads it live anywhere, or updates it by hand (an in-place op, a write through
    `.data`, an EMA), and a file that reads the attribute live outside the class, are left
    alone (NOTE [parameters read only cut]).
    """

    code = "GT117"
    name = "parameter-read-only-cut"
    message = ("`{read}` is the only way the module reads its Parameter `self.{attr}`: the "
               "values come without the graph, so `self.{attr}` never gets a gradient and "
               "never trains; use `self.{attr}` itself")
    triggers = (".data", ".detach(")
    examples = [
        Bad("""
            import torch
            from torch import nn

            class MyLinear(nn.Module):
                def __init__(self, n, m):
                    super().__init__()
                    self.weight = nn.Parameter(torch.randn(n, m))

                def forward(self, x):
                    return x @ self.weight.data

            net = MyLinear(4, 2)
            net(torch.randn(3, 4)).sum().backward()
            """, at=(10, 19)),
        Good("""
            import torch
            from torch import nn

            class MyLinear(nn.Module):
                def __init__(self, n, m):
                    super().__init__()
                    self.weight = nn.Parameter(torch.randn(n, m))

                def forward(self, x):
                    self.norm = self.weight.data.norm()
                    return x @ self.weight

            net = MyLinear(4, 2)
            net(torch.randn(3, 4)).sum().backward()
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions(".backward("):
            return  # a Parameter trains only in a file that runs backward (trained_parameter)
        cls = ctx.analysis.classes.get(node.name)
        if cls is None or cls.node is not node or not cls.is_module:
            return
        for attr in sorted(_cut_attrs(cls)):
            origin = trained_parameter(ctx, cls, attr)
            if origin is None:
                continue
            read = only_cut_reads(ctx, cls, attr)
            if read is None or _read_outside(ctx, cls, attr):
                continue
            cut = read
            yield self.report(cut, ctx, related=[Related(
                ctx.path, origin.lineno, f"`self.{attr}` is made a Parameter here",
                ctx.column(origin))], read=ctx.source(cut), attr=attr)


def _cut_attrs(cls: ClassInfo) -> set[str]:
    """``<attr>`` of every ``self.<attr>.data`` / ``self.<attr>.detach`` in the class."""
    return {n.value.attr for n in walk(cls.node) if isinstance(n, ast.Attribute)
            and n.attr in ("data", "detach") and isinstance(n.value, ast.Attribute)
            and isinstance(n.value.value, ast.Name) and n.value.value.id == "self"}


def _read_outside(ctx: Context, cls: ClassInfo, attr: str) -> bool:
    """The file reads ``<obj>.<attr>`` live outside the class (not ``self.<attr>`` of
    another class, not through ``.data``/``.detach()``/a shape read, not given to a
    ``torch.nn.init`` function nor written: initialisation)."""
    inside = {id(n) for n in walk(cls.node)}
    parents: dict[int, ast.AST] = ctx.memo("parent-map", ctx.tree, lambda: parent_map(ctx.tree))
    for n in walk(ctx.tree):
        if isinstance(n, ast.Attribute) and n.attr == attr and id(n) not in inside \
                and not (isinstance(n.value, ast.Name) and n.value.id == "self") \
                and read_kind(n, parents)[0] == "live":
            p = parents.get(id(n))
            if isinstance(p, ast.Call) and (ctx.qualified_name(p.func) or "").startswith(
                    "torch.nn.init."):
                continue
            return True
    return False
