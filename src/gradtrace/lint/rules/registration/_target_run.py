"""GT438 when the module's output is only the loss's target (NOTE [output only a target]):
the finding moves to the run, with the advice of a fixed target."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.target_outputs import only_a_target
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

MESSAGE = ("`{mod}` (built at line {line}) runs in the training loop with grad on, but its output "
           "is only the target the loss fits {srcs} to: backward fills its `.grad`, which "
           "`{opt}` never applies; a fixed target (a teacher, a target network) is computed "
           "under `torch.no_grad()` or `.detach()`ed (a module meant to learn goes into the "
           "optimizer)")


def target_run(call: ast.Call, scope: Scope | None, ctx: Context) -> ast.stmt | None:
    """The statement of ``call`` (the module's run, in ``scope`` of this file) when every value
    it makes is only a fitting target in the loop around it (or the function)."""
    if scope is None or scope.ctx is not ctx:
        return None
    region = (scope.loops_of(call) or (scope.node,))[-1]
    return scope.statement_of(call) if only_a_target(dotted(call.func) or "", region, ctx,
                                                     scope) else None


def told(rule: Any, at: ast.AST | None, node: ast.AST, ctx: Context, **kw: Any) -> Finding:
    """GT438 at the optimizer ``node``; at the run ``at`` with :data:`MESSAGE` when the module's
    output is only the loss's target (the fix is there), the optimizer as related."""
    rel = kw.pop("related")
    if at is None:
        return rule.report(node, ctx, related=rel, **kw)
    f = rule.report(at, ctx, related=[rel[0], Related(ctx.path, node.lineno, f"`{kw['opt']}` "
                                                      "is built here", ctx.column(node))], **kw)
    return replace(f, message=MESSAGE.format(**kw))
