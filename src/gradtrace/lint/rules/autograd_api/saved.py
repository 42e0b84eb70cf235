"""GT709: a value that is not a tensor given to `ctx.save_for_backward`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import scope_nodes, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.functions import _is_function_class, _method

# methods whose result is a Python number, a tuple of them or a torch.Size, never a tensor
NUMBER_METHODS = frozenset({"size", "dim", "numel", "item", "tolist", "element_size",
                            "nelement", "ndimension", "stride", "get_device"})
NUMBER_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad"})
NUMBER_FUNCS = frozenset({"len", "int", "float", "tuple", "list", "bool", "str", "range"})


def _not_tensor(e: ast.AST) -> str | None:
    """What ``e`` is when it can only be a non-tensor (a literal, ``x.shape``, ``x.size()``,
    ``len(...)``), else None. ``None`` itself is accepted by ``save_for_backward``."""
    if isinstance(e, ast.Constant):
        return None if e.value is None else type(e.value).__name__
    if isinstance(e, (ast.Tuple, ast.List, ast.Dict, ast.Set)):
        return type(e).__name__.lower()
    if isinstance(e, ast.Attribute) and e.attr in NUMBER_ATTRS:
        return f"`.{e.attr}`"
    if isinstance(e, ast.Call):
        f = e.func
        if isinstance(f, ast.Attribute) and f.attr in NUMBER_METHODS:
            return f"`.{f.attr}()`"
        if isinstance(f, ast.Name) and f.id in NUMBER_FUNCS:
            return f"`{f.id}(...)`"
    return None


def _apply_calls(cls: ast.ClassDef, ctx: Context) -> list[ast.Call]:
    """The calls of ``Cls.apply`` in the file (directly, or through a name bound to it)."""
    def make() -> list[ast.Call]:
        aliases = {f"{cls.name}.apply"}
        for n in walk(ctx.tree):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and \
                    dotted(n.value) == f"{cls.name}.apply" and dotted(n.targets[0]):
                aliases.add(dotted(n.targets[0]))  # type: ignore[arg-type]
        return [n for n in walk(ctx.tree) if isinstance(n, ast.Call) and dotted(n.func) in aliases]
    return ctx.memo(f"gt709-apply-{cls.name}", cls, make)


class NonTensorSavedForBackward(Rule):
    """`ctx.save_for_backward(...)` is given something that is not a tensor.

    Why: `save_for_backward` only keeps tensors (or `None`): it checks each argument and
    raises `TypeError: save_for_backward can only save variables, but argument 1 is of type
    tuple` on the first forward (BEVDet's voxel pooling saved its output shape this way).
    Shapes, sizes, flags and other Python values belong on `ctx` itself: `ctx.out_shape =
    out_shape`, read back in `backward`.
    Known limits: an argument that is a literal, `x.shape`/`x.size()`/`len(...)`, a name
    bound to one in `forward`, or a parameter of `forward` that a `Cls.apply(...)` call of the
    file passes such a value.
    """

    code = "GT709"
    name = "non-tensor-saved-for-backward"
    message = ("`{arg}` is {what}, not a tensor: `save_for_backward` raises TypeError on the "
               "first forward; keep it on ctx instead (`ctx.{attr} = {arg}`)")
    triggers = ("save_for_backward",)
    examples = [
        Bad("""
            import torch

            class Pool(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, idx):
                    n = x.size(0)
                    ctx.save_for_backward(idx, n)
                    return x[idx]
            """, at=(7, 35)),
        Good("""
            import torch

            class Pool(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, idx):
                    ctx.n = x.size(0)
                    ctx.save_for_backward(idx)
                    return x[idx]
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not _is_function_class(node, ctx):
            return
        fwd = _method(node, "forward")
        if fwd is None or not fwd.args.args:
            return
        params = [a.arg for a in fwd.args.args]
        ctx_name = params[0]
        scope = ctx.scope(fwd)
        for call in (n for n in scope_nodes(fwd) if isinstance(n, ast.Call)):
            f = call.func
            if not (isinstance(f, ast.Attribute) and f.attr == "save_for_backward"
                    and isinstance(f.value, ast.Name) and f.value.id == ctx_name):
                continue
            for arg in call.args:
                found = self._why(arg, node, fwd, params, scope, ctx)
                if found is not None:
                    what, related = found
                    attr = arg.id if isinstance(arg, ast.Name) else "saved"
                    yield self.report(arg, ctx, arg=ctx.source(arg)[:40], what=what, attr=attr,
                                      related=related)

    def _why(self, arg: ast.expr, cls: ast.ClassDef, fwd: ast.FunctionDef, params: list[str],
             scope, ctx: Context):  # type: ignore[no-untyped-def]
        what = _not_tensor(arg)
        if what is not None:
            return f"a {what}" if not what.startswith("`") else f"the value of {what}", []
        if not isinstance(arg, ast.Name):
            return None
        bs = scope.bindings.get(arg.id, ())
        if bs:
            if len(bs) == 1 and bs[0].value is not None and isinstance(bs[0].stmt, ast.Assign):
                what = _not_tensor(bs[0].value)
                if what is not None:
                    return (f"bound to {ctx.source(bs[0].value)[:30]} (a "
                            f"{what.strip('`')}) at line {bs[0].line}", [])
            return None
        if arg.id not in params[1:]:
            return None
        i = params.index(arg.id) - 1
        for call in _apply_calls(cls, ctx):
            if i < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:i + 1]):
                what = _not_tensor(call.args[i])
                if what is not None:
                    return (f"a parameter of forward that `{ctx.source(call.func)}` is given "
                            f"{ctx.source(call.args[i])[:30]} for (line {call.lineno})",
                            [Related(ctx.path, call.lineno, "the non-tensor value is passed "
                                     "here", ctx.column(call.args[i]))])
        return None
