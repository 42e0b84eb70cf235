"""Loss targets a module captures from its own input in one mode and compares against later.
# NOTE [captured targets]
A module (a style or content loss inserted in a network) has a mode attribute: in one arm of
``if self.mode == "capture":`` it stores a value computed from its method's input on ``self``
(``self.target = x``, ``self.grams.append(gram(x))``, ``self.grams[j] = ...``), and in another
arm (or another method) it hands that attribute to a loss together with the current input
(``self.loss = self.crit(gram(x), self.target)``). Stored as it is, the target is on the
graph of the capture call (the input of a network whose weights require grad then): the first
``backward()`` through a loss that reads it frees that graph, and the next one raises
'Trying to backward through the graph a second time'. :func:`captured_targets` lists such
stores, except where the file cuts them: the stored value read through ``.detach()`` /
``.data`` where it is made, a store under ``no_grad``, and any other assignment of the
attribute outside ``__init__`` or any ``.detach()`` of it in the file (NOTE [carried state]).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.kinds import is_torch_loss
from gradtrace.lint.analysis.modules import _own_statements
from gradtrace.lint.analysis.self_state import CUTS, _cut_elsewhere
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context


# reads that carry no graph: a cut, or the shape, size, type or place of a tensor
_CUTS = CUTS | {"shape", "size", "dim", "ndim", "numel", "dtype", "device"}


@dataclass(frozen=True)
class Capture:
    """``stmt`` (in ``method``) stores ``self.<attr>`` from the input; ``read`` compares."""

    attr: str
    stmt: ast.stmt
    read: ast.Call
    method: ast.FunctionDef | ast.AsyncFunctionDef


def captured_targets(info: ClassInfo, ctx: Context) -> list[Capture]:
    """The stores of NOTE [captured targets] in ``info``'s methods (memoised per class)."""
    return ctx.memo("captured-targets", info.node, lambda: list(_captures(info, ctx)))


def _captures(info: ClassInfo, ctx: Context) -> Iterator[Capture]:
    if not info.is_module:
        return
    methods = [m for m in info.methods.values() if m.name != "__init__"]
    derived: dict[int, set[str]] = {}

    def of(m: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
        if id(m) not in derived:
            derived[id(m)] = _derived(m)
        return derived[id(m)]
    for m in methods:
        arms = _mode_arms(m)
        for s in (x for x in _own_statements(m) if id(x) in arms) if arms else ():
            attr = _store(s, of(m))
            if attr is None or ctx.scope(m).grad_off_at(s) is not None:
                continue
            read = next((c for r in methods for c in _loss_reads(r, attr, of(r), info, ctx)
                         if r is not m or _other_arm(arms, s, c, m)), None)
            if read is not None and not _cut_elsewhere(attr, s, info, ctx):  # type: ignore[arg-type]
                yield Capture(attr, s, read, m)


def _derived(m: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The method's parameters (not ``self``) and the local names computed from them, not
    through a cut (in statement order, loops read once)."""
    a = m.args
    out = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self", "cls"}
    for s in _own_statements(m):
        if isinstance(s, ast.Assign) and _reads(s.value, out):
            out |= {e.id for t in s.targets for e in _names(t)}
    return out


def _names(t: ast.expr) -> Iterator[ast.Name]:
    """The plain names an assignment target binds (not ``self`` of ``self.a``)."""
    if isinstance(t, ast.Name):
        yield t
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _names(e)
    elif isinstance(t, ast.Starred):
        yield from _names(t.value)


def _reads(e: ast.expr, names: set[str]) -> bool:
    """``e`` reads one of ``names`` other than through ``.detach()``/``.data``/``.item()``,
    a shape or ``len()``."""
    cut = {id(x) for n in walk(e) if isinstance(n, ast.Attribute) and n.attr in _CUTS
           or isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len"
           for x in walk(n.value if isinstance(n, ast.Attribute) else n)}
    return any(isinstance(n, ast.Name) and n.id in names and id(n) not in cut for n in walk(e))


def _self_attr(e: ast.AST) -> str | None:
    return e.attr if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) \
        and e.value.id == "self" else None


def _store(s: ast.stmt, derived: set[str]) -> str | None:
    """The attribute ``s`` stores a value of the input in: ``self.a = v``, ``self.a[j] = v``,
    ``self.a.append(v)``."""
    if isinstance(s, ast.Assign) and len(s.targets) == 1:
        t = s.targets[0]
        attr = _self_attr(t.value if isinstance(t, ast.Subscript) else t)
        return attr if attr and _reads(s.value, derived) else None
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
            and isinstance(s.value.func, ast.Attribute) and s.value.func.attr == "append" \
            and len(s.value.args) == 1:
        attr = _self_attr(s.value.func.value)
        return attr if attr and _reads(s.value.args[0], derived) else None
    return None


def _mode_arms(m: ast.AST) -> dict[int, tuple[tuple[int, bool], ...]]:
    """id(statement) -> the arms of the ``if``s testing an attribute of ``self`` that hold it
    (id of the ``if``, which arm), outermost first, for the statements of such arms."""
    out: dict[int, tuple[tuple[int, bool], ...]] = {}
    _mode_arms_into(out, getattr(m, "body", []), ())
    return out


def _mode_arms_into(out: dict[int, tuple[tuple[int, bool], ...]], body: list[ast.stmt],
                    chain: tuple[tuple[int, bool], ...]) -> None:
    """:func:`_mode_arms` for the statements of ``body``, inside the arms ``chain``."""
    for s in body:
        if chain:
            out[id(s)] = chain
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        mode = isinstance(s, ast.If) and any(_self_attr(n) for n in walk(s.test))
        for f in ("body", "orelse", "finalbody"):
            sub = getattr(s, f, None)
            if sub and isinstance(sub[0], ast.stmt):
                _mode_arms_into(out, sub, chain + ((id(s), f == "body"),)
                                if mode and f != "finalbody" else chain)
        for h in getattr(s, "handlers", ()):
            _mode_arms_into(out, h.body, chain)


def _other_arm(arms: dict[int, tuple[tuple[int, bool], ...]], s: ast.stmt, read: ast.Call,
               m: ast.AST) -> bool:
    """The read and the store ``s`` lie in different arms of one mode test (never both run
    in one call)."""
    holder = next((x for x in _own_statements(m) if id(x) in arms and any(
        n is read for n in walk(x)) and not any(isinstance(x, t) for t in (
            ast.If, ast.For, ast.While, ast.With))), None)
    mine = dict(arms.get(id(s), ()))
    return holder is not None and any(mine.get(k, v) != v for k, v in arms[id(holder)])


def _loss_reads(m: ast.FunctionDef | ast.AsyncFunctionDef, attr: str, derived: set[str],
                info: ClassInfo, ctx: Context) -> Iterator[ast.Call]:
    """Loss calls of ``m`` given ``self.<attr>`` (or an item of it) as it is and a value of
    ``m``'s input: a torch loss module held by the class, or a ``*_loss`` function of
    ``torch.nn.functional``."""
    for n in walk(m):
        if not isinstance(n, ast.Call):
            continue
        args = [*n.args, *(k.value for k in n.keywords)]
        if not any(_self_attr(a.value if isinstance(a, ast.Subscript) else a) == attr
                   for a in args) or not any(_reads(a, derived) for a in args):
            continue
        own = _self_attr(n.func)
        kind = info.attr_kind(own) if own else None
        q = ctx.call_name(n) or ""
        if kind is not None and is_torch_loss(kind.cls) or \
                q.startswith("torch.nn.functional.") and q.endswith("_loss"):
            yield n
