"""GT570: a list attribute collects graph values for a backward and is never emptied."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.model_calls import calls_module
from gradtrace.lint.context import FUNCTION_TYPES, LOOP_TYPES, Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

# what a list may undergo and stay a list that only grows
READS = frozenset({"zip", "enumerate", "len", "reversed", "list", "tuple", "sum", "stack",
                   "cat", "mean", "tensor", "as_tensor", "print", "sorted", "map"})
CUTS = (".detach(", ".item(", ".data", ".numpy(", ".tolist(", "no_grad")


def _graph_value(e: ast.AST, scope: Scope, ctx: Context, line: int, depth: int = 0) -> bool:
    """``e`` is computed, with grad on, from a module's output (through the bindings before
    ``line``, three steps back), and nothing on the way detaches it."""
    if depth > 3 or any(c in ctx.source(e) for c in CUTS):
        return False
    if any(isinstance(c, ast.Call) and calls_module(c, scope, ctx) for c in walk(e)):
        return True
    for name in {n.id for n in walk(e) if isinstance(n, ast.Name)}:
        b = scope.binding_before(name, line)
        value = None if b is None else b.value if b.value is not None else getattr(
            b.stmt, "value", None)
        if value is not None and not b.no_grad and _graph_value(  # type: ignore[union-attr]
                value, scope, ctx, b.line, depth + 1):  # type: ignore[union-attr]
            return True
    return False


def _uses(ctx: Context) -> dict[str, list[str]]:
    """Attribute name -> how each occurrence of ``<x>.<name>`` in the file is used: "append",
    "made" (an empty list in ``__init__`` or at module level), "read" (iterated, zipped,
    stacked, measured) or "other" (deleted, cleared, rebound, sliced into, passed on)."""
    def make() -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        todo: list[tuple[ast.AST, ast.AST | None, str]] = [(ctx.tree, None, "")]
        while todo:
            node, parent, fn = todo.pop()
            if isinstance(node, ast.Assign) and fn in ("", "__init__"):
                made, rest = _made(node)
                for a in made:
                    out.setdefault(a.attr, []).append("made")
                    todo.append((a.value, a, fn))
                todo.extend((t, node, fn) for t in rest)
                todo.append((node.value, node, fn))
                continue
            if isinstance(node, ast.Attribute):
                out.setdefault(node.attr, []).append(_use(node, parent))
            here = node.name if isinstance(node, FUNCTION_TYPES) else fn
            todo.extend((c, node, here) for c in ast.iter_child_nodes(node))
        return out
    return ctx.memo("gt570-uses", ctx.tree, make)


def _made(node: ast.Assign) -> tuple[list[ast.Attribute], list[ast.AST]]:
    """(the attributes ``node`` binds to an empty list, ``self.a, self.b = [], []`` too; its
    other targets, walked as usual)."""
    made: list[ast.Attribute] = []
    rest: list[ast.AST] = []
    for t in node.targets:
        v = node.value
        pairs = list(zip(t.elts, v.elts)) if isinstance(t, ast.Tuple) and isinstance(
            v, (ast.Tuple, ast.List)) and len(t.elts) == len(v.elts) else [(t, v)]
        for target, value in pairs:
            empty = isinstance(value, ast.List) and not value.elts
            (made if empty and isinstance(target, ast.Attribute) else rest).append(target)
    return made, rest


def _use(node: ast.Attribute, parent: ast.AST | None) -> str:
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return "append" if parent.attr == "append" else "read" if parent.attr in READS \
            else "other"
    if not isinstance(node.ctx, ast.Load):
        return "other"
    if isinstance(parent, (ast.comprehension, ast.For)) and getattr(parent, "iter", None) is node:
        return "read"
    if isinstance(parent, ast.Call) and node in parent.args:
        f = parent.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        return "read" if name in READS else "other"
    if isinstance(parent, (ast.List, ast.Tuple)):
        return "read"  # torch.stack([...]) of it, a tuple of lists zipped
    return "other"


class GraphListNeverCleared(Rule):
    """A list attribute collects values with their autograd graph for a backward that runs
    again and again, and nothing ever empties it.

    Why: each call of the update backpropagates a loss built from every value in the list;
    `backward()` frees the graphs it went through, so the next call, whose list still holds
    the previous values, goes through a freed graph and raises "Trying to backward through the
    graph a second time" (verified on torch 2.13; with `retain_graph=True` the old terms are
    trained again at every update instead). Empty the list after the update (`del x[:]`,
    `x.clear()`, or rebind it to `[]`).
    Known limits: the list is an attribute (`policy.saved_log_probs`, `self.log_probs`) made
    empty in `__init__` or at module level, appended to in one function of the file with a
    value made from a module's output with grad on, and read by another function that calls
    `backward()` and is itself called in a loop; any other use of the attribute name (a
    `del`, `clear()`, a rebinding, passing it to a function) silences the rule.
    """

    code = "GT570"
    needs_step = True  # NOTE [step files]
    name = "graph-list-never-cleared"
    message = ("`{kept}` collects values with their autograd graph (line {line}) and "
               "`{update}()` backpropagates a loss built from all of them (line {backward}), "
               "but nothing ever empties `{kept}`: the next update goes through graphs the "
               "last one freed; empty it after the update{beside}")
    triggers = ("append",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            from torch.distributions import Categorical
            class Policy(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 2)
                    self.log_probs, self.rewards = [], []
                def forward(self, x):
                    return torch.softmax(self.fc(x), -1)
            policy = Policy()
            def act(state):
                m = Categorical(policy(state))
                a = m.sample()
                policy.log_probs.append(m.log_prob(a))
                return a.item()
            def finish():
                loss = torch.stack([-lp * r for lp, r in zip(policy.log_probs, policy.rewards)])
                loss.sum().backward()
                del policy.rewards[:]
            for episode in range(10):
                act(torch.randn(4))
                policy.rewards.append(1.0)
                finish()
            """, at=(20, 4)),
        Good("""
            import torch
            import torch.nn as nn
            from torch.distributions import Categorical
            class Policy(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 2)
                    self.log_probs, self.rewards = [], []
                def forward(self, x):
                    return torch.softmax(self.fc(x), -1)
            policy = Policy()
            def act(state):
                m = Categorical(policy(state))
                a = m.sample()
                policy.log_probs.append(m.log_prob(a))
                return a.item()
            def finish():
                loss = torch.stack([-lp * r for lp, r in zip(policy.log_probs, policy.rewards)])
                loss.sum().backward()
                del policy.rewards[:]
                del policy.log_probs[:]
            for episode in range(10):
                act(torch.randn(4))
                policy.rewards.append(1.0)
                finish()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "append" and len(node.args) == 1
                and isinstance(f.value, ast.Attribute)):
            return
        kept, fn = dotted(f.value), ctx.function
        if kept is None or fn is None or fn.name == "__init__" or \
                not ctx.mentions(".backward("):
            return
        scope = ctx.scope()
        if not _graph_value(node.args[0], scope, ctx, node.lineno):
            return
        uses = _uses(ctx).get(f.value.attr, [])  # (one walk of the file, then a lookup)
        if "made" not in uses or "other" in uses or "read" not in uses:
            return
        update = self._update(kept, f.value.attr, fn, ctx)
        if update is None:
            return
        g, back, beside = update
        where = beside or back
        yield self.report(where, ctx, related=(
            Related(ctx.path, node.lineno, f"`{kept}` collects graph values here",
                    ctx.column(node)),) + ((Related(
                        ctx.path, back.lineno, "the loss over all of them is backpropagated "
                        "here", ctx.column(back)),) if beside is not None else ()),
            kept=kept, line=node.lineno, update=g.name, backward=back.lineno,
            beside="" if beside is None else f", beside `{ctx.source(beside)}`")

    @staticmethod
    def _update(kept: str, attr: str, fn: ast.AST, ctx: Context
                ) -> tuple[ast.AST, ast.Call, ast.stmt | None] | None:
        """(the other function of the file reading ``kept`` and calling ``backward()`` without
        ``retain_graph``, called in a loop; its backward; the ``del`` of another list there)."""
        for g in walk(ctx.tree):
            if not isinstance(g, FUNCTION_TYPES) or g is fn or g.name == "__init__":
                continue
            if not any(isinstance(n, ast.Attribute) and n.attr == attr and dotted(n) ==
                       kept for n in walk(g)):
                continue
            back = next((c for c in walk(g) if isinstance(c, ast.Call)
                         and isinstance(c.func, ast.Attribute) and c.func.attr == "backward"),
                        None)
            if back is None or back.keywords or g.name not in _called_in_loops(ctx):
                continue
            beside = min((s for s in walk(g) if isinstance(s, ast.Delete)),
                         key=lambda s: s.lineno, default=None)
            return g, back, beside
        return None


def _called_in_loops(ctx: Context) -> frozenset[str]:
    """Names of the functions and methods the file calls inside a loop."""
    def make() -> frozenset[str]:
        out: set[str] = set()
        todo: list[tuple[ast.AST, bool]] = [(ctx.tree, False)]
        while todo:
            node, looped = todo.pop()
            if looped and isinstance(node, ast.Call):
                f = node.func
                out.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""))
            inner = looped and not isinstance(node, FUNCTION_TYPES) or isinstance(
                node, LOOP_TYPES)
            todo.extend((c, inner) for c in ast.iter_child_nodes(node))
        return frozenset(out)
    return ctx.memo("gt570-looped", ctx.tree, make)
