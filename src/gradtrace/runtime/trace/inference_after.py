"""Where an inference tensor was made, read after the crash from the traceback's frames.

# NOTE [inference block from the frames]
"Inference tensors cannot be saved for backward" raised on a step the tracer did not record
(NOTE [trace arming]: after the first steps only one step in N is armed) has no record of
where the tensor was made, and the message alone names the op that tried to save it (a
``kl_div`` a few lines below the block). The frames still hold the tensors: a local of a user
frame on the traceback that *is* an inference tensor named on the failing statement (or, in
an outer frame, the same object under its caller's name) was assigned by a statement of that
function; when that assignment sits inside a ``with`` whose context manager is
``torch.inference_mode`` (the object the frame's names resolve to, not its spelling), that
``with`` is the line to change (``torch.no_grad()`` there, or ``.clone()`` outside it). The
frames are read innermost first; the first such block wins. ``[]`` when no block is found (the
message's generic finding stands).
"""
from __future__ import annotations

import ast
import types
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.catalogue import ErrorPattern
from gradtrace.runtime.frames import Site, is_internal

_MODES = tuple(x for x in (getattr(torch, "inference_mode", None),
                           getattr(torch.autograd.grad_mode, "inference_mode", None)) if x)


def _resolve(node: ast.AST, frame: types.FrameType) -> Any:
    """The object a Name/Attribute chain names in ``frame`` (no calls), else None."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    obj = next((s[node.id] for s in (frame.f_locals, frame.f_globals, frame.f_builtins)
                if node.id in s), None)
    for name in names:
        obj = getattr(obj, name, None)
    return obj


def _is_inference_with(node: ast.AST, frame: types.FrameType) -> bool:
    return isinstance(node, ast.With) and any(
        isinstance(item.context_expr, ast.Call)
        and _resolve(item.context_expr.func, frame) in _MODES for item in node.items)


def _function_node(tree: ast.Module, code: types.CodeType) -> ast.AST | None:
    if code.co_name == "<module>":
        return tree
    return next((n for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == code.co_name
                 and min([n.lineno] + [d.lineno for d in n.decorator_list])
                 == code.co_firstlineno), None)


def _block_of(fn: ast.AST, name: str, frame: types.FrameType) -> tuple[int, int] | None:
    """(with line, assignment line) of an assignment to ``name`` inside an inference_mode
    ``with`` of ``fn``'s own body (nested functions excluded)."""
    todo: list[tuple[ast.AST, int | None]] = [(fn, None)]  # depth first, in source order
    while todo:  # (a loop, not a recursive closure holding ``frame`` in a reference cycle)
        node, block = todo.pop()
        kids = []
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                  ast.ClassDef)):
                continue
            inner = child.lineno if _is_inference_with(child, frame) else block
            kids.append((child, inner))
        todo.extend(reversed(kids))
        if node is fn or block is None or not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            return block, node.lineno
    return None


def _line_names(tree: ast.Module, line: int) -> set[str]:
    stmts = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and not hasattr(n, "body")
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name)}


def inference_block_after(pat: ErrorPattern, exc: BaseException, frame: Any, site: Site,
                          state: Any) -> list[Finding]:
    """NOTE [inference block from the frames]."""
    from gradtrace.runtime.trace.locate import tree_of

    if "Inference tensors cannot be saved" not in str(exc):
        return []
    frames: list[tuple[types.FrameType, int]] = []
    tb = exc.__traceback__
    while tb is not None:
        if not is_internal(tb.tb_frame.f_code):
            frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    wanted: list[torch.Tensor] = []
    for fr, line in reversed(frames):  # innermost user frame first
        tree = tree_of(fr.f_code.co_filename)
        fn = _function_node(tree, fr.f_code) if tree is not None else None
        if fn is None:
            continue
        if not wanted:  # the inference tensors the failing statement names
            wanted = [v for n in _line_names(tree, line)
                      for v in [fr.f_locals.get(n)] if isinstance(v, torch.Tensor)
                      and v.is_inference()]
        for name, value in list(fr.f_locals.items()):
            if not any(value is w for w in wanted):
                continue
            hit = _block_of(fn, name, fr)
            if hit is not None:
                path, func = fr.f_code.co_filename, fr.f_code.co_name
                block, made = Site(path, hit[0], func), Site(path, hit[1], func)
                return [make(code_for("inference-tensor", pat.code), block,
                             f"`{name}` is made inside this torch.inference_mode() block "
                             f"({src(made)}), so it is an inference tensor for good; "
                             f"{src(site)} uses it where autograd must save it for backward",
                             fix="use torch.no_grad() here, or .clone() the tensor outside "
                                 "inference_mode",
                             related=[(made, "the tensor is made here"),
                                      (site, "autograd needed it here")])]
    return []


POSTHOC = {"inference-saved": inference_block_after}
