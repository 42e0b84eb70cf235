"""Errors about backward()'s own arguments, raised before autograd runs any node: a gradient
(``x.backward(g)``, ``torch.autograd.backward(ts, gs)``, ``autograd.grad(o, i, gs)``) whose
shape is not its output's. The cause is where that gradient was built: the assignment of the
name passed (``grad_seq = [torch.ones(1) ...]``), or the call itself when it is built inline
(``q.backward(err.unsqueeze(1))``). Called at failure time (the call's arguments are alive)
and after the fact from the traceback (the same lines, read from the source)."""
from __future__ import annotations

import ast
import re
from typing import Any

from gradtrace.findings import Finding
from gradtrace.lint.names import scaled_name
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.catalogue import ErrorPattern
from gradtrace.runtime.frames import Site

_SHAPE_RE = re.compile(r"grad_output\[(\d+)\] has a shape of torch\.Size\(\[([\d, ]*)\]\) and "
                       r"output\[\d+\] has a shape of torch\.Size\(\[([\d, ]*)\]\)")
# call name -> (position, keyword) of the gradient argument
_FUNCTIONAL = {"backward": (1, "grad_tensors"), "grad": (2, "grad_outputs")}


def gradient_arg(call: ast.Call) -> ast.expr | None:
    """The gradient argument of a backward()/autograd.backward()/autograd.grad() call."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("backward", "grad"):
        return None
    functional = isinstance(func.value, (ast.Name, ast.Attribute)) and \
        ast.unparse(func.value).split(".")[-1] == "autograd"
    if not functional and func.attr == "grad":
        return None
    pos, kw = _FUNCTIONAL[func.attr] if functional else (0, "gradient")
    for k in call.keywords:
        if k.arg == kw:
            return k.value
    return call.args[pos] if len(call.args) > pos else None


def _scope(tree: ast.AST, line: int) -> ast.AST:
    """The innermost function whose body holds ``line`` (else the module)."""
    best: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.lineno < line <= (node.end_lineno or node.lineno):
            if best is tree or node.lineno > getattr(best, "lineno", 0):
                best = node
    return best


def assignment_before(site: Site, name: str) -> ast.stmt | None:
    """The last assignment before ``site`` in its function (or module) that binds ``name``
    (not a nested function's)."""
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(site.path)
    if tree is None:
        return None
    best: ast.stmt | None = None
    stack = list(ast.iter_child_nodes(_scope(tree, site.line)))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.lineno < site.line:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in ast.walk(t)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            if name in names and (best is None or node.lineno > best.lineno):
                best = node
    return best


def assigned_before(site: Site, name: str) -> int | None:
    """The line of :func:`assignment_before`."""
    node = assignment_before(site, name)
    return None if node is None else node.lineno


def _shape_made_at(site: Site, name: str) -> tuple[int, str] | None:
    """The line that gave ``name`` its shape: its assignment before ``site``, followed back
    through a scaling by a number (``neg_one = one * -1`` keeps ``one``'s shape: the fix
    changes ``one``'s line)."""
    got = None
    for _ in range(4):
        node = assignment_before(site, name)
        if node is None:
            return got
        got = node.lineno, name
        nxt = scaled_name(getattr(node, "value", None))
        if nxt is None or nxt == name:
            return got
        site, name = Site(site.path, node.lineno, site.function), nxt
    return got


def _call_at(site: Site) -> ast.Call | None:
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(site.path)
    if tree is None:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno <= site.line
             <= (n.end_lineno or n.lineno) and gradient_arg(n) is not None]
    return min(calls, key=lambda c: (c.end_lineno or c.lineno) - c.lineno) if calls else None


def gradient_shape_finding(pat: ErrorPattern, exc: BaseException, site: Site | None,
                           roots: tuple = ()) -> list[Finding]:
    """The line that built a gradient argument of the wrong shape (see the module doc)."""
    m = _SHAPE_RE.search(str(exc))
    if m is None or site is None:
        return []
    index, got, want = int(m[1]), f"[{m[2]}]", f"[{m[3]}]"
    reduced = _reduced_from(roots[index] if index < len(roots) else None)
    if reduced is not None and reduced == [int(d) for d in m[2].replace(" ", "").split(",") if d]:
        return [make(code_for("backward-gradient-shape", pat.code), site,
                     f"backward() is called on a reduced output (shape {want}, a "
                     f"`{reduced_name(roots[index])}` of a tensor of shape {got}) with a gradient "
                     f"of shape {got}: that gradient belongs to the tensor before the reduction",
                     fix="call backward(gradient=...) on the unreduced tensor, or call "
                         "backward() on the reduced scalar without a gradient")]
    call = _call_at(site)
    arg = gradient_arg(call) if call is not None else None
    if isinstance(arg, (ast.List, ast.Tuple)) and index < len(arg.elts):
        arg = arg.elts[index]
    lead, what = site, f"`{ast.unparse(arg)}`" if arg is not None else "the gradient argument"
    if isinstance(arg, ast.Name):
        made = _shape_made_at(site, arg.id)
        if made is not None:
            lead = Site(site.path, made[0], site.function)
            if made[1] != arg.id:
                what = f"`{made[1]}` (scaled into `{arg.id}`)"
    head = f"the gradient given here for output {index} ({what})" if lead == site else \
        f"{what}, built here, is the gradient given to backward() ({src(site)}) for output " \
        f"{index}: it"
    return [make(code_for("backward-gradient-shape", pat.code), lead,
                 f"{head} has shape {got}, but that output has shape {want}; backward() needs "
                 "one gradient value per element of the output, in the output's shape",
                 fix="build the gradient in the output's shape (torch.ones_like(output), or "
                     "reshape it), or reduce the output to a scalar and call backward() "
                     "without a gradient",
                 related=[] if lead == site else [(site, "backward() was called with it here")])]


def gradient_shape_now(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple,
                       kwargs: dict, site: Site | None, state: Any) -> list[Finding]:
    first = args[0] if args else kwargs.get("tensors")
    roots = tuple(first) if isinstance(first, (list, tuple)) else (first,)
    return gradient_shape_finding(pat, exc, site, roots)


def _reduced_from(t: Any) -> list[int] | None:
    """The input shape of the full reduction (``.sum()``, ``.mean()``) that made ``t``."""
    gf = getattr(t, "grad_fn", None)
    try:
        sizes = getattr(gf, "_saved_self_sym_sizes", None) if gf is not None and \
            type(gf).__name__ in ("SumBackward0", "MeanBackward0") else None
        return [int(d) for d in sizes] if sizes is not None else None
    except (RuntimeError, TypeError, ValueError):
        return None


def reduced_name(t: Any) -> str:
    return ".sum()" if type(t.grad_fn).__name__.startswith("Sum") else ".mean()"


def gradient_shape_after(pat: ErrorPattern, exc: BaseException, frame: Any, site: Site,
                         state: Any) -> list[Finding]:
    return gradient_shape_finding(pat, exc, site)
