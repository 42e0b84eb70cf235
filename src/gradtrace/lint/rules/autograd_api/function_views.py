"""GT719: the output of a custom `autograd.Function` whose `forward` returns an input as-is (or a
view of it) is modified in place."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.functions import _is_function_class, _method, _returns

# methods whose result is a view of the tensor they are called on
VIEWS = frozenset({"view", "view_as", "squeeze", "unsqueeze", "permute", "transpose", "t",
                   "unflatten", "narrow", "select", "expand", "expand_as", "flatten"})
NOT_WRITES = frozenset({"requires_grad_", "retain_grad", "register_hook", "share_memory_"})


def _returned_input(fwd: ast.FunctionDef) -> tuple[int, str] | None:
    """(position among ``apply``'s arguments, how) when every ``return`` of ``forward`` gives
    back one of its inputs itself or a view of it."""
    params = [a.arg for a in fwd.args.args[1:]]
    got: set[tuple[int, str]] = set()
    rets = list(_returns(fwd))
    for r in rets:
        e, how = r.value, "as-is"
        while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                e.func.attr in VIEWS:
            e, how = e.func.value, f"as a view (`.{e.func.attr}()`)"
        if not isinstance(e, ast.Name) or e.id not in params:
            return None
        if any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == e.id
                                                 for t in s.targets) for s in walk(fwd)):
            return None  # rebound: no longer the input
        got.add((params.index(e.id), how))
    return next(iter(got)) if rets and len(got) == 1 else None


def _written(name: str, after: ast.stmt, fn: ast.AST) -> ast.AST | None:
    """The first statement of ``fn`` after ``after`` that modifies ``name`` in place
    (``name *= s``, ``name.mul_(s)``, ``name[i] = v``), while ``name`` still holds that value."""
    line = after.end_lineno or after.lineno
    found: list[ast.AST] = []
    for n in walk(fn):
        if getattr(n, "lineno", 0) <= line:
            continue
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and any(
                isinstance(t, ast.Name) and t.id == name
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])):
            found.append(("rebind", n))  # type: ignore[arg-type]
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and \
                n.target.id == name:
            found.append(("write", n))  # type: ignore[arg-type]
        elif isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                and t.value.id == name for t in n.targets):
            found.append(("write", n))  # type: ignore[arg-type]
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                isinstance(n.func.value, ast.Name) and n.func.value.id == name and \
                n.func.attr.endswith("_") and not n.func.attr.startswith("_") and \
                n.func.attr not in NOT_WRITES:
            found.append(("write", n))  # type: ignore[arg-type]
    found.sort(key=lambda p: (p[1].lineno, p[1].col_offset))  # type: ignore[attr-defined]
    for kind, n in found:  # type: ignore[misc]
        return n if kind == "write" else None
    return None


def _enclosing(stmt: ast.AST, outer: tuple[ast.AST, ...], ctx: Context) -> ast.AST:
    return next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), ctx.tree)


class FunctionOutputViewWrittenInPlace(Rule):
    """The output of a custom `autograd.Function` whose `forward` returns one of its inputs
    as-is (or a view of it: `x.view_as(x)`) is modified in place (`out *= s`, `out.add_(b)`).

    Why: autograd records such an output as a view created inside the Function, and an
    in-place change of it would replace the Function's custom backward, so it refuses:
    `RuntimeError: Output 0 of Fn is a view and is being modified inplace. This view was
    created inside a custom Function (or because an input was returned as-is) ...`, whenever
    the input requires grad (pytorch#30454; checked on torch 2.13; with a `clone()` returned
    it runs). Write `out = out * s`, or return `x.clone()` from `forward`.
    Known limits: `forward` must return the same input on every `return`; the output is
    followed through a local name, in the function that calls `Fn.apply` or a function of the
    file that returns `Fn.apply(...)`; an input read as data only (a factory, no graph) is not
    reported.
    """

    code = "GT719"
    name = "function-output-view-written-in-place"
    message = ("`{name}` is the output of `{cls}`, whose `forward` returns its input {how}: "
               "modifying it in place raises `RuntimeError: Output 0 of {cls} is a view and is "
               "being modified inplace`; write `{name} = {name} * ...` out of place, or return "
               "a clone from `forward`")
    triggers = ("Function",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    x.mul_(2.0)
                    return x

                @staticmethod
                def backward(ctx, g):
                    return g * 2.0

            fc = nn.Linear(4, 4)
            out = Scale.apply(fc(torch.randn(2, 4)))
            out *= 10.0
            """, at=(16, 0)),
        Good("""
            import torch
            import torch.nn as nn

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2.0

                @staticmethod
                def backward(ctx, g):
                    return g * 2.0

            fc = nn.Linear(4, 4)
            out = Scale.apply(fc(torch.randn(2, 4)))
            out *= 10.0
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not _is_function_class(node, ctx):
            return
        fwd = _method(node, "forward")
        got = _returned_input(fwd) if fwd is not None else None
        if got is None:
            return
        pos, how = got
        sites: list[tuple[ast.Call, ast.AST, tuple[ast.AST, ...], int]] = []
        for call, st, outer in call_sites(ctx, "apply"):
            if dotted(call.func) == f"{node.name}.apply":
                sites.append((call, st, outer, pos))
                wrapper = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)),
                               None)
                if wrapper is not None and isinstance(st, ast.Return) and st.value is call \
                        and len(call.args) > pos and isinstance(call.args[pos], ast.Name):
                    params = [a.arg for a in wrapper.args.args]  # type: ignore[attr-defined]
                    if call.args[pos].id in params:  # type: ignore[attr-defined]
                        for c2, s2, o2 in call_sites(ctx, wrapper.name):  # type: ignore
                            if isinstance(c2.func, ast.Name):
                                sites.append((c2, s2, o2, params.index(call.args[pos].id)))
        from gradtrace.lint.analysis.origins import origins
        for call, st, outer, k in sites:
            if not (isinstance(st, ast.Assign) and st.value is call and len(st.targets) == 1
                    and isinstance(st.targets[0], ast.Name)) or len(call.args) <= k:
                continue
            fn = _enclosing(st, outer, ctx)
            if not origins(ctx, fn).trace(call.args[k], st, st.lineno).live:
                continue
            name = st.targets[0].id
            w = _written(name, st, fn)
            if w is None:
                continue
            yield self.report(w, ctx, related=[
                Related(ctx.path, st.lineno, "the Function's output", ctx.column(st)),
                Related(ctx.path, fwd.lineno, "forward returns its input",  # type: ignore
                        ctx.column(fwd))], name=name, cls=node.name, how=how)
