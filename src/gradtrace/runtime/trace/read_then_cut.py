"""Parameters the program reads in the very statement that detaches what it computed from them.

# NOTE [parameter read where it is detached]
A ``.detach()`` whose own statement reads a parameter of the program (an attribute chain in
the frame holding an ``nn.Parameter``, or a ``ParameterList``/``ParameterDict`` indexed there:
``(diff @ self.Us[j] @ self.Us[j].t() * diff).sum(1).sqrt().detach()``) and mixes it with a
value computed on another line (``diff``, from the encoder) computes a statistic the program
means to use without a gradient (a Mahalanobis gate): the cut is written where the parameter
is, so the program's author saw it. That parameter getting no gradient is then the program's
choice, not a cut the author missed, and it is not reported as "never received a gradient".

Not held: a detach of a value made in another statement (``feat = self.encoder(x)`` then
``head(feat.detach())``; ``netd(fake).detach()``: a module is called, no parameter is read),
nor a detach of the parameter alone (``self.w.t().detach()``: NOTE [snapshot cuts] in
:mod:`.silent`), nor a parameter that another cut also cut off.
"""
from __future__ import annotations

import ast
from typing import Any

import torch

from gradtrace.runtime.frame_values import MISSING, read_chain
from gradtrace.runtime.frames import Site, user_frame
from gradtrace.runtime.trace.leaves import upstream_leaves
from gradtrace.runtime.trace.locate import tree_of

_KEY = "read_then_cut"  # state.__dict__ key: Cut -> frozenset of parameter ids (or None)
_LIMIT = 256  # cuts remembered


def _reads(state: Any) -> dict[Any, frozenset[int] | None]:
    return state.__dict__.setdefault(_KEY, {})


def _attr(base: Any, name: str) -> Any:
    """``base.<name>`` from a module's registered parameters/submodules or the instance's
    ``__dict__`` (no user code runs)."""
    d = getattr(base, "__dict__", None)
    if not isinstance(d, dict):
        return MISSING
    for space in (d.get("_parameters"), d.get("_modules"), d):
        if isinstance(space, dict) and name in space:
            return space[name]
    return MISSING


def _params_read(expr: ast.AST, frame: Any) -> set[int]:
    """ids of the parameters ``expr`` reads through an attribute chain of the frame (a
    ``ParameterList``/``ParameterDict`` subscripted there: every parameter it holds)."""
    out: set[int] = set()
    for node in ast.walk(expr):
        if not isinstance(node, ast.Attribute):
            continue
        value = read_chain(node, frame, _attr)
        if isinstance(value, torch.nn.Parameter):
            out.add(id(value))
        elif isinstance(value, (torch.nn.ParameterList, torch.nn.ParameterDict)):
            out.update(id(p) for p in value.parameters())
    return out


def _statement_at(site: Site) -> ast.stmt | None:
    """The innermost simple statement of the file spanning ``site.line``."""
    tree = tree_of(site.path)
    best: ast.stmt | None = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr)) \
                and node.lineno <= site.line <= (node.end_lineno or 0) \
                and (best is None or node.lineno >= best.lineno):
            best = node
    return best


def _detached_receiver(stmt: ast.stmt, line: int) -> ast.AST | None:
    """The receiver of the statement's ``.detach()`` call on ``line`` (the only one)."""
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and not n.args
             and isinstance(n.func, ast.Attribute) and n.func.attr == "detach"
             and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return calls[0].func.value if len(calls) == 1 else None


def note_read_then_cut(state: Any, cut: Any, src: torch.Tensor) -> None:
    """At a ``detach`` cut of a value with a graph: remember the parameters the cutting
    statement itself reads that the value was computed from, with another leaf beside them."""
    reads = _reads(state)
    if cut in reads or len(reads) >= _LIMIT:  # once per cut: the statement reads the same
        return
    reads[cut] = None
    if src.grad_fn is None:
        return
    frame = user_frame(1)
    stmt = _statement_at(cut.site) if frame is not None and \
        frame.f_code.co_filename == cut.site.path else None
    expr = _detached_receiver(stmt, cut.site.line) if stmt is not None else None
    read = _params_read(expr, frame) if expr is not None else set()
    ups = upstream_leaves(src) if read else frozenset()
    if read & ups and ups - read:  # (the parameter alone is a snapshot, not a statistic)
        reads[cut] = frozenset(read)  # a container's every parameter: one is read per call


def read_where_cut(state: Any, p: torch.Tensor) -> bool:
    """Whether ``p`` was read by a statement that detached what it computed from it
    (NOTE [parameter read where it is detached]) and no other cut had it upstream."""
    reads = state.__dict__.get(_KEY)
    if not reads or not any(ids and id(p) in ids for ids in reads.values()):
        return False
    return all(reads.get(c) and id(p) in reads[c]  # type: ignore[operator]
               for c, ids in state.cut_upstream.items() if id(p) in ids)
