"""The mutation operators added in session 50 by recall50a (M35, M36; recall50b's are M33, M34 in
mutation_ops50.py): a term cut inside a loss helper the step backpropagates, and a term cut
in a sum the step reduces at its backward.

M14 turns the last term of the step's own summed loss into a number; these move the same cut
where the terms are not the step's own loss expression (docs/triage/recall50a.md):

    M35 item in a loss helper  ``return a + b`` of the function the step's loss is bound
                               to (``loss = crit(...)``, ``self.crit(...)``) ->
                               ``return a + (b).item()``                             GT102
    M36 detach in a reduced    ``loss = a + b`` with ``loss.mean().backward()`` /
        sum                    ``loss.sum().backward()`` -> ``loss = a + (b).detach()`` GT107

Each yields ``(kind, expected codes "A|B", function, source, lines)`` as ``mutation_ops29``.
"""

import ast


def _last_term(v):
    """The right operand of a summed expression of at least two terms, not a constant."""
    if isinstance(v, ast.BinOp) and isinstance(v.op, (ast.Add, ast.Sub)) \
            and not isinstance(v.right, ast.Constant) and v.lineno == v.end_lineno:
        return v.right
    return None


def _wrapped(lines, node, method):
    line = lines[node.lineno - 1]
    if not line.isascii():
        return None
    a, b = node.col_offset, node.end_col_offset
    L = lines[:]
    L[node.lineno - 1] = f"{line[:a]}({line[a:b]}).{method}(){line[b:]}"
    return "\n".join(L)


def _helper(tree, call):
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
        and isinstance(f.value, ast.Name) and f.value.id == "self" else None
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    return found[0] if len(found) == 1 else None


def helper_ops(src, lines, tree, f, b, loss_assign):
    """M35 and M36 on one training step ``f`` (backward statement ``b``)."""
    if loss_assign is not None and isinstance(loss_assign.value, ast.Call):
        g = _helper(tree, loss_assign.value)
        rets = [n for n in ast.walk(g) if isinstance(n, ast.Return)] if g is not None else []
        t = _last_term(rets[0].value) if len(rets) == 1 and g is not f else None
        text = _wrapped(lines, t, "item") if t is not None else None
        if text is not None:
            yield "M35-item-in-loss-helper", "GT102", f.name, text, {t.lineno}
    tgt = b.value.func.value
    if isinstance(tgt, ast.Call) and isinstance(tgt.func, ast.Attribute) \
            and tgt.func.attr in ("mean", "sum") and isinstance(tgt.func.value, ast.Name):
        name = tgt.func.value.id
        assigns = [n for n in ast.walk(f) if isinstance(n, ast.Assign) and n.lineno < b.lineno
                   and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                   and n.targets[0].id == name]
        a = max(assigns, key=lambda n: n.lineno) if assigns else None
        t = _last_term(a.value) if a is not None else None
        text = _wrapped(lines, t, "detach") if t is not None else None
        if text is not None:
            yield "M36-detach-in-reduced-sum", "GT107", f.name, text, {t.lineno}
