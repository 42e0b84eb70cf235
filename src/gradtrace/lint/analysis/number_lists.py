"""An attribute list a class fills with Python numbers only.

# NOTE [list of numbers on self]
``self.record = []`` in ``__init__`` and a reset, ``self.record.append(loss.item())`` in the
method that computes each batch's loss: the list holds Python floats, the record of what
was logged. ``np.array(self.record)`` of it (an average loss for the epoch's report) takes
no tensor through NumPy: there is no graph to cut. The attribute must be written in the
class's methods only as an empty (or all-number) list display and by ``append`` of a number
by its making (``.item()``, ``float()``/``int()``, a numeric constant, ``.size()[i]``/
``.shape[i]``/``len()``); any other write (``+=``, ``extend``, an index store, a store
outside the class) gives no fact.
"""
from __future__ import annotations

import ast

from gradtrace.lint.nodes import walk

NUMBER_METHODS = frozenset({"item", "size", "numel", "dim"})


def holds_numbers(cls: ast.ClassDef, attr: str) -> bool:
    """Every write of ``self.attr`` in ``cls`` keeps it a list of Python numbers
    (NOTE [list of numbers on self])."""
    seen = False
    for n in walk(cls):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    base = e.value if isinstance(e, ast.Subscript) else e
                    if _is_attr(base, attr):
                        if not (isinstance(n, ast.Assign) and e is t and isinstance(
                                n.value, ast.List) and all(_number(v) for v in n.value.elts)):
                            return False
                        seen = True
        elif isinstance(n, ast.Attribute) and n.attr in ("append", "extend", "insert") \
                and _is_attr(n.value, attr):
            call = next((c for c in walk(cls) if isinstance(c, ast.Call) and c.func is n), None)
            if call is None or n.attr != "append" or len(call.args) != 1 \
                    or not _number(call.args[0]):
                return False
    return seen


def _is_attr(e: ast.AST, attr: str) -> bool:
    return isinstance(e, ast.Attribute) and e.attr == attr and isinstance(e.value, ast.Name) \
        and e.value.id == "self"


def _number(e: ast.expr) -> bool:
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
    if isinstance(e, ast.Subscript):  # `pred.size()[0]`, `x.shape[0]`
        v = e.value
        return isinstance(v, ast.Attribute) and v.attr == "shape" or isinstance(
            v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "size"
    if not isinstance(e, ast.Call):
        return False
    f = e.func
    if isinstance(f, ast.Name):
        return f.id in ("float", "int", "len")
    return isinstance(f, ast.Attribute) and f.attr in NUMBER_METHODS
