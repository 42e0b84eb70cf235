"""What the code says it means, read at report time: a module left out of the optimizer on
purpose. ``set(model.parameters()).difference(model.encoder.parameters())``,
``[p for p in model.parameters() if p not in set(model.encoder.parameters())]`` or
``set(all) - set(model.encoder.parameters())`` freeze ``encoder`` by omission: its parameters
still get gradients, but no optimizer is meant to hold them (GT821 stays silent for them)."""
from __future__ import annotations

import ast
from typing import Any


def _parameters_of(node: ast.AST) -> set[str]:
    """Last attribute names of ``X.parameters()`` / ``X.named_parameters()`` calls in ``node``."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr in ("parameters", "named_parameters") and \
                isinstance(n.func.value, ast.Attribute):
            out.add(n.func.value.attr)
    return out


def excluded_modules(tree: ast.AST) -> set[str]:
    """Attribute names of modules whose parameters the file removes from a collection (the
    removed collection written inline or through a name assigned in the file)."""
    values: dict[str, list[ast.AST]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    values.setdefault(t.id, []).append(n.value)
    removed: list[ast.AST] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr == "difference":
            removed.extend(n.args)
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub):
            removed.append(n.right)
        elif isinstance(n, ast.Compare) and any(isinstance(o, ast.NotIn) for o in n.ops):
            removed.extend(n.comparators)
    out: set[str] = set()
    for r in removed:
        for part in [r, *(values.get(r.id, []) if isinstance(r, ast.Name) else [])]:
            out |= _parameters_of(part)
    return out


def left_out_on_purpose(data: Any, names: list[str]) -> bool:
    """Whether every parameter name (``Model.encoder.0.weight``) lies under a module the files
    of the optimizers' steps exclude from the optimizer's parameters (see the module doc)."""
    from gradtrace.runtime.trace.locate import tree_of

    excluded: set[str] = set()
    for path in {r.site.path for r in list(data.optimizers.values()) if r.site is not None}:
        tree = tree_of(path)
        if tree is not None:
            excluded |= excluded_modules(tree)
    return bool(excluded) and all(set(n.split(".")[1:-1]) & excluded for n in names)
