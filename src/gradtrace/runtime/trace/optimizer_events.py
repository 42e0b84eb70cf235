"""Problems of each optimizer's steps, reported when tracing ends: built again over the same
parameters, gradients cleared between backward() and step(), a step that never changes a
parameter, a non-finite gradient reaching step(). :func:`silent.silent_findings` collects them."""
from __future__ import annotations

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.trace.eps_underflow import eps_underflow
from gradtrace.runtime.trace.extra_step import accumulation_findings
from gradtrace.runtime.trace.fix_lines import zero_gradient_op
from gradtrace.runtime.trace.hooks import HookState, param_name
from gradtrace.runtime.trace.input_nan import input_nan_finding
from gradtrace.runtime.trace.loop_order import step_early_finding, wiped_step_early
from gradtrace.runtime.trace.nonfinite import NAN_FIX, forward_origin, nan_text
from gradtrace.runtime.trace.state import TraceState
from gradtrace.runtime.trace.step_nan import step_nan_finding
from gradtrace.runtime.trace.summed_outside import summed_findings


def _rebuilt(data: HookState) -> list[Finding]:
    """A stateful optimizer built again over the same parameters at least twice."""
    from gradtrace.runtime.trace.wiring import built_at

    recs = [r for r in list(data.optimizers.values()) if r.rebuilt >= 2 and r.stateful]
    if not recs:
        return []
    rec = max(recs, key=lambda r: r.rebuilt)
    return [make("GT829", built_at(rec.site) or rec.site, f"the optimizer is built here again "
                 f"over the same parameters ({rec.rebuilt + 1} optimizers seen): each new one "
                 "starts its state (momentum, Adam moments, step count) from zero",
                 fix="build the optimizer once, outside the loop or function, and pass it in",
                 related=[(rec.site, "each of them steps here")], severity="warning")]


def _optimizer_events(data: HookState, state: TraceState) -> list[Finding]:
    out: list[Finding] = _rebuilt(data)
    for rec in list(data.optimizers.values()):
        if rec.wiped is not None and wiped_step_early(rec):  # NOTE [step before backward]
            out += step_early_finding(rec.wiped[2], rec.wiped[1], rec.wiped[0])
        elif rec.wiped is not None:
            wiped, backward, step = rec.wiped
            out.append(make(code_for("zero-grad-before-step", "GT823"), wiped,
                            "the gradients are cleared here after backward() computed them "
                            f"({src(backward)}) and before optimizer.step() ({src(step)}) uses "
                            "them: the step finds no gradient and leaves every parameter as "
                            "it is", fix="clear the gradients before backward() (or after "
                                         "step()), never between the two",
                            related=[(backward, "backward() computed the gradients here"),
                                     (step, "the optimizer steps here with none left")],
                            severity="warning"))
        out += accumulation_findings(rec) + summed_findings(data, rec, param_name)
        zero = zero_gradient_op(state.zero_ops, rec.ref()) if rec.checks >= 3 and \
            not rec.changed else None
        if zero is not None:
            out.append(make("GT828", zero[0], f"optimizer.step() never changed any parameter "
                            f"in {rec.checks} checked steps: every gradient is exactly 0, "
                            f"because the loss reaches the parameters through `{zero[1]}` "
                            "here, whose derivative is zero everywhere", fix="compute the loss "
                            "from the unrounded value (or use a straight-through estimator: "
                            "x + (x.round() - x).detach())", related=[(rec.site, "the "
                            "optimizer steps here")], severity="warning"))
        elif rec.checks >= 3 and not rec.changed:
            out.append(make("GT828", rec.site, f"optimizer.step() never changed any parameter "
                            f"in {rec.checks} checked steps: the learning rate is 0 or the "
                            "gradients are all zero", fix="check the learning rate (and its "
                            "scheduler) and whether any gradient is non-zero",
                            severity="warning"))
        if rec.nonfinite is not None:
            name, step, site = rec.nonfinite
            if (eps := eps_underflow(data, rec, step, site, param_name)) is not None:
                out.append(eps)  # NOTE [eps below the dtype]
                continue
            if (made := step_nan_finding(state, name, step, site)) is not None:
                out.append(made)  # NOTE [NaN made by a step]
                continue
            where = next((k[1] for k in state.events if k[0] == "where-nonfinite"), None)
            if where is not None:
                out.append(make("GT825", where, f"non-finite gradient (NaN/Inf) first seen in "
                                f"{name} at optimizer step {step}: a branch of this "
                                "`torch.where` holds inf/NaN, and its gradient is NaN even "
                                "where it is not selected (0 * inf)", fix="make both branches "
                                "finite: compute the risky one on safe inputs (e.g. "
                                "torch.where(x > 0, x, 1.0) inside sqrt/log)",
                                related=[(site, "the NaN gradient reached optimizer.step() "
                                          "here")], severity="warning"))
                continue
            if (fwd := forward_origin(state, name, step, site)) is not None:
                out.append(fwd)  # NOTE [forward NaN origin]
                continue
            if (fed := input_nan_finding(data, name, step, site)) is not None:
                out.append(fed)  # NOTE [NaN in the model's input]
                continue
            origin = state.loss_nan or state.nan_origin  # NOTE [NaN loss hunted] first
            if origin is not None:
                out.append(make("GT825", origin[0], f"non-finite gradient (NaN/Inf) "
                                f"first seen in {name} at optimizer step {step}: " +
                                nan_text(origin[1]), fix=NAN_FIX, related=[
                                    (site, "the NaN gradient reached optimizer.step() here")],
                                severity="warning"))
                continue
            out.append(make("GT825", site, f"non-finite gradient (NaN/Inf) first seen in {name} "
                            f"at optimizer step {step}", fix="check the loss for NaN/Inf, lower "
                            "the learning rate, or clip gradients", severity="warning"))
    return out
