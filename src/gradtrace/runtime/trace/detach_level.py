"""# NOTE [detach called outside the backward's loop]
A state kept on an attribute is carried into the next pass still attached to a graph the
previous backward() freed (GT506), and the object's class has a method that detaches it
(``self.h = self.h.detach()``), but the program calls that method outside the loop that runs
the failing backward(): once per video, per epoch, before the inner loop of frames or batches.
The state is detached for the first pass only. That call is the line to move: it is named when
the carrier is found on a live object (NOTE [state kept on an attribute]), the detaching
method is read from its class, and every call of it in the failing backward()'s function sits
outside the innermost loop holding that backward().
"""
from __future__ import annotations

import ast
import inspect
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.carried_attr import _objects
from gradtrace.runtime.trace.records import created_site


def _detaches(fn: ast.FunctionDef, attr: str) -> bool:
    """Whether ``fn`` assigns ``self.<attr>`` from a ``.detach()`` of ``self.<attr>``."""
    for st in ast.walk(fn):
        if not isinstance(st, ast.Assign):
            continue
        targets = [e for t in st.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        values = st.value.elts if isinstance(st.value, ast.Tuple) else [st.value]
        if len(values) != len(targets):
            values = [st.value] * len(targets)
        for t, v in zip(targets, values):
            if isinstance(t, ast.Attribute) and t.attr == attr and isinstance(v, ast.Call) \
                    and isinstance(v.func, ast.Attribute) and v.func.attr in ("detach", "detach_") \
                    and isinstance(v.func.value, ast.Attribute) and v.func.value.attr == attr:
                return True
    return False


def _detaching_methods(cls: type, attr: str) -> set[str]:
    from gradtrace.runtime.trace.locate import tree_of

    try:
        path = inspect.getsourcefile(cls)
        first = inspect.getsourcelines(cls)[1]
    except (TypeError, OSError):
        return set()
    tree = tree_of(path) if path else None
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
                 and n.name == cls.__name__ and n.lineno == first), None) if tree else None
    return {f.name for f in (node.body if node else ()) if isinstance(f, ast.FunctionDef)
            and f.name != "__init__" and _detaches(f, attr)}


def _loops_holding(scope: ast.AST, line: int) -> list[ast.AST]:
    return [n for n in ast.walk(scope) if isinstance(n, (ast.For, ast.While))
            and n.lineno <= line <= (n.end_lineno or n.lineno)]


def _scope(tree: ast.Module, line: int) -> ast.AST:
    fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
           and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return max(fns, key=lambda n: n.lineno, default=tree)


def detach_outside_loop(made: Site | None, site: Site | None, pat: Any,
                        related: list) -> Finding | None:
    """The finding at the call of the detaching method to move, or None."""
    found = _call_to_move(made, site)
    if found is None or site is None:
        return None
    call, attr = found
    return make(code_for("state-carried-across-steps", pat.code), call,
                f"this call detaches `{attr}` outside the loop that runs backward() "
                f"({src(site)}): from the second pass on, `{attr}` is carried in still "
                "attached to the graph the previous backward() freed",
                fix="call it inside that loop, before each forward pass",
                related=[(made, "the carried value is computed here"), *related])


def _call_to_move(made: Site | None, site: Site | None) -> tuple[Site, str] | None:
    """(the call of the detaching method to move, the attribute), or None."""
    from gradtrace.runtime.trace.locate import tree_of

    if made is None or site is None:
        return None
    tree = tree_of(site.path)
    if tree is None:
        return None
    scope = _scope(tree, site.line)
    inner = _loops_holding(scope, site.line)
    if not inner:
        return None
    innermost = max(inner, key=lambda n: n.lineno)
    for obj in _objects():
        for attr, v in list(vars(obj).items()):
            if not isinstance(v, torch.Tensor) or v.grad_fn is None \
                    or created_site(v.grad_fn)[0] != made:
                continue
            names = _detaching_methods(type(obj), attr)
            calls = [n for n in ast.walk(scope) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Attribute) and n.func.attr in names
                     and n is not scope]
            if len(calls) != 1 or innermost.lineno <= calls[0].lineno <= (
                    innermost.end_lineno or innermost.lineno):
                continue
            if not _loops_holding(scope, calls[0].lineno):
                continue  # called once before every loop: a setup, not a per-pass reset
            return Site(site.path, calls[0].lineno, site.function, calls[0].col_offset), attr
    return None
