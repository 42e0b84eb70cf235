"""GT613: an in-place layer (`nn.ReLU(inplace=True)`, a block starting with one) given an
output of split/chunk/unbind of a tensor that carries a graph."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.input_writes import first_layer as inplace_first_layer
from gradtrace.lint.analysis.input_writes import spells_inplace_layer
from gradtrace.lint.analysis.multi_views import MultiViews
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import says_any
from gradtrace.lint.rules.inplace.multi_view import (
    SPLIT_WORDS, InplaceWriteToMultiOutputView, _may_split)
from gradtrace.lint.rules.inplace.out_arg import _callers_all_grad_off


def _layer_calls(fn: ast.AST, writers: frozenset[str]) -> list[ast.Call]:
    """``self.<w>(x)`` calls in ``fn`` of an attribute ``w`` that writes its input."""
    return [n for n in walk(fn) if isinstance(n, ast.Call) and n.args
            and isinstance(n.func, ast.Attribute) and n.func.attr in writers
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"]


class InplaceLayerOnMultiOutputView(Rule):
    """A layer that writes its input in place (`nn.ReLU(inplace=True)`, `nn.LeakyReLU(0.2,
    True)`, `nn.Dropout(p, inplace=True)`, a block starting with one) is given a piece of
    `split`/`chunk`/`unbind` of a tensor that carries a graph: `dit, rest =
    torch.split(self.conv(x), (16, 48), dim=1); out = self.relu(rest)`.

    Why: the pieces are views of one tensor, and autograd refuses an in-place write into any
    of them while grad is enabled: the layer raises `RuntimeError: Output 1 of SplitBackward0
    is a view and is being modified inplace. This view is the output of a function that
    returns multiple views. Such functions do not allow the output views to be modified
    inplace.` at the first forward pass with gradients (NOTE [multi-output views]; checked on
    torch 2.13; ESRGCNN's `self.ReLU(remain1)`). The same layer on the whole tensor, or on a
    piece under `no_grad`, runs. Build the layer with `inplace=False` (or give it
    `piece.clone()`). The functional spellings (`F.relu_(q)`, `F.relu(q, inplace=True)`) are
    GT608's.
    Known limits: the layer is an attribute of the module class, assigned once
    (NOTE [input written in place]); the piece is found as GT608 finds one.
    """

    code = "GT613"
    name = "inplace-layer-on-multi-output-view"
    message = ("`{name}` is a view made by `{how}` (line {line}) of a tensor that carries a "
               "graph, and this layer writes its input in place: it raises 'This view is the "
               "output of a function that returns multiple views ... do not allow the output "
               "views to be modified inplace'; build the layer with `inplace=False`")
    triggers = ("inplace", "True)")
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            class Distill(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(8, 8, 3, padding=1)
                    self.act = nn.ReLU(inplace=True)

                def forward(self, x):
                    kept, rest = torch.split(self.conv(x), (2, 6), dim=1)
                    rest = self.act(rest)
                    return torch.cat([kept, rest], dim=1)
            """, at=(12, 15)),
        Good("""
            import torch
            import torch.nn as nn

            class Distill(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(8, 8, 3, padding=1)
                    self.act = nn.ReLU(inplace=True)

                def forward(self, x):
                    kept, rest = torch.split(self.act(self.conv(x)), (2, 6), dim=1)
                    return torch.cat([kept, rest], dim=1)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if not spells_inplace_layer(ctx) or not says_any(ctx, node, SPLIT_WORDS):
            return
        for cls in ctx.analysis.classes.values():
            if not cls.is_module:
                continue
            writers = frozenset(a for a, info in cls.attrs.items() if not info.later
                                and inplace_first_layer(info.value, info.method, ctx))
            for mname, fn in cls.methods.items() if writers else ():
                calls = _layer_calls(fn, writers) if mname != "__init__" else []
                if not calls or not _may_split(fn, ctx):
                    continue
                views = ctx.memo("gt608-views", fn, lambda: MultiViews(fn, ctx))
                for call in calls:
                    stmt = views.scope.statement_of(call)
                    line = stmt.lineno if stmt is not None else call.lineno
                    made = views.view_of_split(call.args[0], line)
                    if made is not None and views.scope.grad_off_at(call) is None \
                            and not ctx.memo("gt608-callers-off", fn,
                                             lambda: _callers_all_grad_off(ctx, fn)):
                        yield InplaceWriteToMultiOutputView._emit(  # type: ignore[misc]
                            self, call, call.args[0], made, ctx)
