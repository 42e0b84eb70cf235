"""GT228: the model a step trains is run under `no_grad` only to fill its forward-hook cache,
and the loss reads the cache."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import function_sites
from gradtrace.lint.analysis.cuts import is_loss_callee
from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.hook_stores import HookStore, hook_stores
from gradtrace.lint.analysis.reach import decorated_off, disables_grad
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule


class HookCacheFilledUnderNoGrad(Rule):
    """A model the code trains is run inside `torch.no_grad()` for nothing but its forward
    hooks, and the loss is then built from what the hooks stored.

    Why: a forward hook keeps the output of its module's *last* call (`cache[key] = output`).
    A run inside `no_grad` / `inference_mode` records no graph, so it overwrites the cache
    with constants: a feature-distillation loss read from the cache afterwards
    (`mse_loss(student_cache[k], teacher_cache[k])`) is computed, logged, and sends no
    gradient to the student (pytorch-facts.md#partly-cut-graph; YOLO-Master#240). The same
    model is run with grad elsewhere (it is trained), which the hooks also saw, but the
    no-grad re-run came last (NOTE [hook stores]). Read the student's cache after its
    gradient-enabled forward (clear the cache before that forward), and keep only the teacher
    under `no_grad`.
    Known limits: the run is a statement of its own inside the block (`self.student(img)`,
    its result dropped); the cache is read in a loss call after the block in the same
    function, which runs `backward()` or whose callers do; the hook is registered in the file.
    """

    code = "GT228"
    name = "hook-cache-filled-under-no-grad"
    message = ("`{run}` runs `{module}` under `{mode}` only for its forward hook, which keeps "
               "the output in `{cache}` (line {store}): the loss reads `{cache}` (line {use}), "
               "a constant now, so `{module}` (run with grad at line {live}) gets no gradient "
               "from that term")
    triggers = ("register_forward_hook",)
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F

            class Distiller:
                def __init__(self, student, teacher):
                    self.student, self.teacher = student, teacher
                    self.s_cache, self.t_cache = {}, {}
                    student[0].register_forward_hook(self._keep(self.s_cache))
                    teacher[0].register_forward_hook(self._keep(self.t_cache))

                @staticmethod
                def _keep(cache):
                    def fn(module, inputs, output):
                        cache["f"] = output
                    return fn

                def feature_loss(self, x):
                    with torch.no_grad():
                        self.student(x)
                        self.teacher(x)
                    return F.mse_loss(self.s_cache["f"], self.t_cache["f"])

                def step(self, x, y, opt):
                    loss = F.cross_entropy(self.student(x), y) + self.feature_loss(x)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            """, at=(19, 12)),
        Good("""
            import torch
            import torch.nn.functional as F

            class Distiller:
                def __init__(self, student, teacher):
                    self.student, self.teacher = student, teacher
                    self.s_cache, self.t_cache = {}, {}
                    student[0].register_forward_hook(self._keep(self.s_cache))
                    teacher[0].register_forward_hook(self._keep(self.t_cache))

                @staticmethod
                def _keep(cache):
                    def fn(module, inputs, output):
                        cache["f"] = output
                    return fn

                def feature_loss(self, x):
                    with torch.no_grad():
                        self.teacher(x)
                    return F.mse_loss(self.s_cache["f"], self.t_cache["f"])

                def step(self, x, y, opt):
                    loss = F.cross_entropy(self.student(x), y) + self.feature_loss(x)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            """),
    ]

    def visit_With(self, node: ast.With, ctx: Context) -> Iterator[Finding]:
        fn = ctx.function
        if fn is None or len(node.items) != 1 \
                or not disables_grad(node.items[0].context_expr, ctx):
            return
        stores = [h for h in hook_stores(ctx) if not h.detached]
        if not stores:
            return
        end = max(getattr(s, "end_lineno", s.lineno) or s.lineno for s in node.body)
        for s in node.body:
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)):
                continue
            module = dotted(s.value.func)
            for h in stores:
                if h.module != module or not _same_owner(ctx, h, fn):
                    continue
                use = _loss_read(fn, h.target, end, ctx)
                live = _live_run(ctx, h, module, fn)  # type: ignore[arg-type]
                if use is None or live is None or not _differentiated(ctx, fn):
                    continue
                yield self.report(s, ctx, related=(
                    Related(ctx.path, h.store.lineno, "the hook keeps the output here",
                            ctx.column(h.store)),
                    Related(ctx.path, use.lineno, f"the loss reads `{h.target}` here",
                            ctx.column(use)),
                    Related(ctx.path, live.lineno, f"`{module}` runs with grad here",
                            ctx.column(live))),
                    run=ctx.source(s.value), module=module,
                    mode=ctx.source(node.items[0].context_expr), cache=h.target,
                    store=h.store.lineno, use=use.lineno, live=live.lineno)
                return


def _same_owner(ctx: Context, h: HookStore, fn: ast.AST) -> bool:
    """The hook's names mean the same objects in ``fn``: methods of one class for
    ``self.<attr>``, otherwise the registering function itself or the module level."""
    if h.module.startswith("self."):
        a, b = ctx.analysis.class_of(h.where), ctx.analysis.class_of(fn)
        return a is not None and b is not None and a.node is b.node
    return h.where is fn or h.where is ctx.tree


def _loss_read(fn: ast.AST, target: str, end: int, ctx: Context) -> ast.AST | None:
    """A read of ``target`` after line ``end`` inside the arguments of a loss call."""
    for n in walk(fn):
        if isinstance(n, ast.Call) and n.lineno > end and is_loss_callee(ctx, n.func):
            for a in walk(n):
                if a is not n.func and isinstance(a, (ast.Name, ast.Attribute)) \
                        and isinstance(a.ctx, ast.Load) and dotted(a) == target:
                    return a
    return None


def _live_run(ctx: Context, h: HookStore, module: str, fn: ast.AST) -> ast.Call | None:
    """A call of ``module`` with grad on, in the class (``self.<attr>``) or the file."""
    cls = ctx.analysis.class_of(fn)
    where = cls.node if module.startswith("self.") and cls is not None else ctx.tree
    parents = file_parents(ctx)
    for n in walk(where):
        if not (isinstance(n, ast.Call) and dotted(n.func) == module):
            continue
        f = parents.get(id(n))
        while f is not None and not isinstance(f, FUNCTION_TYPES):
            f = parents.get(id(f))
        f = f or ctx.tree
        if isinstance(f, FUNCTION_TYPES) and decorated_off(f, ctx):
            continue
        scope = ctx.scope(f)
        s = scope.statement_of(n)
        if s is not None and scope.grad_off_at(s) is None:
            return n
    return None


def _differentiated(ctx: Context, fn: ast.AST) -> bool:
    """``fn`` runs ``backward()``, or a function calling it does."""
    def backs(f: ast.AST) -> bool:
        return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                   and c.func.attr == "backward" for c in walk(f))
    if backs(fn):
        return True
    sites = function_sites(ctx.analysis, fn) if isinstance(fn, FUNCTION_TYPES) else None
    return any(backs(w) for _, w in sites or ())
