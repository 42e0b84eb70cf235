"""Find, in the user's source, what explains a state: where grad mode was turned off, where a
function returned its value, how a number lost its graph.

Everything here runs only when a guard is about to fail (never on the hot path). It reads
source through :mod:`linecache` and :mod:`ast`, and walks live frames; it never imports torch
at module level.
"""
from __future__ import annotations

import ast
import inspect
import linecache
import os
import sys
import textwrap
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable

from gradtrace.runtime.build import display_path

_OFF_NAMES = {"no_grad", "inference_mode", "set_grad_enabled", "enable_grad"}
_TREES: dict[str, tuple[int, ast.AST | None]] = {}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@dataclass(frozen=True)
class GradSwitch:
    """A statement that turned grad mode off: where it is and what it says."""

    path: str
    line: int
    text: str
    kind: str  # "with" | "decorator" | "call"

    def describe(self) -> str:
        """``with torch.no_grad(): at file.py:12`` style phrase."""
        what = {"with": "the block", "decorator": "the decorator",
                "call": "the call"}[self.kind]
        return f"{what} `{self.text}` at {display_path(self.path)}:{self.line}"


def _tree(path: str) -> ast.AST | None:
    lines = linecache.getlines(path)
    if not lines:
        return None
    key = len(lines)
    hit = _TREES.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    try:
        tree: ast.AST | None = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        tree = None
    _TREES[path] = (key, tree)
    return tree


def _chain(tree: ast.AST, line: int) -> list[ast.AST]:
    """The nodes (outermost first) whose line span contains ``line``."""
    out: list[ast.AST] = []
    node: ast.AST | None = tree
    while node is not None:
        nxt = None
        for child in ast.iter_child_nodes(node):
            lo = getattr(child, "lineno", None)
            hi = getattr(child, "end_lineno", None)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and child.decorator_list:
                lo = min([lo or line] + [d.lineno for d in child.decorator_list])
            if lo is not None and hi is not None and lo <= line <= hi \
                    and isinstance(child, ast.stmt):
                nxt = child
                break
        if nxt is None:
            break
        out.append(nxt)
        node = nxt
    return out


def _switch_name(call: ast.expr) -> str:
    if not isinstance(call, ast.Call):
        return ""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name if name in _OFF_NAMES else ""


def _turns_off(call: ast.Call, name: str) -> bool | None:
    """True: turns grad off. False: turns it on (or leaves it). None: depends on a value."""
    arg = call.args[0] if call.args else next((k.value for k in call.keywords
                                               if k.arg in ("mode", "enabled")), None)
    if name == "enable_grad":
        return False
    if name == "no_grad":
        return True
    if arg is None:
        return True if name == "inference_mode" else None
    if isinstance(arg, ast.Constant):
        return not bool(arg.value)
    return None


def _text(path: str, line: int) -> str:
    return linecache.getline(path, line).strip()


def _own_statements(root: ast.AST) -> list[ast.stmt]:
    """The statements of ``root``'s scope, not those of nested functions or classes."""
    out: list[ast.stmt] = []
    todo: list[ast.AST] = list(getattr(root, "body", []))
    while todo:
        n = todo.pop()
        if isinstance(n, ast.stmt):
            out.append(n)
        if not isinstance(n, _SCOPES):
            todo.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, ast.stmt))
    return out


def _in_scope_switch(path: str, tree: ast.AST, line: int, names: frozenset[str]
                     ) -> GradSwitch | bool | None:
    """The latest grad-mode switch active at ``line`` within its own scope.

    Returns the switch if it turns grad off (or may), ``False`` if the latest one turns grad
    on (stop searching), ``None`` if the scope has none.
    """
    chain = _chain(tree, line)
    start = 0
    for i, node in enumerate(chain):
        if isinstance(node, _SCOPES):
            start = i + 1
    scope: ast.AST = chain[start - 1] if start else tree
    found: list[tuple[int, GradSwitch | bool]] = []
    for node in chain[start:]:
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                name = _switch_name(item.context_expr)
                if name and name in names:
                    off = _turns_off(item.context_expr, name)  # type: ignore[arg-type]
                    sw = GradSwitch(path, node.lineno, _text(path, node.lineno), "with")
                    found.append((node.lineno, sw if off is not False else False))
    for st in _own_statements(scope):
        if isinstance(st, ast.Expr) and st.lineno < line \
                and _switch_name(st.value) == "set_grad_enabled" and "set_grad_enabled" in names:
            off = _turns_off(st.value, "set_grad_enabled")  # type: ignore[arg-type]
            sw = GradSwitch(path, st.lineno, _text(path, st.lineno), "call")
            found.append((st.lineno, sw if off is not False else False))
    if found:
        return max(found, key=lambda c: c[0])[1]
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _decorator_switch(path, scope, names)
    return None


def _decorator_switch(path: str, fn: ast.FunctionDef | ast.AsyncFunctionDef,
                      names: frozenset[str]) -> GradSwitch | None:
    for d in fn.decorator_list:
        name = _switch_name(d)
        if name in names and _turns_off(d, name):  # type: ignore[arg-type]
            return GradSwitch(path, d.lineno, _text(path, d.lineno), "decorator")
    return None


_ALL = frozenset(_OFF_NAMES)
_INFERENCE = frozenset({"inference_mode"})


def find_grad_switch(frame: FrameType | None, limit: int = 40, *, inference: bool = False
                     ) -> GradSwitch | None:
    """The statement that turned grad mode off for ``frame`` (searching outwards).

    Looks, frame by frame from ``frame`` outwards, for the innermost enclosing ``with
    torch.no_grad()`` / ``inference_mode()`` / ``set_grad_enabled(False)`` block, a
    ``set_grad_enabled(False)`` call earlier in the same function, or a ``@torch.no_grad()``
    decorator on the function. Stops (returns None) at an enclosing ``enable_grad`` block.
    With ``inference``, looks for the ``torch.inference_mode()`` that is active instead.
    """
    names = _INFERENCE if inference else _ALL
    f = frame
    while f is not None and limit > 0:
        limit -= 1
        path = f.f_code.co_filename
        if not is_internal(path):
            tree = _tree(path)
            if tree is not None:
                hit = _in_scope_switch(path, tree, f.f_lineno, names)
                if hit is False:
                    return None
                if isinstance(hit, GradSwitch):
                    return hit
        f = f.f_back
    return None


_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_internal(path: str) -> bool:
    """Frames of torch, of gradtrace itself, and of code without a file are skipped."""
    if path.startswith("<") or os.path.abspath(path).startswith(_HERE):
        return True
    torch = sys.modules.get("torch")
    tfile = getattr(torch, "__file__", None)
    return bool(tfile) and os.path.abspath(path).startswith(os.path.dirname(tfile) + os.sep)


def active_trace_state() -> Any:
    """The state of the innermost active ``gradtrace.trace()`` session, or None."""
    mod = sys.modules.get("gradtrace.runtime.trace.tracer")  # never imported here: torch stays lazy
    tracer = mod.active_tracer() if mod is not None else None
    return tracer.state if tracer is not None else None


def describe_number(value: Any) -> str:
    """``a Python float (0.53), which has no autograd graph; it probably came from ...``."""
    tname = type(value).__module__ + "." + type(value).__qualname__ \
        if type(value).__module__ not in ("builtins",) else type(value).__qualname__
    if value is None:
        return ("None: the function returned nothing (a missing `return`?) or the value came "
                "from a method that returns None, e.g. `loss = loss.backward()`")
    if isinstance(value, bool):
        return f"a bool ({value}), which has no autograd graph (a comparison result?)"
    if isinstance(value, float):
        return (f"a Python float ({value!r}), which has no autograd graph; it probably came "
                "from `loss.item()` or `float(loss)` (or a sum of .item() values, or a "
                "math.* function)")
    if isinstance(value, int):
        return (f"a Python int ({value!r}), which has no autograd graph; it is probably an "
                "accumulator that never had a loss added (e.g. `total = 0` and an empty loop) "
                "or the .item() of an integer tensor")
    if type(value).__module__ == "numpy":
        return (f"a {tname} ({value!r}), which has no autograd graph; it probably came from "
                "`.numpy()` / `.cpu().numpy()` or a numpy function applied to the loss")
    if isinstance(value, (tuple, list, dict)) or hasattr(value, "loss"):
        return (f"a {tname}, which is not a tensor (a whole `(loss, logs)` result or model "
                "output? pass the loss tensor inside it)")
    return f"a {tname}, which is not a tensor"


def return_sites(fn: Callable[..., Any]) -> list[tuple[str, int, str]]:
    """``(path, line, text)`` of every ``return`` in ``fn``'s own body (not nested defs).

    The last item is the end of the function (line of its last statement, text ``""``) when
    the function can fall off its end without a return.
    """
    fn = inspect.unwrap(fn)
    try:
        path = inspect.getsourcefile(fn) or ""
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return []
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    out: list[tuple[str, int, str]] = []
    todo: list[ast.AST] = list(node.body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Return):
            line = n.lineno + first - 1
            out.append((display_path(path), line, _text(path, line)))
        elif not isinstance(n, _SCOPES):
            todo.extend(ast.iter_child_nodes(n))
    out.sort(key=lambda s: s[1])
    last = node.body[-1]
    if not isinstance(last, (ast.Return, ast.Raise)):
        end = (last.end_lineno or last.lineno) + first - 1
        out.append((display_path(path), end, ""))
    return out


def argument_assignment(frame: FrameType | None) -> tuple[str, int, str] | None:
    """Where the name passed first on ``frame``'s current line was last assigned before it, in
    the same function: ``(path, line, source)`` (``loss = compute()`` for ``step(loss)``)."""
    if frame is None:
        return None
    path, line = frame.f_code.co_filename, frame.f_lineno
    tree = _tree(path)
    chain = _chain(tree, line) if tree is not None else []
    if not chain:
        return None
    calls = [n for n in ast.walk(chain[-1]) if isinstance(n, ast.Call) and n.args
             and isinstance(n.args[0], ast.Name) and n.lineno <= line <= (n.end_lineno or 0)]
    if len(calls) != 1:
        return None
    name = calls[0].args[0].id  # type: ignore[attr-defined]
    scope = next((n for n in reversed(chain[:-1]) if isinstance(n, _SCOPES)), tree)
    best = 0
    for s in _own_statements(scope):
        targets = s.targets if isinstance(s, ast.Assign) else \
            [s.target] if isinstance(s, (ast.AugAssign, ast.AnnAssign)) else []
        if s.lineno < line and any(isinstance(t, ast.Name) and t.id == name for t in targets):
            best = max(best, s.lineno)
    return (path, best, _text(path, best)) if best else None
