"""What the code does with a GT505 accumulator after its loop: only prints or logs it (the fix
is then safe), or reads it as NumPy (so it carries no graph)."""
from __future__ import annotations

import ast

from gradtrace.lint.names import dotted
from gradtrace.lint.rules.training_loop._loop import LoopFacts
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


def read_as_numpy(f: LoopFacts, acc: str, loop: ast.stmt) -> bool:
    """After ``loop``, the collected values are turned into NumPy without a ``detach()``
    (``torch.cat(reprs).cpu().numpy()``): ``Tensor.numpy()`` raises on a tensor that requires
    grad, so the code itself says they carry no graph (computed under a ``no_grad`` the
    model's own method holds, in another file). So does a NumPy function given the collection
    itself (``np.mean(precision_list)``): NumPy converts each element with ``Tensor.numpy()``
    (checked on torch 2.13: ``np.mean``, ``np.array``, ``np.stack``, ``np.sum`` raise on a
    list of tensors that require grad)."""
    end = loop.end_lineno or loop.lineno
    for stmt in f.scope.stmts:
        if stmt.lineno <= end:
            continue
        for n in walk(stmt):
            if isinstance(n, ast.Call) and (f.ctx.qualified_name(n.func) or "").startswith(
                    "numpy.") and any(dotted(a) == acc for a in n.args) \
                    and f.scope.grad_off_at(stmt) is None:
                return True
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "numpy" and not n.args):
                continue
            inner = list(walk(n.func.value))
            if any(dotted(x) == acc for x in inner if isinstance(x, (ast.Name, ast.Attribute))) \
                    and not any(isinstance(x, ast.Attribute) and x.attr in ("detach", "data")
                                for x in inner) and f.scope.grad_off_at(stmt) is None:
                return True
    return False
