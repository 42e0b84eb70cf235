"""What a function does with its arguments, read from its calls: which ones it feeds to a
model (its input data) and which ones it hands to a torch loss function as the prediction.
Pure functions of one scope (cached on the context)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import MOVES, is_functional_loss
from gradtrace.lint.analysis.vocabulary import is_model_name
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope



def loss_inputs(scope: Scope, ctx: Context) -> frozenset[str]:
    """Names the function hands to a torch loss function as its *input* (first argument:
    ``F.cross_entropy(y, pseudo_labels)``): a prediction whatever its name, as a target never
    goes there."""
    def make() -> frozenset[str]:
        out = set()
        for node in walk(scope.node):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name) \
                    and is_functional_loss(ctx.qualified_name(node.func) or ""):
                out.add(node.args[0].id)
        return frozenset(out)
    return ctx.memo("arg-roles-loss-inputs", scope.node, make)


def model_fed(scope: Scope) -> set[str]:
    """Names the function passes first to a callee named like a model (``self.model(x)``,
    ``net(inputs)``), and the names they were bound from through moves (``x = batch_data``,
    ``x = x.to(device).float()``)."""
    fed = set()
    for node in walk(scope.node):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name) and \
                is_model_name(dotted(node.func) or ""):
            fed.add(node.args[0].id)
    todo = list(fed)
    while todo:
        for b in scope.bindings.get(todo.pop(), ()):
            v = b.value
            while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and \
                    v.func.attr in MOVES:
                v = v.func.value
            if isinstance(v, ast.Name) and v.id not in fed:
                fed.add(v.id)
                todo.append(v.id)
    return fed
