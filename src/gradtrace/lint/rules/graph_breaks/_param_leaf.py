"""GT119's ``nn.Parameter(v)`` shape: a value computed in the step made a Parameter on a
module, then the module run, in one function.

# NOTE [parameter made mid-forward]
``layer.weight = nn.Parameter(merged)`` where ``merged`` is computed in the same function
(``sum(alpha_k * slice_k(w))``: ConfigurableOptimizer's weight entangler), followed in that
function by a call whose result the function returns (``out = block(x); return out``): the
Parameter is a new leaf, its values a copy of ``merged`` without the graph, so everything
``merged`` was computed from (the weights, the architecture coefficients) gets no gradient
from that forward. Not reported in ``__init__``, with grad off, for a value made by a torch
factory or through ``.data``/``.detach()`` (a deliberate copy), nor when no forward follows
(a network widened between steps keeps its new leaf on purpose).
"""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk

CUT_ATTRS = frozenset({"data", "detach", "clone", "item", "numpy", "tolist"})
FACTORIES = frozenset({"randn", "rand", "zeros", "ones", "empty", "full", "tensor", "eye",
                       "arange", "linspace", "normal", "zeros_like", "ones_like", "randn_like",
                       "empty_like", "full_like", "as_tensor", "from_numpy", "load"})
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def parameter_mid_forward(node: ast.Call, ctx: Context) -> ast.Call | None:
    """The call after ``X.attr = nn.Parameter(v)`` whose result the function returns, when
    ``v`` is computed in the function (NOTE [parameter made mid-forward]); else None."""
    fn = ctx.function
    s = ctx.statement
    if not isinstance(fn, DEFS) or fn.name == "__init__" or ctx.grad_disabled is not None \
            or len(node.args) != 1 or node.keywords or not isinstance(s, ast.Assign) \
            or s.value is not node or len(s.targets) != 1 \
            or not isinstance(s.targets[0], ast.Attribute) \
            or not isinstance(node.args[0], ast.Name):
        return None
    scope = ctx.scope(fn)
    if not _computed(node.args[0].id, scope, s.lineno, fn, 0):
        return None
    returned = {n.id for r in walk(fn) if isinstance(r, ast.Return) and r.value is not None
                for n in walk(r.value) if isinstance(n, ast.Name)}
    for later in fn.body:
        if later.lineno <= (s.end_lineno or s.lineno) or not isinstance(later, ast.Assign) \
                or len(later.targets) != 1 or not isinstance(later.targets[0], ast.Name) \
                or later.targets[0].id not in returned or not isinstance(later.value, ast.Call):
            continue
        q = ctx.qualified_name(later.value.func) or ""
        if not q.startswith("torch.") and isinstance(later.value.func, (ast.Name, ast.Attribute)):
            return later.value
    return None


def _computed(name: str, scope, line: int, fn: ast.AST, depth: int) -> bool:
    """``name`` holds a value the function computed with arithmetic from other values (a sum
    of products, possibly through a list it appended them to), none of it a copy or a new
    tensor."""
    b = scope.binding_before(name, line)
    if b is None or b.value is None or not isinstance(b.stmt, ast.Assign) or depth > 2:
        return False
    v = b.value
    if any(isinstance(n, ast.Attribute) and n.attr in CUT_ATTRS for n in walk(v)) or any(
            isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name))
            and (n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id) in FACTORIES
            for n in walk(v)):
        return False
    if isinstance(v, ast.BinOp) and isinstance(v.op, (ast.Add, ast.Mult, ast.Sub)):
        return True
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "sum" \
            and len(v.args) == 1 and isinstance(v.args[0], ast.Name):
        lst = v.args[0].id  # `parts = [w * a]; parts.append(...); merged = sum(parts)`
        made = scope.binding_before(lst, b.line)
        elts = list(made.value.elts) if made is not None and isinstance(
            made.value, ast.List) else []
        elts += [n.args[0] for n in walk(fn) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "append"
                 and isinstance(n.func.value, ast.Name) and n.func.value.id == lst
                 and n.args and n.lineno < b.line]
        return bool(elts) and all(isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult)
                                  and not any(isinstance(n, ast.Attribute) and n.attr in
                                              CUT_ATTRS for n in walk(e)) for e in elts)
    return False
