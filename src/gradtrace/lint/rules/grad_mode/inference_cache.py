"""GT212: a module's lazily filled tensor cache, first filled by a call under `inference_mode`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.context import FUNCTION_TYPES, Context, grad_mode_of
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.grad_mode.inference import INFERENCE_ERROR, _saving_use


class CacheFilledUnderInferenceMode(Rule):
    """A module fills a tensor cache on `self` lazily (`if n > self.cached_len:
    self.cos = ...`) and the file runs that module under `torch.inference_mode()` and also
    trains it.

    Why: whatever the first call under `inference_mode` stores is an inference tensor; the
    cache's guard only looks at its size, so a later training forward reuses it, and the
    first op that saves it for backward raises `RuntimeError: Inference tensors cannot be
    saved for backward` (Dao-AILab/flash-attention#299: rotary cos/sin caches filled by an
    evaluation). Refill the cache when it holds inference tensors (`or
    self.cos.is_inference()` in the guard, as flash-attention does), or evaluate under
    `torch.no_grad()`.
    Known limits: the module class is in the file; the cache is stored under an `if` that
    reads `self`, by `forward` or a method it calls, and saved for backward by another
    method of the class; the call under `inference_mode` is of that module or of one holding
    it (through `self.<name> = Cls(...)` attributes); the file must run `backward()`.
    """

    code = "GT212"
    name = "cache-filled-under-inference-mode"
    message = ("`{attr}` is filled lazily by this `if` and kept across calls, and line {line} "
               "runs the module under `inference_mode`: a first fill there stores inference "
               "tensors that training reuses, raising " + INFERENCE_ERROR + "; refill when "
               "`{attr}.is_inference()`, or evaluate under `torch.no_grad()`")
    triggers = ("inference_mode",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            class Decay(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.table = None

                def _grow(self, n):
                    if self.table is None or self.table.shape[0] < n:
                        self.table = torch.exp(-torch.arange(n, dtype=torch.float32))[:, None]

                def forward(self, x):
                    self._grow(x.shape[0])
                    return x * self.table[: x.shape[0]]

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                    self.decay = Decay()

                def forward(self, x):
                    return self.decay(self.fc(x))

            @torch.inference_mode()
            def evaluate(net, x):
                return net(x).mean()

            def fit(x):
                net = Net()
                opt = torch.optim.SGD(net.parameters(), lr=0.1)
                evaluate(net, x)
                net(x).pow(2).mean().backward()
                opt.step()
            """, at=(10, 8)),
        Good("""
            import torch
            import torch.nn as nn

            class Decay(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.table = None

                def _grow(self, n):
                    if self.table is None or self.table.shape[0] < n:
                        self.table = torch.exp(-torch.arange(n, dtype=torch.float32))[:, None]

                def forward(self, x):
                    self._grow(x.shape[0])
                    return x * self.table[: x.shape[0]]

            @torch.no_grad()
            def evaluate(net, x):
                return net(x).mean()

            def fit(opt, x):
                net = Decay()
                evaluate(net, x)
                net(x).pow(2).mean().backward()
                opt.step()
            """),
    ]

    def visit_With(self, node: ast.With, ctx: Context) -> Iterator[Finding]:
        if any(grad_mode_of(i.context_expr, ctx.imports) == "inference" for i in node.items):
            yield from self._region(node, node.body, ctx)

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if any(grad_mode_of(d, ctx.imports) == "inference" for d in node.decorator_list):
            yield from self._region(node, node.body, ctx)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _region(self, off: ast.stmt, body: list[ast.stmt], ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions("backward"):
            return
        fn = ctx.function if not isinstance(off, FUNCTION_TYPES) else off
        seen: set[int] = ctx.memo("gt212-seen", ctx.tree, set)
        for s in body:
            for n in walk(s):
                if not isinstance(n, ast.Call) or not isinstance(n.func, (ast.Name, ast.Attribute)):
                    continue
                k = ctx.analysis.kind_in(n.func, fn, n.lineno) if fn is not None else \
                    ctx.analysis.kind(n.func, None, n.lineno)
                info = ctx.analysis.classes.get((k.cls or "").rpartition(".")[2]) \
                    if k is not None and k.what == MODULE else None
                for guard, attr in _caches(info, ctx) if info is not None else ():
                    if id(guard) not in seen:
                        seen.add(id(guard))
                        yield self.report(guard, ctx, related=[Related(
                            ctx.path, n.lineno, "the module runs under inference_mode here",
                            ctx.column(n))], attr=attr, line=n.lineno)


def _caches(info: ClassInfo, ctx: Context) -> list[tuple[ast.If, str]]:
    """(guard, ``self.<attr>``) of the lazily filled caches of ``info``'s class and of the
    classes of the file it holds as submodules."""
    out: list[tuple[ast.If, str]] = []
    todo, seen = [info], set()
    while todo:
        c = todo.pop()
        if c.name in seen:
            continue
        seen.add(c.name)
        out.extend(_own_caches(c, ctx))
        for name in c.attrs:
            k = c.attr_kind(name)
            sub = ctx.analysis.classes.get((k.cls or "").rpartition(".")[2]) \
                if k is not None and k.what == MODULE else None
            if sub is not None:
                todo.append(sub)
    return out


def _own_caches(c: ClassInfo, ctx: Context) -> list[tuple[ast.If, str]]:
    out = []
    for m in c.methods.values():
        if m.name == "__init__":
            continue
        for g in walk(m):
            if not isinstance(g, ast.If) or "is_inference" in ctx.source(g.test) or not any(
                    isinstance(n, ast.Attribute) and dotted(n.value) == "self"
                    for n in walk(g.test)):
                continue
            attr = next((a for a in _stored(g.body) if _saving_use(c.node, a, m, ctx)), None)
            if attr is not None:
                out.append((g, attr))
    return out


def _stored(body: list[ast.stmt]) -> Iterator[str]:
    """``self.<attr>`` names the statements of ``body`` assign a computed value to."""
    for s in body:
        if not isinstance(s, ast.Assign) or isinstance(s.value, (ast.Name, ast.Constant)):
            continue
        for t in s.targets:
            for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                attr = dotted(e)
                if attr and attr.startswith("self.") and attr.count(".") == 1:
                    yield attr
