"""What a loss reaches past calls whose effect one file cannot see (NOTE [opaque methods])."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.vocabulary import FORWARD_METHODS
from gradtrace.lint.flow import Binding
from gradtrace.lint.names import dotted
from gradtrace.lint.analysis.cuts import TENSOR_METHODS
from gradtrace.lint.analysis.model_calls import module_like
from gradtrace.lint.analysis.reach import reaching
from gradtrace.lint.analysis.graph_deps import Graphs, followed_value, loads


def known_reach(g: Graphs, expr: ast.AST, line: int, target: Binding) -> bool:
    """Whether ``expr`` reaches ``target`` other than through an argument of another
    file's model method (NOTE [opaque methods])."""
    seen: set[int] = set()
    work: list[tuple[ast.AST, int]] = [(expr, line)]
    while work:
        e, ln = work.pop()
        tops = _loss_terms(e)
        for name, _node in loads(e, g._cut,
                                 lambda c: id(c) in tops and _opaque(g, c, ln)):
            for b in reaching(g.scope, name, ln, prefix=True):
                if b is target:
                    return True
                if id(b) not in seen:
                    seen.add(id(b))
                    v = followed_value(b, g.ctx)
                    if v is not None:
                        work.append((v, b.line))
    return False


def _opaque(g: Graphs, call: ast.Call, line: int) -> bool:
    """# NOTE [opaque methods]
    ``loss = model.discriminator_loss(z)`` on a model whose class is not in this file: a
    method that is not a forward (``encode``, ``forward``...) and whose result is the loss
    itself (a term of it, not an input to a loss function, as ``model.cls_head(f)`` in
    ``ce(model.cls_head(f), y)`` is) may detach what it is given (PyG's
    ``ARGVA.discriminator_loss`` scores ``z.detach()``); a backward of its result is not
    known to run through the graph of ``z``."""
    f = call.func
    if not isinstance(f, ast.Attribute) or f.attr in FORWARD_METHODS \
            or f.attr in TENSOR_METHODS or f.attr == "__call__":
        return False
    owner = dotted(f.value)
    if owner is None or owner == "self" or owner.startswith("self.") \
            or (g.ctx.qualified_name(f) or "").startswith("torch."):
        return False
    k = g.ctx.analysis.kind(f.value, g.scope, line)
    if k is not None and (k.cls or "") in g.ctx.analysis.classes:
        return False  # a class of this file: its method is readable
    return module_like(g.ctx, g.scope, owner, line)


def _loss_terms(e: ast.AST) -> set[int]:
    """The calls ``e`` adds up (``a(x) + 0.5 * b(y)``, ``-a(x)``, ``a(x)`` itself), by id."""
    if isinstance(e, ast.Call):
        return {id(e)}
    if isinstance(e, ast.BinOp):
        return _loss_terms(e.left) | _loss_terms(e.right)
    if isinstance(e, ast.UnaryOp):
        return _loss_terms(e.operand)
    return set()
