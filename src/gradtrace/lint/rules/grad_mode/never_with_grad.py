"""GT220: a module an optimizer steps runs only under `no_grad`: it never trains."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.module_runs import self_module_runs
from gradtrace.lint.analysis.params import PARAM_ITERS
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import statements, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import says_all, says_any

OPTIMIZERS_HOOK = "configure_optimizers"


def _optimized_attrs(ctx: Context, cls: ast.ClassDef) -> dict[str, ast.Call]:
    """``{attr: constructor}`` for each ``torch.optim`` constructor in ``cls`` given
    ``self.<attr>.parameters()`` and stepped (``self.<opt>.step()`` in the class, or built in
    Lightning's ``configure_optimizers``)."""
    out: dict[str, ast.Call] = {}
    stepped: set[str | None] | None = None
    for fn in cls.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for s in statements(fn):
            if not isinstance(s, (ast.Assign, ast.Return)) or not isinstance(s.value, ast.Call):
                continue
            c = s.value
            last = c.func.attr if isinstance(c.func, ast.Attribute) else \
                c.func.id if isinstance(c.func, ast.Name) else ""
            if not last[:1].isupper() or not c.args \
                    or not (ctx.call_name(c) or "").startswith("torch.optim."):
                continue
            owners = {o[5:] for a in walk(c.args[0]) if isinstance(a, ast.Call)
                      and isinstance(a.func, ast.Attribute) and a.func.attr in PARAM_ITERS
                      and not a.args and (o := dotted(a.func.value) or "").startswith("self.")
                      and o.count(".") == 1}
            if not owners:
                continue
            if isinstance(s, ast.Assign):
                if stepped is None:
                    stepped = {dotted(n.func.value) for n in walk(cls) if isinstance(n, ast.Call)
                               and isinstance(n.func, ast.Attribute) and n.func.attr == "step"}
                if not {dotted(t) for t in s.targets} & stepped:
                    continue
            elif fn.name != OPTIMIZERS_HOOK:
                continue
            for o in owners:
                out.setdefault(o, c)
    return out


class TrainedModuleRunOnlyWithoutGrad(Rule):
    """An optimizer steps a module's parameters, and every run of that module is under
    `no_grad`.

    Why: nothing computed under `torch.no_grad()` (or `inference_mode()`) is recorded, so a
    module whose every call sits in such a block (directly, or through a method of the class
    that returns its output and is itself called only there) never gets a gradient: its
    `.grad` stays None and the optimizer built for it (`Adam(self.encoder.parameters())`,
    stepped after the loss's `backward()`) skips it at every step. The module stays at its
    initialisation while the parts after it train (rll-research/cic#5: the pixel encoder
    encoded both observations under one `no_grad` block; checked on torch 2.13). Run it with
    grad where its output feeds the trained loss (keep `no_grad` for the target only), or
    drop its optimizer if it is meant to be frozen.
    Known limits: the module is `self.<attr>` of a class, the optimizer is built in that
    class from `self.<attr>.parameters()` and stepped there (or returned by
    `configure_optimizers`); every use of the module in the class must be a call or a call of
    a method of the class that calls it (anything else, e.g. passing it on, is trusted).
    """

    code = "GT220"
    name = "trained-module-run-only-without-grad"
    message = ("`self.{attr}` runs only under `{mode}` ({runs}), but line {line} builds an "
               "optimizer over its parameters: it never gets a gradient and never trains")
    triggers = ("no_grad", "inference_mode")
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Agent:
                def __init__(self):
                    self.encoder = nn.Linear(8, 8)
                    self.head = nn.Linear(8, 1)
                    self.enc_opt = torch.optim.Adam(self.encoder.parameters())
                    self.head_opt = torch.optim.Adam(self.head.parameters())
                def encode(self, x):
                    return self.encoder(x)
                def update(self, x, y):
                    with torch.no_grad():
                        z = self.encode(x)
                    loss = ((self.head(z) - y) ** 2).mean()
                    self.enc_opt.zero_grad()
                    self.head_opt.zero_grad()
                    loss.backward()
                    self.enc_opt.step()
                    self.head_opt.step()
            """, at=(13, 16)),
        Good("""
            import torch
            import torch.nn as nn
            class Agent:
                def __init__(self):
                    self.encoder = nn.Linear(8, 8)
                    self.head = nn.Linear(8, 1)
                    self.enc_opt = torch.optim.Adam(self.encoder.parameters())
                    self.head_opt = torch.optim.Adam(self.head.parameters())
                def encode(self, x):
                    return self.encoder(x)
                def update(self, x, x_next, y):
                    z = self.encode(x)
                    with torch.no_grad():
                        z_next = self.encode(x_next)
                    loss = ((self.head(z) - self.head(z_next) - y) ** 2).mean()
                    self.enc_opt.zero_grad()
                    self.head_opt.zero_grad()
                    loss.backward()
                    self.enc_opt.step()
                    self.head_opt.step()
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if ctx.code.isascii() and not (  # one-run words: `mentions` is the identifiers' answer
                ctx.mentions("parameters") and ctx.mentions("step", OPTIMIZERS_HOOK)):
            return
        if not ctx.mentions("optim") or ctx.mentions(".grad =", "._grad"):
            return   # gradients written by hand (a shared model fed by workers)
        if not says_all(ctx, node, ("optim", "parameters()")) \
                or not says_any(ctx, node, self.triggers):
            return
        for attr, opt in _optimized_attrs(ctx, node).items():
            runs = self_module_runs(ctx, node, attr)
            if not runs or not all(r.off for r in runs):
                continue
            runs.sort(key=lambda r: (r.call.lineno, r.call.col_offset))
            first = runs[0].call
            fn = next(f for f in walk(node) if isinstance(f, (ast.FunctionDef,
                      ast.AsyncFunctionDef)) and f.lineno <= first.lineno <= f.end_lineno
                      and f in node.body)
            off = ctx.scope(fn).grad_off_at(first)
            mode = "no_grad"
            if isinstance(off, ast.With):
                mode = ctx.source(off.items[0].context_expr)
            related = [Related(ctx.path, opt.lineno, "the optimizer over its parameters",
                               ctx.column(opt))]
            if off is not None and any(off is d for d in fn.decorator_list):
                # a method of the training object turned off whole: its decorator
                related.insert(0, Related(ctx.path, first.lineno, f"`self.{attr}` runs here",
                                          ctx.column(first)))
                first = off  # (NOTE [grad-off method of a trainer])
                mode = ctx.source(off)
            yield self.report(first, ctx, related=related,
                attr=attr, mode=mode, line=opt.lineno,
                runs="one call" if len(runs) == 1 else f"{len(runs)} calls")
