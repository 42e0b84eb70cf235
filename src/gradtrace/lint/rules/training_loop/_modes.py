"""What a call does to train/eval modes (GT516): ``x.eval()`` / ``x.train()`` themselves, and
the file's functions and methods that make such calls, one or two calls away
(``validate(model)`` calling ``model.val_start()``, a wrapper's ``train_start()`` putting
``self.img_enc`` and ``self.txt_enc`` in train mode).

Receivers are dotted names in the caller's terms: a callee's ``self.enc.eval()`` called as
``model.val_start()`` is an effect on ``model.enc``.
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Callable, Iterable

from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef
Effects = dict[str, set[str]]
MAX_DEPTH = 2  # calls followed below the loop's own
CALLED_RE = re.compile(r"\b(\w+)\(")  # a whole word followed by `(`
WORD_RE = re.compile(r"\w+")


def called_names(text: str) -> frozenset[str]:
    """The words ``text`` calls: each whole word (``\\w+``) followed by ``(``."""
    return frozenset(CALLED_RE.findall(text))


def call_test(names: Iterable[str]) -> Callable[[str], bool] | None:
    """A test of a text for a call of one of ``names``, the answer of
    ``re.search(r"\\b(?:NAME|...)\\(", text)``; None when there is no name.

    A name that is a whole word (every identifier but a few with combining marks) is
    called where the text has that word followed by ``(``, so the text is scanned once for
    such words and they are looked up in a set: the alternation of a file's function names
    costs the text's length times their number, and a script of many functions asked it of
    every loop (quadratic in the file). Other names keep the alternation."""
    names = frozenset(names)
    if not names:
        return None
    if all(WORD_RE.fullmatch(n) for n in names):
        return lambda text: not names.isdisjoint(CALLED_RE.findall(text))
    pattern = re.compile(r"\b(?:%s)\(" % "|".join(map(re.escape, sorted(names))))
    return lambda text: pattern.search(text) is not None


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
    for r, modes in function_effects(ctx, fn, depth + 1).items():
        head, dot, rest = r.partition(".")
        if head in mapping:
            out.setdefault(mapping[head] + dot + rest, set()).update(modes)
    return out


def function_effects(ctx: Context, fn: Fn, depth: int) -> Effects:
    """Receiver (in ``fn``'s names) -> the modes calls anywhere in ``fn`` put it in."""
    def make() -> Effects:
        out: Effects = {}
        for n in walk(fn):
            if isinstance(n, ast.Call):
                for r, modes in effects(ctx, fn, n, depth).items():
                    out.setdefault(r, set()).update(modes)
        return out
    memo: dict[int, Effects] = ctx.memo("gt516-fn-effects", fn, dict)
    if depth not in memo:
        memo[depth] = {}  # recursion guard
        memo[depth] = make()
    return memo[depth]


def covers(outer: str, inner: str) -> bool:
    """``outer`` is ``inner`` or one of its owners (``model`` covers ``model.enc``)."""
    return inner == outer or inner.startswith(outer + ".")
