"""A functional dropout left on in eval mode: ``F.dropout(x, p)`` in a module's forward, run
after ``model.eval()``.

# NOTE [functional dropout in eval]
``F.dropout`` (and ``dropout1d/2d/3d``, ``feature_alpha_dropout``) defaults to
``training=True``: unlike ``nn.Dropout`` it does not read the module's mode, so a forward that
calls it without ``training=self.training`` keeps dropping activations at random after
``model.eval()``, and every evaluation is noisy. Nothing fails.

The tracer sees each such call (``handle_torch_function`` passes every argument, so the
values alone cannot tell a default from ``training=True`` written on purpose, as Monte-Carlo
dropout does). It reports a call when:

- it dropped (``training`` True, ``p`` > 0) and was made directly from a user frame;
- the call expression at that frame's instruction (located with ``co_positions`` in the file's
  syntax tree) passes no ``training`` at all: neither a keyword, nor a third positional
  argument, nor ``*args``/``**kwargs`` (the default decided it);
- the nearest user frame whose ``self`` is an ``nn.Module`` (the forward running the call, or
  the forward that called the helper) holds a module in eval mode.

The line is the call. A module in train mode, an explicit ``training=`` (``self.training``,
``True`` for Monte-Carlo dropout) and ``nn.Dropout`` (torch's frame, its mode passed) stay
silent. Each call site's syntax is read once.
"""
from __future__ import annotations

import ast
import linecache
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

import torch

from gradtrace.runtime.frames import is_internal
from gradtrace.runtime.trace.at_instruction import InstructionFacts

if TYPE_CHECKING:
    from gradtrace.runtime.trace.state import TraceState

# functional dropouts whose `training` defaults to True (F.alpha_dropout's defaults to False)
NAMES = frozenset({"dropout", "dropout1d", "dropout2d", "dropout3d", "feature_alpha_dropout"})
_TREES: dict[str, tuple[str, ast.Module | None]] = {}  # path -> (its text, its tree)
_MODULE_DEPTH = 8  # user frames searched for the module running the call


def check_dropout(state: TraceState, name: str, kwargs: dict[str, Any], frame: FrameType) -> None:
    """``frame``: the frame that called the functional ``name`` (past torch's dispatch)."""
    if kwargs.get("training") is not True or not kwargs.get("p") or is_internal(frame.f_code):
        return
    if not _defaulted(frame):
        return
    module = _running_module(frame)
    if module is None or module.training:
        return
    site = state.site((frame.f_code, frame.f_lineno, frame.f_lasti))
    state.note("functional-dropout-in-eval", site, name, type(module).__name__)


def _defaulted(frame: FrameType) -> bool:
    return bool(_DEFAULTED.at(frame.f_code, frame.f_lasti))


def _call_omits_training(code: CodeType, lasti: int) -> bool:
    """Whether the call expression running at ``lasti`` passes no ``training`` argument."""
    try:
        pos = list(code.co_positions())[lasti // 2]
    except (AttributeError, IndexError):
        return False
    if None in pos:
        return False
    tree = _tree(code.co_filename)
    if tree is None:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (node.lineno, node.end_lineno, node.col_offset,
                                           node.end_col_offset) == pos:
            return (len(node.args) < 3
                    and not any(isinstance(a, ast.Starred) for a in node.args)
                    and not any(k.arg in (None, "training") for k in node.keywords))
    return False


# (id(code), lasti) -> the call leaves `training` out
_DEFAULTED = InstructionFacts(_call_omits_training)


def _tree(path: str) -> ast.Module | None:
    """The syntax tree of ``path`` as it is now (a relative path may name another file later)."""
    linecache.checkcache(path)
    text = "".join(linecache.getlines(path))
    hit = _TREES.get(path)
    if hit is None or hit[0] != text:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            tree = None
        hit = _TREES[path] = (text, tree)
    return hit[1]


def _running_module(frame: FrameType | None) -> torch.nn.Module | None:
    """The module of the nearest user method frame whose ``self`` is an ``nn.Module``."""
    depth = _MODULE_DEPTH
    while frame is not None and depth > 0:
        code = frame.f_code
        if not is_internal(code):
            depth -= 1
            if code.co_argcount and code.co_varnames[0] == "self":
                owner = frame.f_locals.get("self")
                if isinstance(owner, torch.nn.Module):
                    return owner
        frame = frame.f_back
    return None
