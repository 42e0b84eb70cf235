"""Two optimizers given each other's parameters, or one holding parameters the loss before its
step does not reach (GT406 at run time): an optimizer that found no gradient at any step while
another's parameters had gradients then. Not said of an optimizer whose own backward() comes
after its step, nor of one whose model no backward() ever grades (NOTE [step before backward]
in loop_order.py)."""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src


def _ungraded_steppers(data: Any) -> list[tuple[Any, Any]]:
    """(optimizer, other optimizer): the first found no gradient at any of its (>= 2) steps
    while parameters the other holds had gradients every time: it steps what the other's
    loss trains."""
    live = [r for r in list(data.optimizers.values()) if r.ref() is not None and r.steps]
    held = {id(r): {id(p) for g in r.ref().param_groups for p in g["params"]} for r in live}
    out = []
    for rec in live:
        seen = rec.graded_elsewhere
        if rec.steps < 2 or rec.empty_steps != rec.steps or not seen:
            continue
        other = next((o for o in live if o is not rec and all(s & held[id(o)] for s in seen)),
                     None)
        if other is not None:
            out.append((rec, other))
    return out


def _swapped(state: Any, data: Any) -> list[Finding]:
    from gradtrace.runtime.trace.loop_order import never_graded, stepped_early
    from gradtrace.runtime.trace.wiring import built_at

    early = stepped_early(state)  # its own backward() comes after its step: not misassigned
    pairs = [(r, o) for r, o in _ungraded_steppers(data) if r is not early and not
             never_graded(state, r)]  # nor when no backward() reaches its model: a cut
    if not pairs:
        return []
    (rec, other), both = pairs[0], len(pairs) > 1
    return [make(code_for("optimizers-swapped", "GT821"), built_at(rec.site) or rec.site,
                 f"the optimizer built here found no gradient on any of its parameters at each "
                 f"of its {rec.steps} steps, while parameters of the optimizer stepped at "
                 f"{src(other.site)} had gradients then: " + (
                     "the two optimizers were given each other's parameters" if both else
                     "it holds parameters the loss before its step does not reach"),
                 fix="give each optimizer the parameters of the network its loss trains",
                 related=[(rec.site, "it steps here"), (other.site, "the other optimizer "
                                                        "steps here")], severity="warning")]
