"""The mutation operator added in session 51 by recall51a (M37): the loss a training step
backpropagates re-made as a new leaf where it is computed, in the loss function or the loss
module's ``forward`` of the file the step's loss is bound to (docs/triage/recall51a.md):

    M37 loss made a new leaf   the single ``return V`` of the function (or of the
                               ``forward`` of the module class) the step's loss is bound to
                               (``loss = crit(...)``, ``self.crit(...)``, ``crit`` built as
                               ``crit = Cls(...)`` in the file) -> ``return
                               (V).detach().requires_grad_(True)``               GT119

Each yields ``(kind, expected codes "A|B", function, source, lines)`` as ``mutation_ops29``.
"""

import ast

from mutation_ops50a import _helper


def _built_class(tree, call):
    """The module class of the file that the called name (``crit``, ``self.crit``) is built
    from (``crit = Cls(...)``), when the file defines it with a ``forward``."""
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
        and isinstance(f.value, ast.Name) and f.value.id == "self" else None
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    made = {n.value.func.id for n in ast.walk(tree) if isinstance(n, ast.Assign)
            and len(n.targets) == 1 and isinstance(n.value, ast.Call)
            and isinstance(n.value.func, ast.Name) and n.value.func.id in classes
            and (isinstance(n.targets[0], ast.Name) and n.targets[0].id == name
                 or isinstance(n.targets[0], ast.Attribute) and n.targets[0].attr == name)}
    if len(made) != 1:
        return None
    cls = classes[made.pop()]
    fwd = [m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "forward"]
    return fwd[0] if fwd else None


def leaf_ops(src, lines, tree, f, loss_assign):
    """M37 on one training step ``f`` whose loss is bound to ``loss_assign``."""
    if loss_assign is None or not isinstance(loss_assign.value, ast.Call):
        return
    call = loss_assign.value
    g = _helper(tree, call) or _built_class(tree, call)
    rets = [n for n in ast.walk(g) if isinstance(n, ast.Return)] if g is not None else []
    if len(rets) != 1 or g is f or rets[0].value is None:
        return
    v = rets[0].value
    line = lines[v.lineno - 1]
    if v.lineno != v.end_lineno or not line.isascii():
        return
    a, b = v.col_offset, v.end_col_offset
    L = lines[:]
    L[v.lineno - 1] = f"{line[:a]}({line[a:b]}).detach().requires_grad_(True){line[b:]}"
    yield "M37-loss-made-new-leaf", "GT119", f.name, "\n".join(L), {v.lineno}
