"""A crash explained by a number that left the graph in the failing step: the line of the
``.item()``/``float()`` of a tensor that requires grad made since the last backward() (see
:meth:`gradtrace.runtime.trace.state.TraceState.recent_items`)."""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.frames import Site


def item_finding(cut: Any, what: str, code: str, backward: Site | None) -> Finding:
    """``what`` explained by the ``.item()``/``float()`` of a tensor that requires grad made in
    the same step (the value went on as a Python number, outside the graph)."""
    return make(code_for("item-then-backward", code), cut.site,
                f"{what}: `{cut.op}()` here turned a tensor that requires grad into a Python "
                "number in this step, and what was computed from the number is off the graph",
                fix="keep the tensor (no .item()/float()) where the value feeds the loss; call "
                    ".item() only for logging",
                related=[(backward, "backward() failed here")])
