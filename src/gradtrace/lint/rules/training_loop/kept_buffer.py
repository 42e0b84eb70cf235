"""GT577: a buffer made before the loop keeps values with their graph, sampled for each
backward of the loop."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.training_loop.kept_list import _graph_value

# calls that make an empty container a loop can fill
EMPTY_MAKERS = frozenset({"list", "collections.deque", "deque"})
# methods of a container that empty it or drop what it holds
EMPTYING = frozenset({"clear", "pop", "popleft"})


class GraphKeptInBuffer(Rule):
    """A buffer (a list or `deque` made before the loop) keeps values with their autograd graph
    (a model's output appended with grad on), and each backward of the loop reads values drawn
    from the buffer: the next backward reaches the ones the last one already went through.

    Why: `backward()` frees the graph of every value it goes through; a value appended in an
    earlier iteration and drawn again (a replay buffer sampled at random, a window of the last
    outputs) brings its freed graph into the next loss, and backward raises "Trying to backward
    through the graph a second time" (checked on torch 2.13; after an optimizer step it is
    "modified by an inplace operation" with `retain_graph=True`). Store `.detach()`ed values
    (or inputs) in the buffer and run the model again on the sampled batch.
    Known limits: the buffer is a name bound once before the loop to an empty `[]`, `list()`
    or `deque(...)`; the append and the backward sit in the same loop, the loss reads the
    buffer through the names of its function (`random.sample(memory, n)`, a comprehension);
    a rebinding, `clear()`, `pop` or `del` of the buffer inside the loop silences it.
    """

    code = "GT577"
    name = "graph-kept-in-buffer"
    message = ("`{buf}` keeps `{value}` with its autograd graph, and the loss backpropagated on "
               "line {backward} reads values drawn from `{buf}`: a value kept from an earlier "
               "iteration goes through a graph the last backward freed; store it detached and "
               "run the model again on the sample")
    triggers = ("append",)
    gate_statements = "function"
    examples = [
        Bad("""
            import random
            import torch
            import torch.nn as nn
            net = nn.Linear(4, 2)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            buffer = []
            for t in range(20):
                out = net(torch.randn(4))
                buffer.append((out, random.random()))
                if len(buffer) >= 4:
                    batch = random.sample(buffer, 4)
                    loss = torch.stack([o.sum() * r for o, r in batch]).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            """, at=(9, 4)),
        Good("""
            import random
            import torch
            import torch.nn as nn
            net = nn.Linear(4, 2)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            buffer = []
            for t in range(20):
                x = torch.randn(4)
                buffer.append((x, net(x).detach(), random.random()))
                if len(buffer) >= 4:
                    batch = random.sample(buffer, 4)
                    loss = torch.stack([net(x).sum() * r for x, _, r in batch]).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr in ("append", "appendleft")
                and len(node.args) == 1 and isinstance(f.value, ast.Name)) \
                or not ctx.mentions("backward"):
            return
        where = ctx.function or ctx.tree  # a backward after the append, before any scope is built
        if not any(ln > node.lineno for ln in ctx.memo("gt577-backwards", where, lambda: [
                c.lineno for c in of_types(where, (ast.Call,)) if isinstance(c.func, ast.Attribute)
                and c.func.attr == "backward"])):
            return
        scope = ctx.scope()
        buf = f.value.id
        loops = scope.loops_of(node)
        if not loops or not _made_before(scope, buf, loops[-1], ctx):
            return
        loop = loops[-1]
        if _emptied_in(loop, buf) or not _graph_value(node.args[0], scope, ctx, node.lineno):
            return
        back = next((c for c in walk(loop) if isinstance(c, ast.Call)
                     and isinstance(c.func, ast.Attribute) and c.func.attr == "backward"
                     and c.lineno > node.lineno and loops[-1] in scope.loops_of(c)
                     and _reads(scope, c.func.value, buf, c.lineno)), None)
        if back is None:
            return
        yield self.report(node, ctx, related=[Related(
            ctx.path, back.lineno, "the loss over values drawn from it is backpropagated here",
            ctx.column(back))], buf=buf, value=ctx.source(node.args[0]), backward=back.lineno)


def _made_before(scope: Scope, buf: str, loop: ast.stmt, ctx: Context) -> bool:
    """``buf`` is bound once, before ``loop``, to an empty container."""
    bs = scope.bindings.get(buf, ())
    if len(bs) != 1 or bs[0].line >= loop.lineno:
        return False
    v = bs[0].value
    if isinstance(v, ast.List):
        return not v.elts
    return isinstance(v, ast.Call) and not v.args and (
        ctx.qualified_name(v.func) or dotted(v.func) or "") in EMPTY_MAKERS


def _emptied_in(loop: ast.stmt, buf: str) -> bool:
    for n in walk(loop):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in EMPTYING and dotted(n.func.value) == buf:
            return True
        if isinstance(n, ast.Delete) and any(buf in {x.id for x in walk(t) if isinstance(
                x, ast.Name)} for t in n.targets):
            return True
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(t, ast.Name) and t.id == buf for t in targets):
                return True
    return False


def _reads(scope: Scope, e: ast.expr, buf: str, line: int) -> bool:
    """``e`` (read at ``line``) is computed from ``buf``, through the bindings before it (six
    steps back)."""
    todo, seen = [(e, line, 0)], set()
    while todo:
        x, at, depth = todo.pop()
        for n in walk(x):
            if not isinstance(n, ast.Name) or (n.id, at) in seen:
                continue
            if n.id == buf:
                return True
            seen.add((n.id, at))
            b = scope.binding_before(n.id, at)
            v = None if b is None else b.value if b.value is not None else getattr(
                b.stmt, "value", None)
            if v is not None and depth < 6:
                todo.append((v, b.line, depth + 1))  # type: ignore[union-attr]
    return False
