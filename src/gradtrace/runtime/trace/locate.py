"""Find the cause's line in the user's source once the runtime knows what happened.

The runtime decides *that* something happened (a value was made under ``inference_mode``,
gradients accumulated across steps...); these helpers only find *where* in the source, from the
syntax tree of the file (parsed once per file version, cached).
"""
from __future__ import annotations

import ast
import linecache
from types import CodeType, FrameType
from typing import Callable

from gradtrace.runtime.frames import Site, is_internal

_TREES: dict[str, tuple[int, ast.Module | None]] = {}


def tree_of(path: str) -> ast.Module | None:
    """The parsed file (``None`` if it cannot be read or parsed); cached per file version."""
    if not path.startswith("<"):
        linecache.checkcache(path)
    lines = linecache.getlines(path)
    key = hash(tuple(lines))
    hit = _TREES.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    try:
        tree: ast.Module | None = ast.parse("".join(lines)) if lines else None
    except (SyntaxError, ValueError):
        tree = None
    _TREES[path] = (key, tree)
    return tree


def enclosing_function(tree: ast.AST, line: int) -> ast.AST:
    """The innermost function whose lines hold ``line`` (the module when none does)."""
    best: ast.AST = tree
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                n.lineno <= line <= (n.end_lineno or n.lineno) and \
                n.lineno > getattr(best, "lineno", 0):
            best = n
    return best


def function_at(site: Site | None) -> tuple[ast.Module, ast.AST] | None:
    """The parsed file of ``site`` and the innermost function holding its line (None: no
    site, or a file that cannot be read)."""
    tree = tree_of(site.path) if site is not None else None
    return None if tree is None else (tree, enclosing_function(tree, site.line))


def _calls(expr: ast.AST, names: tuple[str, ...]) -> bool:
    for n in ast.walk(expr):
        if isinstance(n, ast.Attribute) and n.attr in names:
            return True
        if isinstance(n, ast.Name) and n.id in names:
            return True
    return False


def enclosing_with(site: Site | None, managers: tuple[str, ...]) -> Site | None:
    """The innermost ``with`` statement around ``site`` whose context manager is one of
    ``managers`` (e.g. ``("inference_mode",)``), as a site; ``None`` if there is none."""
    if site is None:
        return None
    tree = tree_of(site.path)
    if tree is None:
        return None
    best: ast.With | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and node.body \
                and node.body[0].lineno <= site.line <= (node.end_lineno or node.lineno) \
                and any(_calls(item.context_expr, managers) for item in node.items):
            if best is None or node.lineno > best.lineno:
                best = node
    return None if best is None else Site(site.path, best.lineno, site.function)


def bare_call(site: Site) -> ast.Call | None:
    """The call of the statement at ``site`` when that statement is only the call, its result
    dropped (``model(x)`` on a line of its own)."""
    tree = tree_of(site.path)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Expr) and node.lineno == site.line \
                and isinstance(node.value, ast.Call):
            return node.value
    return None


def keyword_site(site: Site, keyword: str) -> Site:
    """The line of ``keyword=`` in the call that starts at ``site`` when the call spans several
    lines (``torch.autograd.grad(\n out,\n inp,\n create_graph=False,\n)``): the argument a
    fix changes; else ``site``."""
    tree = tree_of(site.path)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and node.lineno == site.line \
                and (node.end_lineno or node.lineno) > node.lineno:
            for k in node.keywords:
                if k.arg == keyword and k.value.lineno != site.line:
                    return Site(site.path, k.lineno, site.function, k.col_offset)
    return site


def enclosing_loop(site: Site | None) -> ast.For | ast.While | None:
    """The innermost ``for``/``while`` loop whose body holds ``site``."""
    if site is None:
        return None
    tree = tree_of(site.path)
    best = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.For, ast.While)) and node.body \
                and node.body[0].lineno <= site.line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno > best.lineno:
                best = node
    return best


def live_frame(site: Site) -> FrameType | None:
    """The newest live frame of ``site``'s function (the one that called into gradtrace)."""
    import sys

    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_filename == site.path
                                     and frame.f_code.co_name == site.function):
        frame = frame.f_back
    return frame


def loop_and_frame(site: Site) -> tuple[ast.For | ast.While, FrameType] | None:
    """The loop around ``site`` and the newest live frame of its function, or None when either
    is missing."""
    loop = enclosing_loop(site)
    frame = live_frame(site)
    return None if loop is None or frame is None else (loop, frame)


def find_line(site: Site, first: int, last: int, test: Callable[[str], bool]) -> Site | None:
    """The first line in ``first..last`` of ``site``'s file whose text passes ``test``."""
    for line in range(first, last + 1):
        if test(linecache.getline(site.path, line)):
            return Site(site.path, line, site.function)
    return None


_BLOCK_AT: dict[tuple[CodeType, int], Site | None] = {}


def inference_block(frame: FrameType | None) -> Site | None:
    """The ``with torch.inference_mode():`` line (or the ``@torch.inference_mode()``
    decorator) around the running line of ``frame`` or of the user frames that called it: where
    the user turned inference mode on. Cached per (code, line)."""
    while frame is not None:
        code = frame.f_code
        if not is_internal(code):
            key = (code, frame.f_lineno)
            hit = _BLOCK_AT.get(key, False)
            if hit is False:
                if len(_BLOCK_AT) > 4096:
                    _BLOCK_AT.clear()
                hit = _BLOCK_AT[key] = _inference_block_at(code, frame.f_lineno)
            if hit is not None:
                return hit
        frame = frame.f_back
    return None


def decorated_caller(frame: FrameType | None, block: Site) -> Site | None:
    """For an ``@torch.inference_mode()`` decorator ``block``: the user's line that called the
    decorated function (NOTE [inference ids kept by the caller]), else ``None``."""
    while frame is not None and not (frame.f_code.co_filename == block.path
                                     and frame.f_code.co_name == block.function
                                     and not is_internal(frame.f_code)):
        frame = frame.f_back
    frame = frame.f_back if frame is not None else None
    while frame is not None and is_internal(frame.f_code):
        frame = frame.f_back
    if frame is None:
        return None
    return Site(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


def _inference_block_at(code: CodeType, line: int) -> Site | None:
    site = Site(code.co_filename, line, code.co_name)
    found = enclosing_with(site, ("inference_mode",))
    if found is not None:
        return found
    tree = tree_of(code.co_filename)
    for node in ast.walk(tree) if tree is not None and code.co_name != "<module>" else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list \
                and node.name == code.co_name \
                and min(d.lineno for d in node.decorator_list) <= code.co_firstlineno \
                <= node.lineno:
            for dec in node.decorator_list:
                if _calls(dec, ("inference_mode",)):
                    return Site(code.co_filename, dec.lineno, code.co_name)
    return None


def cache_guard(site: Site | None) -> Site | None:
    """The ``if`` around ``site`` that guards a cache on the object: its test reads a ``self``
    attribute and its body assigns ``self`` attributes (``if n > self._cached: self._cos = ...``).
    A value made there once is reused by every later call that skips the block."""
    if site is None:
        return None
    tree = tree_of(site.path)
    best: ast.If | None = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.If) and node.body and node.body[0].lineno <= site.line \
                <= (node.body[-1].end_lineno or node.lineno) \
                and (best is None or node.lineno > best.lineno):
            best = node
    if best is None or not any(_self_attr(n) for n in ast.walk(best.test)):
        return None
    stores = [t for stmt in best.body for n in ast.walk(stmt)
              if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
              for t in (n.targets if isinstance(n, ast.Assign) else [n.target])]
    flat = [e for t in stores for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
    return Site(site.path, best.lineno, site.function) if any(map(_self_attr, flat)) else None


def _self_attr(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and node.value.id == "self"


def _tail(e: ast.AST) -> tuple[str, ...] | None:
    """``self.saved.append`` and ``policy.saved`` name one list: the last attribute, with any
    constant subscripts after it (``episode["pi"]`` -> ``("episode", "'pi'")``)."""
    if isinstance(e, ast.Name):
        return (e.id,)
    if isinstance(e, ast.Attribute):
        return (e.attr,)
    if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant):
        head = _tail(e.value)
        return None if head is None else (*head, repr(e.slice.value))
    return None


_FILLERS = ("append", "extend", "insert")


def stored_at(site: Site | None) -> Site | None:
    """Where the list read by the call at ``site`` (``torch.tensor(self.rewards)``,
    ``np.array(results["loss"])``) gets its items: the one line of the file that appends to a
    list of that name. ``None`` when the call reads no such list or several lines fill it."""
    if site is None:
        return None
    tree = tree_of(site.path)
    if tree is None:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == site.line]
    exact = [n for n in calls if n.col_offset == site.column]
    keys = {k for n in exact or calls for a in n.args[:1] for k in [_tail(a)] if k}
    if not keys:
        return None
    lines = sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute) and n.func.attr in _FILLERS
                    and _tail(n.func.value) in keys and n.lineno != site.line})
    return Site(site.path, lines[0]) if len(lines) == 1 else None


_OFF_DECORATORS = ("no_grad", "inference_mode")


def decorated_off(grad_off: Site, cut_site: Site, backward: Site | None = None) -> Site | None:
    """Grad mode turned off by a decorator (``@torch.no_grad()`` on ``generate``): torch's
    wrapper enters it, so the user line seen is the call of the decorated function. The
    decorator line when the decorated function is a module's ``forward`` or holds the failing
    ``backward`` (it must compute gradients itself); else the call, whose outputs were then
    used for training (the function is meant to run without gradients)."""
    tree = tree_of(cut_site.path)
    stmt = tree_of(grad_off.path)
    if tree is None or stmt is None:
        return None
    called = {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
              for n in ast.walk(stmt) if isinstance(n, ast.Call)
              and n.lineno <= grad_off.line <= (n.end_lineno or n.lineno)} | {cut_site.function}
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name not in called:
            continue
        deco = next((d for d in fn.decorator_list if _calls(d, _OFF_DECORATORS)), None)
        if deco is None:
            continue
        inside = backward is not None and backward.path == cut_site.path and \
            fn.lineno <= backward.line <= (fn.end_lineno or fn.lineno)
        if fn.name == "forward" or inside:
            return Site(cut_site.path, deco.lineno, fn.name)
        return grad_off
    return None


def own_returns(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The ``return`` statements of ``fn`` itself (not of functions or classes inside it)."""
    returns: list[ast.Return] = []
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            returns.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                   ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return returns
