"""GT610: a loss helper that runs backward on every call but steps only when given an
optimizer, called without one."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.steps import backward_of
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.training_loop._base import related_at


@dataclass(frozen=True)
class _Optional:
    """The optimizer ``name`` (a parameter, or ``self.<attr>`` set from one in ``__init__``)
    whose ``param`` of ``target`` (the function, or the class's ``__init__``) defaults to
    None."""

    name: str
    param: str
    target: ast.FunctionDef | ast.AsyncFunctionDef


def _none_default(fn: ast.AST, p: str) -> int | None:
    """The position of ``fn``'s parameter ``p`` (counting ``self``) when it defaults to None."""
    a = fn.args  # type: ignore[attr-defined]
    pos = [*a.posonlyargs, *a.args]
    defaults = dict(zip([x.arg for x in pos[len(pos) - len(a.defaults):]], a.defaults))
    defaults.update((x.arg, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
    d = defaults.get(p)
    if not (isinstance(d, ast.Constant) and d.value is None):
        return None
    names = [x.arg for x in pos]
    return names.index(p) if p in names else -1


def _guard_name(test: ast.expr) -> str | None:
    """``o is not None`` / ``o`` (a name or ``self.<attr>``): ``o``."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and isinstance(test.ops[0], ast.IsNot) and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None:
        test = test.left
    return dotted(test) if isinstance(test, (ast.Name, ast.Attribute)) else None


def _scan(body: list[ast.stmt], guard: str | None, under_if: bool,
          out: dict[str, list]) -> None:
    """Sort the calls of a body: backward calls (with whether an ``if`` holds them), and
    ``step``/``zero_grad`` calls (with the name of the ``if o:`` guard holding them)."""
    for s in body:
        if isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)):
            continue
        if isinstance(s, ast.If):
            g = _guard_name(s.test)
            _scan(s.body, g or guard, True, out)
            _scan(s.orelse, guard, True, out)
            continue
        for n in bfs_walk(s) if not hasattr(s, "body") else _header_nodes(s):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if n.func.attr == "backward":
                    out["backward"].append((n, under_if))
                elif n.func.attr in ("step", "zero_grad"):
                    out["step"].append((n, guard))
        for f in ("body", "orelse", "finalbody"):
            _scan(getattr(s, f, None) or [], guard, under_if, out)
        for h in getattr(s, "handlers", ()):
            _scan(h.body, guard, under_if, out)


def _header_nodes(s: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of a compound statement outside its bodies (a ``for``'s iterable...)."""
    for f, v in ast.iter_fields(s):
        if f in ("body", "orelse", "finalbody", "handlers"):
            continue
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, ast.AST):
                yield from bfs_walk(x)


class BackwardWithoutOptimizer(Rule):
    """A loss helper runs `loss.backward()` on every call but steps (and clears) the optimizer
    only when it is given one (`if self.opt is not None:`), and the file calls it without.

    Why: the call without an optimizer is the validation or test pass (`SimpleLossCompute(
    generator, criterion, None)` in the Annotated Transformer). Its backward still adds the
    validation batches' gradients into `.grad`, and nothing clears them: the next training
    step applies them with its own gradient, so the model trains on the validation data
    (annotated-transformer, transformer-ocr). Put the backward under the same `if` as the
    step, or evaluate under `torch.no_grad()` without calling it.
    Known limits: the helper is a function of the file (its parameter defaulting to None) or a
    class whose `__init__` stores such a parameter; it is called with `None` (or without the
    argument) somewhere in the file and with an optimizer elsewhere, not in the other arm of
    one `if` (gradient accumulation: the calls without an optimizer feed the next step).
    """

    code = "GT610"
    name = "backward-without-optimizer"
    message = ("`{call}` runs on every call, but the optimizer steps only when `{opt}` is given "
               "(line {line}) and `{site}` (line {site_line}) gives none: that pass's "
               "gradients stay in `.grad` and the next step applies them; run the backward "
               "under the same `if`")
    triggers = ("backward",)
    examples = [
        Bad("""
            class LossCompute:
                def __init__(self, criterion, opt=None):
                    self.criterion, self.opt = criterion, opt

                def __call__(self, out, y):
                    loss = self.criterion(out, y)
                    loss.backward()
                    if self.opt is not None:
                        self.opt.step()
                        self.opt.zero_grad()
                    return loss.item()

            for x, y in train_data:
                LossCompute(criterion, optimizer)(model(x), y)
            for x, y in val_data:
                LossCompute(criterion, None)(model(x), y)
            """, at=(7, 8)),
        Good("""
            class LossCompute:
                def __init__(self, criterion, opt=None):
                    self.criterion, self.opt = criterion, opt

                def __call__(self, out, y):
                    loss = self.criterion(out, y)
                    if self.opt is not None:
                        loss.backward()
                        self.opt.step()
                        self.opt.zero_grad()
                    return loss.item()

            for x, y in train_data:
                LossCompute(criterion, optimizer)(model(x), y)
            for x, y in val_data:
                LossCompute(criterion, None)(model(x), y)
            """),
        Good("""
            def backward_step(loss, optimizer=None):
                loss.backward()
                if optimizer is not None:
                    optimizer.step()
                    optimizer.zero_grad()

            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / 4
                if (i + 1) % 4:
                    backward_step(loss)
                else:
                    backward_step(loss, optimizer)
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef,
                               ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, fn: ast.FunctionDef | ast.AsyncFunctionDef,
               ctx: Context) -> Iterator[Finding]:
        text = "\n".join(ctx.code_lines[fn.lineno - 1:fn.end_lineno or fn.lineno])
        if ".backward(" not in text or ".step(" not in text or "None" not in ctx.code:
            return
        calls: dict[str, list] = {"backward": [], "step": []}
        _scan(fn.body, None, False, calls)
        free = [c for c, under in calls["backward"] if not under and backward_of(c, ctx)]
        steps = [(c, g) for c, g in calls["step"] if c.func.attr == "step"]  # type: ignore
        if not free or not steps:
            return
        guards = {g for _, g in calls["step"]}
        if len(guards) != 1 or None in guards:
            return  # a step or a clear outside the guard, or two guards
        guard = guards.pop()
        if not all((dotted(c.func.value) or "").startswith(guard)  # type: ignore[attr-defined]
                   for c, _ in calls["step"]):
            return
        opt = _optional(fn, guard, ctx)  # type: ignore[arg-type]
        if opt is None:
            return
        site = _none_site(opt, ctx)
        if site is None:
            return
        g_if = next(c for c, _ in steps)
        yield self.report(free[0], ctx, related=(
            related_at(ctx, g_if, "the optimizer steps only here"),
            related_at(ctx, site, "called without an optimizer here")),
            call=ctx.source(free[0]), opt=guard, line=g_if.lineno,
            site=ctx.source(site)[:60], site_line=site.lineno)


def _optional(fn: ast.FunctionDef | ast.AsyncFunctionDef, guard: str,
              ctx: Context) -> _Optional | None:
    """The optional optimizer the guard names: a parameter of ``fn`` (a function of the file)
    defaulting to None, or ``self.<attr>`` that ``__init__`` sets from such a parameter."""
    info = ctx.analysis.class_of(fn)
    if info is None:
        if "." in guard or ctx.analysis.functions.get(fn.name) is not fn:
            return None
        return _Optional(guard, guard, fn) if _none_default(fn, guard) is not None else None
    if not guard.startswith("self.") or guard.count(".") != 1:
        return None
    attr = info.attrs.get(guard[5:])
    init = info.methods.get("__init__")
    if attr is None or init is None or attr.method is not init or attr.later \
            or not isinstance(attr.value, ast.Name):
        return None
    p = attr.value.id
    return _Optional(guard, p, init) if _none_default(init, p) is not None else None


def _none_site(opt: _Optional, ctx: Context) -> ast.Call | None:
    """A call of the helper (the function, or the class's constructor) that gives no
    optimizer (``None``, or the argument left out), when another call gives one."""
    target = opt.target
    info = ctx.analysis.class_of(target)
    callee = info.node.name if info is not None else target.name
    index = _none_default(target, opt.param)
    if index is None:
        return None
    if info is not None:
        index -= 1  # `self` is not passed
    none: ast.Call | None = None
    given: list[ast.Call] = []
    for n in ast.walk(ctx.tree):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == callee):
            continue
        if any(isinstance(a, ast.Starred) for a in n.args) or any(k.arg is None
                                                                  for k in n.keywords):
            return None
        v = next((k.value for k in n.keywords if k.arg == opt.param), None)
        if v is None and 0 <= index < len(n.args):
            v = n.args[index]
        if v is None or isinstance(v, ast.Constant) and v.value is None:
            none = none or n
        else:
            given.append(n)
    if none is None or not given or _other_arms(none, given, ctx):
        return None
    return none


def _other_arms(none: ast.Call, given: list[ast.Call], ctx: Context) -> bool:
    """The call without an optimizer and one with it sit in the two arms of one ``if``:
    gradient accumulation (``if (i + 1) % k: step(loss) else: step(loss, opt)``), where the
    gradients of the calls without one are meant to reach the next step."""
    for n in ast.walk(ctx.tree):
        if not isinstance(n, ast.If) or not n.orelse:
            continue
        arms = [{id(x) for s in arm for x in ast.walk(s)} for arm in (n.body, n.orelse)]
        for a, b in (arms, arms[::-1]):
            if id(none) in a and any(id(g) in b for g in given):
                return True
    return False
