"""GT730: a custom Function's `forward` overwrites in place an input it saved for backward."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.functions import _is_function_class, _method
from gradtrace.lint.rules.leaf._tensors import NOT_UPDATES


def _writes(stmt: ast.stmt, name: str) -> ast.AST | None:
    """The node of ``stmt`` that writes the tensor ``name`` in place (``name.mul_(...)``,
    ``name += ...``, ``name[i] = ...``), also inside a ``return``, else None."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) \
            and stmt.target.id == name:
        return stmt
    if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name
            for t in stmt.targets):
        return stmt
    for n in walk(stmt):
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                and n.func.value.id == name:
            m = n.func.attr
            if m.endswith("_") and not m.startswith("_") and m not in NOT_UPDATES:
                return n
        first = n.args[0] if n.args else None
        if isinstance(first, ast.Name) and first.id == name and (
                (dotted(n.func) or "").startswith("torch.")
                and (dotted(n.func) or "").endswith("_")  # `torch.sigmoid_(x)`
                and not (dotted(n.func) or "").rpartition(".")[2].startswith("_")):
            return n
    return None


def _rebinds(stmt: ast.stmt, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
               for n in walk(stmt))


def _first_write(body: list[ast.stmt], name: str) -> ast.AST | None:
    """The first in-place write of ``name`` in ``body`` (top-level statements, in order),
    before any statement that binds ``name`` again."""
    for s in body:
        got = _writes(s, name)
        if got is not None:
            return got
        if _rebinds(s, name):
            return None
    return None


def _helper_write(call: ast.Call, name: str, ctx: Context
                  ) -> tuple[ast.AST, ast.FunctionDef] | None:
    """``helper(..., name, ...)`` where ``helper`` is a top-level function of the file that
    writes the parameter at that position in place: (the write, the helper)."""
    if not isinstance(call.func, ast.Name) or call.keywords:
        return None
    fn = ctx.analysis.functions.get(call.func.id)
    if not isinstance(fn, ast.FunctionDef):
        return None
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    for i, a in enumerate(call.args):
        if isinstance(a, ast.Starred):
            return None
        if isinstance(a, ast.Name) and a.id == name and i < len(params):
            got = _first_write(fn.body, params[i])
            if got is not None:
                return got, fn
    return None


def _signs_only(bwd: ast.FunctionDef) -> bool:
    """Every read in ``backward`` of a name unpacked from ``ctx.saved_tensors`` is an operand
    of a comparison (``grad * (x > 0)``): only the signs of the saved tensor matter."""
    names: set[str] = set()
    for s in ast.walk(bwd):
        if isinstance(s, ast.Assign) and any(isinstance(n, ast.Attribute) and n.attr in (
                "saved_tensors", "saved_variables") for n in ast.walk(s.value)):
            names.update(n.id for t in s.targets for n in ast.walk(t) if isinstance(n, ast.Name))
    if not names:
        return False
    compared = {id(n) for c in ast.walk(bwd) if isinstance(c, ast.Compare)
                for n in ast.walk(c) if isinstance(n, ast.Name)}
    reads = [n for n in ast.walk(bwd) if isinstance(n, ast.Name) and n.id in names
             and isinstance(n.ctx, ast.Load)]
    return bool(reads) and all(id(n) in compared for n in reads)


class SavedInputOverwrittenInForward(Rule):
    """A custom `autograd.Function`'s `forward` saves an input with `ctx.save_for_backward(x)`
    and then writes that input in place (`x.mul_(...)`, `x += ...`, or a function of the file
    that does it to its argument: a scripted `mish_fwd(x)` returning `x.mul_(...)`).

    Why: the tensors given to `save_for_backward` are packed when `forward` returns, after the
    write, so `backward` reads the overwritten values as if they were the input (for an
    activation, its output) and no "modified by an inplace operation" error is raised (the
    version counter is read at packing time): every gradient below the Function is silently
    wrong (checked on torch 2.13; bonlime/pytorch-tools' memory-efficient Mish). Compute the
    result out of place (`x.mul(...)`) or save a copy. A `forward` that calls
    `ctx.mark_dirty(...)` (an in-place Function written for it) is not reported, nor a write
    before the save or after the name is bound again, nor a `backward` that reads the saved
    tensors only in comparisons (`grad * (x > 0)`: a ReLU-like write keeps the signs).
    """

    code = "GT730"
    name = "saved-input-overwritten-in-forward"
    message = ("`{name}` is saved for backward (line {line}) and then overwritten in place "
               "here: the saved tensors are packed when `forward` returns, so `backward` reads "
               "the overwritten values and every gradient through `{cls}` is wrong, with no "
               "error; compute out of place or save a copy")
    triggers = ("save_for_backward",)
    examples = [
        Bad("""
            import torch

            class Swish(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.mul_(torch.sigmoid(x))

                @staticmethod
                def backward(ctx, grad):
                    x, = ctx.saved_tensors
                    s = torch.sigmoid(x)
                    return grad * s * (1 + x * (1 - s))
            """, at=(7, 15)),
        Bad("""
            import torch

            def shift_(t):
                t += 1.0
                return t

            class Shifted(torch.autograd.Function):
                @staticmethod
                def forward(ctx, inp):
                    ctx.save_for_backward(inp)
                    return shift_(inp) ** 2

                @staticmethod
                def backward(ctx, g):
                    (inp,) = ctx.saved_tensors
                    return 2 * (inp + 1.0) * g
            """, at=(4, 4)),
        Good("""
            import torch

            class Swish(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.mul(torch.sigmoid(x))

                @staticmethod
                def backward(ctx, grad):
                    x, = ctx.saved_tensors
                    s = torch.sigmoid(x)
                    return grad * s * (1 + x * (1 - s))

            class InplaceSigmoid(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.mark_dirty(x)
                    ctx.save_for_backward(x)
                    return x.sigmoid_()

                @staticmethod
                def backward(ctx, grad):
                    y, = ctx.saved_tensors
                    return grad * y * (1 - y)

            class ClampedRelu(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.clamp_(min=0)

                @staticmethod
                def backward(ctx, grad):
                    x, = ctx.saved_tensors
                    return grad * (x > 0).float()
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not _is_function_class(node, ctx):
            return
        fwd, bwd = _method(node, "forward"), _method(node, "backward")
        if fwd is None or bwd is None or len(fwd.args.args) < 2 or not any(
                isinstance(n, ast.Attribute) and n.attr in ("saved_tensors", "saved_variables")
                for n in walk(bwd)):
            return
        if _signs_only(bwd):
            return  # a ReLU-like backward reads only the signs, which `relu_`/`clamp_` keep
        ctx_name = fwd.args.args[0].arg
        if any(isinstance(n, ast.Attribute) and n.attr == "mark_dirty" for n in walk(fwd)):
            return
        params = {a.arg for a in fwd.args.args[1:]}
        for i, s in enumerate(fwd.body):  # the save: a statement of forward's own body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                    and isinstance(s.value.func, ast.Attribute)
                    and s.value.func.attr == "save_for_backward"
                    and isinstance(s.value.func.value, ast.Name)
                    and s.value.func.value.id == ctx_name):
                continue
            saved = [a.id for a in s.value.args if isinstance(a, ast.Name) and a.id in params]
            for name in saved:
                yield from self._after(fwd.body[i + 1:], name, s, node, ctx)

    def _after(self, rest: list[ast.stmt], name: str, save: ast.stmt, cls: ast.ClassDef,
               ctx: Context) -> Iterator[Finding]:
        for s in rest:
            got = _writes(s, name)
            if got is not None:
                yield self.report(got, ctx, name=name, line=save.lineno, cls=cls.name)
                return
            for n in walk(s):
                hw = _helper_write(n, name, ctx) if isinstance(n, ast.Call) else None
                if hw is not None:
                    write, helper = hw
                    yield self.report(write, ctx, name=name, line=save.lineno, cls=cls.name,
                                      related=[Related(ctx.path, n.lineno, f"`{helper.name}` "
                                                       f"is given `{name}` here",
                                                       ctx.column(n))])
                    return
            if _rebinds(s, name):
                return
