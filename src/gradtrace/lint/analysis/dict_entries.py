"""A dict whose every entry a loop over its own keys has replaced by a number.

``for key, value in loss_dict.items(): loss_dict[key] = value.item()`` (the logging step of
detection and OCR trainers): after that loop, every entry of ``loss_dict`` is a Python number
(or a detached tensor), whatever the dict held before, so a later ``loss_dict['loss']`` keeps
no graph.
"""
from __future__ import annotations

import ast

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

# calls whose result holds no autograd graph, as methods (`v.item()`) or builtins (`float(v)`)
_GRAPHLESS_METHODS = frozenset({"item", "tolist", "detach"})
_GRAPHLESS_BUILTINS = frozenset({"float", "int", "round"})
_EXITS = (ast.Continue, ast.Break, ast.Return, ast.Raise)


def entries_rewritten(fn: ast.AST, name: str, after: int, read: ast.stmt) -> bool:
    """Whether a loop of ``fn`` over the keys of the dict ``name`` (``name.items()``,
    ``name.keys()``, ``name``, also under ``enumerate``), after line ``after`` and before the
    statement ``read``, on every path to ``read`` (its block holds ``read``), stores a
    graphless value (``v.item()``, ``float(v)``, ``v.detach()``) into ``name[key]`` on each
    pass before anything can skip the store."""
    for block in _blocks(fn):
        for i, s in enumerate(block):
            if not isinstance(s, ast.For) or s.lineno <= after or s.end_lineno is None \
                    or s.end_lineno >= read.lineno:
                continue
            if not any(t.lineno <= read.lineno <= (t.end_lineno or t.lineno)
                       for t in block[i + 1:]):
                continue  # the loop's block does not lead to the read
            key = _key_of(s, name)
            if key is not None and _stores_each(s.body, name, key):
                return True
    return False


def _blocks(fn: ast.AST) -> list[list[ast.stmt]]:
    out = []
    for n in walk(fn):
        for field in ("body", "orelse", "finalbody"):
            b = getattr(n, field, None)
            if isinstance(b, list) and b and isinstance(b[0], ast.stmt):
                out.append(b)
    return out


def _key_of(loop: ast.For, name: str) -> str | None:
    """The loop variable that holds the key of ``name`` on each pass."""
    it, target = loop.iter, loop.target
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate" \
            and it.args and isinstance(target, ast.Tuple) and len(target.elts) == 2:
        it, target = it.args[0], target.elts[1]
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args \
            and dotted(it.func.value) == name:
        if it.func.attr == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            target = target.elts[0]
        elif it.func.attr != "keys":
            return None
    elif dotted(it) != name:
        return None
    return target.id if isinstance(target, ast.Name) else None


def _stores_each(body: list[ast.stmt], name: str, key: str) -> bool:
    for s in body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(t := s.targets[0], ast.Subscript) and dotted(t.value) == name \
                and isinstance(t.slice, ast.Name) and t.slice.id == key:
            return _graphless(s.value)
        if any(isinstance(n, _EXITS) for n in walk(s)):
            return False
    return False


def _graphless(e: ast.expr) -> bool:
    if not isinstance(e, ast.Call):
        return False
    f = e.func
    return isinstance(f, ast.Attribute) and f.attr in _GRAPHLESS_METHODS \
        or isinstance(f, ast.Name) and f.id in _GRAPHLESS_BUILTINS
