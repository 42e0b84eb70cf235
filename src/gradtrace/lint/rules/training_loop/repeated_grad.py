"""GT538: a loop differentiates, pass after pass, one value made before it, freeing its graph on
the first pass."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.steps import backward_of
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.rule import Bad, Good, Rule

_LEAVE = (ast.Break, ast.Return, ast.Raise)
_BLOCKS = (ast.With, ast.AsyncWith, ast.Try)


def _names(e: ast.expr | None) -> list[ast.Name] | None:
    """``loss`` or ``[a, b]`` / ``(a, b)``: the plain names differentiated (None otherwise)."""
    if isinstance(e, ast.Name):
        return [e]
    if isinstance(e, (ast.List, ast.Tuple)) and e.elts \
            and all(isinstance(x, ast.Name) for x in e.elts):
        return list(e.elts)  # type: ignore[arg-type]
    return None


def _own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of ``body``, not those of functions or classes defined in it."""
    todo: list[ast.AST] = list(body)
    while todo:
        n = todo.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if not isinstance(c, (*FUNCTION_TYPES, ast.ClassDef, ast.Lambda)):
                todo.append(c)


def _changed(n: ast.AST, wanted: set[str]) -> bool:
    """``n`` binds one of ``wanted`` (``out = ...``, a loop target), writes into it
    (``out[i] = ...``, ``out += ...``) or calls a method of it (``grads.append(g)``,
    ``out.detach_()``): the value differentiated may change from pass to pass."""
    if isinstance(n, ast.Name):
        return n.id in wanted and not isinstance(n.ctx, ast.Load)
    if isinstance(n, ast.Subscript) and not isinstance(n.ctx, ast.Load) \
            or isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
        v = n.value if isinstance(n, ast.Subscript) else n.func.value  # type: ignore[union-attr]
        return isinstance(v, ast.Name) and v.id in wanted
    return False


def _runs_every_pass(loop: ast.stmt, stmt: ast.stmt) -> bool:
    """``stmt`` sits in ``loop``'s body itself or in a ``with``/``try`` there (not under an
    ``if`` of the loop, which may pick one pass)."""
    body: list[ast.stmt] | None = loop.body  # type: ignore[attr-defined]
    while body is not None:
        inner = None
        for s in body:
            if s is stmt:
                return True
            if isinstance(s, _BLOCKS) and s.lineno <= stmt.lineno <= (s.end_lineno or 0):
                inner = s.body
                break
        body = inner
    return False


def _more_than_once(loop: ast.stmt) -> bool:
    """Not a loop spelt to run once: ``range(1)``, a one-element literal."""
    if isinstance(loop, ast.While):
        return not (isinstance(loop.test, ast.Constant) and not loop.test.value)
    it = loop.iter  # type: ignore[attr-defined]
    if isinstance(it, (ast.List, ast.Tuple, ast.Set)):
        return len(it.elts) > 1 or any(isinstance(x, ast.Starred) for x in it.elts)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" \
            and it.args and all(isinstance(a, ast.Constant) for a in it.args):
        try:
            return len(range(*[a.value for a in it.args])) > 1  # type: ignore[misc]
        except (TypeError, ValueError):
            return False
    return True


class GradientRepeatedOverFreedGraph(Rule):
    """A loop calls `torch.autograd.grad(out, ...)` (or `out.backward(retain_graph=False)`)
    on every pass, with `out` made before the loop and never
    remade in it, and without `retain_graph=True`.

    Why: a backward pass frees the graph it runs through unless `retain_graph=True` (the
    default is `create_graph`, False). The first pass of the loop frees the graph of `out`;
    the second differentiates the same tensor again and raises `RuntimeError: Trying to
    backward through the graph a second time (or directly access saved tensors after they have
    already been freed)` (checked on torch 2.13). It is the shape of Hutchinson probes of a
    Hessian (`for _ in range(n_samples): torch.autograd.grad(grads, params,
    grad_outputs=z, retain_graph=False)`), of Jacobian rows taken one output at a time, of a
    loss backpropagated once per inner step: correct with one pass (a default of 1), failing
    as soon as the count is raised. Pass `retain_graph=True` on every pass but the last
    (`retain_graph=i < n - 1`), or recompute `out` inside the loop.
    Calling `grad`/`backward` on `out` says it has a graph; the loop must be able to run more
    than once (not `range(1)`), leave no pass early (`break`, `return`, `raise` in it), run
    the call on every pass (not under an `if` of the loop), and neither rebind `out` nor change
    it (`out[i] = ...`, `grads.append(g)`); reading it (`torch.zeros_like(out)`) is fine.
    A plain `out.backward()` (or `torch.autograd.backward(out)`) in such a loop is GT507's (it
    names the line that made `out`).
    Known limits: a graph that saved no tensor (`(2 * w).sum()`) can be run again, and is
    reported all the same; the value must be a plain name (or a list of names) of the
    function.
    """

    code = "GT538"
    name = "gradient-repeated-over-freed-graph"
    message = ("`{call}` runs on every pass of this loop over `{name}`, made once before it "
               "(line {line}), without `retain_graph=True`: the first pass frees its graph and "
               "the second raises 'Trying to backward through the graph a second time'; pass "
               "`retain_graph=True` on all passes but the last, or compute `{name}` inside "
               "the loop")
    triggers = ("grad", "backward")
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def hessian_probes(loss, params, n):
                grads = torch.autograd.grad(loss, params, create_graph=True)
                est = [torch.zeros_like(p) for p in params]
                for _ in range(n):
                    zs = [torch.randn_like(p) for p in params]
                    hz = torch.autograd.grad(grads, params, grad_outputs=zs)
                    est = [e + h * z / n for e, h, z in zip(est, hz, zs)]
                return est
            """, at=(8, 13)),
        Good("""
            import torch

            def hessian_probes(loss, params, n):
                grads = torch.autograd.grad(loss, params, create_graph=True)
                est = [torch.zeros_like(p) for p in params]
                for i in range(n):
                    zs = [torch.randn_like(p) for p in params]
                    hz = torch.autograd.grad(grads, params, grad_outputs=zs,
                                             retain_graph=i < n - 1)
                    est = [e + h * z / n for e, h, z in zip(est, hz, zs)]
                return est
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        stmt = ctx.statement
        if stmt is None or not isinstance(node.func, ast.Attribute) \
                and not isinstance(node.func, ast.Name):
            return
        b = backward_of(node, ctx, stmt)
        if b is None or b.retains or b.accumulates and not any(
                k.arg == "retain_graph" for k in node.keywords):
            return  # `loss.backward()` in a loop over a loss of before: GT507's
        names = _names(b.loss)
        if not names:
            return
        scope = ctx.scope()
        loops = scope.loops_of(stmt)
        if not loops:
            return
        loop = loops[-1]
        if not _more_than_once(loop) or not _runs_every_pass(loop, stmt) \
                or any(isinstance(n, _LEAVE) for n in _own_nodes(loop.body)):  # type: ignore
            return
        wanted = {n.id for n in names}
        if any(n is not node and _changed(n, wanted) for n in _own_nodes([loop])):
            return  # remade (or changed in place) in the loop
        first = names[0].id
        made = scope.binding_before(first, loop.lineno)
        if made is None:
            return
        yield self.report(node, ctx, related=[Related(
            ctx.path, made.line, f"`{first}` is made here, once", ctx.column(made.stmt))],
            call=ctx.source(node.func) + "(...)", name=ctx.source(b.loss), line=made.line)
