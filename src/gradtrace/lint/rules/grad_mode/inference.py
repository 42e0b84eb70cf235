"""GT204: a tensor made under `inference_mode()` saved for backward by the training step."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.steps import backward_loss
from gradtrace.lint.context import FUNCTION_TYPES, Context, grad_mode_of
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.cuts import SAVES_INPUT_FUNCS, is_loss_callee
from gradtrace.lint.analysis.grad_sources import LIVE_MULT, is_inference_function
from gradtrace.lint.analysis.helper_sources import grad_sources
from gradtrace.lint.nodes import bfs_walk

TRAINING_NAMES = frozenset({"forward", "training_step", "train_step", "compute_loss",
                            "loss", "step", "train_batch", "fit_batch"})
INFERENCE_ERROR = "`RuntimeError: Inference tensors cannot be saved for backward`"


class InferenceTensorInTraining(Rule):
    """A tensor created under `torch.inference_mode()` is saved for backward by training code.

    Why: results made under `inference_mode` are *inference tensors*. Unlike `no_grad`
    results, they may not take part in autograd: an op that saves one for backward (a layer,
    a product, a loss) raises
    `RuntimeError: Inference tensors cannot be saved for backward. ...`
    (pytorch-facts.md#inference-tensors).
    This bites features precomputed under `inference_mode` and fed to a trainable head, and
    caches (`self.table`, a global dict) first filled by an `inference_mode` evaluation and
    reused by the training forward, tensors passed to a helper that runs the model on them,
    and parameters replaced (`model.embed.weight = nn.Parameter(...)`) by a function decorated
    with `inference_mode` in a script that trains. Use `torch.no_grad()` there, or `.clone()`
    the tensor outside `inference_mode`.
    Known limits: a cache filled lazily by a forward that some caller wraps in
    `inference_mode` is only visible at runtime (`gradtrace run`); only uses that save the
    tensor itself (layer input, `*`, `@`, loss argument) are reported: `+` and `cat` save
    nothing, and a result computed from it outside `inference_mode` (`F.softmax(t)`) is a
    normal tensor (checked on torch 2.13).
    """

    code = "GT204"
    name = "inference-tensor-in-training"
    message = ("`{value}` is made under `{mode}` (an inference tensor) and `{use}` (line {line}) "
               "saves it for backward in training code")
    triggers = ("inference_mode", "backward")
    examples = [
        Bad("""
            import torch

            def train(backbone, head, loader, opt, criterion):
                for x, y in loader:
                    with torch.inference_mode():
                        feats = backbone(x)
                    loss = criterion(head(feats), y)
                    loss.backward()
                    opt.step()
            """, at=(5, 8)),
        Bad("""
            import torch
            from torch import nn

            class Rotary(nn.Module):
                @torch.inference_mode()
                def build(self, n):
                    self.cos = torch.cos(torch.arange(n)[:, None] * self.freq)

                def forward(self, q):
                    return q * self.cos[: q.shape[0]]
            """, at=(7, 8)),
        Good("""
            import torch

            def train(backbone, head, loader, opt, criterion):
                for x, y in loader:
                    with torch.no_grad():
                        feats = backbone(x)
                    loss = criterion(head(feats), y)
                    loss.backward()
                    opt.step()
            """),
        Good("""
            import torch
            from torch import nn

            class Model(nn.Module):
                @torch.inference_mode()
                def predict(self, x):
                    self.last = self.net(x)
                    return self.last.argmax(-1)

                def forward(self, x):
                    return self.net(x) + self.bias
            """),
    ]

    # -- local: features made under inference_mode feed a trainable op ------------------------
    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions("inference_mode"):
            return
        if grad_mode_of(node, ctx.imports) == "inference":
            yield from self._region(node, ctx)
            return
        if backward_loss(node, ctx) is None or ctx.grad_disabled is not None:
            return
        deps = grad_sources(ctx, ctx.scope().node).sources(
            backward_loss(node, ctx), node.lineno)  # type: ignore[arg-type]
        seen: set[int] = ctx.memo("gt2-reported-" + self.code, ctx.tree, set)
        for use, dead in deps.consumers:
            if id(dead.off) in seen:
                continue
            seen.add(id(dead.off))
            s = ctx.scope().statement_of(dead.expr)
            value = ctx.source(s.targets[0]) if isinstance(s, ast.Assign) else ctx.source(dead.expr)
            related = (Related(ctx.path, use.lineno, f"`{ctx.source(use)}` saves it for backward",  # type: ignore[attr-defined]
                               ctx.column(use)),
                       Related(ctx.path, node.lineno, f"`{ctx.source(node)}` raises "
                               f"{INFERENCE_ERROR} here", ctx.column(node)))
            yield self.report(dead.off, ctx, related=related, value=value,
                              mode=_mode_text(dead.off, ctx), use=ctx.source(use),
                              line=use.lineno)  # type: ignore[attr-defined]

    # -- cached: self.<attr> filled under inference_mode, used by the training forward ---------
    def visit_Attribute(self, node: ast.Attribute, ctx: Context) -> Iterator[Finding]:
        stmt = ctx.statement  # `@torch.inference_mode` without parentheses
        if isinstance(stmt, FUNCTION_TYPES) and node in stmt.decorator_list \
                and grad_mode_of(node, ctx.imports) == "inference":
            yield from self._region(node, ctx)

    def _region(self, node: ast.expr, ctx: Context) -> Iterator[Finding]:
        """Stores to ``self.<attr>`` in the with-block or decorated method ``node`` opens."""
        stmt = ctx.statement
        cls = ctx.class_def
        if cls is None:
            yield from self._new_parameters(node, stmt, ctx)
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)) and any(
                i.context_expr is node for i in stmt.items):
            off, store_fn = stmt, ctx.function
        elif isinstance(stmt, FUNCTION_TYPES) and node in stmt.decorator_list:
            off, store_fn = node, stmt
        else:
            return
        for s in _body_statements(stmt.body):
            if isinstance(s, ast.Assign):
                yield from self._cache_store(s, s.targets, s.value, off, cls, store_fn, ctx)
            elif isinstance(s, ast.AnnAssign) and s.value is not None:
                yield from self._cache_store(s, [s.target], s.value, off, cls, store_fn, ctx)

    def _new_parameters(self, node: ast.expr, stmt: ast.stmt, ctx: Context
                        ) -> Iterator[Finding]:
        """``model.embed.weight = nn.Parameter(...)`` in a function decorated with (or a block
        under) ``inference_mode``, in a file that trains: the new parameter is an inference
        tensor, and the first layer that saves it for backward raises."""
        if not ctx.mentions("backward"):
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)) and any(
                i.context_expr is node for i in stmt.items):
            body = stmt.body
        elif isinstance(stmt, FUNCTION_TYPES) and node in stmt.decorator_list:
            body = stmt.body
        else:
            return
        made = [s for s in _body_statements(body)
                if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                and ctx.qualified_name(s.value.func) == "torch.nn.Parameter" and any(
                    isinstance(t, ast.Attribute) and _root_name(t) not in (None, "self")
                    for t in s.targets)]
        if not made:
            return
        first = made[0]
        names = ", ".join(f"`{ctx.source(s.targets[0])}`" for s in made[:3]) + \
            (f" and {len(made) - 3} more" if len(made) > 3 else "")
        related = tuple(Related(ctx.path, s.lineno, f"`{ctx.source(s.targets[0])}` is replaced "
                                "by a parameter made here", ctx.column(s)) for s in made)
        mode = _mode_text(stmt if isinstance(stmt, (ast.With, ast.AsyncWith)) else node, ctx)
        f = self.report(node, ctx, related=related, value="", mode="", use="", line=0)
        yield replace(f, message=(
            f"{names} {'is' if len(made) == 1 else 'are'} replaced (line {first.lineno}) by new "
            f"`nn.Parameter`s made under `{mode}`: inference tensors, so any op of the "
            f"training step that saves one for backward (a linear or conv weight, a matmul) "
            f"raises {INFERENCE_ERROR}; make them under `torch.no_grad()` instead"))

    def _cache_store(self, node: ast.stmt, targets: list[ast.expr], value: ast.expr,
                     off: ast.AST, cls: ast.ClassDef, store_fn: ast.AST | None,
                     ctx: Context) -> Iterator[Finding]:
        if not _makes_tensor(value):
            return
        for t in targets:
            base = t.value if isinstance(t, ast.Subscript) else t
            attr = dotted(base)
            if not attr or not attr.startswith("self.") or attr.count(".") != 1:
                continue
            use = _saving_use(cls, attr, store_fn, ctx)
            if use is None:
                continue
            fn, expr = use
            related = (Related(ctx.path, off.lineno, "inference mode is turned on here",  # type: ignore[attr-defined]
                               ctx.column(off)),
                       Related(ctx.path, expr.lineno, f"`{fn.name}` saves `{attr}` for backward "  # type: ignore[attr-defined]
                               f"here: {INFERENCE_ERROR}", ctx.column(expr)))
            yield self.report(node, ctx, related=related, value=attr,
                              mode=_mode_text(off, ctx), use=ctx.source(expr),
                              line=expr.lineno)  # type: ignore[attr-defined]
            return


def _root_name(e: ast.expr) -> str | None:
    """``model`` for ``model.embed.weight`` or ``model[0].weight``."""
    while isinstance(e, (ast.Attribute, ast.Subscript)):
        e = e.value
    return e.id if isinstance(e, ast.Name) else None


def _body_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements of a block, nested blocks included, nested defs and classes excluded."""
    for s in body:
        yield s
        if isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)):
            continue
        for f in ("body", "orelse", "finalbody"):
            yield from _body_statements(getattr(s, f, None) or [])
        for h in getattr(s, "handlers", ()):
            yield from _body_statements(h.body)


def _mode_text(off: ast.AST, ctx: Context) -> str:
    if isinstance(off, (ast.With, ast.AsyncWith)):
        return ctx.source(off.items[0].context_expr)
    return "@" + ctx.source(off)


def _makes_tensor(value: ast.expr) -> bool:
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr in ("item", "tolist", "numpy", "clone") and not value.args:
        return value.func.attr == "clone"  # a clone under inference_mode is still one
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id in ("int", "float", "bool", "len", "str", "list", "dict", "tuple"):
        return False
    return any(isinstance(n, (ast.Call, ast.BinOp)) for n in bfs_walk(value))


def _saving_use(cls: ast.ClassDef, attr: str, store_fn: ast.AST | None,
                ctx: Context) -> tuple[ast.AST, ast.AST] | None:
    """A training method of ``cls`` whose code saves ``self.<attr>`` for backward."""
    for fn in cls.body:
        if not isinstance(fn, FUNCTION_TYPES) or fn is store_fn or is_inference_function(fn, ctx):
            continue
        if fn.name not in TRAINING_NAMES and not any(
                isinstance(c, ast.Call) and backward_loss(c, ctx) is not None for c in bfs_walk(fn)):
            continue
        if any(isinstance(st, ast.Assign) and any(dotted(t) == attr for t in st.targets)
               for st in fn.body):
            continue  # the training method rebuilds the value itself before using it
        names = {attr} | _aliases(fn, attr)
        for n in bfs_walk(fn):
            hit = _saves(n, names, ctx)
            if hit is not None:
                return fn, hit
    return None


def _aliases(fn: ast.AST, attr: str) -> set[str]:
    """Local names bound to ``self.<attr>`` (or a slice/view of it) in ``fn``."""
    out: set[str] = set()
    for n in bfs_walk(fn):
        if not isinstance(n, ast.Assign) or len(n.targets) != 1:
            continue
        t, v = n.targets[0], n.value
        pairs = list(zip(t.elts, v.elts)) if isinstance(t, ast.Tuple) and isinstance(
            v, ast.Tuple) and len(t.elts) == len(v.elts) else [(t, v)]
        for a, b in pairs:
            if isinstance(a, ast.Name) and _is_attr(b, {attr}):
                out.add(a.id)
    return out


def _is_attr(e: ast.AST, attr: set[str]) -> bool:
    while isinstance(e, ast.Subscript) or (
            isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
            and e.func.attr in ("view", "reshape", "expand", "unsqueeze", "squeeze")):
        e = e.value if isinstance(e, ast.Subscript) else e.func.value  # type: ignore[attr-defined]
    return dotted(e) in attr


def _saves(n: ast.AST, attr: set[str], ctx: Context) -> ast.AST | None:
    if isinstance(n, ast.BinOp) and isinstance(n.op, LIVE_MULT):
        if (_is_attr(n.left, attr) and not isinstance(n.right, ast.Constant)) or \
                (_is_attr(n.right, attr) and not isinstance(n.left, ast.Constant)):
            return n
    if isinstance(n, ast.Call) and any(_is_attr(a, attr) for a in n.args):
        q = ctx.qualified_name(n.func) or ""
        last = q.rpartition(".")[2]
        if last in SAVES_INPUT_FUNCS or is_loss_callee(ctx, n.func):
            return n
    return None
