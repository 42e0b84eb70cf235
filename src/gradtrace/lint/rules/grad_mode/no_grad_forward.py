"""GT214: a module whose `forward` runs under `no_grad` has parameters the file trains."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.grad_values import CONTAINERS, weighted
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.analysis.params import FLAG, PARAM_ITERS
from gradtrace.lint.context import Context, grad_mode_of
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk, function_scopes, scope_nodes
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import file_says
from gradtrace.lint.rules.registration.construction import _forward_methods


def _true(e: ast.expr | None) -> bool:
    return isinstance(e, ast.Constant) and e.value is True


def _unfreezes(n: ast.AST) -> ast.expr | None:
    """The module ``n`` makes trainable: ``m.requires_grad_(True)`` / ``m.requires_grad_()``,
    ``for p in m.parameters(): p.requires_grad = True``."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
            and n.func.attr == "requires_grad_" and not n.keywords \
            and (not n.args or _true(n.args[0])):
        return n.func.value
    if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.iter, ast.Call) \
            and isinstance(n.iter.func, ast.Attribute) and n.iter.func.attr in PARAM_ITERS:
        t = n.target.elts[-1] if isinstance(n.target, ast.Tuple) else n.target
        var = dotted(t)
        for s in n.body:
            if isinstance(s, ast.Assign) and _true(s.value) \
                    and any(dotted(x) == f"{var}.{FLAG}" for x in s.targets):
                return n.iter.func.value
            if isinstance(s, ast.Expr) and _unfreezes(s.value) is not None \
                    and dotted(_unfreezes(s.value)) == var:
                return n.iter.func.value
    return None


def _optimized(n: ast.AST, ctx: Context) -> ast.expr | None:
    """The module whose ``.parameters()`` a ``torch.optim`` constructor is given directly."""
    if not (isinstance(n, ast.Call) and (ctx.call_name(n) or "").startswith("torch.optim.")
            and n.args):
        return None
    a = n.args[0]
    if isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) \
            and a.func.attr in PARAM_ITERS and not a.args:
        return a.func.value
    return None


def _trained_at(info: ClassInfo, ctx: Context, subs: frozenset[str] | None
                ) -> tuple[ast.AST, str] | None:
    """Where the file makes an instance of ``info``'s class trainable (or, with ``subs``,
    one of those submodules of an instance), and how."""
    for fn, n, m, how in _trainings(ctx):
        owners = [] if subs is not None else [m]  # forward: also `tower.vit` unfrozen
        if isinstance(m, ast.Attribute) and (m.attr in subs if subs is not None
                                             else info.registered(m.attr) is True):
            owners.append(m.value)
        for o in owners:
            k = ctx.analysis.kind_in(o, fn, n.lineno)
            if k is not None and k.what == MODULE \
                    and (k.cls or "").rpartition(".")[2] == info.name:
                return n, how
            if subs is None and k is not None and k.what == MODULE and k.cls in CONTAINERS \
                    and _holds_instance(k.node, info, fn, n.lineno, ctx):
                return n, how + " (through the container that holds it)"
    return None


def _holds_instance(made: ast.AST | None, info: ClassInfo, fn: ast.AST, line: int,
                    ctx: Context) -> bool:
    """``made``, the call that built an ``nn.ModuleDict``/``ModuleList``/``Sequential``
    (speechbrain's ``modules = nn.ModuleDict({"compute_features": fbank, ...})`` handed to
    the optimizer), lists an instance of ``info``'s class, and that class builds a trainable
    weight (:func:`weighted`): an optimizer over the container trains it."""
    if not isinstance(made, ast.Call) or not weighted(ctx, info.name, None):
        return False
    for a in (*made.args, *(k.value for k in made.keywords)):
        elts = a.values if isinstance(a, ast.Dict) else a.elts \
            if isinstance(a, (ast.List, ast.Tuple)) else [a]
        for e in elts:
            k = ctx.analysis.kind_in(e, fn, line) if e is not None else None
            if k is not None and k.what == MODULE and (k.cls or "").rpartition(".")[2] \
                    == info.name:
                return True
    return False


def _trainings(ctx: Context) -> list[tuple[ast.AST, ast.AST, ast.expr, str]]:
    """(scope, node, module, how) for every unfreeze of a module and every ``torch.optim``
    constructor over a module's parameters in the file, in walk order (found once per file:
    :func:`_trained_at` asks for each decorated method). Neither can be written without
    ``requires_grad`` or ``optim`` in the code (NOTE [word gates])."""
    def make() -> list[tuple[ast.AST, ast.AST, ast.expr, str]]:
        out: list[tuple[ast.AST, ast.AST, ast.expr, str]] = []
        if not _may_train(ctx):
            return out
        for fn in function_scopes(ctx.tree):
            for n in scope_nodes(fn):
                m, how = _unfreezes(n), "makes its parameters trainable"
                if m is None:
                    m, how = _optimized(n, ctx), "hands its parameters to an optimizer"
                if m is not None and isinstance(m, (ast.Name, ast.Attribute)):
                    out.append((fn, n, m, how))
        return out
    return ctx.memo("gt214-trainings", ctx.tree, make)


def _may_train(ctx: Context) -> bool:
    """Whether the file may unfreeze a module or build an optimizer (NOTE [word gates]):
    without it :func:`_trainings` finds none and GT214 nothing, so its scopes are not built."""
    return file_says(ctx, "requires_grad") or file_says(ctx, "optim")


def _off_for(ret: ast.Return, scope: Scope) -> ast.AST | None:
    """The no-grad region ``ret``'s value was computed in: the return's own, or, for a
    returned name, the one around every binding of it."""
    off = scope.grad_off_at(ret)
    if off is not None or not isinstance(ret.value, ast.Name):
        return off
    bs = scope.bindings.get(ret.value.id, ())
    offs = [scope.grad_off_at(b.stmt) for b in bs if b.line <= ret.lineno]
    return offs[0] if offs and all(o is not None for o in offs) else None


class NoGradForwardOfTrainedModule(Rule):
    """A module's `forward` runs under `no_grad`, and the file makes that module's parameters
    trainable.

    Why: `@torch.no_grad()` on `forward` (or a `with torch.no_grad():` around its body)
    records no graph for anything the module computes, whatever `requires_grad` says: its
    parameters never receive a gradient. A frozen feature extractor is often written so;
    once the script unfreezes it (`tower.requires_grad_(True)`, `p.requires_grad = True` over
    its parameters) or hands its parameters to an optimizer, they still never train, silently
    (haotian-liu/LLaVA's `CLIPVisionTower.forward` with `tune_vision_tower`; checked on
    torch 2.13). Remove the decorator and freeze with `requires_grad_(False)` instead, which
    the unfreeze can undo.
    The same holds for a decorated method `forward` calls (`@torch.no_grad() def
    encode(self, x): return self.visual(x)`) once `model.visual` is unfrozen, and for a
    decorated `forward` once one of its registered submodules is (`for p in
    tower.vit.parameters(): p.requires_grad = True` in a helper given the tower: TinyLLaVA#17).
    Known limits: the class must be of this file and own parameters or submodules; the
    unfreeze (or `torch.optim` constructor over its `.parameters()`) must name an instance
    the analysis knows to be of that class (for a decorated method: that instance's
    submodule the method calls).
    """

    code = "GT214"
    name = "no-grad-forward-of-trained-module"
    message = ("`{cls}.{method}` runs under `{mode}`, so its parameters never get a gradient, "
               "but line {line} {how}: they will not train; freeze it with "
               "`requires_grad_(False)` instead of `{mode}`")
    triggers = ("no_grad", "set_grad_enabled", "inference_mode")
    gate_statements = "function"
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(8, 8)
                @torch.no_grad()
                def forward(self, x):
                    return self.body(x)
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = Encoder()
                    self.head = nn.Linear(8, 2)
                def forward(self, x):
                    return self.head(self.enc(x))
            net = Net()
            net.enc.requires_grad_(True)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            """, at=(7, 5)),
        Good("""
            import torch
            import torch.nn as nn
            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(8, 8)
                @torch.no_grad()
                def forward(self, x):
                    return self.body(x)
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = Encoder()
                    self.enc.requires_grad_(False)
                    self.head = nn.Linear(8, 2)
                def forward(self, x):
                    return self.head(self.enc(x))
            net = Net()
            net.head.requires_grad_(True)
            opt = torch.optim.SGD(net.head.parameters(), lr=0.1)
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        cls = ctx.class_def
        if cls is None or node.name != "forward" and not node.decorator_list \
                or not _may_train(ctx):
            return
        if not any(grad_mode_of(d, ctx.imports) == "off" for d in node.decorator_list) and \
                not any(isinstance(n, ast.With) for n in node.body):
            return  # grad off around the whole body: a decorator or a top-level `with`
        info = ctx.analysis.classes.get(cls.name)
        if info is None or info.node is not cls or not info.is_module or not any(
                info.registered(a) for a in info.attrs):
            return
        subs: frozenset[str] | None = None  # forward: the whole module
        if node.name != "forward":
            if node not in _forward_methods(info):
                return
            subs = frozenset(n.func.attr for n in bfs_walk(node) if isinstance(n, ast.Call)
                             and isinstance(n.func, ast.Attribute)
                             and dotted(n.func.value) == "self" and info.registered(n.func.attr))
            if not subs:
                return
        scope = ctx.scope(node)
        rets = [s for s in scope.stmts if isinstance(s, ast.Return) and s.value is not None]
        offs = [_off_for(r, scope) for r in rets]
        if not offs or any(o is None for o in offs):
            return
        off = offs[0]
        assert off is not None
        if isinstance(off, ast.With):
            mode = ctx.source(off.items[0].context_expr)
        else:
            mode = ctx.source(off.func if isinstance(off, ast.Call) else off)
        if "inference_mode" in mode:
            return  # GT211
        got = _trained_at(info, ctx, subs)
        if got is None:
            return
        at, how = got
        yield self.report(off, ctx, related=[Related(ctx.path, at.lineno, how.replace(
            "its", f"the `{cls.name}`'s"), ctx.column(at))], cls=cls.name, mode=mode,
            line=at.lineno, how=how, method=node.name)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]
