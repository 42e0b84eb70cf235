"""GT780: a loss given the batch as its input and the model's output as its target."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import call_sites, statements_on, word_lines
from gradtrace.lint.analysis.facts import unpacked_value
from gradtrace.lint.analysis.kinds import LOADER, MODULE
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.numerics._ops import strip

# losses whose two arguments play different parts: (input, target); the target is data
_F = "torch.nn.functional."
# (not `kl_div`: a KL divergence with the model as its target is the reverse KL, which
# distillation from stored teacher log-probabilities may want)
LOSS_FUNCS = ("binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy",
              "nll_loss")
LOSS_CLASSES = ("BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "NLLLoss")
LOSS_MODULES = frozenset(m + c for c in LOSS_CLASSES
                         for m in ("torch.nn.", "torch.nn.modules.loss."))
DATA, OUTPUT = "data", "output"
MAX_DEPTH = 3  # helpers followed to their call sites


def _iterated(it: ast.expr) -> ast.expr:
    """``loader`` of ``enumerate(loader)`` / ``tqdm(loader)``."""
    while isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.args \
            and it.func.id in ("enumerate", "tqdm", "iter"):
        it = it.args[0]
    return it


def _holds(target: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target))


class LossArgumentsSwapped(Rule):
    """A loss whose arguments play different parts (`binary_cross_entropy`, `cross_entropy`,
    `nll_loss`, their modules) is given a batch from the data loader as its input and the
    model's output as its target.

    Why: these losses are not symmetric: the first argument is the prediction, the second the
    data it is compared to. Swapped, the loss still runs (PyTorch differentiates BCE and
    soft-label cross-entropy with respect to their target too, checked on torch 2.13)
    and still falls, but it trains the model towards another optimum: `F.binary_cross_entropy(x,
    recon_x)` pushes every reconstructed pixel to 0 or 1 instead of towards `x`. Nothing warns.
    Pass the model's output first: `F.binary_cross_entropy(recon_x, x)`.
    `kl_div` is left out: with the model's output as its target it is the reverse KL, which
    some distillation wants.
    Known limits: the input must be a value unpacked from iterating a `DataLoader` (or handed
    to a helper by every call of it as such), the target the result of a module call (through
    views and casts, or handed to the helper as one).
    """

    code = "GT780"
    name = "loss-arguments-swapped"
    message = ("`{loss}` is given the batch `{data}` as its input and the model's output "
               "`{out}` as its target: the loss trains the model towards the wrong optimum, "
               "silently; pass the output first")
    triggers = (*LOSS_FUNCS, *LOSS_CLASSES)
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F

            def loss_function(recon_x, x):
                return F.binary_cross_entropy(x.view(-1, 784), recon_x)

            def train(opt):
                model = torch.nn.Sequential(torch.nn.Linear(784, 784), torch.nn.Sigmoid())
                loader = torch.utils.data.DataLoader(range(8))
                for data, _ in loader:
                    recon = model(data)
                    loss = loss_function(recon, data)
                    loss.backward()
                    opt.step()
            """, at=(5, 11)),
        Bad("""
            import torch
            from torch import nn

            def train(opt, dataset):
                model = nn.Sequential(nn.Linear(8, 8), nn.Sigmoid())
                criterion = nn.BCELoss()
                for x, _ in torch.utils.data.DataLoader(dataset):
                    out = model(x)
                    loss = criterion(x, out)
                    loss.backward()
                    opt.step()
            """, at=(9, 15)),
        Good("""
            import torch
            import torch.nn.functional as F

            def loss_function(recon_x, x):
                return F.binary_cross_entropy(recon_x, x.view(-1, 784))

            def train(opt):
                model = torch.nn.Sequential(torch.nn.Linear(784, 784), torch.nn.Sigmoid())
                loader = torch.utils.data.DataLoader(range(8))
                for data, _ in loader:
                    recon = model(data)
                    loss = loss_function(recon, data)
                    loss.backward()
                    opt.step()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if not word_lines(ctx, ("DataLoader",)):
            return  # no batch of a DataLoader (the kind the input must have) in the file
        calls: list[tuple[ast.Call, tuple[ast.AST, ...]]] = []
        for f in LOSS_FUNCS:
            for call, _, outer in call_sites(ctx, f):
                if ctx.qualified_name(call.func) == _F + f:
                    calls.append((call, outer))
        for name in self._loss_modules(ctx):
            last = name.rpartition(".")[2]
            calls.extend((c, o) for c, _, o in call_sites(ctx, last) if dotted(c.func) == name)
        for call, outer in calls:
            fn = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), ctx.tree)
            yield from self._check(call, fn, ctx)

    @staticmethod
    def _loss_modules(ctx: Context) -> set[str]:
        """Spellings of the names and attributes bound to a loss module built in the file."""
        out: set[str] = set()
        for s, _ in statements_on(ctx, word_lines(ctx, LOSS_CLASSES)):
            if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                    and isinstance(s.value, ast.Call) \
                    and (ctx.qualified_name(s.value.func) or "") in LOSS_MODULES:
                name = dotted(s.targets[0])
                if name:
                    out.add(name)
        return out

    def _check(self, call: ast.Call, fn: ast.AST, ctx: Context) -> Iterator[Finding]:
        args = {k.arg: k.value for k in call.keywords if k.arg in ("input", "target")}
        inp = call.args[0] if call.args else args.get("input")
        tgt = call.args[1] if len(call.args) > 1 else args.get("target")
        if inp is None or tgt is None or isinstance(inp, ast.Starred):
            return
        scope = ctx.scope(fn)
        got_in = _role(inp, scope, call.lineno, ctx, 0)
        if got_in is None or got_in[0] != DATA:
            return
        got_t = _role(tgt, scope, call.lineno, ctx, 0)
        if got_t is None or got_t[0] != OUTPUT:
            return
        related = [Related(ctx.path, n.lineno, what, ctx.column(n))
                   for n, what in ((got_in[1], "the batch comes from here"),
                                   (got_t[1], "the model's output is made here"))
                   if n.lineno != call.lineno]
        yield self.report(call, ctx, related=related, loss=ctx.source(call.func),
                          data=ctx.source(inp), out=ctx.source(tgt))


def _role(e: ast.AST, scope: Scope, line: int, ctx: Context, depth: int
          ) -> tuple[str, ast.AST] | None:
    """(DATA, where) when ``e`` is a batch taken from a DataLoader, (OUTPUT, where) when it is
    the result of a module call; through views and casts, ``x.to(device)`` and a helper's
    parameters (every call of the helper in the file agreeing)."""
    e = strip(e)
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in ("to", "cuda", "cpu"):
        e = strip(e.func.value)
    if isinstance(e, ast.Call):
        k = ctx.analysis.kind(e.func, scope, line) if isinstance(
            e.func, (ast.Name, ast.Attribute)) else None
        if k is not None and k.what == MODULE and (k.cls or "") not in LOSS_MODULES:
            return OUTPUT, e
        return None
    if not isinstance(e, ast.Name) or depth > MAX_DEPTH:
        return None
    b = scope.binding_before(e.id, line)
    if b is None:
        return _argument_role(e.id, scope, ctx, depth)
    s = b.stmt
    if isinstance(s, (ast.For, ast.AsyncFor)) and _holds(s.target, e.id):
        k = ctx.analysis.kind(_iterated(s.iter), scope, s.lineno)
        return (DATA, s) if k is not None and k.what == LOADER else None
    v = unpacked_value(b, e.id)
    if v is not None:
        return _role(v, scope, b.line, ctx, depth + 1)
    if isinstance(s, ast.Assign) and len(s.targets) == 1 \
            and isinstance(s.targets[0], ast.Tuple) and isinstance(s.value, ast.Call):
        got = _role(s.value, scope, b.line, ctx, depth + 1)  # `recon, mu, logvar = model(x)`
        return got if got is not None and got[0] == OUTPUT else None
    return None


def _argument_role(name: str, scope: Scope, ctx: Context, depth: int
                   ) -> tuple[str, ast.AST] | None:
    fn = scope.node
    if not isinstance(fn, FUNCTION_TYPES):
        return None
    values = ctx.analysis.argument_values(fn, name)
    roles = {None if r is None else r[0]: r for r in (
        _role(v, ctx.scope(where), v.lineno, ctx, depth + 1) for v, where in values)}
    return roles.popitem()[1] if len(roles) == 1 else None
