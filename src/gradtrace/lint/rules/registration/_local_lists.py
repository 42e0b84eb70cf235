"""GT401's local lists: a function's locals bound only to lists of layers, and empty containers."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.list_elements import container_elements as _elements
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.registration._modules import statements


def _is_empty(value: ast.AST) -> str | None:
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult) \
            and isinstance(value.left, ast.List) \
            and all(isinstance(e, ast.Constant) and e.value is None for e in value.left.elts):
        return "list"  # [None] * n, filled by index
    if isinstance(value, ast.List) and not value.elts:
        return "list"
    if isinstance(value, ast.Dict) and not value.keys:
        return "dict"
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and not value.args \
            and not value.keywords and value.func.id in ("list", "dict"):
        return value.func.id
    return None


def _local_lists(func: ast.FunctionDef) -> dict[str, tuple[list[ast.AST], ast.stmt]]:
    """Locals of ``func`` bound only to lists (``layers = []``, ``layers.append(x)``,
    ``layers += [...]``), with their elements, unless also handed to a call or starred
    (``nn.Sequential(*layers)`` registers the same layers)."""
    out: dict[str, tuple[list[ast.AST], ast.stmt]] = {}
    bad: set[str] = set()
    for n in statements(func):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if not isinstance(t, ast.Name):
                    continue
                got = _elements(n.value)
                if len(n.targets) != 1 or (got is None and _is_empty(n.value) != "list"):
                    bad.add(t.id)
                elif t.id not in out:
                    out[t.id] = (list(got[1]) if got else [], n)
                else:
                    out[t.id][0].extend(got[1] if got else [])
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and \
                n.target.id in out:
            got = _elements(n.value)
            out[n.target.id][0].extend(got[1] if got else [n.value])
    if not out:
        return out
    for n in walk(func):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                f.value.id in out and f.attr in ("append", "extend", "insert") and n.args:
            got = _elements(n.args[-1])
            out[f.value.id][0].extend(got[1] if got and f.attr == "extend" else [n.args[-1]])
            continue
        if isinstance(f, ast.Name) and f.id in ("list", "tuple", "len"):
            continue  # `self.x = list(layers)`, `len(layers)`
        for a in [*n.args, *(k.value for k in n.keywords)]:
            bad.update(x.id for x in walk(a) if isinstance(x, ast.Name) and x.id in out)
    return {k: v for k, v in out.items() if k not in bad}
