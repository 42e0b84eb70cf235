"""# NOTE [state reset in place keeps its graph]
A state carried across passes and "reset" in place at the start of the next one
(``buffer.zero_()``, ``h.fill_(0)``) loses its values but not its history: the write becomes a
node (``ZeroBackward0``, ``FillBackward*``) whose input is the previous pass's graph, which that
pass's backward() freed, so the next backward() walks into it and fails. The reset is the line
to change (``buffer.detach_().zero_()``, or a new tensor): it is named when the failing graph
holds such a node, made after the last backward(), whose input reaches a freed node.
"""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.graph_walk import graph_nodes, reaches_marked
from gradtrace.runtime.trace.records import META_FREED, created_site

_RESETS = ("ZeroBackward", "FillBackward")


def reset_keeps_graph(roots: list[Any], since: int, pat: Any, site: Site | None,
                      freed_by: Site | None) -> Finding | None:
    """The in-place reset whose node leads the failing backward() into a freed graph."""
    for node in graph_nodes(roots):
        if not type(node).__name__.startswith(_RESETS):
            continue
        made, seq = created_site(node)
        if made is None or seq <= since:
            continue
        try:
            inputs = [n for n, _ in node.next_functions if n is not None]
        except (AttributeError, RuntimeError):
            continue
        if any(reaches_marked(n, META_FREED) for n in inputs):
            return make(code_for("state-carried-across-steps", pat.code), made,
                        "this resets the tensor in place, which keeps it attached to the graph "
                        "it came from (its last pass's); that pass's backward() freed the "
                        "graph, so the next backward() through the reset value fails",
                        fix="detach it before resetting (t.detach_().zero_()), or bind a new "
                            "tensor (torch.zeros_like(t))",
                        related=[(freed_by, "an earlier backward() freed that graph here"),
                                 (site, "this backward() needs it again")])
    return None
