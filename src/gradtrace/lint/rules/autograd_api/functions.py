"""GT701, GT702: custom `autograd.Function`s and `torch.autograd.grad` inputs."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.int_values import integer_valued
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.nodes import walk

FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function",
                            "torch.autograd.function.InplaceFunction",
                            "torch.autograd.InplaceFunction"})
def _is_function_class(node: ast.ClassDef, ctx: Context) -> bool:
    return any((ctx.qualified_name(b) or "") in FUNCTION_BASES for b in node.bases)


def only_called_directly(node: ast.ClassDef, ctx: Context) -> bool:
    """The Function class is named in the file, and only to run one of its methods as a plain
    method: ``Dice().forward(a, b)`` (a metric). Autograd then never records it: no instance is
    called, ``apply`` never runs, its ``backward`` never runs (checked on torch 2.13: the
    instance only warns, the method returns its value)."""
    def make() -> bool:
        parents = file_parents(ctx)
        seen = False
        for n in walk(ctx.tree):
            if not (isinstance(n, ast.Name) and n.id == node.name
                    and isinstance(n.ctx, ast.Load)):
                continue
            if node.lineno <= n.lineno <= (node.end_lineno or 0):
                continue  # inside the class: its own methods
            seen = True
            made = parents.get(id(n))
            if not (isinstance(made, ast.Call) and made.func is n and isinstance(
                    attr := parents.get(id(made)), ast.Attribute) and attr.value is made
                    and attr.attr not in ("apply", "__call__")
                    and isinstance(run := parents.get(id(attr)), ast.Call)
                    and run.func is attr):
                return False
        return seen
    return ctx.memo("autograd-fn-direct:" + node.name, node, make)  # type: ignore[no-any-return]


def _method(node: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    for s in node.body:
        if isinstance(s, ast.FunctionDef) and s.name == name:
            return s
    return None


def _returns(fn: ast.FunctionDef) -> Iterator[ast.Return]:
    """Return statements of ``fn`` itself (not of nested functions or classes) that can run:
    one after a ``raise`` or ``return`` of its own block is dead (BigVGAN's inference-only
    ``backward`` opens with ``raise NotImplementedError``)."""
    stack: list[ast.AST] = list(_live(fn.body))
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Return):
            yield n
        elif isinstance(n, (*FUNCTION_TYPES, ast.ClassDef, ast.Lambda)):
            continue
        elif isinstance(n, (ast.stmt, ast.excepthandler, ast.match_case)):
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                block = getattr(n, field, None)
                if isinstance(block, list):
                    stack.extend(_live(block))


def _live(block: list) -> list:
    """``block`` up to its first ``raise`` or ``return``: what follows never runs."""
    for i, s in enumerate(block):
        if isinstance(s, (ast.Raise, ast.Return)):
            return block[:i + 1]
    return block


def _tuple_items(e: ast.expr | None, fn: ast.FunctionDef) -> list[ast.expr] | None:
    """The items a ``return`` gives back, when that is certain from the source, else None
    (for ``backward``'s gradients, GT701, and ``forward``'s outputs, GT135)."""
    if e is None or (isinstance(e, ast.Constant) and e.value is None):
        return None  # `return None`: one None gradient, but also a bare early exit; skip
    if isinstance(e, ast.Tuple):
        return None if any(isinstance(x, ast.Starred) for x in e.elts) else list(e.elts)
    if isinstance(e, ast.Name):
        stores = [n for n in walk(fn) if isinstance(n, ast.Name) and n.id == e.id
                  and isinstance(n.ctx, ast.Store)]
        values = [s.value for s in walk(fn) if isinstance(s, ast.Assign) and len(s.targets) == 1
                  and isinstance(s.targets[0], ast.Name) and s.targets[0].id == e.id]
        if len(stores) == 1 and len(values) == 1 and isinstance(values[0], ast.Tuple):
            return _tuple_items(values[0], fn)  # bound once, to a tuple literal
        if not stores and e.id in {a.arg for a in fn.args.args[1:]}:
            return [e]  # an argument itself (the incoming gradient): one tensor
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
    An input with a default value that every `apply(...)` call of the file passes (a
    `training` flag) needs its gradient (or `None`) too; a `backward` that computes the
    gradients but never returns them returns `None`, one gradient.
    Known limits: only counts returns whose size is certain from the source (a tuple literal,
    a single arithmetic expression on `grad_output`); `*args` forwards and inputs with
    default values are checked against the `apply(...)` calls of the same file when they all
    agree, else only against the bounds. A `backward` without any `return` of a value is
    reported for two or more inputs (one input then gets a `None` gradient, which autograd
    accepts); one that returns on some paths and may fall off the end on others is trusted
    (those paths are usually the ones where no input needs a gradient).
    """

    code = "GT701"
    gate_statements = True
    name = "backward-gradient-count-mismatch"
    message = ("`{cls}.backward` {returns} but {where} {inputs}: the backward, run whenever an "
               "input requires grad, raises `RuntimeError: function {cls}Backward returned an "
               "incorrect number of gradients (expected {expected}, got {got})`")
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
        Bad("""
            import torch

            class StochasticSign(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, training=True):
                    return x.sign() if not training else (x + torch.rand_like(x) - 0.5).sign()

                @staticmethod
                def backward(ctx, grad_output):
                    return grad_output

            def binarize(self, h):
                return StochasticSign.apply(torch.tanh(h), self.training)
            """, at=(10, 8)),
        Bad("""
            from torch.autograd import Function

            class Adder(Function):
                @staticmethod
                def forward(ctx, w, x):
                    ctx.save_for_backward(w, x)
                    return -(w - x).abs().sum()

                @staticmethod
                def backward(ctx, g):
                    w, x = ctx.saved_tensors
                    grad_w = (x - w) * g
                    grad_x = (w - x).clamp(-1, 1) * g
            """, at=(10, 4)),
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

            class StochasticSign(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, training=True):
                    return x.sign() if not training else (x + torch.rand_like(x) - 0.5).sign()

                @staticmethod
                def backward(ctx, grad_output):
                    if ctx.needs_input_grad[0]:
                        return grad_output, None
                    raise RuntimeError("no gradient needed")

            def binarize(self, h):
                return StochasticSign.apply(torch.tanh(h), self.training)
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
        if fwd is None or bwd is None or _never_differentiated(fwd):
            return
        pos = [*fwd.args.posonlyargs, *fwd.args.args]
        if any(dotted(d) == "classmethod" for d in fwd.decorator_list):
            pos = pos[1:]  # `cls`, bound by the call: `forward(cls, ctx, ...)`
        if _method(node, "setup_context") is None:
            pos = pos[1:]  # ctx
        total, required = len(pos), len(pos) - len(fwd.args.defaults)
        passed = _apply_arity(ctx).get(node.name)
        where = "`forward` takes"
        if passed is not None and (fwd.args.vararg is not None or required <= passed <= total):
            total = required = passed  # every `apply` call gives exactly this many
            where = f"`{node.name}.apply` is given"
        elif fwd.args.vararg is not None:
            return
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
            yield self._finding(ret, ctx, node, fwd, where, got, expected,
                                f"returns {got} gradient{'s' if got != 1 else ''}")
        if required >= 2 and _computes(bwd) and _falls_off(bwd.body) and not any(
                r.value is not None for r in _returns(bwd)):
            yield self._finding(bwd, ctx, node, fwd, where, 1, required,
                                "never returns the gradients it computes (it returns None, "
                                "one gradient)")

    def _finding(self, at: ast.AST, ctx: Context, node: ast.ClassDef, fwd: ast.FunctionDef,
                 where: str, got: int, expected: int, returns: str) -> Finding:
        ins = f"{expected} input{'s' if expected != 1 else ''}"
        if where.startswith("`forward`"):
            ins += " besides ctx"
        rel = (Related(ctx.path, fwd.lineno, "`forward` takes its inputs here (besides ctx)",
                       ctx.column(fwd)),)
        return self.report(at, ctx, related=rel, cls=node.name, returns=returns, where=where,
                           inputs=ins, got=got, expected=expected)


def _apply_arity(ctx: Context) -> dict[str, int]:
    """Class name -> the number of inputs every ``Cls.apply(...)`` call of the file gives
    (also through ``f = Cls.apply`` / ``self.f = Cls.apply``); classes whose calls disagree,
    use ``*args``/keywords or are never called are left out."""
    def make() -> dict[str, int]:
        alias: dict[str, str] = {}
        calls: list[ast.Call] = []
        for n in walk(ctx.tree):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute) \
                    and n.value.attr == "apply" and isinstance(n.value.value, ast.Name):
                for t in n.targets:
                    name = dotted(t)
                    if name is not None:
                        alias[name] = n.value.value.id
            elif isinstance(n, ast.Call):
                calls.append(n)
        counts: dict[str, set[int | None]] = {}
        for c in calls:
            f = c.func
            if isinstance(f, ast.Attribute) and f.attr == "apply" \
                    and isinstance(f.value, ast.Name):
                cls = f.value.id
            else:
                cls = alias.get(dotted(f) or "")
                if cls is None:
                    continue
            exact = not c.keywords and not any(isinstance(a, ast.Starred) for a in c.args)
            counts.setdefault(cls, set()).add(len(c.args) if exact else None)
        return {k: next(iter(v)) for k, v in counts.items()
                if len(v) == 1 and None not in v}  # type: ignore[misc]
    return ctx.memo("gt7-apply-arity", ctx.tree, make)


def _never_differentiated(fwd: ast.FunctionDef) -> bool:
    """Whether every value ``forward`` returns is one it passed to
    ``ctx.mark_non_differentiable(...)`` or an integer tensor (:func:`integer_valued`): no
    output requires grad, so autograd never calls ``backward`` (an index kernel's
    ``return ()`` is never checked)."""
    marked: set[str] = set()
    for n in walk(fwd):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "mark_non_differentiable":
            marked |= {a.id for a in n.args if isinstance(a, ast.Name)}
    rets = [r for r in walk(fwd) if isinstance(r, ast.Return)]
    if not rets:
        return False
    for r in rets:
        v = r.value
        items = v.elts if isinstance(v, (ast.Tuple, ast.List)) else [v]
        if not items or not all(isinstance(x, ast.Name) and x.id in marked
                                or integer_valued(x, fwd) for x in items):
            return False
    return True


def _computes(fn: ast.FunctionDef) -> bool:
    """Whether ``fn`` computes something (an assignment), unlike a stub of ``pass``/``raise``."""
    return any(isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)) for s in walk(fn))


def _falls_off(body: list[ast.stmt]) -> bool:
    """Whether the end of ``body`` is certainly reached on some path (no exception raised):
    False when every path returns or raises, or when a loop, ``try`` or ``match`` makes it
    uncertain."""
    return _completes(body) is True


def _completes(body: list[ast.stmt]) -> bool | None:
    """True: the block can finish normally; False: it never does; None: unknown."""
    for s in body:
        r = _stmt_completes(s)
        if r is not True:
            return r
    return True


def _stmt_completes(s: ast.stmt) -> bool | None:
    if isinstance(s, (ast.Return, ast.Raise)):
        return False
    if isinstance(s, ast.Assert):
        return not (isinstance(s.test, ast.Constant) and not s.test.value)
    if isinstance(s, ast.If):
        a, b = _completes(s.body), _completes(s.orelse)
        if a is True or b is True:
            return True
        return False if a is False and b is False else None
    if isinstance(s, (ast.With, ast.AsyncWith)):
        return _completes(s.body)
    if isinstance(s, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Pass,
                      ast.Delete, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal,
                      *FUNCTION_TYPES, ast.ClassDef)):
        return True
    return None
