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

    twin = next((f for r in list(data.optimizers.values()) if r.ref() is not None and
                 r.steps >= 2 and r.empty_steps == r.steps for f in [_twin(data, r)] if f), None)
    if twin is not None:  # NOTE [one parameter set, two optimizers]
        return [twin]
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


# NOTE [one parameter set, two optimizers]
# dreamer's ``value_optimizer = Adam(get_parameters(self.model_modules))`` beside
# ``model_optimizer = Adam(get_parameters(self.model_modules))``: two optimizers that both step
# hold the very same parameters. The copy's zero_grad() clears what the first's loss made
# before the first steps (the ungraded optimizer above), and the parameters the copy was meant
# for are in no optimizer. Said before the swapped-pair reading below. Of the two, the one built later is the copy: its construction line
# is named (both lines are shown). Only when the ungraded optimizer's set equals another's and
# some parameter that got a gradient is in no optimizer.
def _twin(data: Any, rec: Any) -> Finding | None:
    from gradtrace.runtime.trace.wiring import optimizer_built_at

    live = [r for r in list(data.optimizers.values()) if r.ref() is not None and r.steps]
    mine = {id(p) for g in rec.ref().param_groups for p in g["params"]}
    dup = next((o for o in live if o is not rec and {id(p) for g in o.ref().param_groups
                                                      for p in g["params"]} == mine), None)
    if dup is None or not _orphans(data, mine):
        return None
    sites = [(optimizer_built_at(data, r, r.ref()), r) for r in (rec, dup)]
    (a, _), (b, _) = sites
    if a is None or b is None or a.path != b.path or a.line == b.line:
        return None
    (first, _), (later, later_rec) = sorted(sites, key=lambda x: x[0].line)
    return make(code_for("optimizers-swapped", "GT821"), later,
                f"the optimizer built here holds the same parameters as the one built at line "
                f"{first.line}, and both step: one's zero_grad() clears the gradients the other "
                "was to apply, and the parameters a loss trains are in no optimizer",
                fix="give this optimizer the parameters of the network its loss trains",
                related=[(first, "the optimizer over the same parameters"),
                         (later_rec.site, "it steps here")], severity="warning")


def _orphans(data: Any, held: set[int]) -> bool:
    """Some parameter of a module that ran got a gradient and no live optimizer holds it."""
    opts = set(held)
    for r in list(data.optimizers.values()):
        if r.ref() is not None:
            opts |= {id(p) for g in r.ref().param_groups for p in g["params"]}
    return any(p.grad is not None and id(p) not in opts for m in list(data.modules.values())
               if m.ref() is not None for p in m.ref()._parameters.values() if p is not None)
