"""An arm of a module's ``forward`` that the project takes only for inference.

# NOTE [arm run only for inference]
A change-detection net's ``forward(self, x1, x2, tta=False)`` returns ``self.base_forward(x1,
x2)`` under ``if not tta:``; its ``else`` arm averages six flipped passes with ``out1 =
F.softmax(out1, dim=1)`` then ``out1 += F.softmax(cur, dim=1).flip(2)``: a write into
softmax's saved output (GT602), an error only if backward runs through that arm. Training
calls ``model(img1, img2)``; the two callers passing ``True`` (``model(img1, img2, True)``)
run under ``torch.no_grad()``. NOTE [run only for inference] decides per class (and the
class here is trained); :func:`inference_arm` decides per arm of ``forward``:

* the statement sits in the arm of ``if P:`` (or the ``else`` of ``if not P:``) taken when
  ``P`` is truthy, ``P`` a parameter of ``forward`` whose default is a falsy constant
  (``False``, ``None``, ``0``), never rebound in ``forward``;
* every call in the project's files (this one included) that may bind ``P`` to anything but
  a falsy constant runs with grad off (``no_grad``, a grad-off decorator) or in an inference
  function or eval-only branch, and at least one of them passes a truthy constant. A call
  "may bind" ``P`` when it names ``P`` as a keyword, or when it gives a value at ``P``'s
  position and its callee is not an import, a function or class of its file, a builtin, or
  a method of the enclosing class (the receiver's type is not resolved: an
  over-approximation, so *every caller* stays sound);
* a ``*args``/``**kwargs`` in such a call, a project over :data:`MAX_FILES` files, a buffer,
  an unreadable file: unknown, the arm is trained.

Asked only for a write GT602/GT603 would report in a module's ``forward``.
"""
from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callers import _off_at, readers
from gradtrace.lint.analysis.inference_runs import _inference_at
from gradtrace.lint.grad_modes import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_FILES = 60  # project files scanned for the flag's callers; more: unknown
_BUILTINS = frozenset(dir(builtins))


def inference_arm(ctx: Context, fn: ast.AST, path: list[ast.stmt]) -> bool:
    """NOTE [arm run only for inference]: ``path`` (from ``fn``'s body down to the write)
    runs only when a defaulted-off flag of ``forward`` is on, which only inference sets."""
    if not isinstance(fn, FUNCTION_TYPES) or fn.name != "forward":
        return False
    rebound = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
               and isinstance(n.ctx, (ast.Store, ast.Del))}
    flags = {k: v for k, v in _flag_params(fn).items() if k not in rebound}
    for s, inner in zip(path, path[1:]):
        if not isinstance(s, ast.If):
            continue
        negated = isinstance(s.test, ast.UnaryOp) and isinstance(s.test.op, ast.Not)
        node = s.test.operand if negated else s.test  # type: ignore[attr-defined]
        if not isinstance(node, ast.Name) or node.id not in flags:
            continue
        if (inner in s.orelse) != negated:
            continue
        known = ctx.memo("inference-arm", fn, lambda: {})
        if node.id not in known:
            known[node.id] = _set_only_for_inference(ctx, fn, node.id, flags[node.id])
        if known[node.id]:
            return True
    return False


def _flag_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, int | None]:
    """The parameters with a falsy constant default: name -> position after ``self``
    (None: keyword-only)."""
    a = fn.args
    pos = [*a.posonlyargs, *a.args][1:]
    out: dict[str, int | None] = {}
    for p, d in zip(pos[len(pos) - len(a.defaults):], a.defaults):
        if _falsy(d):
            out[p.arg] = pos.index(p)
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        if d is not None and _falsy(d):
            out[p.arg] = None
    return out


def _falsy(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and not e.value and not isinstance(e.value, str)


def _set_only_for_inference(ctx: Context, fn: ast.AST, flag: str, at: int | None) -> bool:
    others = readers(ctx, b"(", limit=MAX_FILES)
    if others is None:
        return False
    truthy = False
    for octx in [ctx, *others]:
        for call, where, value in _binding_calls(octx, fn, flag, at):  # type: ignore[arg-type]
            if value is None:
                return False  # a starred argument: unknown
            if _falsy(value):
                continue
            if not (_off_at(octx, call, where) or _inference_at(octx, call, where)):
                return False
            truthy = truthy or isinstance(value, ast.Constant)
    return truthy


def _binding_calls(octx: Context, fn: ast.FunctionDef, flag: str, at: int | None
                   ) -> list[tuple[ast.Call, ast.AST, ast.expr | None]]:
    """The calls of ``octx``'s file that may bind ``flag``, with the function making each
    and the value given (None: a starred argument hides it)."""
    local = {s.name for s in octx.tree.body if isinstance(s, (*FUNCTION_TYPES, ast.ClassDef))}
    out: list[tuple[ast.Call, ast.AST, ast.expr | None]] = []
    todo: list[tuple[ast.AST, ast.AST, ast.ClassDef | None]] = [(octx.tree, octx.tree, None)]
    while todo:  # (node, the function making its calls, its class), depth first, in order
        node, where, cls = todo.pop()
        if isinstance(node, ast.Call):
            got = _bound(octx, node, fn, flag, at, local, cls)
            if got is not False:
                out.append((node, where, got))  # type: ignore[arg-type]
        todo.extend(reversed([
            (c, where, c) if isinstance(c, ast.ClassDef)
            else (c, c if isinstance(c, FUNCTION_TYPES) else where, cls)
            for c in ast.iter_child_nodes(node)]))
    return out


def _bound(octx: Context, call: ast.Call, fn: ast.FunctionDef, flag: str, at: int | None,
           local: set[str], cls: ast.ClassDef | None) -> ast.expr | None | bool:
    """The value ``call`` may give ``flag``; False: it gives none; None: unknown."""
    for k in call.keywords:
        if k.arg == flag:
            return k.value
    f = call.func
    root = f
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) and (octx.imports.is_imported(root.id)
                                       or root.id in octx.imports.package) or \
            isinstance(f, ast.Name) and (f.id in local or f.id in _BUILTINS):
        return False  # an import, a function or class of the file, a builtin
    if isinstance(f, ast.Attribute) and not isinstance(root, ast.Name) and f.attr != "forward":
        return False  # a method of a computed value (``f(y).view(b, c)``)
    if cls is not None and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
            and f.value.id == "self" and any(
                isinstance(m, FUNCTION_TYPES) and m.name == f.attr for m in cls.body):
        return False
    if any(k.arg is None for k in call.keywords):
        return None
    if at is None or len(call.args) <= at or not _fits(call, fn):
        return False  # no value at the flag's position, or not a call ``forward`` accepts
    if any(isinstance(a, ast.Starred) for a in call.args[:at + 1]):
        return None
    return call.args[at]


def _fits(call: ast.Call, fn: ast.FunctionDef) -> bool:
    """``call`` (no starred argument) could bind ``fn``'s parameters: no more positional
    arguments than it takes, no keyword it lacks (``*args``/``**kwargs`` take any)."""
    a = fn.args
    pos = [*a.posonlyargs, *a.args][1:]
    if a.vararg is None and len(call.args) > len(pos):
        return False
    names = {p.arg for p in [*pos, *a.kwonlyargs]}
    return a.kwarg is not None or all(k.arg in names for k in call.keywords)
