"""GT230: a value of a no-grad forward is kept in a list that another function backpropagates."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.model_calls import calls_module
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule


def _no_grad_forward(e: ast.AST, scope: Scope, ctx: Context, line: int,
                     depth: int = 0) -> ast.AST | None:
    """The ``with``/decorator that disabled grad where a module ran that ``e`` is computed
    from (through the bindings before ``line``, three steps back)."""
    if depth > 3:
        return None
    for name in {n.id for n in walk(e) if isinstance(n, ast.Name)}:
        b = scope.binding_before(name, line)
        if b is None:
            continue
        value = b.value if b.value is not None else getattr(b.stmt, "value", None)
        if value is None:
            continue
        if b.no_grad and any(isinstance(c, ast.Call) and calls_module(c, scope, ctx)
                             for c in walk(value)):
            return scope.grad_off_at(b.stmt)
        got = _no_grad_forward(value, scope, ctx, b.line, depth + 1)
        if got is not None:
            return got
    return None


class NoGradValueKeptForBackward(Rule):
    """A value computed from a forward under `no_grad` is appended to a list that another
    function stacks into the loss and backpropagates, without running the model again.

    Why: inside `torch.no_grad()` nothing is recorded, so the log-probabilities (or values)
    kept from an action-selection step are constants; the update function that sums them into
    the loss has no other path to the parameters, and `backward()` raises "element 0 of
    tensors does not require grad and does not have a grad_fn" far from the cause (verified on
    torch 2.13). Run the forward with grad where the kept values are made, or recompute them in
    the update (PPO's `evaluate()` re-runs the policy, and keeping no-grad old log-probs there is
    right).
    Known limits: the list is an attribute (`policy.saved_log_probs`, `self.logprobs`) appended
    to in one function of the file and read in another that calls `backward()` and runs no
    module.
    """

    code = "GT230"
    needs_step = True  # NOTE [step files]
    name = "no-grad-value-kept-for-backward"
    message = ("grad is off here while `{model}` runs, and `{kept}` keeps a value made from its "
               "output (line {line}); `{update}()` backpropagates a loss built from `{kept}` "
               "without running a model (line {backward}): the kept values are constants and "
               "`backward()` fails or trains nothing; run this forward with grad")
    triggers = ("append",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            from torch.distributions import Categorical
            policy = nn.Sequential(nn.Linear(4, 2), nn.Softmax(-1))
            policy.saved_log_probs = []
            def select_action(state):
                with torch.no_grad():
                    probs = policy(state)
                m = Categorical(probs)
                action = m.sample()
                policy.saved_log_probs.append(m.log_prob(action))
                return action.item()
            def finish_episode(returns):
                loss = torch.stack([-lp * r for lp, r in zip(policy.saved_log_probs, returns)])
                loss.sum().backward()
            """, at=(7, 4)),
        Good("""
            import torch
            import torch.nn as nn
            from torch.distributions import Categorical
            class Agent:
                def __init__(self):
                    self.policy = nn.Sequential(nn.Linear(4, 2), nn.Softmax(-1))
                    self.logprobs, self.states = [], []
                def act(self, state):
                    with torch.no_grad():
                        m = Categorical(self.policy(state))
                        a = m.sample()
                    self.logprobs.append(m.log_prob(a))
                    self.states.append(state)
                    return a.item()
                def update(self, adv):
                    old = torch.stack(self.logprobs)
                    new = Categorical(self.policy(torch.stack(self.states))).log_prob(a)
                    (-(torch.exp(new - old) * adv)).mean().backward()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "append" and len(node.args) == 1):
            return
        kept = dotted(f.value)
        fn = ctx.function
        if kept is None or "." not in kept or fn is None:
            return
        scope = ctx.scope()
        off = _no_grad_forward(node.args[0], scope, ctx, node.lineno)
        if off is None:
            return
        update = self._update(kept, fn, ctx)
        if update is None:
            return
        g, back = update
        model = next((ctx.source(c.func) for s in [scope.statement_of(off)] if s is not None
                      for c in walk(s) if isinstance(c, ast.Call) and calls_module(c, scope, ctx)),
                     "the model")
        yield self.report(off, ctx, related=(
            Related(ctx.path, node.lineno, f"`{kept}` keeps it here", ctx.column(node)),
            Related(ctx.path, back.lineno, "the kept values are backpropagated here",
                    ctx.column(back))),
            model=model, kept=kept, line=node.lineno, update=g.name, backward=back.lineno)

    @staticmethod
    def _update(kept: str, fn: ast.AST, ctx: Context) -> tuple[ast.AST, ast.Call] | None:
        """The other function of the file reading ``kept`` (a method of the same class for
        ``self.x``) that calls ``backward()`` and runs no module."""
        own = ctx.analysis.class_of(fn) if kept.startswith("self.") else None
        for g in walk(ctx.tree):
            if not isinstance(g, FUNCTION_TYPES) or g is fn or (
                    kept.startswith("self.") and ctx.analysis.class_of(g) is not own):
                continue
            if not any(isinstance(n, ast.Attribute) and dotted(n) == kept
                       and isinstance(n.ctx, ast.Load) for n in walk(g)):
                continue
            back = next((c for c in walk(g) if isinstance(c, ast.Call)
                         and isinstance(c.func, ast.Attribute) and c.func.attr == "backward"),
                        None)
            if back is None:
                continue
            gs = ctx.scope(g)
            if any(isinstance(c, ast.Call) and calls_module(c, gs, ctx) for c in walk(g)):
                return None  # the update runs the model again (PPO's evaluate)
            return g, back
        return None
