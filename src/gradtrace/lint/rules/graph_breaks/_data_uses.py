"""When a `.data` in what `forward` returns cuts no layer from the module's output (GT105).

# NOTE [deliberate data]
``h = self.layer(x)`` then ``h.data`` in a value ``forward`` returns is a cut of every layer
before it, unless the code shows the layer trains anyway or nothing is lost:
- the `.data` only feeds metadata: ``type(x.data)``, ``x.data.size()``, ``x.data.shape``;
- the same value ``h`` is also read with its history elsewhere in the function (Faster R-CNN's
  RPN feeds ``rpn_bbox_pred.data`` to the proposal layer and ``rpn_bbox_pred`` to its loss):
  the layer gets its gradient there, and the `.data` path is a stop-gradient on purpose (not
  when the statement rebinds ``h`` itself, ``state = state.data``, or a loop around it
  rebinds ``h`` from what the statement made: a recurrent state cut between steps);
- what the statement computes from it is read only inside ``.detach()`` afterwards
  (``Variable(grid).detach()``): the code cuts that path itself;
- ``x`` is narrowed by ``if isinstance(x, PackedSequence):`` (NOTE [narrowed to an object]):
  its `.data` is the object's field, not ``Tensor.data``;
- the `.data` value only gives indices or a boolean (``t.data.max(1)[1]``, pseudo-labels as
  argmax): no gradient flows through an index, with or without `.data`;
- the statement runs only under ``if flag:`` on a parameter of the function whose default is
  ``False`` (``forward(..., normalize_outputs=False)``: a mode the caller asks for, an
  inference-time output, PPUU's policies): the default call keeps its history.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import FRESH_METHODS, NO_HISTORY_METHODS
from gradtrace.lint.analysis.narrowed import narrowed_to_object
from gradtrace.lint.analysis.selectors import only_indices
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes, walk

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope

META_ATTRS = frozenset({"shape", "dtype", "device", "is_cuda", "ndim", "type", "new"}) | \
    FRESH_METHODS
META_FUNCS = frozenset({"type", "isinstance", "len", "id"})


def deliberate_data(node: ast.Attribute, stmt: ast.Assign, scope: Scope) -> bool:
    """Whether ``node`` (``x.data`` in ``stmt``) cuts no layer (NOTE [deliberate data])."""
    parents = _parents(stmt)
    if _meta(node, parents) or only_indices(node, parents):
        return True
    op = node.value
    if isinstance(op, ast.Name) and _read_live(op.id, scope, stmt, exclude=node):
        return True
    if isinstance(op, ast.Name) and narrowed_to_object(op.id, stmt, scope, scope.ctx):
        return True  # NOTE [narrowed to an object]: `x.data` of a PackedSequence
    if _opt_in(stmt, scope.node):
        return True
    target = stmt.targets[0]
    return isinstance(target, ast.Name) and _only_detached(target.id, scope, stmt)


def _opt_in(stmt: ast.stmt, fn: ast.AST) -> bool:
    """``stmt`` lies in the body of ``if flag:`` where ``flag`` is a parameter of ``fn`` whose
    default is ``False`` (NOTE [deliberate data])."""
    a = getattr(fn, "args", None)
    if a is None:
        return False
    pos = [*a.posonlyargs, *a.args]
    defaults = {**{x.arg: d for x, d in zip(pos[len(pos) - len(a.defaults):], a.defaults)},
                **{x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}}
    off = {n for n, d in defaults.items() if isinstance(d, ast.Constant) and d.value is False}
    return any(isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id in off
               and any(stmt is x for b in n.body for x in walk(b)) for n in walk(fn))


def _parents(root: ast.AST) -> dict[int, ast.AST]:
    return {id(c): p for p in walk(root) for c in child_nodes(p)}


def _meta(n: ast.AST, parents: dict[int, ast.AST]) -> bool:
    p = parents.get(id(n))
    if isinstance(p, ast.Call) and n in p.args:
        return dotted(p.func) in META_FUNCS
    return isinstance(p, ast.Attribute) and p.attr in META_ATTRS


COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
            ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _uses(name: str, scope: Scope, after: int = 0):
    """(statement, Name node, parents) for each read of ``name`` in the function (a compound
    statement: in its header only; its body's statements come on their own)."""
    for s in scope.stmts:
        if s.lineno < after:
            continue
        if isinstance(s, COMPOUND):
            heads = [getattr(s, "test", None), getattr(s, "iter", None),
                     *(i.context_expr for i in getattr(s, "items", ()))]
        else:
            heads = [s]
        for h in heads:
            if h is None:
                continue
            parents = _parents(h)
            for n in walk(h):
                if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
                    yield s, n, parents


def _under_cut(n: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """``n`` is read through ``.data``, inside a ``.detach()``/``.item()`` receiver, or for
    metadata only."""
    child, p = n, parents.get(id(n))
    if _meta(n, parents) or (isinstance(p, ast.Attribute) and p.attr == "data"):
        return True
    while p is not None:
        if isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute) \
                and p.func.attr in NO_HISTORY_METHODS and child is p.func:
            return True
        child, p = p, parents.get(id(p))
    return False


def _read_live(name: str, scope: Scope, stmt: ast.stmt, exclude: ast.AST) -> bool:
    """``name`` (as bound when ``stmt`` runs) is read with its history somewhere else."""
    b = scope.binding_before(name, stmt.lineno)
    if b is None:
        return False
    # `state = state.data.clone()`: the name holds the cut value from here on, so only a read
    # before it (of the value it cut: VQ's commitment loss, then the straight-through
    # `q = (q.data - x.detach()).add_(x)`) can be live; a loop around rebinds it (below)
    own = any(x.stmt is stmt for x in scope.bindings.get(name, ()))
    loops = {id(lp) for lp in scope.loops_of(stmt)}
    made = {t.id for t in ast.walk(stmt) if isinstance(t, ast.Name)
            and isinstance(t.ctx, ast.Store)}
    if any(loops & {id(lp) for lp in scope.loops_of(x.stmt)} and _carries(x.stmt, stmt, made)
           for x in scope.bindings.get(name, ())):
        return False  # rebound in the loop around: a read may see the cut value of a pass
    for s, n, parents in _uses(name, scope):
        if n is exclude.value or _under_cut(n, parents):  # type: ignore[attr-defined]
            continue
        if own and s.lineno >= stmt.lineno:
            continue
        if scope.binding_before(name, s.lineno) is b or (
                s is not stmt and s.lineno == stmt.lineno):
            return True
    return False


def _carries(rebind: ast.stmt, stmt: ast.stmt, made: set[str]) -> bool:
    """Whether the loop's rebinding ``rebind`` of the name can hand the next pass what ``stmt``
    computed from the cut: it is ``stmt`` itself, or reads a name ``stmt`` binds (``out =
    cell(x, h.data)``, then ``h = out``). VQ's ``f_hat = f_hat + h`` reads no name of ``loss
    = loss + mse(f_hat.data, f) + mse(f_hat, f_ng)``: the cut only feeds the loss."""
    if rebind is stmt:
        return True
    return any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in made
               for n in ast.walk(rebind))


def _only_detached(name: str, scope: Scope, stmt: ast.stmt) -> bool:
    """Every later read of ``name`` is inside a ``.detach()`` (and there is one)."""
    uses = [(s, n, p) for s, n, p in _uses(name, scope, after=stmt.lineno + 1)]
    return bool(uses) and all(_under_cut(n, p) and not _meta(n, p) for _, n, p in uses)
