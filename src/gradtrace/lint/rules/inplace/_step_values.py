"""The values GT601 (an optimizer step between two backwards) follows: what a binding is made of,
which names a value reads, whether a backward retains its graph, a graph input kept from an
earlier iteration."""
from __future__ import annotations

import ast
import builtins

from gradtrace.lint.context import Context
from gradtrace.lint.flow import GRAPH
from gradtrace.lint.names import dotted
from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.nodes import child_nodes, walk


CUT_CALLS = ("detach", "item", "tolist", "numpy")
MOVES = ("to", "cuda", "cpu", "float", "double", "half", "train", "eval")


def _built_here(v: ast.AST | None, ctx: Context) -> bool:
    """``Classifier(dim, sizes, st_ed)``: an object of a class of this file, called or whose
    method is called: its parameters are new ones (a stepped model handed to it is still
    seen, as an argument of that call), and what it was built from (tab-ddpm's ``st_ed``
    from a config argument, its ``Sampler(train_data, info)``) is settings, not a graph."""
    while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and \
            v.func.attr in MOVES:  # `Classifier(...).to(device)`
        v = v.func.value
    return isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and \
        v.func.id in ctx.analysis.classes


def _made_of(b):  # type: ignore[no-untyped-def]
    """What ``b``'s value is made of: its value, or for a name bound by a ``for`` loop
    (``for epoch in range(self.epochs)``, no value of its own) the iterable it walks."""
    v = value_of(b)
    if v is None and isinstance(b.stmt, (ast.For, ast.AsyncFor)):
        return b.stmt.iter
    return v


def _bindings_of(e: ast.AST | None, line: int, scope, keep) -> dict:  # type: ignore[no-untyped-def]
    """The bindings (by id) ``e`` is computed from, through the function, those ``keep``
    accepts (a few levels)."""
    out: dict = {}
    todo = [(e, line, 0)]
    while todo:
        v, at, depth = todo.pop()
        for n in _live_nodes(v) if v is not None else ():
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                b = scope.binding_before(n.id, at)
                if b is not None and id(b) not in out and keep(b) and b.line < at:
                    out[id(b)] = b
                    if depth < 4 and value_of(b) is not None:
                        todo.append((value_of(b), b.line, depth + 1))
    return out


def _listed_tensors(made: ast.AST | None) -> frozenset[str]:
    """The dotted names of an optimizer built over a list of tensors (``[self.log_alpha]``):
    a loss reaches them only by reading them."""
    if not isinstance(made, ast.Call) or not made.args or \
            not isinstance(made.args[0], (ast.List, ast.Tuple)):
        return frozenset()
    names = [dotted(e) for e in made.args[0].elts]
    return frozenset(n for n in names if n) if all(names) else frozenset()


def _live_nodes(e: ast.AST) -> list[ast.AST]:
    """The nodes of ``e`` outside the receivers of ``.detach()``/``.item()``/``.data`` and
    the arguments of ``torch.from_numpy``."""
    out, todo = [], [e]
    while todo:
        n = todo.pop()
        out.append(n)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr in CUT_CALLS:
            todo.extend(n.args)
            continue
        if isinstance(n, ast.Attribute) and n.attr == "data" or isinstance(n, ast.Call) and \
                (dotted(n.func) or "").endswith("from_numpy"):
            continue  # (a NumPy array holds no graph)
        todo.extend(child_nodes(n))
    return out


def _retains(call: ast.Call) -> bool:
    return any(k.arg == "retain_graph" and isinstance(k.value, ast.Constant)
               and k.value.value is True for k in call.keywords)


def _stale_graph_input(b, loop: ast.stmt, scope, depth: int = 0):  # type: ignore[no-untyped-def]
    """The statement inside ``loop`` that uses a tensor whose graph was built before the loop,
    on the way to the loss bound by ``b`` (``output = D(fake)``; ``err = -output.mean()``), or
    None."""
    for n in walk(b.value):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            nb = scope.binding_before(n.id, b.line)
            if nb is None or nb.no_grad:
                continue
            if nb.line < loop.lineno and (
                    nb.kind == GRAPH or nb.kind is None and _model_call(nb.value, scope)):
                return b.stmt, n.id
            if nb.line >= loop.lineno and nb.value is not None and depth < 3 \
                    and loop in scope.loops_of(nb.stmt):
                got = _stale_graph_input(nb, loop, scope, depth + 1)
                if got is not None:
                    return got
    return None


def _model_call(e: ast.AST | None, scope) -> bool:  # type: ignore[no-untyped-def]
    """``encoder(x)`` / ``self.backbone(x)``: a call of something that may hold parameters
    (not a torch/NumPy function, a builtin, a method of a tensor, or the constructor of a
    class of this file)."""
    if not isinstance(e, ast.Call):
        return False
    q = scope.ctx.qualified_name(e.func) or ""
    if q.startswith(("torch.", "numpy.", "np.", "math.")) or q in dir(builtins):
        return False
    if isinstance(e.func, ast.Name) and e.func.id in scope.ctx.analysis.classes:
        return False  # `loss_fn = PhysicsLoss(dx)`: builds an object of this file, runs nothing
    from gradtrace.lint.analysis.project import foreign_class
    if foreign_class(scope.ctx, e.func) is not None:
        return False  # a class of another file of the project (NOTE [project index]) too
    return isinstance(e.func, ast.Name) or q.startswith("self.") and q.count(".") == 1
