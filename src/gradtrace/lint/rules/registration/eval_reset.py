"""GT443: `model.train()` in the training loop undoes a frozen submodule's eval mode."""
from __future__ import annotations

import ast
import bisect
from dataclasses import replace
from typing import Callable, Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.build_arms import build_flags, decided_against
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.handed_parts import handed_part_free
from gradtrace.lint.analysis.mode_free import mode_free_part
from gradtrace.lint.rules.registration._part_effect import part_effect
from gradtrace.lint.analysis.objects import constructor_call
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule

STEP_CALLS = ("backward", "step")


def _freezes_with_eval(fn: ast.AST, ctx: Context) -> bool:
    """Whether the method ``fn``, with the methods it calls through ``self`` (two levels
    deep), switches something other than ``self`` to eval mode and sets ``requires_grad``: a
    freeze that also fixes normalisation statistics."""
    return ctx.memo("gt443-freezes-eval", fn, lambda: _closure_freezes(fn, ctx))


def _run_through_self(fn: ast.AST, ctx: Context) -> Iterator[ast.AST]:
    """``fn`` and the methods of its class it calls on ``self`` (two calls deep), each once."""
    cls = ctx.analysis.class_of(fn)
    todo, seen = [(fn, 0)], set()
    while todo:
        m, depth = todo.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        yield m
        if cls is not None and depth < 2:
            todo.extend((cls.methods[n.func.attr], depth + 1) for n in walk(m)
                        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                        and dotted(n.func.value) == "self" and n.func.attr in cls.methods)


def _eval_call(n: ast.AST) -> bool:
    """``x.eval()`` on something other than ``self``."""
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
        and n.func.attr == "eval" and not n.args and dotted(n.func.value) != "self"


def _closure_freezes(fn: ast.AST, ctx: Context) -> bool:
    evals = flags = False
    for m in _run_through_self(fn, ctx):
        for n in walk(m):
            if _eval_call(n):
                evals = True
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "requires_grad_":
                flags = True
            elif isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                    for t in n.targets):
                flags = True
    return evals and flags


class FrozenEvalUndoneByTrain(Rule):
    """`model.train()` in the training loop puts a frozen submodule back in training mode.

    Why: `Module.train()` sets `training=True` on every submodule. A freeze that also put a
    part of the model in eval mode before the loop (`model.freeze()` setting the encoder's
    BatchNorm to `eval()`, `model.encoder.eval()`) is undone by the `model.train()` at the top
    of each epoch: BatchNorm updates its running statistics (and Dropout drops) in the frozen
    part during fine-tuning, silently (pgniewko/gt-pyg#112). Re-apply the eval mode after
    `model.train()` (or override `train()` to keep the frozen part in eval).
    A class whose `__init__` puts a submodule in eval mode (DeepLab's `freeze_bn()` called
    from the constructor) is undone the same way by the first `model.train()` before a step.
    Known limits: the eval must be set before the loop in the same function, directly on a
    submodule together with a freeze, or by a method of the model's class (two calls deep)
    that both sets `requires_grad` and calls `.eval()` on a submodule; or by the `__init__`
    of the model's class (a class of the file), two calls deep. When that class overrides
    `train()`, the override is the line named; it is silent when it runs the freezing method
    again (or the same `x.eval()` outside any `if`). It is silent when the call that built the
    model rules out every such eval in `__init__` (`if frozen_backbone:` left to its False
    default, `**cfg` of a dict literal read; NOTE [construction arms]); when the part put in
    eval mode was built from a class of the file with its own `train()` (mmdet's backbones
    re-apply `frozen_stages` there), the eval in `__init__` is the line named: the freeze
    belongs to the part's own switch. It is silent when the part put in eval mode is known to
    run the same in both modes (built from torch layers that read no `training` flag, or a class
    of the file made only of them: NOTE [mode-free modules]).
    """

    code = "GT443"
    name = "frozen-eval-undone-by-train"
    message = ("`{model}.train()` puts every submodule back in training mode, undoing the eval "
               "mode `{freeze}` (line {line}) set on the frozen part: {effect}; re-apply it "
               "after `{model}.train()`")
    message_override = (
        "`{cls}.train()` calls `nn.Module.train()`, which puts every submodule back in training "
        "mode, and does not re-apply the eval mode `{freeze}` (line {line}) set on the frozen "
        "part: {effect} from the first `{model}.train()`; "
        "re-apply the freeze after this call")
    message_part = (
        "`{freeze}` in `{cls}.__init__` is undone by `{model}.train()` (line {line}): "
        "`Module.train()` puts every submodule back in training mode, and `{part}` overrides "
        "`train()` to keep only its own frozen parts in eval, so {effect}; freeze the part "
        "through `{part}`'s own switch (what its `train()` "
        "re-applies) or re-apply the eval after `{model}.train()`")
    triggers = ("train(",)
    examples = [
        Bad("""
            import torch
            def finetune(model, loader, opt):
                model.backbone.eval()
                for p in model.backbone.parameters():
                    p.requires_grad = False
                for epoch in range(3):
                    model.train()
                    for x, y in loader:
                        opt.zero_grad()
                        model(x).sum().backward()
                        opt.step()
            """, at=(7, 8)),
        Good("""
            import torch
            def finetune(model, loader, opt):
                for p in model.backbone.parameters():
                    p.requires_grad = False
                for epoch in range(3):
                    model.train()
                    model.backbone.eval()
                    for x, y in loader:
                        opt.zero_grad()
                        model(x).sum().backward()
                        opt.step()
            """),
        Bad("""
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self, norm_eval=False):
                    super().__init__()
                    self.stem = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
                    self.head = nn.Linear(4, 2)
                    self.norm_eval = norm_eval
                    self.freeze_stem()
                def freeze_stem(self):
                    self.stem.eval()
                    for p in self.stem.parameters():
                        p.requires_grad = False
                def train(self, mode=True):
                    super().train(mode)
                    if mode and self.norm_eval:
                        self.stem.eval()
                    return self
            net = Net()
            net.train()
            net(x).sum().backward()
            """, at=(14, 8)),
        Good("""
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.stem = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
                    self.head = nn.Linear(4, 2)
                    self.freeze_stem()
                def freeze_stem(self):
                    self.stem.eval()
                    for p in self.stem.parameters():
                        p.requires_grad = False
                def train(self, mode=True):
                    super().train(mode)
                    self.freeze_stem()
                    return self
            net = Net()
            net.train()
            net(x).sum().backward()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "train" and not node.keywords
                and (not node.args or isinstance(node.args[0], ast.Constant)
                     and node.args[0].value is True)):
            return
        model = dotted(f.value)
        scope = ctx.scope()
        loops = scope.loops_of(node)
        if model is not None and model != "self":
            yield from self._constructed(node, f.value, model, scope, ctx)
        if model is None or model == "self" or not loops:
            return
        outer = loops[0]
        end = outer.end_lineno or outer.lineno
        idx = _index(scope, ctx)
        if not _any_within(idx.step_lines(scope), outer.lineno, end):
            return
        freeze = self._eval_freeze(-1, outer.lineno - 1, model, scope, ctx)
        if freeze is None:
            return
        if self._eval_freeze(max(outer.lineno, node.lineno + 1), end, model, scope, ctx,
                             reapply=True) is not None:
            return
        yield self.report(node, ctx, related=[Related(
            ctx.path, freeze.lineno, "the frozen part is put in eval mode here",
            ctx.column(freeze))], model=model, freeze=ctx.source(freeze), line=freeze.lineno,
            effect=part_effect(freeze, None, scope, ctx))

    def _constructed(self, node: ast.Call, recv: ast.expr, model: str, scope: Scope,
                     ctx: Context) -> Iterator[Finding]:
        """``model.train()`` on an instance whose class put a submodule in eval mode while it
        was built (``__init__`` calling ``self.freeze_bn()``), before a step of the same
        function, and nothing re-applies the eval between them."""
        k = ctx.analysis.kind(recv, scope, node.lineno)  # `train_epoch(seg, opt)`: the callers'
        cls = ctx.analysis.classes.get(k.cls or "") if k is not None and k.what == MODULE \
            else None
        init = cls.methods.get("__init__") if cls is not None else None
        ev = _eval_in(init, ctx, lambda e: not mode_free_part(e, cls, scope, ctx) and not
                      handed_part_free(e, cls, recv, scope, node.lineno, ctx)) \
            if init is not None else None  # NOTE [handed mode-free parts]: a part without
        # Dropout/BatchNorm, built here or handed to `__init__`, runs the same: no change
        if ev is None or _never_run(cls, init, recv, scope, node.lineno, ctx):  # type: ignore
            return
        own = cls.methods.get("train")  # type: ignore[union-attr]
        effect = part_effect(ev, cls, scope, ctx)
        if own is not None:  # the class keeps its own train(): the fix belongs there
            if not _reapplies(own, init, ev, ctx):  # type: ignore[arg-type]
                at = next((n for n in walk(own) if isinstance(n, ast.Call)
                           and isinstance(n.func, ast.Attribute) and n.func.attr == "train"
                           and isinstance(n.func.value, ast.Call)
                           and dotted(n.func.value.func) == "super"), own)
                f = self.report(at, ctx, related=[Related(
                    ctx.path, ev.lineno, f"`{cls.name}` puts this part in eval mode when it is "
                    "built", ctx.column(ev)), Related(
                    ctx.path, node.lineno, "training mode is switched on here", ctx.column(node))],
                    model=model, freeze=ctx.source(ev), line=ev.lineno, effect=effect)
                yield replace(f, message=self.message_override.format(
                    cls=cls.name, model=model, freeze=ctx.source(ev),  # type: ignore[union-attr]
                    line=ev.lineno, effect=effect))
            return
        idx = _index(scope, ctx)
        steps = [ln for ln in idx.step_lines(scope) if ln > node.lineno]
        if not steps:
            return
        hi = steps[0]
        if any(node.lineno <= line <= hi for line, _ in idx.evals.get(model, ())) or any(
                node.lineno < line <= hi and _eval_in(  # the class's own method (`freeze_bn`)
                    cls.methods.get(n.func.attr)  # type: ignore[attr-defined]
                    or called_function(n, scope, n.lineno), ctx) is not None  # type: ignore
                for line, n in idx.calls.get(model, ())):
            return
        part = _self_managed_part(cls, ev, ctx)
        if part is not None:  # the part keeps its own eval switch: the outside eval is the root
            f = self.report(ev, ctx, related=[Related(
                ctx.path, node.lineno, "training mode is switched on here", ctx.column(node))],
                model=model, freeze=ctx.source(ev), line=ev.lineno, effect=effect)
            yield replace(f, message=self.message_part.format(
                cls=cls.name, model=model, freeze=ctx.source(ev), part=part,  # type: ignore
                line=node.lineno, effect=effect))
            return
        yield self.report(node, ctx, related=[Related(
            ctx.path, ev.lineno, f"`{cls.name}` puts this part in eval mode when it is built",
            ctx.column(ev))], model=model, freeze=ctx.source(ev), line=ev.lineno, effect=effect)

    @staticmethod
    def _eval_freeze(lo: int, hi: int, model: str, scope: Scope, ctx: Context,
                     reapply: bool = False) -> ast.AST | None:
        """The call putting part of ``model`` in eval mode as part of a freeze, among the
        statements of the scope on lines ``lo`` to ``hi``: a method of the model that freezes
        with eval (the first such call), else the first ``model.<part>.eval()`` when something
        there sets ``requires_grad`` (or ``reapply``)."""
        idx = _index(scope, ctx)
        for line, n in idx.freezing_calls(model, ctx):
            if lo <= line <= hi:
                fn = called_function(n, scope, n.lineno)  # type: ignore[arg-type]
                if fn is not None and _freezes_with_eval(fn, ctx):
                    return n
        found = next((n for line, n in idx.evals.get(model, ()) if lo <= line <= hi and (
            reapply or not mode_free_part(n, None, scope, ctx))), None)
        froze = reapply or _any_within(idx.sorted_flags(), lo, hi)
        return found if found is not None and froze else None


def _self_managed_part(cls: object, ev: ast.Call, ctx: Context) -> str | None:
    """The name of the class of the file that built the part ``ev`` puts in eval mode
    (``self.backbone = ResNet(...)`` for ``self.backbone.eval()``) when that class has its own
    ``train()`` (mmdet's backbones re-apply ``_freeze_stages()`` and ``norm_eval`` there)."""
    recv = ev.func.value  # type: ignore[attr-defined]
    if not (isinstance(recv, ast.Attribute) and dotted(recv.value) == "self"):
        return None
    info = getattr(cls, "attrs", {}).get(recv.attr)
    v = info.value if info is not None and not info.later else None
    part = ctx.analysis.classes.get(v.func.id) if isinstance(v, ast.Call) \
        and isinstance(v.func, ast.Name) else None
    if part is None or part.method("train") is None:
        return None
    return part.name


def _never_run(cls: object, init: ast.AST, recv: ast.expr, scope: Scope, line: int,
               ctx: Context) -> bool:
    """Whether the construction call that built ``recv`` rules out every statement of
    ``init`` that puts a part in eval mode (itself or through a method on ``self``): the
    freeze sits under ``if frozen_backbone:`` and the call leaves that argument to its False
    default (NOTE [construction arms])."""
    call = constructor_call(recv, scope, line)
    flags = build_flags(cls, call, scope) if call is not None else None  # type: ignore[arg-type]
    if flags is None:
        return False
    cls_methods = getattr(cls, "methods", {})
    anchors = [n for n in walk(init) if _eval_call(n) or isinstance(n, ast.Call)
               and isinstance(n.func, ast.Attribute) and dotted(n.func.value) == "self"
               and (m := cls_methods.get(n.func.attr)) is not None and m is not init
               and _eval_in(m, ctx) is not None]
    return bool(anchors) and all(decided_against(init, a, flags) for a in anchors)


def _eval_in(fn: ast.AST | None, ctx: Context, keep: Callable[[ast.Call], bool] | None = None
             ) -> ast.Call | None:
    """The first ``x.eval()`` (``x`` not ``self``) that the method ``fn`` runs, itself or
    through the methods it calls on ``self`` (two calls deep), of those ``keep`` keeps."""
    if fn is None:
        return None
    return next((n for m in _run_through_self(fn, ctx) for n in walk(m)  # type: ignore[misc]
                 if _eval_call(n) and (keep is None or keep(n))), None)


def _reapplies(own: ast.AST, init: ast.AST, ev: ast.Call, ctx: Context) -> bool:
    """Whether the ``train()`` override ``own`` runs again the method of ``__init__`` that
    called ``ev`` (``self._freeze_stages()``), or calls the same ``x.eval()`` outside any
    ``if`` (an eval under ``if self.norm_eval:`` is another switch)."""
    maker = next((m for m in _run_through_self(init, ctx) if m is not init
                  and any(n is ev for n in walk(m))), None)
    ran = list(_run_through_self(own, ctx))
    if maker is not None and any(m is maker for m in ran):
        return True
    recv = ctx.source(ev.func)
    for m in ran:
        todo = list(getattr(m, "body", ()))
        while todo:
            st = todo.pop()
            if isinstance(st, (ast.If, ast.Try, ast.While)):
                continue
            if isinstance(st, (ast.For, ast.With)):
                todo.extend(st.body)
            elif any(_eval_call(n) and ctx.source(n.func) == recv  # type: ignore[attr-defined]
                     for n in walk(st)):
                return True
    return False


def _any_within(lines: list[int], lo: int, hi: int) -> bool:
    """Whether the sorted ``lines`` hold one from ``lo`` to ``hi``."""
    k = bisect.bisect_left(lines, lo)
    return k < len(lines) and lines[k] <= hi


def _freezing_method(name: str, ctx: Context) -> bool:
    """Whether a method of a class of the file called ``name`` freezes with eval: the only
    functions :func:`called_function` gives for ``x.name(...)`` are methods of that name."""
    memo: dict[str, bool] = ctx.memo("gt443-freezing-names", ctx.tree, dict)
    if name not in memo:
        memo[name] = any(_freezes_with_eval(m, ctx) for c in ctx.analysis.classes.values()
                         if (m := c.methods.get(name)) is not None)
    return memo[name]


class _Index:
    """A scope's freezes, ``x.eval()`` calls (by every dotted prefix of ``x`` but ``x``) and
    other method calls (by receiver), each with the line of the statement it is in, in the
    order a walk of the scope's statements meets them; built once per scope (a train() call in
    a loop of a long script used to walk every earlier statement again)."""

    def __init__(self) -> None:
        self.flags: list[int] = []
        self.evals: dict[str, list[tuple[int, ast.AST]]] = {}
        self.calls: dict[str, list[tuple[int, ast.AST]]] = {}
        self._freezing: dict[str, list[tuple[int, ast.AST]]] = {}
        self._sorted_flags: list[int] | None = None
        self._steps: list[int] | None = None

    def freezing_calls(self, model: str, ctx: Context) -> list[tuple[int, ast.AST]]:
        """The calls on ``model`` of a method name that some class's freeze with eval has, in
        order (a long script calls ``model.parameters()`` in every block: asking each call
        for its function at every train() call was quadratic)."""
        got = self._freezing.get(model)
        if got is None:
            got = self._freezing[model] = [
                (line, n) for line, n in self.calls.get(model, ())
                if _freezing_method(n.func.attr, ctx)]  # type: ignore[attr-defined]
        return got

    def sorted_flags(self) -> list[int]:
        if self._sorted_flags is None:
            self._sorted_flags = sorted(self.flags)
        return self._sorted_flags

    def step_lines(self, scope: Scope) -> list[int]:
        """The sorted lines of the statements calling ``x.backward()`` or ``x.step()``."""
        if self._steps is None:
            self._steps = sorted(m.stmt.lineno for name in STEP_CALLS
                                 for m in scope.calls_to(name))
        return self._steps


def _held(e: ast.expr) -> bool:
    """``e`` may be a parameter or a module (``p``, ``model.enc``), not a tensor computed
    right there (``torch.min(d, 0)[0].detach()``: its flag freezes nothing)."""
    return not any(isinstance(n, ast.Call) and (isinstance(n.func, ast.Attribute) and
                                                n.func.attr in ("detach", "clone")
                                                or (dotted(n.func) or "").startswith("torch."))
                   for n in walk(e))


def _index(scope: Scope, ctx: Context) -> _Index:
    def make() -> _Index:
        idx = _Index()
        for s in scope.stmts:  # a statement's calls, nested ones too (NOTE [walk index])
            for n in of_types(s, (ast.Assign, ast.Call)):
                if isinstance(n, ast.Assign) and any(
                        isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                        and _held(t.value) for t in n.targets) or isinstance(n, ast.Call) \
                        and isinstance(n.func, ast.Attribute) \
                        and n.func.attr == "requires_grad_" and _held(n.func.value):
                    idx.flags.append(s.lineno)
                if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
                    continue
                recv = dotted(n.func.value) or ""
                if n.func.attr == "eval" and not n.args:
                    parts = recv.split(".")
                    for k in range(1, len(parts)):
                        idx.evals.setdefault(".".join(parts[:k]), []).append((s.lineno, n))
                elif recv and n.func.attr not in ("train", "eval"):
                    idx.calls.setdefault(recv, []).append((s.lineno, n))
        return idx
    return ctx.memo("gt443-index", scope.node, make)
