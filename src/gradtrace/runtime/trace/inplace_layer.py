"""Which line built the layer that wrote in place.

# NOTE [in-place layer]
When a tensor saved for backward is changed in place inside a layer (``nn.ReLU(inplace=True)``,
``nn.LeakyReLU(0.1, True)``...), the user line the tracer sees is the call of the layer
(``x = relu2(x)``, ``return self.net(x)``), which writes nothing itself: the line to change is
the constructor that asked for ``inplace=True``. Read from the file (no torch): the statement at
the call site must spell no in-place write of its own (no augmented or subscript assignment, no
``*_()`` method, no ``inplace=``); the constructors are the calls with ``inplace=True`` whose
class is the op's (``relu_`` -> ``ReLU``; ``hardtanh_`` -> ``ReLU6``/``Hardtanh``). The one
assigned to the name or attribute the call site calls (directly or inside a container built
there) is it; failing that, the only such constructor of the file. Anything ambiguous: None.
"""
from __future__ import annotations

import ast
import linecache
from typing import Iterator

from gradtrace.runtime.frames import Site

_SAME_OP = {"hardtanh": ("relu6", "hardtanh"), "elu": ("elu", "celu"), "threshold": ("threshold",)}


def _norm(name: str) -> str:
    return name.rstrip("_").replace("_", "").lower()


def _inplace_ctor(n: ast.AST, op: str) -> bool:
    if not (isinstance(n, ast.Call) and any(
            k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in n.keywords)):
        return False
    f = n.func
    last = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    if not last[:1].isupper():
        return False  # F.relu(x, inplace=True) writes on its own line
    return _norm(last) in _SAME_OP.get(op, (op,))


def _writes(stmt: ast.AST) -> bool:
    for n in ast.walk(stmt):
        if isinstance(n, ast.AugAssign) or (isinstance(n, ast.Subscript)
                                            and isinstance(n.ctx, ast.Store)):
            return True
        if isinstance(n, ast.Call) and (any(k.arg == "inplace" for k in n.keywords) or (
                isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_")
                and not n.func.attr.startswith("_"))):
            return True
    return False


def _statement_at(tree: ast.Module, line: int) -> ast.stmt | None:
    best: ast.stmt | None = None
    for n in ast.walk(tree):
        if isinstance(n, ast.stmt) and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                          ast.ClassDef, ast.For, ast.While,
                                                          ast.If, ast.With, ast.Try)) \
                and n.lineno <= line <= (n.end_lineno or n.lineno):
            if best is None or n.lineno >= best.lineno:
                best = n
    return best


def _called(stmt: ast.stmt) -> set[tuple[str, str]]:
    """("name", n) / ("attr", a) for every ``n(...)`` / ``<obj>.a(...)`` of the statement."""
    out: set[tuple[str, str]] = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name):
                out.add(("name", n.func.id))
            elif isinstance(n.func, ast.Attribute):
                out.add(("attr", n.func.attr))
    return out


def _bound(tree: ast.Module) -> Iterator[tuple[tuple[str, str], ast.AST]]:
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    yield ("name", t.id), n.value
                elif isinstance(t, ast.Attribute):
                    yield ("attr", t.attr), n.value


def layer_built_inplace(where: Site | None, op: str) -> Site | None:
    """The line that built, with ``inplace=True``, the layer whose forward ran the in-place
    ``op`` reported at ``where`` (NOTE [in-place layer]); None when ``where`` writes itself or
    the constructor is not clear."""
    if where is None or not op:
        return None
    text = "".join(linecache.getlines(where.path))
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    stmt = _statement_at(tree, where.line)
    if stmt is None or _writes(stmt):
        return None
    op = _norm(op)
    ctors = [n for n in ast.walk(tree) if _inplace_ctor(n, op)]
    if not ctors:
        return None
    called = _called(stmt)
    hits: list[ast.AST] = []
    for key, value in _bound(tree):
        if key in called:
            hits.extend(c for c in ctors if any(c is x for x in ast.walk(value)))
    found = {(c.lineno, c.col_offset): c for c in hits}
    if not found and len(ctors) == 1:
        found = {(ctors[0].lineno, ctors[0].col_offset): ctors[0]}
    if len(found) != 1:
        return None
    c = next(iter(found.values()))
    return Site(where.path, c.lineno, "", c.col_offset)
