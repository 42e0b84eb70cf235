"""GT220: a module an optimizer steps runs only under `no_grad`: it never trains.

# NOTE [grad-off part of a trained model]
``Adam(self.model.parameters())`` trains every submodule of ``self.model``, also one the
training class runs itself, ``self.model.cond(x)``, apart from the model's own methods. When
every such run sits in grad-off code (a ``with torch.no_grad()`` or a decorated method) and the
model's class (of the file) never uses that submodule outside ``__init__``, the submodule never
gets a gradient. It is left alone when its class is neither of the file nor a torch layer, when
the file freezes it, switches it to eval, loops over its parameters or hands it to a helper, and
when its class sets ``requires_grad`` on anything (a frozen encoder inside it, meant to run
without grad).
"""
from __future__ import annotations

import ast
import dataclasses
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE, OPTIMIZER, Kind
from gradtrace.lint.analysis.module_runs import NOT_RUNS, Run, self_module_runs
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.analysis.params import PARAM_ITERS
from gradtrace.lint.analysis.script_runs import name_runs
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import parent_map, statements, walk
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


def _part_runs(ctx: Context, cls: ast.ClassDef, attr: str) -> tuple[list[Run], str] | None:
    """(the runs, ``attr.part``) of a submodule ``self.<attr>.<part>`` run in ``cls`` only
    under grad off (NOTE [grad-off part of a trained model])."""
    info = ctx.analysis.classes.get(cls.name)
    k = info.attr_kind(attr) if info is not None else None
    model = ctx.analysis.classes.get((k.cls or "").rpartition(".")[2]) \
        if k is not None and k.what == MODULE else None
    if model is None:
        return None
    parents = ctx.memo("s23b-parents", cls, lambda: parent_map(cls))
    runs: dict[str, list[Run]] = {}
    for n in walk(cls):
        if not (isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
                and dotted(n.value) == f"self.{attr}"):
            continue
        top = n
        while isinstance(parents.get(id(top)), (ast.Attribute, ast.Subscript)) \
                and getattr(parents[id(top)], "value", None) is top:
            top = parents[id(top)]
        p = parents.get(id(top))
        fn = next((f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and f.lineno <= n.lineno <= (f.end_lineno or f.lineno)), None)
        if isinstance(p, ast.Call) and p.func is top and fn is not None:
            if top is n or isinstance(top, ast.Attribute) and top.value is n \
                    and top.attr not in NOT_RUNS:
                runs.setdefault(n.attr, []).append(Run(p, ctx.scope(fn).grad_off_at(p) is not None))
            continue
        if top is not n and (isinstance(p, (ast.Expr, ast.Compare)) or isinstance(
                top, ast.Attribute) and top.attr == "grad"):
            continue  # a setting or a gradient read: `self.model.part.proj.weight.grad`
        runs.setdefault(n.attr, []).append(Run(p, False))  # passed on, stored: trusted
    for part, rs in sorted(runs.items()):
        sub = model.attr_kind(part)
        if sub is None or sub.what != MODULE or part in model.methods \
                or not all(r.off for r in rs) or _runs_inside(model, part) \
                or _frozen(ctx, part, sub):
            continue
        return rs, f"{attr}.{part}"
    return None


def _runs_inside(model: ClassInfo, part: str) -> bool:
    """The model's own methods (not ``__init__``) use ``self.<part>``: it runs with them."""
    return any(isinstance(n, ast.Attribute) and n.attr == part and dotted(n.value) == "self"
               for name, m in model.methods.items() if name != "__init__" for n in walk(m))


def _frozen(ctx: Context, part: str, sub: Kind) -> bool:
    """The part is meant to run without grad, or cannot be read: its class is neither in the
    file nor a torch layer, or the file freezes it or switches it to eval (``<x>.part.requires_grad_(False)``, a loop
    over ``<x>.part.parameters()``, ``<x>.part.eval()``), or its class freezes ``self``."""
    c = ctx.analysis.classes.get((sub.cls or "").rpartition(".")[2])
    if c is None and not (sub.cls or "").startswith("torch.nn."):
        return True  # a class of another file or library: it may freeze itself
    inside = range(c.node.lineno, (c.node.end_lineno or 0) + 1) if c is not None else range(0)
    for n in walk(ctx.tree):
        if isinstance(n, ast.Call) and any(  # handed to a helper (`freeze(m.part)`): trusted
                (dotted(a) or "").endswith(f".{part}") for a in n.args):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in ("requires_grad_", "eval", "parameters") \
                and (dotted(n.func.value) or "").endswith(f".{part}"):
            return True
        if getattr(n, "lineno", 0) in inside and (  # the class freezes something of its own
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "requires_grad_" or isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                    for t in n.targets)):
            return True
    return False


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
    a method of the class that calls it (anything else, e.g. passing it on, is trusted). A
    submodule the class runs itself, `self.model.cond(x)`, is read as its own module
    (NOTE [grad-off part of a trained model]). In a script, a module-level module the
    optimizer holds (`Adam([*text_encoder.parameters(), ...])`) is read the same way: its own
    calls and the calls of an object of the file it was handed to (`PromptBank(text_encoder)`
    running `self.encoder(tokens)` under `inference_mode` to fill a cache) must all be
    grad-off (NOTE [runs through a holder]); the `with` or decorator is the line reported.
    """

    code = "GT220"
    needs_step = True  # NOTE [step files]
    name = "trained-module-run-only-without-grad"
    message = ("`self.{attr}` runs only under `{mode}` ({runs}), but line {line} builds an "
               "optimizer over its parameters: it never gets a gradient and never trains")
    message_script = ("`{name}` runs only under `{mode}` ({runs}), but line {line} builds an "
                      "optimizer over its parameters: it never gets a gradient and never "
                      "trains")
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

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        """A module-level module an optimizer of the script holds, every run of which (its
        own calls, those of an object it was given to) is under grad-off
        (NOTE [runs through a holder])."""
        if not ctx.mentions("optim") or ctx.mentions(".grad =", "._grad"):
            return
        scope = ctx.scope(node)
        stepped = {dotted(n.func.value) for n in walk(node) if isinstance(n, ast.Call)
                   and isinstance(n.func, ast.Attribute) and n.func.attr == "step"}
        done: set[str] = set()
        for s in node.body:
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                    and isinstance(s.targets[0], ast.Name) and s.targets[0].id in stepped):
                continue
            k = ctx.analysis.kind(s.targets[0], scope, s.lineno + 1)
            if k is None or k.what != OPTIMIZER:
                continue
            for owner in sorted(k.over - done):
                ok = ctx.analysis.kind(ast.Name(id=owner, ctx=ast.Load()), scope, s.lineno)
                if "." in owner or ok is None or ok.what != MODULE:
                    continue
                runs = name_runs(ctx, owner)
                if not runs or not all(r.off for r in runs):
                    continue
                done.add(owner)
                runs.sort(key=lambda r: (r.call.lineno, r.call.col_offset))
                yield self._script_finding(ctx, owner, runs, s)

    def _script_finding(self, ctx: Context, owner: str, runs: list[Run], opt: ast.stmt
                        ) -> Finding:
        first = runs[0].call
        fn = next((f for f in walk(ctx.tree) if isinstance(f, (ast.FunctionDef,
                   ast.AsyncFunctionDef)) and f.lineno <= first.lineno <= (f.end_lineno or 0)
                   and any(x is first for x in walk(f))), None)
        off = ctx.scope(fn or ctx.tree).grad_off_at(first)
        mode = ctx.source(off.items[0].context_expr) if isinstance(off, ast.With) else \
            ctx.source(off) if isinstance(off, ast.expr) else "no_grad"
        at = off if isinstance(off, (ast.With, ast.expr)) else first
        related = [Related(ctx.path, first.lineno, f"`{owner}` runs here", ctx.column(first)),
                   Related(ctx.path, opt.lineno, "the optimizer over its parameters",
                           ctx.column(opt))]
        f = self.report(at, ctx, related=related, attr=owner, mode=mode, line=opt.lineno,
                        runs="one call" if len(runs) == 1 else f"{len(runs)} calls")
        return dataclasses.replace(f, message=self.message_script.format(
            name=owner, mode=mode, line=opt.lineno,
            runs="one call" if len(runs) == 1 else f"{len(runs)} calls"))

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
            if runs is None:  # a submodule of it runs: is one run only grad-off?
                runs, attr = _part_runs(ctx, node, attr) or (None, attr)
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
