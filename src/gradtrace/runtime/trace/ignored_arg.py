"""A function handed the input autograd.grad asks about, that never reads its parameter.

# NOTE [argument the callee ignores]
``torch.autograd.grad(loss, noise)`` fails with "One of the differentiated Tensors appears to
not have been used in the graph" when nothing between ``noise`` and ``loss`` used it. When the
frame that asked for the gradient computed a value from the input (``embed_perturbed = embed +
noise``) and handed it to a function of the user's code (a callback, ``self.eval_fn(...)``)
whose result feeds the outputs, and that function never reads the parameter it was handed it
in (``def eval_fn(embed): return model(model.embeddings(input_ids))``: the argument is ignored,
the function recomputes from elsewhere), the gradient call is right and the callee is the line
to change: the value it returns does not depend on what it was given. Read from the live frame
of the failing call and its source: names bound (in the frame's function, loops included) from
expressions that read the input's name, a call taking one of them whose result reaches the
outputs' names, the callee resolved from the frame (a plain function, a bound method, a
lambda; no ``*args``/``**kwargs``), and its code loading the parameter nowhere (nested
functions included). Named: the callee's last ``return`` (its ``def`` when it has none).
Anything else keeps the autograd.grad line.
"""
from __future__ import annotations

import ast
import dis
import types
from typing import Any

from gradtrace.runtime.frames import Site

_LOADS = frozenset({"LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_FAST_CHECK",
                    "LOAD_FAST_AND_CLEAR", "LOAD_FAST_LOAD_FAST", "LOAD_NAME",
                    "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF", "DELETE_FAST"})


def _reads(expr: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _targets(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    from gradtrace.lint.nodes import scope_nodes

    return list(scope_nodes(fn))


def flow(binds: list[tuple[set[str], set[str]]], start: set[str]) -> set[str]:
    """Names reached from ``start`` through the bindings (targets <- reads), to a fixed point
    (a loop's later statements feed its earlier ones)."""
    seen = set(start)
    changed = True
    while changed:
        changed = False
        for targets, reads in binds:
            if reads & seen and not targets <= seen:
                seen |= targets
                changed = True
    return seen


def _resolve(expr: ast.AST, frame: types.FrameType) -> Any:
    """The object ``expr`` (a name or a chain of attributes on one) names in ``frame``, read
    without running properties; None when it cannot be read."""
    from gradtrace.runtime.frame_values import MISSING, read_chain

    found = read_chain(expr, frame, _function_attr, builtins=True)
    return None if found is MISSING or found is None else found


def _function_attr(base: Any, name: str) -> Any:
    """``base.name`` when it is a plain function (bound when ``base`` is an instance of the
    class that defines it); MISSING otherwise."""
    import inspect

    from gradtrace.runtime.frame_values import MISSING

    try:
        found = inspect.getattr_static(base, name)
    except AttributeError:
        return MISSING
    if isinstance(found, staticmethod):
        found = found.__func__
    own = getattr(base, "__dict__", None)
    if isinstance(found, types.FunctionType) and not isinstance(base, type) and not (
            isinstance(own, dict) and own.get(name) is found):
        return types.MethodType(found, base)  # a method of the instance's class
    return found if isinstance(found, types.FunctionType) else MISSING


def _ignored_param(fn: Any, call: ast.Call, flows: set[str]) -> str | None:
    """The parameter of ``fn`` that takes a value in ``flows`` at ``call`` and that its code
    never reads; None when there is none (or ``fn`` is not a plain Python function)."""
    bound = isinstance(fn, types.MethodType)
    func = fn.__func__ if bound else fn
    if not isinstance(func, types.FunctionType):
        return None
    code = func.__code__
    if code.co_flags & (0x04 | 0x08):  # *args / **kwargs: where a value goes is not known
        return None
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    positional = list(names[1:] if bound else names)[:code.co_argcount - (1 if bound else 0)]
    handed: list[str] = []
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            return None
        if _reads(arg) & flows and i < len(positional):
            handed.append(positional[i])
    for kw in call.keywords:
        if kw.arg is None:
            return None
        if _reads(kw.value) & flows and kw.arg in names:
            handed.append(kw.arg)
    loaded = _loaded(code)
    return next((p for p in handed if p not in loaded), None)


def _loaded(code: types.CodeType) -> set[str]:
    out: set[str] = set()
    todo = [code]
    while todo:
        c = todo.pop()
        for ins in dis.get_instructions(c):
            if ins.opname in _LOADS:
                val = ins.argval
                out.update(val if isinstance(val, tuple) else (val,))
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out


def _line_of(func: types.FunctionType) -> Site | None:
    """The callee's last own ``return`` (its first line when it has none)."""
    from gradtrace.runtime.ran import is_user_file
    from gradtrace.runtime.trace.locate import own_returns, tree_of

    code = func.__code__
    path = code.co_filename
    if not is_user_file(path):
        return None
    if func.__name__ == "<lambda>":
        return Site(path, code.co_firstlineno, "<lambda>")
    tree = tree_of(path)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name == func.__name__ and code.co_firstlineno in (
                    node.lineno, *(d.lineno for d in node.decorator_list)):
            returns = [r for r in own_returns(node) if r.value is not None]
            line = max(r.lineno for r in returns) if returns else node.lineno
            return Site(path, line, func.__name__)
    return None


def _inputs(call: ast.Call) -> ast.expr | None:
    """The ``inputs`` argument of an ``autograd.grad(outputs, inputs, ...)`` call."""
    if len(call.args) > 1 and not isinstance(call.args[1], ast.Starred):
        return call.args[1]
    return next((k.value for k in call.keywords if k.arg == "inputs"), None)


def ignoring_callee(site: Site | None, unused: Any) -> tuple[Site, Site, str, str] | None:
    """(the callee's line, the call's line, the callee's name, its parameter) when the input
    ``unused`` of the autograd.grad call at ``site`` flowed into a function that ignores it
    (NOTE [argument the callee ignores]); None otherwise."""
    from gradtrace.runtime.trace.locate import function_at, live_frame

    frame = live_frame(site) if site is not None else None
    found = function_at(site)
    if frame is None or found is None:
        return None
    start = {k for k, v in list(frame.f_locals.items()) if v is unused}
    if not start:
        return None
    nodes = _own_nodes(found[1])
    grad = [n for n in nodes if isinstance(n, ast.Call) and n.lineno <= site.line
            <= (n.end_lineno or n.lineno) and n.args and _inputs(n) is not None
            and _reads(_inputs(n)) & start]  # the call that asks about the input
    if not grad:
        return None
    outputs = set().union(*(_reads(g.args[0]) for g in grad))
    binds, values = [], []
    for n in nodes:
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None:
            targets = set().union(*(_targets(t) for t in (
                n.targets if isinstance(n, ast.Assign) else [n.target])))
            binds.append((targets, _reads(n.value)))
            values.append((targets, n.value))
        elif isinstance(n, (ast.For, ast.comprehension)):
            binds.append((_targets(n.target), _reads(n.iter)))
    flows = flow(binds, start)
    for n in nodes:
        if not isinstance(n, ast.Call) or n in grad or not any(
                _reads(a) & flows for a in (*n.args, *(k.value for k in n.keywords))):
            continue
        holders = [t for t, value in values if any(c is n for c in ast.walk(value))]
        if not any(outputs & flow(binds, t) for t in holders):
            continue  # its result does not reach the outputs
        fn = _resolve(n.func, frame)
        if fn is None:
            continue
        param = _ignored_param(fn, n, flows)
        func = fn.__func__ if isinstance(fn, types.MethodType) else fn
        line = _line_of(func) if param is not None else None
        if line is not None:
            return line, Site(site.path, n.lineno, site.function), func.__name__, param
    return None


__all__ = ["ignoring_callee"]
