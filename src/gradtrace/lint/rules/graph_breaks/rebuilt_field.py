"""GT155: a class rebuilds one of its own tensor fields from a number or a detached copy of it,
and the file backpropagates that field of an instance."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.steps import backward_loss
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import of_types
from gradtrace.lint.rule import Bad, Good, Rule

# builders of a tensor that keep no history of what they are given (a tensor argument is copied)
NEW_TENSOR = frozenset({"torch.tensor", "torch.Tensor", "torch.FloatTensor", "numpy.array",
                        "numpy.asarray"})
NUMBER_CASTS = frozenset({"float", "int", "bool"})
CUT_METHODS = frozenset({"item", "tolist", "detach", "numpy", "cpu_numpy"})
INIT_METHODS = frozenset({"__post_init__", "__init__", "__attrs_post_init__"})


def _cut(e: ast.AST, ctx: Context) -> bool:
    """``e`` hands on its operand without history: a number cast, ``.item()``, ``.detach()``,
    ``.data``, ``.numpy()``, ``torch.tensor(...)`` (``torch.as_tensor`` of a tensor is that
    tensor: not a cut)."""
    if isinstance(e, ast.Attribute):
        return e.attr == "data"
    if not isinstance(e, ast.Call):
        return False
    if isinstance(e.func, ast.Name) and e.func.id in NUMBER_CASTS:
        return True
    if isinstance(e.func, ast.Attribute) and e.func.attr in CUT_METHODS:
        return True
    return (ctx.call_name(e) or "") in NEW_TENSOR


def _only_through_cuts(e: ast.AST, hit, ctx: Context) -> bool:  # type: ignore[no-untyped-def]
    """``e`` reads what ``hit`` matches, and every such read sits under a cut (:func:`_cut`)."""
    found = False
    todo: list[tuple[ast.AST, bool]] = [(e, False)]
    while todo:
        n, under = todo.pop()
        if hit(n):
            if not under:
                return False
            found = True
            continue
        under = under or _cut(n, ctx)
        todo.extend((c, under) for c in ast.iter_child_nodes(n))
    return found


class FieldRebuiltWithoutGraph(Rule):
    """A class rebuilds its own tensor field without history, and the file backpropagates it.

    Why: `self.loss = torch.as_tensor(float(self.loss))` in a dataclass's `__post_init__` (or
    `self.loss = torch.tensor(loss.item())` in `__init__`) replaces the tensor the model
    computed with a new one made from a Python number (or a `.detach()`/`.data` copy): it has
    no `grad_fn`. Every object of the class then carries a loss without graph, and
    `out.loss.backward()` raises `RuntimeError: element 0 of tensors does not require grad and
    does not have a grad_fn` (pytorch-facts.md#python-number-loss). Keep the tensor (convert
    only a copy for logging: `self.loss_value = float(self.loss)`).
    Known limits: the field is rebuilt in `__post_init__`/`__init__` from itself (or from the
    `__init__` parameter of its name), and a `.backward()` of the file is called on an attribute
    of that name of an object the class builds (or that a call returns), or on a name bound once
    to it (`loss = out.loss`, or its `.mean()`/`.sum()`).
    """

    code = "GT155"
    gate_statements = "function"
    name = "field-rebuilt-without-graph"
    message = ("`{target}` is rebuilt without history (`{value}`): `{sink}` (line {line}) "
               "backpropagates a tensor with no graph")
    triggers = ("__post_init__", "__init__")
    examples = [
        Bad("""
            from dataclasses import dataclass
            import torch

            @dataclass
            class Output:
                logits: torch.Tensor
                loss: torch.Tensor

                def __post_init__(self):
                    self.loss = torch.as_tensor(float(self.loss))

            def train_step(model, x, y, opt):
                logits = model(x)
                out = Output(logits, torch.nn.functional.cross_entropy(logits, y))
                out.loss.backward()
                opt.step()
            """, at=(10, 20)),
        Good("""
            from dataclasses import dataclass
            import torch

            @dataclass
            class Output:
                logits: torch.Tensor
                loss: torch.Tensor

                def __post_init__(self):
                    self.loss_value = float(self.loss)
                    self.loss = torch.as_tensor(self.loss)

            def train_step(model, x, y, opt):
                logits = model(x)
                out = Output(logits, torch.nn.functional.cross_entropy(logits, y))
                out.loss.backward()
                opt.step()
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        fn = ctx.function
        if not isinstance(fn, FUNCTION_TYPES) or fn.name not in INIT_METHODS or \
                not fn.args.args or len(node.targets) != 1 or not ctx.mentions("backward"):
            return  # (a file with no backward has no sink: asked before any walk)
        me, t = fn.args.args[0].arg, node.targets[0]
        if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                and t.value.id == me):
            return
        field = t.attr
        own = field in [a.arg for a in fn.args.args[1:] + fn.args.kwonlyargs]

        def hit(n: ast.AST) -> bool:
            return (isinstance(n, ast.Attribute) and n.attr == field and isinstance(n.value, ast.Name)
                    and n.value.id == me) or (own and isinstance(n, ast.Name) and n.id == field)
        if not _only_through_cuts(node.value, hit, ctx):
            return
        cls = ctx.analysis.class_of(fn)
        if cls is None:
            return
        sink = _field_backward(cls.node.name, field, ctx)
        if sink is None:
            return
        yield self.report(node.value, ctx, target=ctx.source(t), value=ctx.source(node.value),
                          sink=ctx.source(sink), line=sink.lineno, related=(Related(
                              ctx.path, sink.lineno, f"`{ctx.source(sink)}` backpropagates it",
                              ctx.column(sink)),))


def _field_backward(cls: str, field: str, ctx: Context) -> ast.Call | None:
    """A backward of the file on ``<x>.<field>`` itself (``out.loss.backward()``), in a file
    that builds an object of class ``cls``."""
    calls = of_types(ctx.tree, (ast.Call,))
    if not any(isinstance(c.func, ast.Name) and c.func.id == cls for c in calls):
        return None
    for c in calls:
        loss = backward_loss(c, ctx)
        if isinstance(loss, ast.Attribute) and loss.attr == field:
            return c
    for c, _, outer in call_sites(ctx, "backward"):  # `loss = out.loss`, then `loss.backward()`
        loss = backward_loss(c, ctx)
        if not isinstance(loss, ast.Name):
            continue
        where = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), ctx.tree)
        b = ctx.scope(where).binding_before(loss.id, c.lineno)
        v = b.value if b is not None else None
        while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and \
                v.func.attr in ("mean", "sum") and not v.args and not v.keywords:
            v = v.func.value  # a reduction of it carries no graph either
        if isinstance(v, ast.Attribute) and v.attr == field and \
                len(ctx.scope(where).bindings.get(loss.id, ())) == 1:
            return c
    return None
