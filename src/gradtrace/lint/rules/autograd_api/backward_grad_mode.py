"""GT717: a custom `autograd.Function`'s `backward` recomputes a value and differentiates it
with grad mode off."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.functions import _is_function_class, _method

GRAD = "torch.autograd.grad"
BACKWARD = "torch.autograd.backward"
# spellings that turn grad mode back on for a block or a function
REENABLE = ("enable_grad", "set_grad_enabled")


def _outputs(call: ast.Call, ctx: Context) -> ast.expr | None:
    """What ``torch.autograd.grad`` / ``torch.autograd.backward`` / ``out.backward()``
    differentiates, or None for another call."""
    q = ctx.qualified_name(call.func) or ""
    if q in (GRAD, BACKWARD):
        if call.args:
            return call.args[0]
        return next((k.value for k in call.keywords if k.arg in ("outputs", "tensors")), None)
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "backward" and not q.startswith("torch."):
        return f.value
    return None


def _computed(e: ast.expr, fn: ast.AST) -> ast.stmt | None:
    """The statement of ``fn`` that computes ``e`` (a local name bound once, by one assignment,
    to an op: a call or arithmetic), or None (a parameter, a saved tensor, a ``ctx``
    attribute: made in ``forward``, where the graph may have been recorded on purpose)."""
    while isinstance(e, ast.Subscript):  # `out[0]`, `outs[i]`
        e = e.value
    if not isinstance(e, ast.Name):
        return None
    binds = [s for s in walk(fn) if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign))
             and any(isinstance(t, ast.Name) and t.id == e.id
                     for t in (s.targets if isinstance(s, ast.Assign) else [s.target]))]
    if len(binds) != 1 or not isinstance(binds[0], ast.Assign) or len(binds[0].targets) != 1:
        return None
    v = binds[0].value
    if isinstance(v, ast.BinOp):
        return binds[0]
    if isinstance(v, ast.Call):
        d = dotted(v.func) or ""
        if d.startswith("ctx.") or isinstance(v.func, ast.Attribute) and v.func.attr in (
                "requires_grad_", "detach", "clone", "view", "view_as", "reshape", "to",
                "contiguous", "float", "double", "half"):
            return None  # a copy or a view of what came in: no op of backward's own
        return binds[0]
    return None


def _turns_grad_on(fn: ast.AST, ctx: Context) -> bool:
    """Whether ``fn`` mentions a way to turn grad mode back on (a decorator, a ``with``, a
    call): then its author handled it."""
    start, end = fn.lineno, fn.end_lineno or fn.lineno  # type: ignore[attr-defined]
    first = min([start] + [d.lineno for d in getattr(fn, "decorator_list", [])])
    return any(w in ctx.code_line(i) for i in range(first, end + 1) for w in REENABLE)


def _helpers(fn: ast.FunctionDef, ctx: Context) -> list[tuple[ast.Call, ast.FunctionDef]]:
    """The functions of the file (top level, by name) that ``fn`` calls, with the call."""
    out = []
    for n in walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            f = ctx.analysis.functions.get(n.func.id)
            if isinstance(f, ast.FunctionDef) and f is not fn:
                out.append((n, f))
    return out


class RecomputedInBackwardWithoutGrad(Rule):
    """A custom `autograd.Function`'s `backward` (or a function of the file it calls)
    recomputes a value and differentiates it with `torch.autograd.grad` / `.backward()`,
    without `with torch.enable_grad():`.

    Why: autograd runs `backward` with grad mode off (on only under `create_graph=True`), so
    the recomputation records no graph: its result has no `grad_fn`, `torch.autograd.grad`
    raises `element 0 of tensors does not require grad`, and once the author marks the result
    `requires_grad = True` to silence that, it is a new leaf and every gradient asked of it
    is `None` (pytorch#45405, checked on torch 2.13: the input's `.grad` stays None). Wrap the
    recomputation and the differentiation in `with torch.enable_grad():` (on detached
    copies of the saved inputs that require grad), as `torch.utils.checkpoint` does.
    Known limits: the differentiated value must be a local name bound once in that function to
    an op (not a saved tensor or a `ctx` attribute: `forward` may have recorded it under
    `enable_grad` on purpose); a function that mentions `enable_grad` or `set_grad_enabled`
    anywhere is trusted. The finding is on the recomputation.
    """

    code = "GT717"
    name = "recomputed-in-backward-without-grad"
    message = ("`{value}` is recomputed in `{cls}.backward`, where autograd runs with grad mode "
               "off: it records no graph, so `{call}` (line {line}) cannot differentiate it "
               "(an error, or None gradients once it is marked `requires_grad`); wrap the "
               "recomputation in `with torch.enable_grad():`")
    triggers = ("Function",)
    gate_statements = True
    examples = [
        Bad("""
            import torch

            class Energy(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    return (x * w).sum()

                @staticmethod
                def backward(ctx, grad_out):
                    x, w = ctx.saved_tensors
                    x = x.detach().requires_grad_()
                    e = (x * w).sum()
                    gx, = torch.autograd.grad(e, x, grad_out)
                    return gx, None
            """, at=(13, 8)),
        Good("""
            import torch

            class Energy(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    return (x * w).sum()

                @staticmethod
                def backward(ctx, grad_out):
                    x, w = ctx.saved_tensors
                    with torch.enable_grad():
                        x = x.detach().requires_grad_()
                        e = (x * w).sum()
                        gx, = torch.autograd.grad(e, x, grad_out)
                    return gx, None
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not _is_function_class(node, ctx):
            return
        bwd = _method(node, "backward")
        if bwd is None or _turns_grad_on(bwd, ctx):
            return
        places: list[tuple[ast.FunctionDef, ast.Call | None]] = [(bwd, None)]
        places += [(f, c) for c, f in _helpers(bwd, ctx) if not _turns_grad_on(f, ctx)]
        for fn, via in places:
            for call in walk(fn):
                if not isinstance(call, ast.Call):
                    continue
                out = _outputs(call, ctx)
                made = _computed(out, fn) if out is not None else None
                if made is None or _nested(made, fn):
                    continue
                rel = [Related(ctx.path, call.lineno, "differentiated here", ctx.column(call))]
                if via is not None:
                    rel.append(Related(ctx.path, via.lineno, "called from backward here",
                                       ctx.column(via)))
                yield self.report(made, ctx, related=rel, value=ctx.source(made.targets[0]),
                                  cls=node.name, call=(dotted(call.func) or "grad") + "()",
                                  line=call.lineno)
                return


def _nested(stmt: ast.stmt, fn: ast.AST) -> bool:
    """Whether ``stmt`` lies in a function or class nested in ``fn`` (which runs elsewhere)."""
    for n in walk(fn):
        if n is not fn and isinstance(n, (*FUNCTION_TYPES, ast.ClassDef, ast.Lambda)) and \
                any(x is stmt for x in walk(n)):
            return True
    return False
