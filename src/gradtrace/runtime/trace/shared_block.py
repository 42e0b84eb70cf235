"""One ``no_grad`` cut site run for a frozen copy and for the trained model.

# NOTE [one no_grad site, two models]
The tracer keeps one cut record per op site and ``no_grad`` block (the hot path keys it so),
and read the leaves upstream of it from the first tensor it cut. A helper that runs a frozen
copy and then the trained model through the same ``with torch.no_grad():`` lines (GradCAM
maps of the old and the new model; a distillation penalty's previous and current outputs)
had only the frozen copy's leaves, so the trained model's dead loss term went unreported
(NOTE [dead loss term]). Here the next 3 tensors cut at the site add their leaves, each with
the statement of the block running then (the frame that switched grad mode off).

At the end, the statement named for the dead term is the one that ran on the trained
parameters' tensors (avalanche's ``y_curr = forward(curr_model, x)`` beside ``y_prev``). When
that same statement also ran on the frozen copy's tensors, no statement can be moved out of
the block: the block itself is wrong for the trained model, and its switch (the ``with``
line or decorator) is named.

# NOTE [block of one statement]
The run names the line the user edits to fix the finding. A ``no_grad`` block that holds
other statements which stay under it (a teacher's forward beside the student's features in
mobile-yolov5's distillation) is there on purpose: the statement that ran on the trained
model's tensors is the one to move out, and it is named. A block whose body is that one
statement (so-vits-svc's ``with torch.no_grad(): y_d_hat_r, ... = self.net_d(y, y_hat)``
for the generator's adversarial term) has nothing that stays: moving the statement out *is*
deleting the block, so the switch (the ``with`` line) is named, the statement its context.
Only a simple statement counts (not a loop or an ``if`` whose body holds several), and only
a ``with`` in the same file and function as the statement (a decorator is named as it is).
"""
from __future__ import annotations

import ast
import sys
from typing import Any

import torch

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.leaves import upstream_leaves

Tensor = torch.Tensor
MORE = 3
_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, getattr(ast, "Match", ast.If),
             getattr(ast, "TryStar", ast.Try))


def more_sources(state: Any, cut: Any, src: Tensor) -> None:
    """A further tensor cut at a ``no_grad`` site seen before (called from ``add_cut``)."""
    seen = state.cut_sources.get(cut)
    if seen is None:
        if len(state.cut_sources) >= 256:
            state.sources_done.add(id(cut))
            return
        seen = state.cut_sources[cut] = [(state.cut_upstream.get(cut, frozenset()),
                                          state.block_stmt.get(cut))]
    if len(seen) > MORE:
        state.sources_done.add(id(cut))
        return
    leaves = upstream_leaves(src, state._track_leaf)
    seen.append((leaves, block_statement(cut.grad_off, start=1)))
    state.cut_upstream[cut] = state.cut_upstream.get(cut, frozenset()) | leaves


def term_statement(state: Any, cut: Any, trained: set[int], site: Site) -> Site:
    """The line to name for the dead term of ``cut`` (see the NOTE); ``site`` otherwise."""
    seen = state.cut_sources.get(cut)
    if not seen:
        return site
    live = [stmt for leaves, stmt in seen if leaves & trained and stmt is not None]
    if not live:
        return site
    if any(stmt == live[0] for leaves, stmt in seen if leaves and not leaves & trained):
        return cut.grad_off or live[0]
    return live[0]


def lone_statement_switch(grad_off: Site | None, site: Site) -> Site | None:
    """``grad_off`` when it is a ``with`` whose body is the one simple statement holding
    ``site`` (NOTE [block of one statement]); None otherwise."""
    from gradtrace.runtime.trace.locate import tree_of

    if grad_off is None or grad_off.path != site.path or site.line <= grad_off.line \
            or grad_off.function != site.function:
        return None
    tree = tree_of(site.path)
    if tree is None:
        return None
    for n in ast.walk(tree):
        if isinstance(n, (ast.With, ast.AsyncWith)) and n.lineno == grad_off.line:
            body = n.body
            if len(body) == 1 and not isinstance(body[0], _COMPOUND) and \
                    body[0].lineno <= site.line <= (body[0].end_lineno or body[0].lineno):
                return grad_off
            return None
    return None


def block_statement(grad_off: Site | None, start: int = 2, limit: int = 48) -> Site | None:
    """The line the frame that switched grad mode off (at ``grad_off``) is running now."""
    if grad_off is None:
        return None
    try:
        f: Any = sys._getframe(start + 1)
    except ValueError:
        return None
    while f is not None and limit > 0:
        code = f.f_code
        if code.co_name == grad_off.function and code.co_filename == grad_off.path \
                and f.f_lineno > grad_off.line:
            return Site(code.co_filename, f.f_lineno, code.co_name)
        f, limit = f.f_back, limit - 1
    return None
