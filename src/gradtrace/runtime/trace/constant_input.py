"""A custom Function handed a trainable tensor at an input its backward treats as a constant.

# NOTE [input the Function treats as a constant]
torchao's ``_GenericFakeQuantize`` (before PR 2280) is a straight-through fake-quantize:
forward takes the input, the block size, the scales and the zero points, keeps only the clamp
mask for backward, and backward returns ``gy * mask, None, None, ...``: every input but the
first is a constant to it, by design. Range learning then made the scales and zero points
Parameters and kept handing them to the same ``.apply``: they get no gradient (GT845). The
maintainers' fix changes the call (a differentiable fake-quantize with a straight-through
round), not the Function's return.

A backward that *forgot* an input's gradient knows that input: forward saved it
(``ctx.save_for_backward(x, w)`` ... ``return g * w, None``), or backward computed a value for
it and dropped it (``dlow, dhigh = ...`` ... ``return dlow, None, None``). So GT845 names the
``.apply`` call (the return line becomes a related place) only when, for every input backward
returned None for:

- forward kept nothing of it for backward: no saved tensor is it, a view of it or its output
  (read from the node when the loss-graph walk meets it, before backward frees them), and no
  tensor attribute of the ctx is;
- the return writes a literal ``None`` at its position;
- and backward leaves no local it assigned unread (nothing computed and dropped).

Otherwise the return line stays the cause (NOTE [custom Function returning None]).
"""
from __future__ import annotations

import ast
import dis
from typing import Any

import torch

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import tree_of
from gradtrace.runtime.trace.needs_guard import returned_tuple

Tensor = torch.Tensor


def kept_inputs(node: Any, edges: tuple[Any, ...]) -> frozenset[int]:
    """Positions of the inputs whose tensor forward kept for backward (saved or on the ctx);
    every position when the saved tensors cannot be read."""
    every = frozenset(range(len(edges)))
    try:
        held = [t for t in node.saved_tensors if isinstance(t, Tensor)]
        held += [v for v in vars(node).values() if isinstance(v, Tensor)]
    except Exception:  # freed, or a ctx we cannot read: assume it kept everything
        return every
    out = set()
    for i, e in enumerate(edges):
        if e is None:
            continue
        leaf = getattr(e, "variable", None) if type(e).__name__ == "AccumulateGrad" else None
        for t in held:
            gf = t.grad_fn
            if (leaf is not None and t is leaf) or (gf is not None and (
                    gf is e or any(n is e for n, _ in gf.next_functions))):
                out.add(i)
                break
    return frozenset(out)


def arg_positions(node: Any, edges: tuple[Any, ...]) -> dict[int, int]:
    """Tensor input (edge) position -> forward argument position, for the inputs that require
    grad (the k-th flag set in ``needs_input_grad`` is the k-th edge that is not None)."""
    try:
        flags = tuple(node.needs_input_grad)
    except Exception:
        return {}
    return dict(zip([i for i, e in enumerate(edges) if e is not None],
                    [k for k, f in enumerate(flags) if f]))


def apply_site(cls: Any, code: Any) -> Site | None:
    """The one ``<cls>.apply(...)`` call in the file that defines the Function (None when the
    file has none or several: the call that handed the tensor is then not known)."""
    tree = tree_of(code.co_filename)
    name = getattr(cls, "__name__", "")
    if tree is None or not name:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "apply"
             and (getattr(n.func.value, "id", None) == name
                  or getattr(n.func.value, "attr", None) == name)]
    if len(calls) != 1:
        return None
    line = calls[0].lineno
    inside = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              and f.lineno <= line <= (f.end_lineno or f.lineno)]
    name = max(inside, key=lambda f: f.lineno).name if inside else "<module>"
    return Site(code.co_filename, line, name, calls[0].col_offset)


def constant_by_design(code: Any, missing: set[int]) -> bool:
    """The return writes a literal None at each position of ``missing`` (forward argument
    positions) and backward drops no value it computed (the caller checked that forward kept none of those inputs)."""
    fn, ret = returned_tuple(code)
    if fn is None or ret is None or not isinstance(ret.value, ast.Tuple):
        return False
    elts = ret.value.elts
    if any(i >= len(elts) or not (isinstance(elts[i], ast.Constant) and elts[i].value is None)
           for i in missing):
        return False
    return not _unread_locals(code)


def _unread_locals(code: Any) -> set[str]:
    """Locals of ``code`` assigned and never read (arguments and ``_`` names aside)."""
    stored, loaded = set(), set()
    for ins in dis.get_instructions(code):
        names = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
        if ins.opname in ("STORE_FAST", "STORE_DEREF", "STORE_FAST_STORE_FAST"):
            stored.update(names)
        elif ins.opname == "STORE_FAST_LOAD_FAST":  # (3.13: both names in one instruction)
            stored.add(names[0])
            loaded.update(names[1:])
        elif ins.opname.startswith(("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "DELETE_FAST")):
            loaded.update(names)
    args = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    return {n for n in stored - loaded - args if not n.startswith("_")}


__all__ = ["apply_site", "arg_positions", "constant_by_design", "kept_inputs"]
