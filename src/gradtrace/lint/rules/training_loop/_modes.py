"""What a call does to train/eval modes (GT516): ``x.eval()`` / ``x.train()`` themselves, and
the file's functions and methods that make such calls, one or two calls away
(``validate(model)`` calling ``model.val_start()``, a wrapper's ``train_start()`` putting
``self.img_enc`` and ``self.txt_enc`` in train mode).

Receivers are dotted names in the caller's terms: a callee's ``self.enc.eval()`` called as
``model.val_start()`` is an effect on ``model.enc``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Container

from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef
Effects = dict[str, set[str]]
MAX_DEPTH = 2  # calls followed below the loop's own


def mode_call(call: ast.Call) -> str | None:
    """"eval" for ``x.eval()`` / ``x.train(False)``, "train" for ``x.train()`` /
    ``x.train(True)`` (anything else: None)."""
    f = call.func
    if not isinstance(f, ast.Attribute) or call.keywords:
        return None
    if f.attr == "eval" and not call.args:
        return "eval"
    if f.attr == "train":
        if not call.args:
            return "train"
        a = call.args[0]
        if isinstance(a, ast.Constant) and a.value in (True, False):
            return "train" if a.value else "eval"
    return None


def effects(ctx: Context, where: ast.AST, call: ast.Call, depth: int = 0) -> Effects:
    """Receiver (in the caller's names) -> the modes ``call`` puts it in."""
    m = mode_call(call)
    if m is not None:
        return {dotted(call.func.value) or "": {m}}  # type: ignore[attr-defined]
    if depth >= MAX_DEPTH:
        return {}
    target = resolve(ctx, where, call)
    if target is None:
        return {}
    fn, mapping = target
    out: Effects = {}
    glob = _globals(ctx, fn)
    for r, modes in function_effects(ctx, fn, depth + 1).items():
        head, dot, rest = r.partition(".")
        if head in mapping:
            out.setdefault(mapping[head] + dot + rest, set()).update(modes)
        elif head in glob:  # `def train(data): model.train()` on the script's own `model`
            out.setdefault(r, set()).update(modes)
    return out


class _Globals:
    """Membership in the module-level names a function reads as globals, tested per name: a
    set of them per function (every module name, less the function's own) was quadratic on
    a script of thousands of module-level names and functions."""

    __slots__ = ("module", "params", "local")

    def __init__(self, module: Container[str], params: set[str], local: Container[str]) -> None:
        self.module, self.params, self.local = module, params, local

    def __contains__(self, name: object) -> bool:
        return name in self.module and name not in self.params and name not in self.local


def _globals(ctx: Context, fn: ast.AST) -> Container[str]:
    """The module-level names of the file a function of the file reads as globals: bound at
    the module level, neither a parameter nor bound in the function (membership only)."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or ctx.analysis.functions.get(fn.name) is not fn:
        return frozenset()
    def make() -> _Globals:
        a = fn.args
        params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        local = ctx.scope(fn).bindings
        return _Globals(ctx.scope(ctx.tree).bindings, params, local)
    return ctx.memo("gt516-globals", fn, make)


def function_effects(ctx: Context, fn: Fn, depth: int) -> Effects:
    """Receiver (in ``fn``'s names) -> the modes calls anywhere in ``fn`` put it in."""
    def make() -> Effects:
        out: Effects = {}
        for n in walk(fn):
            if isinstance(n, ast.Call):
                for r, modes in effects(ctx, fn, n, depth).items():
                    out.setdefault(r, set()).update(modes)
        for r in _restored(fn):
            out.pop(r, None)
        return out
    memo: dict[int, Effects] = ctx.memo("gt516-fn-effects", fn, dict)
    if depth not in memo:
        memo[depth] = {}  # recursion guard
        memo[depth] = make()
    return memo[depth]


def covers(outer: str, inner: str) -> bool:
    """``outer`` is ``inner`` or one of its owners (``model`` covers ``model.enc``)."""
    return inner == outer or inner.startswith(outer + ".")


def _restored(fn: Fn) -> set[str]:
    """Receivers whose mode ``fn`` saves and puts back as its last switch: ``was =
    model.training; model.eval(); ...; model.train(was)`` leaves ``model`` as it found it."""
    saved: dict[str, str] = {}  # flag name -> receiver
    last: dict[str, tuple[int, bool]] = {}  # receiver -> (line, a restore) of its last switch
    for n in walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and isinstance(n.targets[0], ast.Name) \
                and isinstance(n.value, ast.Attribute) and n.value.attr == "training":
            saved[n.targets[0].id] = dotted(n.value.value) or ""
    if not saved:
        return set()
    for n in walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in ("train", "eval") and not n.keywords:
            r = dotted(n.func.value) or ""
            a = n.args[0] if n.args else None
            back = isinstance(a, ast.Name) and saved.get(a.id) == r
            if n.lineno >= last.get(r, (0, False))[0]:
                last[r] = (n.lineno, back)
    return {r for r, (_, back) in last.items() if back}
