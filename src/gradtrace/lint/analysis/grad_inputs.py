"""What a backward pass restricted to one module's parameters runs (NOTE [grad inputs]).

``torch.autograd.grad(loss, m.parameters())`` and ``loss.backward(inputs=list(m.parameters()))``
run only the nodes on the paths from ``loss`` to ``m``'s parameters: ``m``'s nodes and those
after it. A value computed before ``m`` without reading it (the encoder's features that MAML's
inner step feeds to its learner) keeps its saved tensors.
"""
from __future__ import annotations

import ast
from typing import Callable, Iterable

from gradtrace.lint.analysis.reach import reaching, value_of
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted


def parameters_of(e: ast.expr) -> str | None:
    """``m`` for ``m.parameters()``, ``list(m.parameters())``, ``[*m.parameters()]``."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in (
            "list", "tuple") and len(e.args) == 1:
        e = e.args[0]
    elif isinstance(e, (ast.List, ast.Tuple)) and len(e.elts) == 1 \
            and isinstance(e.elts[0], ast.Starred):
        e = e.elts[0].value
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "parameters" and not e.args:
        return dotted(e.func.value)
    return None


def alias_chain(scope: Scope, chain: str, line: int) -> str:
    """``model.quantizer.embed`` for ``vq.embed`` after ``vq = model.quantizer`` (the root's
    one reaching binding an attribute chain), three steps at most."""
    for _ in range(3):
        root, dot, rest = chain.partition(".")
        bs = reaching(scope, root, line)
        v = value_of(bs[0]) if len(bs) == 1 else None
        d = dotted(v) if isinstance(v, (ast.Name, ast.Attribute)) else None
        if not d or d == root:
            return chain
        chain = d + dot + rest
    return chain


def weight_inputs(e: ast.expr, resolve: Callable[[str], str]) -> list[str] | None:
    """``['m.embed.weight', 'm.proj.weight']`` for ``[vq.embed.weight, vq.proj.weight]``
    (or one such attribute) with ``vq`` bound to ``m`` (``resolve``): the parameters the pass
    stops at, each an attribute of a module; None when spelled any other way."""
    items = e.elts if isinstance(e, (ast.List, ast.Tuple)) else [e]
    out = []
    for x in items:
        d = dotted(x) if isinstance(x, ast.Attribute) else None
        if not d:
            return None
        out.append(resolve(d))
    return out or None


def reads_weights(values: Iterable[ast.expr | None], weights: list[str],
                  resolve: Callable[[str], str]) -> bool:
    """Some of ``values`` may run a node on the path to one of ``weights``
    (NOTE [grad inputs]): it calls or reads a module holding the weight (``m(x)``,
    ``m.embed(i)``), the weight's own module or a part of it (``m.embed.weight.t()``). A
    chain that is neither (``m.encoder(x)`` for ``m.proj.weight``) runs no such node."""
    owners = [w.rpartition(".")[0] for w in weights]
    for e in values:
        if e is None:
            continue
        inner = {id(n.value) for n in ast.walk(e) if isinstance(n, ast.Attribute)}
        for n in ast.walk(e):
            if id(n) in inner or not isinstance(n, (ast.Name, ast.Attribute)):
                continue
            d = dotted(n)
            if d is None:
                if isinstance(n, ast.Attribute):
                    continue  # `(x @ w).sum`: the receiver's names are walked on their own
                return True
            c = resolve(d)
            if any(w == c or w.startswith(c + ".") or c == o or c.startswith(o + ".")
                   for w, o in zip(weights, owners)):
                return True
    return False


def reads_module(values: Iterable[ast.expr | None], owner: str) -> bool:
    """Some of ``values`` reads the module ``owner``: a call of it or of a part of it, a read
    of one of its weights (``x @ self.head.weight``)."""
    return any(isinstance(n, (ast.Name, ast.Attribute)) and (
        (d := dotted(n) or "") == owner or d.startswith(owner + "."))
        for e in values if e is not None for n in ast.walk(e))



def runs_on_output(ctx, fns: Iterable[ast.AST], first: str, then: str) -> bool:
    """Whether, in ``fns``, a statement that reads the module ``then`` (a call of it or of a
    part of it, a weight of it) also reads a value computed from ``first`` (through each
    function's assignments): then ``then``'s nodes may lie on the paths from a loss to
    ``first``'s parameters, and a pass with ``inputs=first.parameters()`` runs them
    (NOTE [grad inputs]). ``then`` run on data alone (3DInfomax's 2D model on the molecular
    graph, beside the 3D model on the conformers) is not on those paths. True also when no
    statement of ``fns`` reads ``then`` (it runs elsewhere: unknown)."""
    found = False
    for fn in fns:
        scope = ctx.scope(fn)
        for s in scope.stmts:
            v = getattr(s, "value", None)
            if not isinstance(v, ast.expr):
                if reads_module(_header(s), then):
                    return True  # `for x in then(...)`, `if then(x)...`: not followed
                continue
            if not _runs(v, then):
                continue
            if _handed(v, then):
                return True  # `m = self.critic`, `run(self.critic, h)`: not followed
            found = True
            todo, seen = [v], set()
            while todo:
                e = todo.pop()
                if reads_module([e], first):
                    return True
                for n in ast.walk(e):
                    if isinstance(n, ast.Name) and n.id not in seen:
                        seen.add(n.id)
                        todo.extend(x for b in scope.bindings.get(n.id, ())
                                    if (x := b.value if b.value is not None else getattr(
                                        b.stmt, "value", None)) is not None)
    return not found


def _header(s: ast.stmt) -> list[ast.expr]:
    """The expressions of a statement without its body (a loop's iterable, a test, ...)."""
    out: list[ast.expr] = []
    for _, v in ast.iter_fields(s):
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, ast.expr):
                out.append(x)
            elif isinstance(x, ast.withitem):
                out.append(x.context_expr)
    return out


NOT_RUN = frozenset({"parameters", "named_parameters", "zero_grad", "train", "eval", "to",
                     "cuda", "cpu", "requires_grad_", "state_dict", "load_state_dict"})


def _runs(v: ast.expr, module: str) -> bool:
    """``v`` reads ``module`` other than through a method that runs none of its forward
    (``module.parameters()``, ``module.zero_grad()``)."""
    todo: list[ast.AST] = [v]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in NOT_RUN and dotted(n.func.value) == module:
            todo.extend([*n.args, *(k.value for k in n.keywords)])
            continue
        if isinstance(n, (ast.Name, ast.Attribute)) and (
                (d := dotted(n) or "") == module or d.startswith(module + ".")):
            return True
        todo.extend(ast.iter_child_nodes(n))
    return False


def _handed(v: ast.expr, module: str) -> bool:
    """``module`` itself is a value in ``v`` (bound to a name, handed to a call), not only
    called or read through (``module(x)``, ``module.fc(x)``, ``module.fc.weight``)."""
    parent = {id(c): p for p in ast.walk(v) for c in ast.iter_child_nodes(p)}
    for n in ast.walk(v):
        if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) == module:
            p = parent.get(id(n))
            if not (isinstance(p, ast.Call) and p.func is n or isinstance(p, ast.Attribute)):
                return True
    return False
