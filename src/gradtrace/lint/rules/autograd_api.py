"""GT7xx: misuse of the autograd API (custom Functions, ``torch.autograd.grad``)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.nodes import walk

FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function",
                            "torch.autograd.function.InplaceFunction",
                            "torch.autograd.InplaceFunction"})
# constructors whose result is a new leaf that does not require grad (unless told to)
FRESH = frozenset({
    "torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.from_numpy", "torch.zeros",
    "torch.ones", "torch.randn", "torch.rand", "torch.empty", "torch.full", "torch.arange",
    "torch.linspace", "torch.eye", "torch.randint", "torch.zeros_like", "torch.ones_like",
    "torch.randn_like", "torch.rand_like", "torch.empty_like", "torch.full_like",
})
# methods that keep "no requires_grad" (a copy, a move, a view of a plain tensor)
KEEP = frozenset({"to", "cpu", "cuda", "float", "double", "half", "clone", "contiguous",
                  "view", "reshape", "squeeze", "unsqueeze", "detach", "type", "flatten",
                  "permute", "transpose", "t", "expand", "repeat"})

UNDECIDABLE: list[tuple[str, str]] = [
    ("A custom `autograd.Function` whose `backward` returns a tuple built at run time "
     "(`return tuple(grads)`, `return helper(...)`), or whose `forward` takes `*args`",
     "the number of gradients is only known when backward runs; see runtime: gradtrace run"),
    ("`torch.autograd.grad` over tensors made in another function or stored on `self`",
     "whether they require grad and took part in the graph is only known at run time; "
     "see runtime: gradtrace run"),
]


def _is_function_class(node: ast.ClassDef, ctx: Context) -> bool:
    return any((ctx.qualified_name(b) or "") in FUNCTION_BASES for b in node.bases)


def _method(node: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for s in node.body:
        if isinstance(s, ast.FunctionDef) and s.name == name:
            return s
    return None


def _returns(fn: ast.FunctionDef) -> Iterator[ast.Return]:
    """Return statements of ``fn`` itself (not of nested functions or classes)."""
    stack: list[ast.AST] = list(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Return):
            yield n
        elif isinstance(n, (*FUNCTION_TYPES, ast.ClassDef, ast.Lambda)):
            continue
        elif isinstance(n, ast.stmt):
            stack.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, ast.stmt)
                         or isinstance(c, ast.excepthandler) or isinstance(c, ast.match_case))
        else:
            stack.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, ast.stmt))


def _tuple_items(e: ast.expr | None, fn: ast.FunctionDef) -> list[ast.expr] | None:
    """The items a ``return`` gives back, when that is certain from the source, else None."""
    if e is None or (isinstance(e, ast.Constant) and e.value is None):
        return None  # `return None`: one None gradient, but also a bare early exit; skip
    if isinstance(e, ast.Tuple):
        return None if any(isinstance(x, ast.Starred) for x in e.elts) else list(e.elts)
    if isinstance(e, ast.Name):
        values = [s.value for s in walk(fn) if isinstance(s, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == e.id for t in s.targets)]
        if len(values) == 1 and isinstance(values[0], ast.Tuple):
            return _tuple_items(values[0], fn)
        if not values and e.id in {a.arg for a in fn.args.args[1:]}:
            return [e]  # the incoming gradient itself: one tensor
        return None
    grads = {a.arg for a in fn.args.args[1:]}
    return [e] if _single(e, grads) else None


TUPLE_METHODS = frozenset({"split", "chunk", "unbind", "max", "min", "sort", "topk",
                           "kthvalue", "mode", "median", "aminmax", "tensor_split"})


def _single(e: ast.expr, grads: set[str]) -> bool:
    """Whether ``e`` is certainly one tensor (not a tuple): built from a backward argument
    (``grad_output``) by arithmetic or tensor methods."""
    if isinstance(e, ast.Name):
        return e.id in grads
    if isinstance(e, ast.UnaryOp):
        return not isinstance(e.operand, (ast.Tuple, ast.List))
    if isinstance(e, ast.BinOp):
        if isinstance(e.left, (ast.Tuple, ast.List)) or isinstance(e.right, (ast.Tuple, ast.List)):
            return False
        if isinstance(e.op, (ast.Sub, ast.Div, ast.MatMult, ast.Pow, ast.FloorDiv)):
            return True
        return _single(e.left, grads) or _single(e.right, grads)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        if e.func.attr in TUPLE_METHODS:
            return False
        if _single(e.func.value, grads):
            return True
    return False


class BackwardGradientCountMismatch(Rule):
    """A custom `autograd.Function.backward` returns a different number of gradients than
    `forward` takes inputs.

    Why: autograd needs exactly one gradient (or `None`) per input given to `apply`, besides
    `ctx`. Fewer, or extra ones that are not `None`, make backward fail with
    `RuntimeError: function MyFnBackward returned an incorrect number of gradients
    (expected 2, got 1)`. Extra trailing `None`s are accepted. Return `None` for inputs that
    need no gradient (non-tensor arguments, flags, integers).
    Known limits: only counts returns whose size is certain from the source (a tuple literal,
    a single arithmetic expression on `grad_output`); `*args` forwards and inputs with
    default values that the caller may or may not pass are only checked against the bounds.
    """

    code = "GT701"
    gate_statements = True
    name = "backward-gradient-count-mismatch"
    message = ("`{cls}.backward` returns {got} gradient{s} but `forward` takes {expected} "
               "input{es} besides ctx: backward raises `RuntimeError: function {cls}Backward "
               "returned an incorrect number of gradients (expected {expected}, got {got})`")
    triggers = ("Function",)
    examples = [
        Bad("""
            import torch

            class ScaledMul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w, scale):
                    ctx.save_for_backward(x, w)
                    ctx.scale = scale
                    return x * w * scale

                @staticmethod
                def backward(ctx, grad_out):
                    x, w = ctx.saved_tensors
                    return grad_out * w * ctx.scale, grad_out * x * ctx.scale
            """, at=(13, 8)),
        Bad("""
            from torch.autograd import Function

            class Clip(Function):
                @staticmethod
                def forward(ctx, x):
                    return x.clamp(-1, 1)

                @staticmethod
                def backward(ctx, g):
                    return g, g
            """, at=(10, 8)),
        Good("""
            import torch

            class ScaledMul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w, scale):
                    ctx.save_for_backward(x, w)
                    ctx.scale = scale
                    return x * w * scale

                @staticmethod
                def backward(ctx, grad_out):
                    x, w = ctx.saved_tensors
                    if not ctx.needs_input_grad[0]:
                        return None, grad_out * x * ctx.scale, None
                    return grad_out * w * ctx.scale, grad_out * x * ctx.scale, None, None
            """),
        Good("""
            import torch

            class Square(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x ** 2

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(inputs[0])

                @staticmethod
                def backward(ctx, g):
                    (x,) = ctx.saved_tensors
                    return 2 * x * g
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not node.bases or not _is_function_class(node, ctx):
            return
        fwd, bwd = _method(node, "forward"), _method(node, "backward")
        if fwd is None or bwd is None or fwd.args.vararg is not None:
            return
        pos = [*fwd.args.posonlyargs, *fwd.args.args]
        if _method(node, "setup_context") is None:
            pos = pos[1:]  # ctx
        total, required = len(pos), len(pos) - len(fwd.args.defaults)
        for ret in _returns(bwd):
            items = _tuple_items(ret.value, bwd)
            if items is None:
                continue
            got = len(items)
            extra = items[total:]
            if got >= required and all(isinstance(x, ast.Constant) and x.value is None
                                       for x in extra):
                continue
            expected = required if got < required else total
            rel = (Related(ctx.path, fwd.lineno, f"`forward` takes {expected} input"
                           f"{'s' if expected != 1 else ''} here (besides ctx)",
                           ctx.column(fwd)),)
            yield self.report(ret, ctx, related=rel, cls=node.name, got=got,
                              s="s" if got != 1 else "", expected=expected,
                              es="s" if expected != 1 else "")


class GradInputNotInGraph(Rule):
    """`torch.autograd.grad` is asked for the gradient of an input that cannot have taken part
    in the graph.

    Why: an input made by `torch.tensor(...)`, `torch.zeros(...)`, `.detach()` (and never given
    `requires_grad`) has no way into the graph: `torch.autograd.grad` raises
    `RuntimeError: One of the differentiated Tensors does not require grad` (even with
    `allow_unused=True`). An input that requires grad but is never used before the call
    (typically the output was computed from the original tensor instead of the new
    `x_in = x.detach().requires_grad_()`) raises `RuntimeError: The differentiated Tensor at
    index 0 appears to not have been used in the graph. Set allow_unused=True if this is the
    desired behavior.`
    Known limits: only inputs that are local names bound in the same function; a function
    that mentions `requires_grad` after making the input is trusted.
    """

    code = "GT702"
    gate_statements = True
    name = "grad-input-not-in-graph"
    message = "`{name}` {why}: `torch.autograd.grad` (line {line}) raises `RuntimeError: {error}`"
    triggers = ("grad",)
    examples = [
        Bad("""
            import torch

            def gradient_penalty(D, real, fake):
                eps = torch.rand(real.size(0), 1, 1, 1)
                mix = torch.tensor(eps * real + (1 - eps) * fake)
                score = D(mix)
                g, = torch.autograd.grad(score.sum(), mix, create_graph=True)
                return ((g.flatten(1).norm(dim=1) - 1) ** 2).mean()
            """, at=(5, 4)),
        Bad("""
            import torch

            def input_gradient(model, x):
                x_in = x.detach().requires_grad_()
                out = model(x)
                return torch.autograd.grad(out.sum(), x_in)[0]
            """, at=(6, 42)),
        Good("""
            import torch

            def gradient_penalty(D, real, fake):
                eps = torch.rand(real.size(0), 1, 1, 1)
                mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
                score = D(mix)
                g, = torch.autograd.grad(score.sum(), mix, create_graph=True)
                return ((g.flatten(1).norm(dim=1) - 1) ** 2).mean()
            """),
        Good("""
            import torch

            def hvp(loss_fn, w, v):
                w = w.detach().clone()
                w.requires_grad = True
                g, = torch.autograd.grad(loss_fn(w), w, create_graph=True)
                return torch.autograd.grad(g @ v, w)[0]
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if ctx.qualified_name(node.func) != "torch.autograd.grad":
            return
        inputs = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "inputs"), None)
        if inputs is None:
            return
        names = inputs.elts if isinstance(inputs, (ast.List, ast.Tuple)) else [inputs]
        fn = ctx.function
        if fn is None:
            return
        scope = ctx.scope()
        allow_unused = any(k.arg in ("allow_unused", "materialize_grads") and not (
            isinstance(k.value, ast.Constant) and k.value.value is False) for k in node.keywords)
        for i, n in enumerate(names):
            if not isinstance(n, ast.Name):
                continue
            b = scope.binding_before(n.id, node.lineno)
            if b is None or not isinstance(b.stmt, ast.Assign) or b.value is None or \
                    not _dominates(fn, b.stmt, node):
                continue
            if _mentions_requires_grad(ctx, b.line, fn, b.value):
                continue
            why = _never_requires_grad(b.value, ctx)
            rel = (Related(ctx.path, node.lineno, "the gradient is asked for here",
                           ctx.column(node)),)
            if why is not None:
                yield self.report(b.stmt, ctx, related=rel, name=n.id, why=why, line=node.lineno,
                                  error="One of the differentiated Tensors does not require grad")
            elif not allow_unused and _requires_grad_created(b.value) and \
                    not _used_between(fn, n.id, b.stmt, inputs):
                rel = (Related(ctx.path, b.line, f"`{n.id}` is made here and never used after",
                               ctx.column(b.stmt)),)
                yield self.report(
                    n, ctx, related=rel, name=n.id, line=node.lineno,
                    why=f"(made at line {b.line}) is never used, so it is not in the graph of "
                        f"the outputs",
                    error=f"The differentiated Tensor at index {i} appears to not have been used "
                          f"in the graph. Set allow_unused=True if this is the desired behavior.")


def _never_requires_grad(v: ast.expr, ctx: Context) -> str | None:
    """Why ``v`` is a tensor that does not require grad, or None when that is not certain."""
    e = v
    while True:
        if isinstance(e, ast.Subscript):
            e = e.value
        elif isinstance(e, ast.Attribute) and e.attr in ("T", "mT"):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                e.func.attr in KEEP:
            if e.func.attr == "detach":
                return "is made with `.detach()` and never given `requires_grad`"
            e = e.func.value
        else:
            break
    if isinstance(e, ast.Attribute) and e.attr == "data":
        return "is read through `.data` and never given `requires_grad`"
    if isinstance(e, ast.Call):
        qual = ctx.qualified_name(e.func) or ""
        if qual in FRESH and not any(k.arg == "requires_grad" for k in e.keywords):
            what = qual.rpartition(".")[2]
            return f"is a new tensor from `{what}(...)` without `requires_grad=True`"
    return None


def _requires_grad_created(v: ast.expr) -> bool:
    """``x.detach().requires_grad_()`` or ``torch.zeros(..., requires_grad=True)``."""
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and \
            v.func.attr == "requires_grad_":
        return True
    return isinstance(v, ast.Call) and any(
        k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in v.keywords)


def _mentions_requires_grad(ctx: Context, line: int, fn: ast.AST, value: ast.expr) -> bool:
    """``requires_grad`` written after ``line`` in ``fn`` (outside the binding's own value)."""
    end = fn.end_lineno or line  # type: ignore[attr-defined]
    first = (value.end_lineno or line) + 1
    if any("requires_grad" in ctx.code_line(i) for i in range(first, end + 1)):
        return True
    return False


def _used_between(fn: ast.AST, name: str, bind: ast.stmt, inputs: ast.expr) -> bool:
    """Whether ``name`` is loaded anywhere in ``fn`` besides its binding, the ``inputs``
    argument, and ``requires_grad_``/``retain_grad`` calls on it."""
    skip = {id(n) for n in walk(bind)} | {id(n) for n in walk(inputs)}
    for n in walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr in ("requires_grad_", "retain_grad") and dotted(n.func.value) == name:
            skip.add(id(n.func.value))
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               and id(n) not in skip for n in walk(fn))


def _dominates(fn: ast.AST, bind: ast.stmt, use: ast.AST) -> bool:
    """Whether ``use`` comes after ``bind`` in the same block or nested in a later statement
    of that block (so every path to ``use`` went through ``bind``; early exits aside)."""
    stack: list[ast.AST] = [fn]
    while stack:
        n = stack.pop()
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if isinstance(block, list) and bind in block:
                i = block.index(bind)
                return any(use is x for s in block[i + 1:] for x in walk(s))
            if isinstance(block, list):
                stack.extend(x for x in block if isinstance(x, ast.stmt))
        for h in getattr(n, "handlers", ()):
            stack.append(h)
        for c in getattr(n, "cases", ()):
            stack.append(c)
    return False
