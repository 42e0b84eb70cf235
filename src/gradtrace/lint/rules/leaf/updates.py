"""GT301-GT302: manual updates that break leaf tensors (rebinding; in-place with grad on)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.caller_grad import callers_grad_off
from gradtrace.lint.analysis.grad_values import runs_with_grad
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.layer_params import layer_parameter
from gradtrace.lint.analysis.param_attrs import file_freezes
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._modules import module_ctor, owns_params
from gradtrace.lint.rules.leaf._origin import (
    calls_backward, filled_after_flag, flag_cleared_before, flagged_leaf, frozen_before,
    moved_leaf, parameter_loop_of, requires_grad_set,
)
from gradtrace.lint.rules.leaf._passed import passed_parameter
from gradtrace.lint.rules.leaf._shared_view import view_writes
from gradtrace.lint.rules.leaf._writes import (
    forward_parameter_writes, getattr_write, in_place_writes, instance_parameter_writes,
    own_statements, passed_parameter_writes, write_error,
)
from gradtrace.lint.rules.leaf._tensors import grad_leaf_binding, reads_grad_of, torch_alias
from gradtrace.lint.rules.leaf._leaf_text import _helper_made, _maybe_leaf_text, _mentions
from gradtrace.lint.rules.leaf._releaf import _grad_read_after, _releafed

SYMBOL = {ast.Sub: "-", ast.Add: "+"}


class LeafReboundByUpdate(Rule):
    """`w = w - lr * w.grad` rebinds the name to a new tensor instead of updating the leaf.

    Why: `w - lr * w.grad` is a new tensor computed from `w`; with grad enabled it is a
    non-leaf (`grad_fn=SubBackward0`) whose `.grad` is never populated, so the next
    `w.grad.zero_()` raises `AttributeError: 'NoneType' object has no attribute 'zero_'`
    (pytorch-facts.md#rebound-leaf) and reading `w.grad` warns
    (pytorch-facts.md#non-leaf-grad). Under `no_grad` the new tensor does
    not require grad at all. For a loop variable over `model.parameters()` the model is never
    updated. Update in place under `torch.no_grad()`: `w -= lr * w.grad`.
    Known limits: only the direct spelling `w = w ± <expr using w.grad>` is recognised, in a
    loop or followed by a read of `w.grad`. Code that makes `w` a fresh leaf again (another
    binding from `.detach()`/`.data` or from `Variable(w, requires_grad=True)` /
    `torch.tensor(w, requires_grad=True)`, `w.detach_()`, or `requires_grad_()` after a
    `no_grad` rebinding, as PGD attack loops do) is left alone.
    """

    code = "GT301"
    gate_statements = True
    name = "leaf-rebound-by-update"
    message = ("`{name} = {name} {op} ...` binds `{name}` to a new non-leaf tensor; the leaf is "
               "not updated and the new `{name}.grad` stays None")
    fix_title = "Update the leaf in place under `torch.no_grad()`"
    fix_safety = "unsafe"
    triggers = (".grad",)
    examples = [
        Bad("""
            import torch
            w = torch.randn(3, requires_grad=True)
            for x, y in data:
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                w = w - 0.1 * w.grad
                w.grad.zero_()
            """, fixed="""
            import torch
            w = torch.randn(3, requires_grad=True)
            for x, y in data:
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                with torch.no_grad():
                    w -= 0.1 * w.grad
                w.grad.zero_()
            """, at=(6, 4)),
        Bad("""
            import torch
            def sgd(model, lr):
                for p in model.parameters():
                    with torch.no_grad():
                        p = p - lr * p.grad
            """, fixed="""
            import torch
            def sgd(model, lr):
                for p in model.parameters():
                    with torch.no_grad():
                        p -= lr * p.grad
            """, at=(5, 12)),
        Good("""
            import torch
            w = torch.randn(3, requires_grad=True)
            for x, y in data:
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                with torch.no_grad():
                    w -= 0.1 * w.grad
                    w.grad.zero_()
            """),
        Good("""
            import torch
            with torch.no_grad():
                w = w - lr * w.grad
            w.requires_grad_()
            """),
        Good("""
            import torch
            fast = w - lr * torch.autograd.grad(loss, w, create_graph=True)[0]
            """),
    ]

    def visit_BinOp(self, value: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        node = ctx.statement
        if not isinstance(node, ast.Assign) or node.value is not value \
                or len(node.targets) != 1 or type(value.op) not in SYMBOL:
            return
        name = dotted(node.targets[0])
        if name is None:  # `params[i] = p - lr * p.grad`: an element of a list of leaves
            yield from self._element(node, value, ctx)
            return
        if dotted(value.left) != name or not reads_grad_of(value.right, name):
            return
        scope = ctx.scope()
        if _releafed(scope, name, node, ctx.grad_disabled is not None):
            return
        after = _grad_read_after(scope, name, node.lineno)
        if after is None and not scope.loops_of(node):
            return  # a one-off step (FGSM): nothing reads the lost `.grad`
        related = [Related(ctx.path, after, f"`{name}.grad` is None here")] if after else []
        yield self.report(node, ctx, related=related, fix=self._fix(node, name, ctx),
                          name=name, op=SYMBOL[type(value.op)])

    def _element(self, node: ast.Assign, value: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        """``L[i] = p - lr * p.grad`` in ``for i, p in enumerate(L)`` (or ``L[i] = L[i] - lr *
        L[i].grad``): the list's element, a leaf, is replaced by a new non-leaf tensor; the next
        backward through the list leaves its `.grad` None."""
        t = node.targets[0]
        if not isinstance(t, ast.Subscript) or ctx.grad_disabled is not None:
            return
        left = value.left
        same = ast.unparse(t) == ast.unparse(left)
        alias = None
        scope = ctx.scope()
        for loop in scope.loops_of(node):
            it, tg = getattr(loop, "iter", None), getattr(loop, "target", None)
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) \
                    and it.func.id == "enumerate" and it.args \
                    and ast.unparse(it.args[0]) == ast.unparse(t.value) \
                    and isinstance(tg, ast.Tuple) and len(tg.elts) == 2 \
                    and all(isinstance(e, ast.Name) for e in tg.elts) \
                    and ast.unparse(t.slice) == tg.elts[0].id \
                    and isinstance(left, ast.Name) and left.id == tg.elts[1].id:  # type: ignore[attr-defined]
                alias = left.id
        reads = any(isinstance(n, ast.Attribute) and n.attr == "grad"
                    and ast.unparse(n.value) == ast.unparse(left) for n in ast.walk(value.right))
        if not reads or not (same or alias) or not scope.loops_of(node):
            return
        if alias is not None and _releafed(scope, alias, node, False):
            return
        shown = ctx.source(t)
        yield self.report(node, ctx, name=shown, op=SYMBOL[type(value.op)])

    def _fix(self, node: ast.Assign, name: str, ctx: Context):
        value = node.value
        assert isinstance(value, ast.BinOp)
        if node.lineno != node.end_lineno:
            return None
        update = f"{name} {SYMBOL[type(value.op)]}= {ctx.source(value.right)}"
        if ctx.grad_disabled is not None:
            return self.fix(ctx.edit(node, update))
        torch = torch_alias(ctx)
        if torch is None:
            return None
        indent = " " * (ctx.column(node) + 4)
        return self.fix(ctx.edit(node, f"with {torch}.no_grad():\n{indent}{update}"))


class InplaceUpdateOfLeaf(Rule):
    """An in-place update or slice assignment on a leaf that requires grad, with grad enabled.

    Why: autograd forbids changing a leaf that requires grad in place while recording:
    `w -= lr * w.grad`, `w.add_(...)`, `p.copy_(...)` raise `RuntimeError: a leaf Variable that
    requires grad is being used in an in-place operation.` and `w[0] = 1.0` raises
    `RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place
    operation.` (pytorch-facts.md#leaf-inplace). A result tensor flagged before it is filled
    (`res = torch.zeros(n, requires_grad=True)`, then `res[i] = ...`) is reported at the flag.
    Wrap the update in `with torch.no_grad():` (or `@torch.no_grad()`), as `torch.optim` does.
    A Parameter `__init__` registers is such a leaf in `forward` too (`self.weight /= ...`), and
    through an instance in any code the file runs with grad (`model.P[u] = row`).
    Known limits: the leaf must be made in the same function (`torch.*(..., requires_grad=True)`,
    `nn.Parameter(...)`, `.requires_grad_()` on a tensor without history: a detached one, or
    one whose `.grad` the update reads) or be the loop variable over `.parameters()` in a
    function that also calls `.backward()`; a helper only ever called under `no_grad` is not
    followed across calls; a layer's Parameter named by a string
    (`getattr(self.rnn, f"bias_hh_l{i}")`) is read only in a file that also holds one of the
    other trigger words (`.backward(`, `Parameter`, `requires_grad`...).
    """

    code = "GT302"
    name = "inplace-update-of-leaf"
    message = ("in-place {what} of `{name}`, a leaf that requires grad, while grad is enabled: "
               "raises `RuntimeError: {view}")
    # leaf paths need one of the first four words in the function; the layer path an
    # in-place spelling on `.weight` / `.bias`, or, in a file the other words open,
    # `getattr(` (a layer's Parameter named by a string, `getattr(self.rnn, f"bias_hh_l{i}")`:
    # strings hold no trigger word)
    triggers = ("requires_grad", "Parameter", ".backward(", ".grad", ".weight.", ".bias.",
                ".weight[", ".bias[", ".weight -=", ".weight +=", ".weight *=", ".bias -=",
                ".bias +=", "bias_ih", "bias_hh", "weight_ih", "weight_hh")
    statement_triggers = (*triggers, "getattr(")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            w = torch.randn(3, requires_grad=True)
            for x, y in data:
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                w -= 0.1 * w.grad
            """, at=(6, 4)),
        Bad("""
            import torch
            def train(model, data):
                for x, y in data:
                    model(x).sum().backward()
                    for p in model.parameters():
                        p.sub_(0.1 * p.grad)
            """, at=(6, 12)),
        Bad("""
            import torch
            emb = torch.nn.Parameter(torch.randn(10, 4))
            emb[0] = 0.0
            """, at=(3, 0)),
        Bad("""
            import torch
            res = torch.zeros(3, 3, requires_grad=True)
            for i in range(3):
                res[i] = res[i] + i
            """, at=(2, 0)),
        Bad("""
            import torch
            layer = torch.nn.Linear(4, 4)
            layer.weight.fill_(0.5)
            w = torch.zeros(4, requires_grad=True)
            def step(lr):
                w.sub_(lr * w.grad)
            """, count=2),
        Bad("""
            import torch
            w = torch.randn(3, requires_grad=True)
            b = torch.zeros(1, requires_grad=True)
            params = [w, b]
            for x, y in data:
                ((x @ w + b - y) ** 2).mean().backward()
                for p in params:
                    p -= 0.1 * p.grad
            """, at=(8, 8)),
        Good("""
            import torch
            w = torch.randn(3, requires_grad=True)
            for x, y in data:
                loss = ((x @ w - y) ** 2).mean()
                loss.backward()
                with torch.no_grad():
                    w -= 0.1 * w.grad
                w.grad.zero_()
            """),
        Bad("""
            import torch.nn.functional as F
            def refine(z0, decoder, target, steps=5):
                z = z0.detach().clone().requires_grad_()
                for _ in range(steps):
                    F.mse_loss(decoder(z), target).backward()
                    z.sub_(0.01 * z.grad)
                    z.grad = None
                return z
            """, at=(6, 8)),
        Good("""
            import torch
            import torch.nn.functional as F
            def refine(z0, decoder, target, steps=5):
                z = z0.detach().clone().requires_grad_()
                for _ in range(steps):
                    F.mse_loss(decoder(z), target).backward()
                    with torch.no_grad():
                        z.sub_(0.01 * z.grad)
                    z.grad = None
                return z
            def features(model, x):
                h = model(x).requires_grad_()
                h += 1
                return h
            """),
        Good("""
            import torch
            @torch.no_grad()
            def ema(model, teacher):
                for p, q in zip(model.parameters(), teacher.parameters()):
                    q.mul_(0.99).add_(p, alpha=0.01)
            def train(model, data):
                for p in model.parameters():
                    p.data.clamp_(-1, 1)
                    p.grad.zero_()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._scan(node, ctx)
        for w in (*passed_parameter_writes(ctx), *instance_parameter_writes(ctx)):
            if self._first(w.stmt, ctx):  # helpers whose own lines hold no trigger
                rel = [Related(ctx.path, w.origin.lineno, w.note or "a Parameter is passed for "
                               f"`{w.name}` here", ctx.column(w.origin))]
                yield self.report(w.stmt, ctx, related=rel, what=w.what, name=w.name,
                                  view=write_error(w.view))

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from self._scan(node, ctx)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef,
                               ctx: Context) -> Iterator[Finding]:
        yield from self._scan(node, ctx)

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        """In-place writes in ``forward`` to a Parameter ``__init__`` registered
        (NOTE [trained parameter attributes])."""
        for w in forward_parameter_writes(ctx, node):
            if self._first(w.stmt, ctx):
                rel = [Related(ctx.path, w.origin.lineno, f"`{w.name}` is made a Parameter "
                               "that requires grad here", ctx.column(w.origin))]
                yield self.report(w.stmt, ctx, related=rel, what=w.what, name=w.name,
                                  view=write_error(w.view))

    @staticmethod
    def _first(stmt: ast.stmt, ctx: Context) -> bool:
        """Whether ``stmt`` is not reported yet (both visits may reach it)."""
        seen: set[int] = ctx.memo("gt302-reported", ctx.tree, set)
        if id(stmt) in seen:
            return False
        seen.add(id(stmt))
        return True

    def _scan(self, fn: ast.AST, ctx: Context) -> Iterator[Finding]:
        """Check the update statements of one function (or the module body), nested defs
        excluded (the engine visits each function whose text holds a trigger word)."""
        for stmt in own_statements(fn.body):  # type: ignore[attr-defined]
            for target, what in in_place_writes(stmt):
                yield from self._check(fn, stmt, target, what, ctx)

    def _check(self, fn: ast.AST, stmt: ast.stmt, target: ast.expr, what: str,
               ctx: Context) -> Iterator[Finding]:
        if not getattr_write(target) and not _mentions(ctx, fn, *self.triggers):
            return  # opened by `getattr(` alone: only a write through it is this path's
        view = ""
        while isinstance(target, ast.Subscript):  # `res[b][c] = ...`: a view of a view
            target, view = target.value, "view of a "
        name = dotted(target)
        if name is not None and name.endswith((".data", ".grad")):
            return
        origin = self._origin(fn, name, stmt.lineno, ctx, target) if name else None
        if origin is None:  # a view of a layer's Parameter (NOTE [layer parameter views])
            origin, name = _layer_view(fn, stmt, target, view, ctx), ctx.source(target)
        if origin is None or ctx.scope(fn).grad_off_at(stmt) is not None \
                or not self._first(stmt, ctx) \
                or flag_cleared_before(ctx.scope(fn), name, origin, stmt) \
                or callers_grad_off(ctx, fn):  # NOTE [grad off by the callers]
            return
        line = stmt.lineno
        if what == "slice assignment" and filled_after_flag(origin, name, ctx):
            yield from [self.report(origin, ctx, what=f"slice assignment (line {line}, after "
                        "this line makes it require grad: set the flag once it is filled, or "
                        "build it out of place)", name=name, view=write_error(view, target))
                        ] if self._first(origin, ctx) else []  # type: ignore[arg-type]
            return
        shared = view_writes(fn, stmt, target, ctx) if view else None
        if shared is not None:  # NOTE [one view, several writes]
            bind, writes = shared
            lines = ", ".join(str(w.lineno) for w in writes)
            rel = [Related(ctx.path, w.lineno, "an in-place write through the view",
                           ctx.column(w)) for w in writes]
            rel.append(Related(ctx.path, origin.lineno, "the Parameter is made here",
                               ctx.column(origin)))
            if self._first(bind, ctx):
                yield self.report(bind, ctx, what=f"updates (lines {lines}) through the view "
                                  f"`{name}`", name=ctx.source(bind.value.func.value),
                                  view=write_error(view, target), related=rel)
            if stmt is not writes[0]:
                return  # the first write raises; the binding's finding lists the others
        note = f"`{name}` iterates over leaves that require grad here" \
            if isinstance(origin, (ast.For, ast.AsyncFor)) \
            else f"`{name}` is made a leaf that requires grad here" + (
                " (`.to(...)` returns this same tensor when it is already on that device, as "
                "on a CPU run)" if moved_leaf(ctx.scope(fn), name, line) is origin else "")
        related = [Related(ctx.path, origin.lineno, note, ctx.column(origin))] \
            if origin.lineno != line else []
        yield self.report(stmt, ctx, related=related, what=what, name=name,
                          view=write_error(view, target))

    @staticmethod
    def _origin(fn: ast.AST, name: str, line: int, ctx: Context,
                target: ast.expr | None = None) -> ast.stmt | None:
        """The statement making ``name`` a leaf that requires grad (None: not known to be)."""
        root, _, attr = name.rpartition(".")
        if attr in ("weight", "bias") and "." in root and isinstance(target, ast.Attribute) \
                and _mentions(ctx, fn, ".backward(", "nn."):
            k = ctx.analysis.kind_in(target.value, fn, line)  # `self.emb.weight`: a layer's
            if k is not None and k.what == MODULE and isinstance(k.node, ast.Call) and \
                    (k.cls or "").startswith("torch.nn.") and owns_params(k.node, ctx) and \
                    not frozen_before(ctx.scope(fn), name, line):
                return ctx.scope(fn).statement_of(k.node) or k.node  # type: ignore[return-value]
        if attr in ("weight", "bias") and "." not in root \
                and _mentions(ctx, fn, ".backward(", "nn."):
            scope = ctx.scope(fn)
            b = scope.binding_before(root, line)
            if b is not None and b.value is not None and module_ctor(b.value, ctx) \
                    and owns_params(b.value, ctx) \
                    and (ctx.call_name(b.value) or "").startswith("torch.nn.") \
                    and not frozen_before(scope, name, line):
                return b.stmt  # a torch.nn layer's weight/bias are Parameters (not buffers)
        if (_mentions(ctx, fn, "requires_grad", "Parameter", ".backward(")
                or name in _helper_made(ctx, fn)) and _maybe_leaf_text(ctx, fn, name):
            scope = ctx.scope(fn)
            b = grad_leaf_binding(scope, name, line)
            if b is not None:
                return b.stmt
            moved = moved_leaf(scope, name, line)  # NOTE [moved leaf kept on the CPU]
            if moved is not None:
                return moved
            got = requires_grad_set(scope, name, line)
            if got is not None and _layer_output(fn, scope.binding_before(name, line), ctx):
                got = None  # NOTE [flag on a layer's output]
            got = got or flagged_leaf(scope, name, line)
            if got is not None:
                return got
            loop = parameter_loop_of(scope, name, line)
            if loop is not None and (calls_backward(scope) or isinstance(loop.iter, ast.Name)):
                return loop
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and "." not in name \
                and name not in ctx.scope(fn).bindings:
            passed = passed_parameter(fn, name, ctx)
            if passed is not None:  # `init_(E=self.emb.weight)`: the caller passes a Parameter
                return passed
        if not isinstance(fn, ast.Module) and "." not in name \
                and _maybe_leaf_text(ctx, fn, name, True):
            if name not in ctx.scope(fn).bindings:  # a global weight updated in a function
                b = grad_leaf_binding(ctx.scope(ctx.tree), name, 1 << 30)
                return b.stmt if b is not None else None
        return None


# NOTE [flag on a layer's output]: ``x = self.emb(ids); x.requires_grad_(); x += pos`` (a
# model that returns attention maps): with grad on, the output of a layer that owns
# parameters has history (a non-leaf: the flag changes nothing and the in-place write is
# recorded); with grad off it is a leaf, but an in-place write under ``no_grad`` is allowed.
# It is a leaf that requires grad under grad only when the layer is frozen, which the code
# does not show here: not known to be a leaf.
def _layer_output(fn: ast.AST, b, ctx: Context) -> bool:  # type: ignore[no-untyped-def]
    v = b.value if b is not None and not isinstance(b.stmt, ast.AugAssign) else None
    if not isinstance(v, ast.Call) or not isinstance(v.func, (ast.Name, ast.Attribute)):
        return False
    k = ctx.analysis.kind_in(v.func, fn, v.lineno)
    return k is not None and k.what == MODULE and isinstance(k.node, ast.Call) \
        and owns_params(k.node, ctx)


def _layer_view(fn: ast.AST, stmt: ast.stmt, target: ast.expr, view: str,
                ctx: Context) -> ast.AST | None:
    """The statement building the ``torch.nn`` layer whose Parameter ``target`` views (or is,
    through a call or a subscript chain), in a function the file runs with grad on and a
    file that freezes nothing."""
    if not view and isinstance(target, ast.Attribute) and dotted(target):
        return None  # a plain `layer.weight` is `_origin`'s
    got = layer_parameter(ctx, fn, target, stmt.lineno)
    if got is None or file_freezes(ctx) or not runs_with_grad(ctx, fn):
        return None
    return got
