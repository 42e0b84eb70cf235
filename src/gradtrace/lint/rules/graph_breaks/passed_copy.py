"""GT151: a helper copies, with `torch.tensor(...)`, the tensor that requires grad its caller
passes."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.grad_values import passed_param
from gradtrace.lint.analysis.helper_grad import passed_grad
from gradtrace.lint.analysis.loss_evidence import reaches_backward
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.excerpt import excerpt
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule


def _returned(call: ast.Call, fn: ast.AST) -> bool:
    """The copy is (part of) what ``fn`` returns: in a ``return``, or bound to a name a
    ``return`` reads."""
    rets = [r for r in walk(fn) if isinstance(r, ast.Return) and r.value is not None]
    if any(call in walk(r.value) for r in rets):  # type: ignore[arg-type]
        return True
    read = {n.id for r in rets for n in walk(r.value) if isinstance(n, ast.Name)}  # type: ignore[arg-type]
    return any(isinstance(s, ast.Assign) and len(s.targets) == 1
               and isinstance(s.targets[0], ast.Name) and s.targets[0].id in read
               and call in walk(s.value) for s in walk(fn))


class PassedTensorCopied(Rule):
    """A function of the file copies, with `torch.tensor(...)`, a tensor its caller passes
    that requires grad, and returns what it computed from the copy to a caller that
    backpropagates it.

    Why: `torch.tensor(t)` copies the values of `t` into a new leaf without history, whatever
    `t` is (PyTorch warns "To copy construct from a tensor, it is recommended to use
    sourceTensor.detach().clone()"), while `torch.as_tensor(t)` and `torch.Tensor(t)` return
    `t` (or an alias of it) with its graph (checked on torch 2.13). In a helper
    (`def extractor(x): return model(torch.tensor(x.view(1, -1)))`) the caller's tensor,
    computed from what should train (`sine(fp)` with `fp` requiring grad), is cut there:
    `backward()` runs, reaches the model's weights, and `fp.grad` stays None
    (fairseq#2789). Pass the tensor itself. The caller's value is known to require grad
    through the callers' own parameters and the file's helpers that compute from theirs
    (NOTE [helper results that require grad]).
    Known limits: the copy must be in what the helper returns, and the first call of the
    chain's value must reach `backward()` where it is made; a copy under `torch.no_grad()`
    is left alone.
    """

    code = "GT151"
    needs_step = True  # NOTE [step files]
    name = "passed-tensor-copied"
    message = ("`{call}` copies `{param}`, which the caller passes requiring grad (line "
               "{line}), into a new tensor without history: nothing before this line gets a "
               "gradient through it; pass the tensor itself")
    triggers = ("tensor(",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            net = torch.nn.Linear(4, 1)
            def score(x):
                return net(torch.tensor(x.view(1, -1)))
            w = torch.ones(4, requires_grad=True)
            score(w * 2.0).sum().backward()
            """, at=(4, 15)),
        Good("""
            import torch
            net = torch.nn.Linear(4, 1)
            def score(x):
                return net(x.view(1, -1))
            def record(x):
                return torch.tensor(x)
            w = torch.ones(4, requires_grad=True)
            score(w * 2.0).sum().backward()
            score(torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if len(node.args) != 1 or isinstance(node.args[0], (ast.List, ast.Tuple, ast.Starred)) \
                or ctx.qualified_name(node.func) != "torch.tensor":
            return
        fn = ctx.function
        if not isinstance(fn, FUNCTION_TYPES) or ctx.scope().grad_off_at(node) is not None:
            return
        param = passed_param(ctx, fn, node.args[0], node.lineno)
        if param is None or not _returned(node, fn):
            return
        got = passed_grad(ctx, fn, param)
        if got is None:
            return
        src, calls, first_where = got
        if reaches_backward(ctx, first_where, calls[0]) is not True:
            return
        rel = [Related(ctx.path, c.lineno, "the tensor is passed here", ctx.column(c))
               for c in calls]
        if hasattr(src, "lineno"):
            rel.append(Related(ctx.path, src.lineno, "its gradient comes from here",  # type: ignore[attr-defined]
                               ctx.column(src)))
        yield self.report(node, ctx, related=rel, call=excerpt(ctx.source(node)),
                          param=param, line=calls[0].lineno)
