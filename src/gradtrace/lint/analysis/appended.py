"""What an empty container of blocks holds when the code fills it by ``append`` calls.

``self.levels = nn.ModuleList()`` then ``self.levels.append(conv_relu(c))`` in a loop of
``__init__`` holds those blocks (NOTE [module results] reads them as a literal's elements).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def appended_blocks(e: ast.Call, ctx: Context, where: ast.AST | None) -> list[ast.AST]:
    """The ``append`` arguments on the name or ``self`` attribute the empty container ``e`` is
    assigned to, in the same function, when they build one kind of block (the same
    constructor or helper); [] when it is changed any other way there."""
    fn = where or ctx.tree
    target = next((dotted(n.targets[0]) for n in walk(fn) if isinstance(n, ast.Assign)
                   and n.value is e and len(n.targets) == 1), None)
    if target is None:
        return []
    out: list[ast.AST] = []
    for n in walk(fn):
        if isinstance(n, (ast.AugAssign, ast.Assign)) and n.lineno > e.lineno and any(
                dotted(t.value if isinstance(t, ast.Subscript) else t) == target
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])):
            return []  # `self.levels += [...]`, `self.levels[0] = ...`, a new container
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and dotted(n.func.value) == target:
            if n.func.attr != "append" or len(n.args) != 1:
                return []  # extend/insert: not followed
            out.append(n.args[0])
    kinds = {dotted(a.func) if isinstance(a, ast.Call) else None for a in out}
    return out if len(kinds) == 1 and None not in kinds else []  # one kind of block only:
    # a list of mixed layers (convs, then a ReLU) is walked by code that tells them apart


def first_block(e: ast.Call, ctx: Context, where: ast.AST | None) -> ast.AST | None:
    """# NOTE [first appended block]
    ``self.levels = nn.ModuleList()`` then, in ``for i in range(n):``, ``if i == 0:
    self.levels.append(conv_gn_relu(c, c))`` and ``else: self.levels.append(nn.Sequential(
    *layers))``: ``self.levels[0]`` is the block the first pass appends. The statements of the
    function are read in order, each loop's body as its first pass: a test on a ``range``
    loop's variable (``i == 0``, ``not i``, ``i < 1``, ``i > 0``, ``i != 0``; the range
    starting at 0) is decided for that pass, so the arm it skips is skipped; the first
    ``append`` on the container's name reached is element 0. Any other test before it, a
    ``while``, a loop over something else or a change of the container other than ``append``
    (``extend``, ``insert``, ``+=``, a slice store): unknown (None)."""
    fn = where or ctx.tree
    target = next((dotted(n.targets[0]) for n in walk(fn) if isinstance(n, ast.Assign)
                   and n.value is e and len(n.targets) == 1), None)
    if target is None:
        return None
    start = next((s for s in walk(fn) if isinstance(s, ast.Assign) and s.value is e), None)
    if start is None:
        return None
    got = _scan(getattr(fn, "body", []), target, {}, start, [False])
    return got if isinstance(got, ast.AST) else None


_NOT_FOUND = object()


def _scan(body: list[ast.stmt], target: str, zero: dict[str, bool], start: ast.stmt,
          seen: list[bool]) -> object:
    """The first block appended (an AST), None when unknown, ``_NOT_FOUND`` when this body
    appends nothing on its first pass. ``zero``: loop variables at their first value (0);
    ``seen``: whether the container's assignment ``start`` was passed."""
    for s in body:
        if s is start:
            seen[0] = True
            continue
        if not seen[0]:
            if isinstance(s, (ast.For, ast.If, ast.With, ast.Try)) and any(
                    n is start for n in walk(s)):
                pass  # the container is made inside: read on
            else:
                continue
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                and isinstance(s.value.func, ast.Attribute) \
                and dotted(s.value.func.value) == target:
            if s.value.func.attr != "append" or len(s.value.args) != 1:
                return None
            return s.value.args[0]
        touches = any(isinstance(n, ast.Attribute) and dotted(n) == target for n in walk(s)) \
            or any(isinstance(n, ast.Name) and n.id == target for n in walk(s))
        if not touches:
            continue
        if isinstance(s, ast.For):
            var = _range_var(s)
            if var is None:
                return None
            got = _scan(s.body, target, {**zero, var: True}, start, seen)
        elif isinstance(s, ast.If):
            t = _decided(s.test, zero)
            if t is None:
                return None
            got = _scan(s.body if t else s.orelse, target, zero, start, seen)
        elif isinstance(s, ast.With):
            got = _scan(s.body, target, zero, start, seen)
        else:
            return None  # an assignment, a while, a try: not followed
        if got is not _NOT_FOUND:
            return got
    return _NOT_FOUND


def _range_var(s: ast.For) -> str | None:
    """``for i in range(n)`` / ``range(0, n)``: ``i``."""
    it = s.iter
    if not (isinstance(s.target, ast.Name) and isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name) and it.func.id == "range" and it.args
            and not it.keywords and not s.orelse):
        return None
    if len(it.args) > 1 and not (isinstance(it.args[0], ast.Constant) and it.args[0].value == 0):
        return None
    return s.target.id


def _decided(t: ast.expr, zero: dict[str, bool]) -> bool | None:
    """The truth of ``t`` with each loop variable of ``zero`` at 0, or None."""
    if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
        inner = _decided(t.operand, zero)
        return None if inner is None else not inner
    if isinstance(t, ast.Name) and t.id in zero:
        return False
    if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.left, ast.Name) \
            and t.left.id in zero and isinstance(t.comparators[0], ast.Constant) \
            and isinstance(t.comparators[0].value, int):
        k = t.comparators[0].value
        ops = {ast.Eq: 0 == k, ast.NotEq: 0 != k, ast.Lt: 0 < k, ast.LtE: 0 <= k,
               ast.Gt: 0 > k, ast.GtE: 0 >= k}
        return ops.get(type(t.ops[0]))
    return None
