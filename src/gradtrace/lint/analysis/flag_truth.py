"""What an ``if`` test of a module's ``forward`` is under the constants its constructor gave
(NOTE [module results]): ``self.<attr>`` and ``__init__``'s arguments (``$name``) -> value."""
from __future__ import annotations

import ast

_UNKNOWN = object()


def truth_under(test: ast.expr, flags: dict[str, object]) -> bool | None:
    """``test`` under the constructor's flags: True/False, or None when it depends on more."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        t = truth_under(test.operand, flags)
        return None if t is None else not t
    if isinstance(test, ast.BoolOp):
        vals = [truth_under(v, flags) for v in test.values]
        want = isinstance(test.op, ast.Or)
        if want in vals:
            return want
        return None if None in vals else not want
    v = _flag(test, flags)
    if v is not _UNKNOWN:
        try:
            return bool(v)
        except TypeError:  # an enum member (NOTE [enum flags])
            return None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        a, b = _flag(test.left, flags), _flag(test.comparators[0], flags)
        if a is _UNKNOWN or b is _UNKNOWN:
            return None
        op = test.ops[0]
        try:
            if isinstance(op, (ast.Eq, ast.Is)):
                return a == b
            if isinstance(op, (ast.NotEq, ast.IsNot)):
                return a != b
            if isinstance(op, ast.In):
                return a in b  # type: ignore[operator]
            if isinstance(op, ast.NotIn):
                return a not in b  # type: ignore[operator]
            if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b)):
                return {ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b,  # type: ignore[operator]
                        ast.GtE: a >= b}[type(op)]  # type: ignore[operator]
        except TypeError:
            return None
    return None


def _flag(e: ast.expr, flags: dict[str, object]) -> object:
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)) and all(
            isinstance(x, ast.Constant) for x in e.elts):
        return tuple(x.value for x in e.elts)  # type: ignore[attr-defined]
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        return flags.get(e.attr, flags.get("$self." + e.attr, _UNKNOWN))
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name):  # ``Kind.FIXED``
        return flags.get(f"{e.value.id}.{e.attr}", flags.get(  # (NOTE [enum flags])
            f"${e.value.id}.{e.attr}", _UNKNOWN))  # ``args.flag`` (NOTE [arms of one flag])
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Attribute):
        d = _chain(e)  # ``self.hps.shared_value`` (NOTE [arms of one flag])
        return _UNKNOWN if d is None else flags.get("$" + d, _UNKNOWN)
    if isinstance(e, ast.Name):  # an argument of ``__init__`` (:func:`constructor_values`)
        return flags.get("$" + e.id, _UNKNOWN)
    return _UNKNOWN


def _chain(e: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    return ".".join([e.id, *reversed(parts)]) if isinstance(e, ast.Name) else None
