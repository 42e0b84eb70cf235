"""Problems that never raise: reported when tracing ends, at the line where they first happen."""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.hooks import HookState, ModuleRecord, param_name
from gradtrace.runtime.state import TraceState

Tensor = torch.Tensor


def silent_findings(state: TraceState, data: HookState) -> list[Finding]:
    """Every silent problem the session saw, most serious first."""
    out: list[Finding] = []
    out += _params_without_grad(state, data)
    out += _params_in_no_optimizer(state, data)
    out += _optimizer_events(data)
    out += _events(state)
    return out


def _owners(data: HookState) -> dict[int, ModuleRecord]:
    """param id -> record of the module that owns it directly (among modules that ran)."""
    owners: dict[int, ModuleRecord] = {}
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is not None:
            for p in m._parameters.values():
                if p is not None:
                    owners[id(p)] = rec
    return owners


def _optimizer_params(data: HookState) -> list[tuple[Any, Tensor]]:
    out = []
    for rec in list(data.optimizers.values()):
        opt = rec.ref()
        if opt is not None and rec.steps:
            out += [(rec, p) for g in opt.param_groups for p in g["params"]]
    return out


def why_no_grad(state: TraceState, data: HookState, p: Tensor,
                owners: dict[int, ModuleRecord] | None = None) -> Finding | None:
    """Why parameter ``p`` never got a gradient (``None`` if it has one)."""
    if p.grad is not None or id(p) in data.had_grad:
        return None
    owners = _owners(data) if owners is None else owners
    name = param_name(data, p)
    rec = owners.get(id(p))
    frozen = state.frozen_at(p)
    if not p.requires_grad:
        return make(code_for("frozen-parameter", "GT820"), frozen,
                     f"{name} gets no gradient: it has requires_grad=False"
                     + (f", frozen here ({src(frozen)})" if frozen else ""),
                     fix="call requires_grad_(True) on it if it should train", severity="warning")
    if rec is None or rec.grad_runs + rec.nograd_runs == 0:
        return make(code_for("unused-parameter", "GT820"), None if rec is None else rec.site,
                    f"{name} never received a gradient: its module never ran in a forward pass "
                    "that backward() went through (not used in forward?)",
                    fix="use it in forward(), or leave it out of the optimizer", severity="warning")
    if rec.grad_runs == 0:
        return make(code_for("no-grad-forward", "GT820"), rec.nograd_site or rec.site,
                    f"{name} never received a gradient: its module only ran with grad mode off"
                    + (f" (turned off here: {src(rec.nograd_site)})" if rec.nograd_site else ""),
                    fix="run the training forward pass outside torch.no_grad()",
                    related=[(rec.site, "the module was called here")], severity="warning")
    cuts = [c for c, ids in state.cut_upstream.items() if id(p) in ids]
    cuts.sort(key=lambda c: c.reason == "item")
    if cuts:
        from gradtrace.runtime.diagnose import _CUT_KIND

        c = cuts[0]
        return make(code_for(_CUT_KIND.get(c.reason, "graph-cut"), "GT820"), c.site,
                    f"{name} is used in forward but never received a gradient: the graph was cut "
                    f"here, {c.describe()}", fix="keep the path from this parameter to the loss "
                    "attached (no .detach()/.item()/no_grad on it)",
                    related=[(rec.site, "its module was called here")], severity="warning")
    return make("GT820", rec.site, f"{name} is used in forward but never received a gradient "
                "(no backward() reached it)", severity="warning")


def _params_without_grad(state: TraceState, data: HookState) -> list[Finding]:
    if state.backward_count == 0:
        return []
    owners = _owners(data)
    out: list[Finding] = []
    seen: set[int] = set()
    for _, p in _optimizer_params(data):
        if id(p) in seen or not p.requires_grad:
            continue
        seen.add(id(p))
        f = why_no_grad(state, data, p, owners)
        if f is not None and f.message not in {g.message for g in out}:
            out.append(f)
    return out


def _params_in_no_optimizer(state: TraceState, data: HookState) -> list[Finding]:
    pairs = _optimizer_params(data)
    if not pairs:
        return []
    in_opt = {id(p) for _, p in pairs}
    stale = [p for _, p in pairs if p.requires_grad and id(p) not in data.had_grad]
    out: list[Finding] = []
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None or rec.grad_runs == 0:
            continue
        missed = [p for p in m._parameters.values()
                  if p is not None and p.requires_grad and p.grad is not None
                  and id(p) not in in_opt]
        if not missed:
            continue
        what = f"{type(m).__name__} ({', '.join(n for n, p in m._parameters.items() if p in missed)})"
        if rec.unregistered_in:
            kind, why = "unregistered-submodule", (
                f"it is called from {rec.unregistered_in}.forward but not registered as its "
                "submodule (held in a plain list/dict or attribute of another type?), so "
                "model.parameters() does not include it")
            fix = "hold layers in nn.ModuleList / nn.ModuleDict (parameters in nn.ParameterList)"
        elif stale:
            kind, why = "model-recreated-after-optimizer", (
                "the optimizer holds other parameters that never received a gradient: the model "
                "(or this layer) was re-created, copied or replaced after the optimizer was built")
            fix = "build the optimizer after the final model exists (or rebuild it)"
        else:
            kind, why = "parameter-in-no-optimizer", "it was not passed to any optimizer"
            fix = "pass these parameters to the optimizer (or add a param group)"
        out.append(make(code_for(kind, "GT821"), rec.site,
                        f"{what} receives gradients but no optimizer updates it: {why}", fix=fix,
                        related=[(r.site, "optimizer.step() here") for r in
                                 list(data.optimizers.values())[:1]], severity="warning"))
    return out


def _optimizer_events(data: HookState) -> list[Finding]:
    out: list[Finding] = []
    for rec in list(data.optimizers.values()):
        if rec.accumulate_site is not None:
            out.append(make(code_for("zero-grad-missing", "GT823"), rec.accumulate_site,
                            "gradients keep accumulating across optimizer steps: .grad was not "
                            "reset (zero_grad) between this step and the previous one",
                            fix="call optimizer.zero_grad() once per step, before backward()",
                            severity="warning"))
        if rec.nonfinite is not None:
            name, step, site = rec.nonfinite
            out.append(make("GT825", site, f"non-finite gradient (NaN/Inf) first seen in {name} "
                            f"at optimizer step {step}", fix="check the loss for NaN/Inf, lower "
                            "the learning rate, or clip gradients", severity="warning"))
    return out


_EVENT_TEXT = {
    "non-leaf-grad": ("GT822", ".grad read on a non-leaf tensor: it is always None because "
                      "backward() fills .grad of leaf tensors only",
                      "read .grad of the leaf you created, or call .retain_grad() before "
                      "backward()"),
    "clip-after-step": ("GT824", "gradient clipping runs after optimizer.step(), so it does "
                        "not affect the update it was meant to limit",
                        "clip between loss.backward() and optimizer.step()"),
    "graph-kept": ("GT826", "a running total of a tensor that requires grad keeps every "
                   "step's graph alive (memory grows each step)",
                   "accumulate loss.item() (a float) or loss.detach() instead"),
}


def _events(state: TraceState) -> list[Finding]:
    out: list[Finding] = []
    for (kind, site, _), counter in state.events.items():
        text = _EVENT_TEXT.get(kind)
        if text is None:
            continue
        code, msg, fix = text
        rel: list[tuple[Site | None, str]] = list(counter.event.related)
        out.append(make(code_for(kind, code), site, msg + (f" (seen {counter.count} times)"
                                                           if counter.count > 1 else ""),
                        fix=fix, related=rel, severity="warning"))
    return out
