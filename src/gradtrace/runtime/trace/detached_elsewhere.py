"""# NOTE [detached for one use, handed whole to another]
A second backward() needs a graph the first one freed, and the traced line that used the freed
node binds a local (``fake_AB = torch.cat((self.real_A, self.fake_B), 1)``) that its function
hands on detached once (``netD(fake_AB.detach())``: the author meant the freed part to stay out
of this loss) and whole on exactly one other line (``cal_gradient_penalty(netD, real_AB,
fake_AB)``). The detached use cuts the graph, so the whole one is the only way this backward()
reached the freed graph: that call is the line to change (hand it ``fake_AB.detach()`` too).

Named only when the local is an argument of a call on that one line, the freed node's line made
no node since the last backward() (a value rebuilt every pass is carried state), and the
function holds the ``.detach()`` of the same local.
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.guarded_cache import rebuilt
from gradtrace.runtime.trace.locate import function_at


def _bare_argument_lines(fn: ast.AST, name: str, bound: int) -> tuple[bool, set[int]]:
    """(whether ``name.detach()`` occurs in ``fn``, the lines after ``bound`` passing ``name``
    itself as a call's argument)."""
    detached, lines = False, set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "detach" and isinstance(n.func.value, ast.Name) \
                and n.func.value.id == name:
            detached = True
        elif isinstance(n, ast.Call) and n.lineno > bound and any(
                isinstance(a, ast.Name) and a.id == name
                for a in [*n.args, *(k.value for k in n.keywords)]):
            lines.add(n.lineno)
    return detached, lines


def detached_elsewhere(roots: list[Any], used: Site | None, made: Site | None, site: Site,
                       pat: Any, state: Any) -> Finding | None:
    """NOTE [detached for one use, handed whole to another]: the one call handing the local
    bound at ``used`` on whole, when its function also detaches it."""
    found = function_at(used) if used is not None else None
    if found is None or made is None or rebuilt(roots, made, state.last_backward_seq):
        return None
    _, fn = found
    stmt = next((n for n in ast.walk(fn) if isinstance(n, ast.Assign)
                 and n.lineno <= used.line <= (n.end_lineno or n.lineno)), None)
    if stmt is None or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return None
    name = stmt.targets[0].id
    detached, lines = _bare_argument_lines(fn, name, stmt.end_lineno or stmt.lineno)
    if not detached or len(lines) != 1:
        return None
    at = Site(used.path, lines.pop(), used.function)
    return make(code_for("graph-reused-across-steps", pat.code), at,
                f"`{name}` is handed on detached elsewhere in this function, but whole here: "
                f"through this call the loss reaches the graph `{name}` was built from "
                f"({src(made)}), which an earlier backward() freed",
                fix=f"pass `{name}.detach()` here as well",
                related=[(used, f"`{name}` is built here from the freed graph"),
                         (made, "the freed part was computed here"),
                         (site, "this backward() needs the freed graph")])
