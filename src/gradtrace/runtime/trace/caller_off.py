"""The call that brings gradient code under a caller's no_grad block.

# NOTE [grad off in a caller]
backward() fails on a loss without grad_fn because grad mode is off, turned off by a ``with
torch.no_grad():`` (or inference_mode) block. When that block's frame calls the function that
holds the backward() directly (a test loop around an attack), the block is the line to change.
When the block is further up the live stack (a harness's ``validate()`` wraps ``evaluate_batch``,
which trains a probe; a module's ``forward`` that always runs a backward to cache gradients,
evaluated under no_grad), the caller is right to evaluate without gradients and the line to
change is the call that enters the gradient code from below the block: the first user frame
above the one holding the backward(), skipping pass-through wrappers (a function whose body is
one ``return f(...)``), where grad must be re-enabled (``torch.enable_grad()``) or the
gradient step skipped. When the backward() itself runs in an installed library (a motion
planner's own optimizer loop under ``site-packages``), the library frames are skipped and the
first project frame, the call into the library, is that call. Run-time facts only: the frames
live at the failure and the extent of the ``with`` statement that turned grad off.
"""
from __future__ import annotations

import ast
import sys
from typing import Any

from gradtrace.runtime.frames import Site, is_internal

_LIB = ("site-packages", "dist-packages")


def _with_at(tree: ast.Module, line: int) -> ast.AST | None:
    return next((n for n in ast.walk(tree) if isinstance(n, (ast.With, ast.AsyncWith))
                 and n.lineno == line), None)


def _pass_through(tree: ast.Module | None, f: Any) -> bool:
    """``f`` runs a function whose body is one ``return <call>`` (a docstring aside)."""
    if tree is None:
        return False
    line, name = f.f_lineno, f.f_code.co_name
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name \
                and n.lineno <= line <= (n.end_lineno or n.lineno):
            body = [s for s in n.body if not (isinstance(s, ast.Expr)
                                              and isinstance(s.value, ast.Constant))]
            return len(body) == 1 and isinstance(body[0], ast.Return) \
                and isinstance(body[0].value, ast.Call)
    return False


def call_below_off(off: Site | None) -> Site | None:
    """The call to name instead of the ``with`` at ``off`` (NOTE [grad off in a caller]), from
    the caller's live stack; ``None`` when the block's own frame calls the gradient code."""
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(off.path) if off is not None else None
    block = _with_at(tree, off.line) if tree is not None else None
    if block is None:
        return None
    frames, f, first = [], sys._getframe(1), 1  # frames[0] holds the backward()
    while f is not None and len(frames) < 64:
        if not is_internal(f.f_code):
            if not any(p in f.f_code.co_filename for p in _LIB):
                frames.append(f)
            elif not frames:  # the backward() is an installed library's: the first project
                first = 0  # frame is the call into it (NOTE [grad off in a caller])
        f = f.f_back
    end = block.end_lineno or block.lineno
    w = next((i for i, g in enumerate(frames) if g.f_code.co_filename == off.path
              and block.lineno <= g.f_lineno <= end), None)
    if w is None or w <= first:
        return None
    for g in frames[first:w]:
        if not _pass_through(tree_of(g.f_code.co_filename), g):
            return Site(g.f_code.co_filename, g.f_lineno, g.f_code.co_name)
    return None


__all__ = ["call_below_off"]
