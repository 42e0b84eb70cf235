"""Classes of the file that keep a running copy of the tensors they are given (an EMA of the
weights): the methods that fold new values in (``update`` / ``step``: a loop over
``zip(self.<held>, <argument>)`` writing the held tensors in place) and the others (apply,
store, restore). Found once per file (docs/triage/static23b.md)."""
from __future__ import annotations

import ast
import re

from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import statements, walk

Fn = ast.FunctionDef | ast.AsyncFunctionDef


def _held(e: ast.AST) -> str | None:
    """``s`` of ``s``, ``s.data``: the tensor a write goes to."""
    while isinstance(e, ast.Attribute) and e.attr == "data":
        e = e.value
    return e.id if isinstance(e, ast.Name) else None


def _folds_in(fn: Fn) -> bool:
    """``fn`` loops over ``zip(self.<x>, <argument>)`` (either order) and writes the element
    taken from ``self.<x>`` in place (``s.sub_(...)``, ``s.mul_(d).add_(p)``, ``s.copy_``)."""
    args = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    args.discard("self")
    for loop in walk(fn):
        if not (isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.iter, ast.Call)
                and dotted(loop.iter.func) == "zip" and isinstance(loop.target, ast.Tuple)
                and len(loop.target.elts) == len(loop.iter.args)):
            continue
        held, given = set(), False
        for t, a in zip(loop.target.elts, loop.iter.args):
            src = dotted(a.func.value) if isinstance(a, ast.Call) and isinstance(
                a.func, ast.Attribute) else dotted(a)
            if src and src.startswith("self.") and isinstance(t, ast.Name):
                held.add(t.id)
            elif src and src.split(".")[0] in args:
                given = True
        if not held or not given:
            continue
        for n in walk(loop):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr.endswith("_") and not n.func.attr.startswith("_"):
                recv = n.func.value
                while isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) \
                        and recv.func.attr.endswith("_"):
                    recv = recv.func.value   # s.mul_(d).add_(p)
                if _held(recv) in held:
                    return True
    return False


HELD_ZIP = re.compile(r"zip\([^\n]*self\.")
# the in-place writes an average folds values in with, and what it is built from
IN_PLACE = ("sub_", "mul_", "add_", "copy_", "lerp_")
SOURCES = ("parameters", "named_parameters", "state_dict")


def averaging_classes(ctx: Context) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """``{class: (methods folding values in, other methods)}`` for the classes of the file
    with at least one method of each kind (``__init__`` left out). Only methods holding a
    line with ``zip(...self.`` are read."""
    return {c: v for c, v in folding_classes(ctx).items() if v[1]}


def folding_classes(ctx: Context) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """As :func:`averaging_classes`, also the classes whose only methods fold values in (an
    ``EMA`` with ``update`` alone, GT572)."""
    def make() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
        # (each word one run of identifier characters: in ASCII code, `may_hold` of the
        # identifiers is `w in code`, which `mentions` answers without building them)
        if ctx.code.isascii() and not (ctx.mentions("zip") and ctx.mentions("step")
                                       and ctx.mentions(*IN_PLACE) and ctx.mentions(*SOURCES)):
            return {}
        code = ctx.code
        lines = [code.count("\n", 0, m.start()) + 1 for m in HELD_ZIP.finditer(code)]
        out: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        if not lines:
            return out
        for c in statements(ctx.tree):
            if not isinstance(c, ast.ClassDef) or not any(
                    c.lineno <= x <= (c.end_lineno or 0) for x in lines):
                continue
            fns = [f for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and f.name != "__init__"]
            fold = frozenset(f.name for f in fns if any(
                f.lineno <= x <= (f.end_lineno or 0) for x in lines) and _folds_in(f))
            other = frozenset(f.name for f in fns) - fold
            if fold:
                out[c.name] = (fold, other)
        return out
    return ctx.memo("s23b-folding-classes", ctx.tree, make)
