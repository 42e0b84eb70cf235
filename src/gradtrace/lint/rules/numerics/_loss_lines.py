"""The loss names GT758 knows and the lines of a file that may call one of those losses,
found in the code text before any walk (NOTE [triggers]): the scan of
:mod:`.softmax_loss`. Holds no rule."""
from __future__ import annotations

import ast
import bisect
import re
from typing import Any, Iterator

from gradtrace.lint.code_text import occurrences
from gradtrace.lint.context import Context
from gradtrace.lint.words import holds

CE = "cross_entropy"
NLL = "nll_loss"
KL = "kl_div"
BCEL = "binary_cross_entropy_with_logits"
LOSS_CLASSES = {"CrossEntropyLoss": CE, "NLLLoss": NLL, "KLDivLoss": KL, "BCEWithLogitsLoss": BCEL}
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


# `criterion = nn.CrossEntropyLoss(...)`, `self.crit = NLLLoss()`: names that compute the loss
HOLDER_RE = re.compile(r"([A-Za-z_][\w.]*)\s*=\s*(?:[\w.]+\.)?$")
TUPLE_HOLDERS_RE = re.compile(r"\s*([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)+)\s*=[^=]")


def _candidate_lines(tree: ast.Module, ctx: Context, funcs: tuple[str, ...] = (CE, NLL, KL, BCEL),
                     classes: Any = LOSS_CLASSES) -> dict[ast.AST, set[int]]:
    """The lines that may call a cross-entropy / NLL loss (read from the code text: the
    functions, the names the file binds to those loss modules, a module built in place), by
    the innermost function holding them (the module for top-level code). The text is searched
    first so that a file is walked only where a loss is called (NOTE [triggers])."""
    text = ctx.code
    words = [*(f + "(" for f in funcs), *(c + "(" for c in classes)]
    holders: set[str] = set()
    for cls in classes:
        pos = text.find(cls)
        while pos != -1:
            start = text.rfind("\n", 0, pos) + 1
            m = HOLDER_RE.search(text, start, pos)
            if m is not None:  # `criterion(out, y)`, `criterion.forward(out, y)`
                holders.update((m.group(1) + "(", m.group(1) + ".forward("))
            m = TUPLE_HOLDERS_RE.match(text, start, pos)  # `ce, nll = CrossEntropyLoss(), ...`
            if m is not None:
                holders.update(n.strip() + "(" for n in m.group(1).split(","))
            pos = text.find(cls, pos + 1)
    words += sorted(holders)
    found = [m.start() for m in _any_of(words).finditer(text)] if len(words) > FIND_WORDS \
        else sorted(p for w in words for p in occurrences(text, w))  # (lines: as one find)
    lines: set[int] = set()
    line, prev = 1, 0
    for pos in found:
        line += text.count("\n", prev, pos)
        prev = pos
        lines.add(line)
    out: dict[ast.AST, set[int]] = {}
    if not lines:
        return out
    defs = sorted(_defs(tree.body, sorted(lines)), key=lambda f: f.lineno)
    starts = [f.lineno for f in defs]
    parent: list[int] = []  # the innermost of ``defs`` holding each (defs nest or are apart)
    open_: list[int] = []
    for i, f in enumerate(defs):
        while open_ and (defs[open_[-1]].end_lineno or 0) < f.lineno:
            open_.pop()
        parent.append(open_[-1] if open_ else -1)
        open_.append(i)
    for line in lines:  # the innermost function holding it: the last one starting before it
        k = bisect.bisect_right(starts, line) - 1  # that still runs there (the defs between
        while k >= 0 and line > (defs[k].end_lineno or 0):  # one and the def holding it
            k = parent[k]  # end before it: a walk back over them was quadratic at module level)
        out.setdefault(defs[k] if k >= 0 else tree, set()).add(line)
    return out


FIND_WORDS = 16  # words found by a `str.find` scan each; more: by one `_any_of` pattern


def _any_of(words: list[str]) -> re.Pattern[str]:
    """One pattern matching where any of ``words`` starts, as a trie (one pass over the text;
    a search per word was quadratic in a file with a loss wrapper per block). A match starting
    inside another lies on its line: the words hold no line break."""
    trie: dict[str, dict] = {}  # type: ignore[type-arg]
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}
    return re.compile(_emit(trie) if words else "(?!)")


def _emit(node: dict) -> str:  # type: ignore[type-arg]
    """The pattern of a trie node of :func:`_any_of`."""
    alts = [re.escape(ch) + _emit(sub) for ch, sub in sorted(node.items()) if ch]
    if not alts:
        return ""
    one = alts[0] if len(alts) == 1 and "" not in node else "(?:%s)" % "|".join(alts)
    return one + ("?" if "" in node else "")


def _defs(body: list[ast.stmt], lines: list[int]
          ) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function of a body, nested ones too, that holds one of the sorted ``lines``
    (statements only, no expressions walked; a statement that holds none of the lines holds
    no function that does, and is not entered)."""
    for st in body:
        if not holds(lines, st.lineno, st.end_lineno or st.lineno):
            continue
        if isinstance(st, FUNCS):
            yield st
        for field in ("body", "orelse", "finalbody", "handlers"):
            sub = getattr(st, field, None)
            if isinstance(sub, list):
                yield from _defs([x for x in sub if isinstance(x, (ast.stmt,
                                                                    ast.ExceptHandler))], lines)
