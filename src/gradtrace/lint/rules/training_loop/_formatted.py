"""Whether a later use of a GT505 accumulator only prints or logs it (its fix is then safe)."""
from __future__ import annotations

import ast

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

FORMAT_FUNCS = frozenset({"print", "str", "float", "round", "format", "repr"})
LOG_METHODS = frozenset({"info", "debug", "warning", "error", "log", "add_scalar", "write",
                         "set_postfix", "set_description", "format"})


def ctx_names(stmt: ast.stmt) -> set[str]:
    """Dotted names used in a statement's own expressions (not its nested body)."""
    out: set[str] = set()
    for field, value in ast.iter_fields(stmt):
        if field in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, ast.AST):
                out.update(dotted(n) or "" for n in walk(v)
                           if isinstance(n, (ast.Name, ast.Attribute)))
    return out


def only_formatted(stmt: ast.stmt, acc: str) -> bool:
    """Every use of ``acc`` in ``stmt`` is printed, logged or formatted."""
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return isinstance(stmt, ast.AugAssign) and dotted(stmt.target) == acc \
            and acc not in {dotted(n) for n in walk(stmt.value)}
    func = stmt.value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in FORMAT_FUNCS and name not in LOG_METHODS:
        return False
    for n in walk(stmt.value):
        if isinstance(n, ast.Call) and n is not stmt.value and isinstance(n.func, ast.Attribute) \
                and dotted(n.func.value) == acc:
            return False  # a method of the accumulator: acc.item(), acc.cpu()
    return True
