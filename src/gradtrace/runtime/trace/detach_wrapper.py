"""A method that detaches every input it is handed names its caller (issue 13).

# NOTE [grad-free wrapper]
Some classes offer a grad-free entry point beside the computation itself: a metric's
``__call__`` detaches both inputs and hands them to ``self._compute_tensor`` (MONAI's
``IterationMetric``), an evaluation helper detaches its argument and calls ``self.score``.
The ``.detach()`` there is the contract of that entry point, not a slip: the bug is the caller
that used it where the graph was needed (MONAI#5668's fix: ``SSIMLoss`` calls
``_compute_tensor`` instead of the metric), so a detach cut made in such a method is recorded at
the caller's line (``Cut.site``), the detach itself kept as ``Cut.inner``.

The method is read from its source (cached per code object): a method (first parameter
``self``, not ``forward``) with at least one other parameter, no ``*args``/``**kwargs``, whose
parameters are only ever read as the receiver of ``.detach()`` or in an ``isinstance``/``is
None`` check, at least one of them detached, and that returns ``self.<method>(...)``. A helper
that detaches one input but reads another plainly (``self.criterion(pred.detach(), target)``)
is not one: its own line stays the cause. Read only when a detach cut is recorded.

The same holds for a helper that RETURNS what it is handed, detached: ``return x.detach()``,
``return x.detach().cpu().numpy()`` on a parameter ``x`` of a function other than ``forward``
or ``__call__`` (ride's ``detach_to_cpu``, a ``to_numpy``). Its purpose is to leave the graph;
the slip is the caller that handed it the loss (ride PR#12: ``common_step`` stops passing the
loss through it). The cut is recorded at the first caller outside the helper, its recursion and
its comprehensions (a helper that maps itself over a dict or a list). A helper that detaches a
value it computed (``return self.net(x).detach()``, ``return out.detach()``) keeps its line.
"""
from __future__ import annotations

import ast
from dataclasses import replace
from types import CodeType

from gradtrace.runtime.frames import Site, is_internal, user_frame
from gradtrace.runtime.trace.convert_shim import conversion_lines
from gradtrace.runtime.trace.offstack import function_node

# code id -> (code, a grad-free wrapper?, lines of `return P.detach()...`, lines of a
# conversion shim's return: NOTE [conversion shim]), read once per code
_SEEN: dict[int, tuple[CodeType, bool, frozenset[int], frozenset[int]]] = {}
# methods that hand back the same values in another place or form: `x.detach().cpu().numpy()`
_CONVERSIONS = frozenset({"detach", "cpu", "numpy", "to", "clone", "float", "double", "half",
                          "contiguous", "tolist", "item"})


def _benign(node: ast.AST, parent: dict[ast.AST, ast.AST]) -> str | None:
    """How a parameter read is used: "detach", "check" (isinstance / is None), else None."""
    up = parent.get(node)
    call = parent.get(up) if up is not None else None
    if isinstance(up, ast.Attribute) and up.attr == "detach" \
            and isinstance(call, ast.Call) and call.func is up:
        return "detach"
    if isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id == "isinstance" \
            and up.args and up.args[0] is node:
        return "check"
    if isinstance(up, ast.Compare) and all(isinstance(o, (ast.Is, ast.IsNot)) for o in up.ops) \
            and all(isinstance(c, ast.Constant) and c.value is None
                    for c in [up.left, *up.comparators] if c is not node):
        return "check"
    return None


def _returns_own_method(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(n, ast.Return) and isinstance(n.value, ast.Call)
               and isinstance(n.value.func, ast.Attribute)
               and isinstance(n.value.func.value, ast.Name) and n.value.func.value.id == "self"
               for n in ast.walk(fn))


def _is_wrapper(code: CodeType) -> bool:
    fn = function_node(code)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name == "forward":
        return False
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if a.vararg or a.kwarg or len(names) < 2 or names[0] != "self":
        return False
    params = set(names[1:])
    parent = {c: p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}
    uses = [_benign(n, parent) for n in ast.walk(fn)
            if isinstance(n, ast.Name) and n.id in params and isinstance(n.ctx, ast.Load)]
    return bool(uses) and None not in uses and "detach" in uses and _returns_own_method(fn)


def _detached_param(node: ast.AST, params: set[str]) -> bool:
    """``node`` is ``P.detach()`` of a parameter ``P``, followed by conversions only."""
    detached = False
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in _CONVERSIONS:
        detached = detached or node.func.attr == "detach"
        node = node.func.value
    return detached and isinstance(node, ast.Name) and node.id in params


def _returned_detach_lines(code: CodeType) -> frozenset[int]:
    """The lines of ``return P.detach()...`` on a parameter ``P`` (NOTE [grad-free wrapper])."""
    fn = function_node(code)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or fn.name in ("forward", "__call__"):
        return frozenset()
    a = fn.args
    params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self", "cls"}
    return frozenset(line for n in ast.walk(fn) if isinstance(n, ast.Return)
                     and n.value is not None and _detached_param(n.value, params)
                     for line in range(n.lineno, (n.end_lineno or n.lineno) + 1))


def wrapper_caller(raw: tuple[CodeType, int, int],
                   reason: str = "detach") -> tuple[CodeType, int, int] | None:
    """For a detach made at ``raw`` inside a grad-free wrapper or a helper that returns its
    input detached (NOTE [grad-free wrapper]), or a rewrap/copy on a conversion shim's return
    (NOTE [conversion shim]): the raw site of the user's line that called it; else None."""
    code = raw[0]
    hit = _SEEN.get(id(code))
    if hit is None or hit[0] is not code:
        if len(_SEEN) > 4096:
            _SEEN.clear()
        hit = _SEEN[id(code)] = (code, _is_wrapper(code), _returned_detach_lines(code),
                                 conversion_lines(code))
    if reason != "detach" and raw[1] not in hit[3] or \
            reason == "detach" and not hit[1] and raw[1] not in hit[2]:
        return None
    frame = user_frame(2)
    if frame is None or frame.f_code is not code:
        return None
    own = {code, *(c for c in code.co_consts if isinstance(c, CodeType))}
    caller = frame.f_back
    while caller is not None and (is_internal(caller.f_code) or caller.f_code in own):
        caller = caller.f_back
    return None if caller is None else (caller.f_code, caller.f_lineno, caller.f_lasti)


def wrapper_site(site: Site | None, code: CodeType) -> Site | None:
    """``site`` (the detach) named by the wrapper's qualified name (``Metric.__call__``)."""
    name = getattr(code, "co_qualname", code.co_name)
    return None if site is None else replace(site, function=name)


__all__ = ["wrapper_caller", "wrapper_site"]
