"""GT718: a custom `autograd.Function`'s `backward` computes the gradient of one input only
when another input needs one (`if ctx.needs_input_grad[0]:` around both)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.functions import (
    _is_function_class, _method, _returns)


def _flags(test: ast.expr) -> set[int] | None:
    """The input positions whose ``needs_input_grad`` the test reads (``ctx.needs_input_grad[0]
    or ctx.needs_input_grad[2]``), or None when it reads none, or reads it otherwise (``any(...)``,
    a variable index, a slice: which inputs it covers cannot be told)."""
    got: set[int] = set()
    for n in walk(test):
        if isinstance(n, ast.Attribute) and n.attr == "needs_input_grad":
            sub = next((s for s in walk(test) if isinstance(s, ast.Subscript) and s.value is n),
                       None)
            if sub is None or not isinstance(sub.slice, ast.Constant) or \
                    not isinstance(sub.slice.value, int):
                return None
            got.add(sub.slice.value)
    return got or None


def _assigned(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The local names the statements bind (first binding of each)."""
    out: dict[str, ast.stmt] = {}
    for st in body:
        for n in walk(st):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    for x in walk(t):
                        if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store):
                            out.setdefault(x.id, n)
    return out


def _none_only(name: str, fn: ast.FunctionDef, skip: ast.If) -> bool:
    """Whether every binding of ``name`` in ``fn`` outside ``skip`` gives it ``None``."""
    inside = {id(n) for n in walk(skip)}
    for n in walk(fn):
        if id(n) in inside or not isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        targets = n.targets if isinstance(n, ast.Assign) else [n.target]
        for t in targets:
            names = [x for x in walk(t) if isinstance(x, ast.Name) and x.id == name]
            if not names:
                continue
            v = n.value
            if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) and \
                    len(t.elts) == len(v.elts):
                v = next((b for a, b in zip(t.elts, v.elts)
                          if isinstance(a, ast.Name) and a.id == name), None)
            if not (isinstance(v, ast.Constant) and v.value is None):
                return False
    return True


class GradientGatedOnAnotherInput(Rule):
    """A custom `autograd.Function`'s `backward` computes the gradient it returns for one
    input inside `if ctx.needs_input_grad[i]:` for ANOTHER input `i`.

    Why: `ctx.needs_input_grad[i]` is True only when input `i` requires grad. When input `i`
    does not (raw data, a frozen branch) but input `j` does, the block is skipped and
    `backward` returns `None` for `j`: the layers that produced input `j` silently get no
    gradient and never train (pytorch_wavelets' SFB1D computed the highpass gradient under
    the lowpass input's flag, checked on torch 2.13). Test the flag of the input whose
    gradient the block computes (`if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:`
    around a shared computation, or one `if` per gradient).
    Known limits: the flag must be indexed by a constant; the gradient must be a local name
    returned in the input's position of a tuple, and bound (other than to None) only in
    that block.
    """

    code = "GT718"
    severity = "warning"  # wrong only when the inputs' requires_grad differ
    name = "gradient-gated-on-another-input"
    message = ("`{grad}` is the gradient returned for input {pos}, but it is only computed "
               "under `{test}`, the flag of input {flags}: when that input does not require "
               "grad and input {pos} does, backward returns None for it and what produced it "
               "never trains; test `ctx.needs_input_grad[{pos}]` too")
    triggers = ("needs_input_grad",)
    gate_statements = True
    examples = [
        Bad("""
            import torch

            class Mix(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b, w):
                    ctx.save_for_backward(w)
                    return a * w + b * (1 - w)

                @staticmethod
                def backward(ctx, g):
                    ga, gb = None, None
                    if ctx.needs_input_grad[0]:
                        w, = ctx.saved_tensors
                        ga, gb = g * w, g * (1 - w)
                    return ga, gb, None
            """, at=(12, 8)),
        Good("""
            import torch

            class Mix(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b, w):
                    ctx.save_for_backward(w)
                    return a * w + b * (1 - w)

                @staticmethod
                def backward(ctx, g):
                    ga, gb = None, None
                    if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
                        w, = ctx.saved_tensors
                        ga, gb = g * w, g * (1 - w)
                    return ga, gb, None
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not _is_function_class(node, ctx):
            return
        bwd = _method(node, "backward")
        if bwd is None:
            return
        returned: dict[str, int] = {}
        for r in _returns(bwd):
            if isinstance(r.value, ast.Tuple):
                for j, e in enumerate(r.value.elts):
                    if isinstance(e, ast.Name):
                        returned.setdefault(e.id, j)
        if not returned:
            return
        for st in walk(bwd):
            if not isinstance(st, ast.If) or _in_nested(st, bwd):
                continue
            flags = _flags(st.test)
            if flags is None:
                continue
            for name, bind in _assigned(st.body).items():
                pos = returned.get(name)
                if pos is None or pos in flags or not _none_only(name, bwd, st):
                    continue
                yield self.report(st, ctx, related=[Related(
                    ctx.path, bind.lineno, "computed only here", ctx.column(bind))],
                    grad=name, pos=pos, test=ctx.source(st.test)[:60],
                    flags=" or ".join(str(i) for i in sorted(flags)))
                return


def _in_nested(stmt: ast.stmt, fn: ast.AST) -> bool:
    for n in walk(fn):
        if n is not fn and isinstance(n, (*FUNCTION_TYPES, ast.ClassDef, ast.Lambda)) and \
                any(x is stmt for x in walk(n)):
            return True
    return False
