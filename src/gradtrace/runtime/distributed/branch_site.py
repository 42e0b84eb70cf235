"""Where a branch the forward never runs was built, for DDP's unused-parameter error.

# NOTE [unrun branch built here]
DDP's "Expected to have finished reduction" names parameters that got no gradient; when their
module never ran, the finding names where that module was assigned in its parent's
``__init__`` (``defined_at``), which finds a module holding the parameter itself. A parameter
deeper down (``blocks.0.aux.0.weight``: a conv inside a small ``nn.Sequential`` subclass the
first block builds but never calls) is owned by a module that is not the one left out: the
branch is the outermost module on the parameter's path that never ran, and the line to change
is where its parent (which ran) built it (build it only where it is used, or tell DDP to look
for unused parameters). The parent's ``__init__`` may assign that attribute on several lines
(``self.aux = nn.Identity()`` in one branch of an ``if``, a layer in the other): the line taken
is the assignment whose value is a call of the branch's own class (the object the name
resolves to in the ``__init__``'s globals, not its spelling). ``None`` when the parent is a
torch container, or no such line is found.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any, Callable

from gradtrace.runtime.frames import Site


def unrun_branch_site(root: Any, name: str, ran: Callable[[Any], bool]) -> Site | None:
    """NOTE [unrun branch built here]: the line that built the outermost never-run module on
    the path of parameter ``name`` of module ``root``, or None."""
    parts = name.split(".")[:-1]
    parent = root
    for i, part in enumerate(parts):
        child = getattr(parent, "_modules", {}).get(part)
        if child is None:
            return None
        if not ran(child):
            return None if i == 0 and parent is root and not ran(root) \
                else _assigned_at(type(parent), part, type(child))
        parent = child
    return None


def _assigned_at(cls: type, attr: str, made: type) -> Site | None:
    if cls.__module__.startswith("torch."):
        return None
    init = cls.__dict__.get("__init__")
    if init is None:
        return None
    try:
        lines, start = inspect.getsourcelines(init)
        path = inspect.getsourcefile(init) or ""
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    scope = getattr(init, "__globals__", {})
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            continue
        if not any(isinstance(t, ast.Attribute) and t.attr == attr
                   and isinstance(t.value, ast.Name) and t.value.id == "self"
                   for t in node.targets):
            continue
        if _resolve(node.value.func, scope) is made:
            return Site(path, start + node.lineno - 1, "__init__")
    return None


def _resolve(node: ast.AST, scope: dict[str, Any]) -> Any:
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in scope:
        return None
    obj = scope[node.id]
    for n in names:
        obj = getattr(obj, n, None)
    return obj
