"""GT702: `torch.autograd.grad` asked for the gradient of an input outside the graph."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.data_values import marked_later
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.nodes import walk

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
    An input copied or viewed in the call itself (`torch.autograd.grad(L, params[0].clone())`,
    `[p.view(-1) for p in ps]`, `w.detach().requires_grad_()`) is a new tensor made after the
    outputs: it took no part in their graph and the call raises one of the two errors (GradNorm
    taking the gradient of a clone of the shared weight, checked on torch 2.13). So does a local
    name bound to such a copy and never used before the call.
    Inputs are read in functions and in scripts (module level).
    Known limits: only inputs that are local names bound in the same function (or script),
    or made in the call; an input flagged, written in place, aliased, put in a container or
    handed to a function that may mark it (one of the file that sets `requires_grad`, or
    another library's whose result is dropped) between its making and the call (or in a loop
    around the call) is trusted (NOTE [data values]).
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
        fn = ctx.function or ctx.tree  # a script's names too
        scope = ctx.scope()
        allow_unused = any(k.arg in ("allow_unused", "materialize_grads") and not (
            isinstance(k.value, ast.Constant) and k.value.value is False) for k in node.keywords)
        if isinstance(inputs, (ast.ListComp, ast.GeneratorExp)):
            names = [inputs.elt]
        for i, n in enumerate(names):
            made = _made_here(n, ctx)
            if made is not None and (not allow_unused or made == "detach"):
                yield self.report(node, ctx, name=_clip(ctx.source(n)), line=node.lineno,
                                  why=MADE_WHY, error=MADE_ERROR if made == "detach" else
                                  f"The differentiated Tensor at index {i} appears to not have "
                                  f"been used in the graph")
                return
            if not isinstance(n, ast.Name):
                continue
            b = scope.binding_before(n.id, node.lineno)
            if b is None or not isinstance(b.stmt, ast.Assign) or b.value is None or \
                    not _dominates(fn, b.stmt, node):
                continue
            if marked_later(ctx, scope, n.id, b.stmt, node):
                continue
            why = _never_requires_grad(b.value, ctx)
            rel = (Related(ctx.path, node.lineno, "the gradient is asked for here",
                           ctx.column(node)),)
            if why is not None:
                yield self.report(b.stmt, ctx, related=rel, name=n.id, why=why, line=node.lineno,
                                  error="One of the differentiated Tensors does not require grad")
            elif not allow_unused and (_requires_grad_created(b.value) or
                                       _made_here(b.value, ctx) is not None) and \
                    not _used_between(fn, n.id, b.stmt, inputs):
                rel = (Related(ctx.path, b.line, f"`{n.id}` is made here and never used after",
                               ctx.column(b.stmt)),)
                yield self.report(
                    n, ctx, related=rel, name=n.id, line=node.lineno,
                    why=f"(made at line {b.line}) is never used, so it is not in the graph of "
                        f"the outputs",
                    error=f"The differentiated Tensor at index {i} appears to not have been used "
                          f"in the graph. Set allow_unused=True if this is the desired behavior.")


# ops whose result is always a new tensor object (a copy, a view, a detached alias): one made
# after the outputs were computed is not in their graph (`.to()`/`.float()`/`.contiguous()`
# may return the tensor itself, and are not here)
MADE = frozenset({"clone", "detach", "view", "reshape", "flatten", "unsqueeze", "squeeze",
                  "permute", "transpose", "t", "expand", "repeat", "view_as", "expand_as",
                  "reshape_as", "narrow", "select", "unflatten"})
MADE_TORCH = frozenset({"torch.cat", "torch.stack", "torch.clone", "torch.flatten",
                        "torch.reshape", "torch.squeeze", "torch.unsqueeze"})
MADE_WHY = ("is made in the call itself, after the outputs were computed, so it is a new "
            "tensor that took no part in their graph (ask for the gradient of the tensor it "
            "copies, and copy the result)")
MADE_ERROR = "One of the differentiated Tensors does not require grad"


def _made_here(e: ast.expr, ctx: Context) -> str | None:
    """The op (``clone``, ``detach``, ``view``...) when ``e`` computes a new tensor (through
    ``requires_grad_()``, which returns its tensor), else None. Arithmetic is not read (``a +
    b`` of two lists of parameters is a list of the same tensors), nor a subscript (an element
    of a list, or a view of a tensor: which one cannot be told)."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
            e.func.attr == "requires_grad_":
        e = e.func.value
    if not isinstance(e, ast.Call):
        return None
    if isinstance(e.func, ast.Attribute) and e.func.attr in MADE and not (
            isinstance(e.func.value, ast.Name) and e.func.value.id in ("torch", "F")):
        if e.func.attr == "detach" and e.args:
            return None
        return e.func.attr
    q = ctx.qualified_name(e.func) or ""
    return q.rpartition(".")[2] if q in MADE_TORCH else None


def _clip(src: str) -> str:
    src = " ".join(src.split())
    return src if len(src) <= 40 else src[:37] + "..."


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
