"""A list of graph values copied by ``torch.tensor`` inside a loss that stays live elsewhere.

# NOTE [rebuilt beside a live value]
``torch.tensor([t1, t2])`` (``torch.Tensor``, ``torch.as_tensor``, ``Variable``) of values that
carry a graph builds a new leaf: each element is read as a Python number (torch 2.13 warns
"Converting a tensor with requires_grad=True to a scalar"), and no gradient reaches what made
them. The loss-path analysis (NOTE [loss paths]) reports such a copy when a whole term of the
loss is cut. Two shapes keep the term live and hide the copy; :func:`rebuilt_parts` reads them
inside a live term of a loss, through the names it reads (bound in the same function):

* the copy is added to (or subtracted from) a live value: ``pos / (pos + neg)`` with
  ``neg = torch.sum(torch.tensor([self.dist(f, k) for k in negatives]))``, a contrastive
  regulariser whose negatives never push (PCT-Net's ``losses.py``): the sum needs both
  operands' gradients, and the copy's is lost;
* the copy is what a name holds on one path, while another binding reaching the same read is
  live: ``if perm is None: loss = torch.stack([...]).min(0)[0]`` / ``else: loss =
  torch.tensor([criterion(a, b) for ...])`` (ESPnet's PIT solver): on that path the loss is a
  constant.

Only a copy of a list, tuple or comprehension whose elements carry a graph counts (the "list of
loss terms"); a copy that scales (``w * loss``, ``loss / torch.tensor([n1, n2]).sum()``) is a
weight and is never reported, nor a copy of data (``torch.tensor([0.5, 2.0])``).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import REBUILD, Cut

if TYPE_CHECKING:
    from gradtrace.lint.analysis.origins import Tracer

SEQUENCES = (ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp)
MAX_NAMES = 3  # names followed back from the term


def rebuilt_parts(t: Tracer, term: ast.expr, use: ast.stmt | None, line: int
                  ) -> tuple[Cut, ...]:
    """NOTE [rebuilt beside a live value]: the copies of a list of graph values that a live
    ``term`` (read at ``line`` in ``use``) adds to a live value, or holds on one path."""
    if not _spells_copy(t):
        return ()
    found: list[Cut] = []
    seen: set[int] = set()
    _visit(t, term, use, line, 0, found, seen)
    return tuple(dict.fromkeys(found))


def _spells_copy(t: Tracer) -> bool:
    """The function's code spells a copy call (``tensor(``, ``Tensor(``, ``Variable(``): the
    names followed are the function's own, so the copy is there (cached per function)."""
    node, ctx = t.scope.node, t.ctx

    def spelled() -> bool:
        if node is ctx.tree:
            text = ctx.code
        else:
            text = "\n".join(ctx.code_lines[node.lineno - 1:node.end_lineno])  # type: ignore
        return any(w in text for w in ("tensor(", "Tensor(", "Variable("))
    return ctx.memo("rebuilt-parts-spelled", node, spelled)


def _visit(t: Tracer, e: ast.expr, use: ast.stmt | None, line: int, depth: int,
           found: list[Cut], seen: set[int]) -> None:
    stack: list[ast.AST] = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                          ast.GeneratorExp)):
            continue  # (their names are their own)
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub)):
            for a, b in ((n.left, n.right), (n.right, n.left)):
                c = _rebuilt(t, a, use, line)
                if c is not None and t.trace(b, use, line).live:
                    found.append(c)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and depth < MAX_NAMES:
            bs = [b for b in t.bindings_at(n.id, use, line) if id(b) not in seen]
            seen.update(id(b) for b in bs)
            if len(bs) > 1:
                traces = [(b, t.binding_trace(b)) for b in bs]
                if any(tr.live for _, tr in traces):
                    for b, tr in traces:
                        c = _rebuilt(t, b.value, b.stmt, b.line) if b.value is not None \
                            and not tr.live else None
                        if c is not None:
                            found.append(c)
            for b in bs:
                if b.value is not None:
                    _visit(t, b.value, b.stmt, b.line, depth + 1, found, seen)
            continue
        stack.extend(ast.iter_child_nodes(n))


def _rebuilt(t: Tracer, e: ast.expr | None, use: ast.stmt | None, line: int) -> Cut | None:
    """The copy of a list of graph values ``e`` is made from, when all ``e`` carries is cut by
    such copies (``torch.sum(torch.tensor([...]))``, a name bound to one)."""
    if e is None:
        return None
    tr = t.trace(e, use, line)
    if tr.live or not tr.cuts or any(c.kind != REBUILD for c in tr.cuts):
        return None
    for c in tr.cuts:
        call = c.node
        if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], SEQUENCES):
            return c
    return None
