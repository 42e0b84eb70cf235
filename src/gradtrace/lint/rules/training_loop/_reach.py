"""What a loss reaches past calls whose effect one file cannot see (NOTE [opaque methods]), and
which optimizers' models a backward() reaches (NOTE [two optimizers] in step_early.py)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.vocabulary import FORWARD_METHODS
from gradtrace.lint.flow import Binding
from gradtrace.lint.names import dotted
from gradtrace.lint.analysis.cuts import DETACHING_METHODS, TENSOR_METHODS
from gradtrace.lint.analysis.model_calls import module_like
from gradtrace.lint.analysis.reach import reaching
from gradtrace.lint.analysis.graph_deps import (
    VALUE_OF_OBJECT, Graphs, followed_value, graphs, loads)
from gradtrace.lint.nodes import child_nodes

if TYPE_CHECKING:
    from gradtrace.lint.rules.training_loop._loop import Backward, LoopFacts, Step


def known_reach(g: Graphs, expr: ast.AST, line: int, target: Binding) -> bool:
    """Whether ``expr`` reaches ``target`` other than through an argument of another
    file's model method (NOTE [opaque methods]), or through an element a function hands back
    with no history (``new_points.detach()``: :meth:`.Graphs.plain_result`)."""
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
                    if g.plain_result(b):
                        continue  # a helper hands it back with no history (NOTE [helper results])
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
            or f.attr in TENSOR_METHODS or f.attr in VALUE_OF_OBJECT:
        return False  # (`dist.log_prob(a)`: a density, computed from the distribution)
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


def _reached(f: LoopFacts, b: Backward, owners: frozenset[str], inner: bool = False
             ) -> set[str]:
    """The owners (``model``, ``self.net``) whose call the loss of ``b`` is computed from,
    through the bindings of the function; ``inner``: also an owner that is a submodule of a
    called module (``G(x)`` runs ``G.features``, an optimizer built over
    ``G.features.parameters()``)."""
    if b.loss is None:
        return set()
    values: list[ast.AST] = [b.loss]
    g = graphs(f.scope)
    deps = list(g.deps(b.loss, b.stmt.lineno).bindings)
    for st in _element_stores(f.scope.node, {d.name for d in deps}):
        values.append(st.value)  # `losses[i] = (losses[i] * weights[i]).sum()`
        deps.extend(g.deps(st.value, st.lineno).bindings)
    for d in deps:
        v = d.value if d.value is not None else _unpacked_from(d)
        if v is not None:
            values.append(v)
    out: set[str] = set()
    for v in values:
        for n in _live_calls(v):
            d = dotted(n.func) or ""
            out.update(o for o in owners if d == o or d.startswith(o + ".")
                       or inner and d and o.startswith(d + "."))
            for w in _wrapped(f, d) if d else ():
                out.update(o for o in owners if w == o or w.startswith(o + "."))
    return out


def _wrapped(f: LoopFacts, d: str) -> frozenset[str]:
    """The models a called object wraps: the names handed to the call that builds it
    (``self.flow = MeanFlow(self.actor, ...)``, in the class's methods for ``self.<x>``, in
    the function otherwise): calling ``self.flow`` runs ``self.actor``, whose optimizer a loss
    computed from ``self.flow(...)`` reaches."""
    cls = f.ctx.class_def if d.startswith("self.") and d.count(".") == 1 else None
    where = cls if cls is not None else f.node if "." not in d else None
    if where is None:
        return frozenset()

    def make() -> dict[str, frozenset[str]]:
        out: dict[str, set[str]] = {}
        for n in ast.walk(where):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.value, ast.Call) and (t := dotted(n.targets[0])):
                for a in (*n.value.args, *(k.value for k in n.value.keywords)):
                    got = dotted(a)
                    if got and got != "self" and (got.startswith("self.") or "." not in got):
                        out.setdefault(t, set()).add(got)
        return {k: frozenset(v) for k, v in out.items()}
    return f.ctx.memo("reach-wrapped", where, make).get(d, frozenset())


def _element_stores(fn: ast.AST, names: set[str]) -> list[ast.Assign]:
    """``name[i] = value`` statements of ``fn`` for the list/dict ``names`` a loss is summed
    from (``bprloss = sum(losses)``): each stored value is part of what the loss reads."""
    return [n for n in ast.walk(fn) if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in names
        for t in n.targets)]


def _unpacked_from(d: Binding) -> ast.expr | None:
    """The call a name unpacked from its result comes from: ``mag, pha = G(x)`` binds
    ``mag`` to an output of ``G`` (a binding with no value of its own)."""
    st = d.stmt
    if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and any(
            isinstance(t, (ast.Tuple, ast.List)) and any(
                isinstance(e, ast.Name) and e.id == d.name for e in ast.walk(t))
            for t in st.targets):  # nested too: ``_, (h, c) = lstm(x)``
        return st.value
    return None


def _live_calls(v: ast.AST) -> Iterator[ast.Call]:
    """The calls of ``v`` whose result keeps its history in ``v``: not those under a detaching
    method (``fake = aG(z).detach()``, improved-wgan-pytorch's critic pass: the critic's loss
    read from ``fake`` does not reach ``aG``) nor under ``.data``."""
    stack = [v]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Attribute) and n.attr == "data":
            continue
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and n.func.attr in DETACHING_METHODS:
                stack.extend(n.args)
                stack.extend(k.value for k in n.keywords)
                continue
            yield n
        stack.extend(child_nodes(n))


def for_another(f: LoopFacts, b: Backward, s: Step) -> bool:
    """NOTE [two optimizers]: the loss of ``b`` is computed from the models of other
    optimizers stepped in the function and from none of ``s``'s (both known)."""
    from gradtrace.lint.rules.training_loop._loop import _owners, _stepped_expr

    mine = _owners(f, _stepped_expr(s), s.call.lineno)
    if not mine or _reached(f, b, mine):
        return False
    others: frozenset[str] = frozenset().union(*(
        _owners(f, _stepped_expr(s2), s2.call.lineno) for s2 in f.steps
        if s2.optimizer != s.optimizer))
    return bool(others) and bool(_reached(f, b, others))
