"""What a container literal built in ``__init__`` holds, however it is spelled (GT401-GT403).

# NOTE [container spellings]
``self.layers = [nn.Linear(...) for _ in range(n)]`` was read as a list of layers; the same
list spelled ``list(nn.Linear(...) for _ in range(n))``, ``list([nn.Linear(a, w)] + [nn.Linear(w,
w) for _ in range(d)])`` or ``tuple([...])`` was not, so a stack of layers kept in a plain list
went unreported. ``list(...)`` / ``tuple(...)`` of one literal, comprehension or generator holds
its elements; ``a + b`` of such lists holds the elements of both. (``list(name)`` of a local or
an argument is another fact: the local lists and the callers, read by the rule.)
"""
from __future__ import annotations

import ast


def container_elements(value: ast.AST) -> tuple[str, list[ast.AST]] | None:
    """("list" | "dict", the element expressions) of a container literal, or None."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id in ("list", "tuple") and len(value.args) == 1 and not value.keywords:
        inner = value.args[0]  # `list(<generator>)`, `list([...] + [...])`
        if isinstance(inner, (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp, ast.BinOp)):
            value = inner
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        left, right = container_elements(value.left), container_elements(value.right)
        if left is not None and right is not None and left[0] == right[0] == "list":
            return "list", left[1] + right[1]
        return None
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):  # `[block] * 8`
        value = value.left if isinstance(value.left, ast.List) else value.right
    if isinstance(value, (ast.List, ast.Tuple)):
        return "list", list(value.elts)
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        return "list", [value.elt]
    if isinstance(value, ast.Dict):
        return "dict", [v for v in value.values if v is not None]
    if isinstance(value, ast.DictComp):
        return "dict", [value.value]
    return None


def rewraps(value: ast.AST, attr: str) -> bool:
    """``self.<attr> = list(self.<attr>)`` (or ``tuple``): the same plain container again, after
    ``self.<attr> = []`` and its appends (NOTE [container spellings])."""
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
        value.func.id in ("list", "tuple") and len(value.args) == 1 and not value.keywords \
        and isinstance(a := value.args[0], ast.Attribute) and a.attr == attr and \
        isinstance(a.value, ast.Name) and a.value.id == "self"
