"""Problems that never raise: reported when tracing ends, at the line where they first happen."""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import NEVER_RAN, OUTPUT_UNUSED, code_for, listed, make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.after_wrap import after_wrap_findings
from gradtrace.runtime.trace.aliased import alias_findings
from gradtrace.runtime.trace.applied import applied_findings
from gradtrace.runtime.trace.bypassed_store import bypassed_store
from gradtrace.runtime.trace.dead_terms import dead_term_findings
from gradtrace.runtime.trace.climbed_feed import crossed_only
from gradtrace.runtime.trace.detached_feed import DETACHED, detached_feed
from gradtrace.runtime.trace.random_buffer import random_buffer_findings
from gradtrace.runtime.trace.score_weight import score_weight_findings
from gradtrace.runtime.trace.ema_reads import ema_findings
from gradtrace.runtime.trace.eval_freeze import eval_freeze_findings
from gradtrace.runtime.trace.late import late_findings, self_diff_findings
from gradtrace.runtime.trace.leaked_step import leaked_findings
from gradtrace.runtime.trace.loose_leaves import loose_leaf_findings
from gradtrace.runtime.trace.refrozen import refrozen_findings
from gradtrace.runtime.trace.fix_lines import frozen_beside, other_stepped
from gradtrace.runtime.trace.events import event_findings
from gradtrace.runtime.trace.singleton import singleton_findings
from gradtrace.runtime.trace.soft_target import soft_target_findings
from gradtrace.runtime.trace.st_loss import st_loss_reason
from gradtrace.runtime.trace.teacher_target import teacher_target
from gradtrace.runtime.trace.windows import window_findings
from gradtrace.runtime.trace.declared import (declared_unused, norm_left_out, parent_idle,
                                              read_as_none)
from gradtrace.runtime.trace.idle import idle_findings
from gradtrace.runtime.trace.late_thaw import late_thaw_findings
from gradtrace.runtime.trace.loss_input import loss_input_findings
from gradtrace.runtime.trace.decay_groups import inverted_decay_findings
from gradtrace.runtime.trace.lr_groups import erased_findings
from gradtrace.runtime.trace.intent import climbed_module, left_out_on_purpose
from gradtrace.runtime.trace.plain_held import uncalled_in_plain_container
from gradtrace.runtime.trace.loop_order import discarded_findings as discarded, never_graded
from gradtrace.runtime.trace.closure_sum import closure_findings
from gradtrace.runtime.trace.data_swap import swap_findings
from gradtrace.runtime.trace.chained_state import chained_state_findings
from gradtrace.runtime.trace.swapped import _swapped, _ungraded_steppers
from gradtrace.runtime.trace.reached_cuts import unused_snapshot
from gradtrace.runtime.trace.read_then_cut import read_where_cut
from gradtrace.runtime.trace.untaken import UNTAKEN, untaken_branch
from gradtrace.runtime.trace.modes import eval_findings
from gradtrace.runtime.trace.opt_state import thrown_away_findings
from gradtrace.runtime.trace.restored_lr import restored_lr_findings
from gradtrace.runtime.trace.replaced import registered_after, replacement_site
from gradtrace.runtime.trace.schedule import schedule_findings
from gradtrace.runtime.trace.shared_layers import shared_findings
from gradtrace.runtime.trace.hooks import (HookState, ModuleRecord, attribute_site, param_name,
                                     unregistered_owner)
from gradtrace.runtime.trace.nonfinite import nan_loss_findings, nonfinite_findings
from gradtrace.runtime.trace.state import TraceState
from gradtrace.runtime.trace.wiring import (partial_optimizer_site, plain_object_parameters,
                                            requires_grad_attribute, single_optimizer_built_at,
                                            tensor_made_at)
from gradtrace.runtime.trace.optimizer_events import _optimizer_events

Tensor = torch.Tensor


def silent_findings(state: TraceState, data: HookState) -> list[Finding]:
    """Every silent problem the session saw, most likely root cause first. The parameter
    checks need the model and optimizer alive; when they are gone (the program built them
    inside a function that returned) the last snapshot taken at an optimizer step is used."""
    live = any(r.ref() is not None for r in data.optimizers.values())
    lead, last = applied_findings(data)
    out = lead + alias_findings(data) + (parameter_findings(state, data) if live
                                         else list(data.snapshot))
    steps = any(r.steps for r in data.optimizers.values())
    out += shared_findings(data.shared, steps) + self_diff_findings(state) + \
        dead_term_findings(state, data, out) + loss_input_findings(state, data) + \
        soft_target_findings(state, data) + score_weight_findings(state) + \
        schedule_findings(data) + erased_findings(data) + eval_freeze_findings(data) + \
        inverted_decay_findings(data) + random_buffer_findings(state, data) + \
        thrown_away_findings(data) + restored_lr_findings(data)
    added = any(f.code == "GT821" for f in out)  # new parameters named: no GT849 besides
    idle = [f for f in idle_findings(state, data) if not (added and f.code == "GT849")]
    return out + eval_findings(data) + late_findings(state, data) + \
        requires_grad_attribute(data) + idle + late_thaw_findings(state, data) + _optimizer_events(data, state) + \
        event_findings(state, steps) + discarded(state, data) + leaked_findings(state) + \
        window_findings(state, data) + closure_findings(state) + swap_findings(state) + \
        nonfinite_findings(state, data) + singleton_findings(state) + ema_findings(state) + last + \
        chained_state_findings(state, data) + \
        nan_loss_findings(state, data)  # NOTE [NaN loss, finite gradients]: a symptom, last


def parameter_findings(state: TraceState, data: HookState) -> list[Finding]:
    """Parameters that get no gradient, or get one that no optimizer uses."""
    out: list[Finding] = _swapped(state, data) + _params_in_no_optimizer(state, data)
    recreated = any(f.code == code_for("model-recreated-after-optimizer", "GT821") and
                    "re-created" in f.message for f in out)
    missing = _params_without_grad(state, data, _replaced(data) if recreated else frozenset())
    if recreated:  # the stale parameters are explained by that finding
        missing = [f for f in missing if f.path != "<unknown>"]
    return out + missing + after_wrap_findings(data)  # NOTE [after the DDP wrap]


def _replaced(data: HookState) -> frozenset[int]:
    """Optimizer tensors that never got a gradient while a tensor of the same shape and dtype
    in no optimizer did: the old model's, when the model was made again after its optimizer
    (its layers never ran, so "never ran in a forward pass" would send the reader to forward)."""
    in_opt = {id(p) for _, p in _optimizer_params(data)}
    fresh = {(tuple(p.shape), p.dtype) for rec in list(data.modules.values())
             for m in [rec.ref()] if m is not None and rec.grad_runs
             for p in m._parameters.values()
             if p is not None and p.grad is not None and id(p) not in in_opt}
    return frozenset(id(p) for _, p in _optimizer_params(data)
                     if p.grad is None and (tuple(p.shape), p.dtype) in fresh)


def param_owners(data: HookState) -> dict[int, ModuleRecord]:
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


Reason = tuple[str, "Site | None", str, str, tuple[tuple["Site | None", str], ...]]


def unreached_reason(state: TraceState, data: HookState, p: Tensor,
            owners: dict[int, ModuleRecord]) -> Reason:
    """(code, site, why, fix, related) for a parameter that has no gradient."""
    rec = owners.get(id(p))
    frozen = state.frozen_at(p)
    if not p.requires_grad:
        return (code_for("frozen-parameter", "GT820"), frozen, "it has requires_grad=False"
                + (f", frozen here ({src(frozen)})" if frozen else ""),
                "call requires_grad_(True) on it if it should train", ())
    cut = _cut_reason(state, p, None) if rec is None else None  # a plain tensor trained
    if cut is not None:                                         # by the optimizer, cut
        return cut
    if (rec is None or rec.grad_runs + rec.nograd_runs == 0) and data.unobserved:
        return ("GT820", defined_at(data, p) or held_at(data, p), "no backward() reached it",
                "", ())
    if rec is None or rec.grad_runs + rec.nograd_runs == 0:
        site = defined_at(data, p) or held_at(data, p)
        branch = untaken_branch(data, p)  # NOTE [call in a branch that never ran]
        if branch is not None:
            return (code_for("unused-parameter", "GT820"), branch[0], NEVER_RAN + ": its only "
                    f"call in `{branch[1]}.forward` is in the body of this `if`, {UNTAKEN}",
                    "fix the test so that the branch runs (or leave the layer "
                    "out of the optimizer)", ((site, "the module is defined here"),)
                    if site is not None else ())
        return (code_for("unused-parameter", "GT820"), site, NEVER_RAN + " (not used in "
                "forward?)", "use it in forward(), or leave it out of the optimizer", ())
    if rec.grad_runs == 0 and rec.in_checkpoint:
        return (code_for("checkpoint-no-grad", "GT820"), rec.site,
                "its module runs inside torch.utils.checkpoint (reentrant) and no input of the "
                "checkpoint requires grad, so backward() never re-runs the segment",
                "use checkpoint(..., use_reentrant=False), or pass an input that requires grad",
                ())
    if rec.grad_runs == 0:
        kept = frozen_beside(data, rec)
        if kept is not None and rec.site is not None:  # NOTE [no_grad kept for a frozen module]
            return (code_for("no-grad-forward", "GT820"), rec.site,
                    "its module only ran with grad mode off: it is called inside the no-grad "
                    f"block opened at {src(rec.nograd_site)}, which is there for the frozen "
                    f"module called at {src(kept)}",
                    "call this module after the no-grad block (only the frozen module needs it)",
                    ((rec.nograd_site, "grad mode is turned off here"),
                     (kept, "the frozen module the block is for is called here")))
        return (code_for("no-grad-forward", "GT820"), rec.nograd_site or rec.site,
                "its module only ran with grad mode off" + (
                    f" (turned off here: {src(rec.nograd_site)})" if rec.nograd_site else ""),
                "run the training forward pass outside torch.no_grad()",
                ((rec.site, "the module was called here"),))
    cut = _cut_reason(state, p, rec)
    if cut is not None:
        return cut
    return ("GT820", rec.site, OUTPUT_UNUSED, "", ())


def _cut_reason(state: TraceState, p: Tensor, rec: ModuleRecord | None) -> Reason | None:
    """Why ``p`` got no gradient when a cut was seen with it upstream (else None)."""
    cuts = cuts_upstream_of(state, p, rec)
    if not cuts:
        return None
    related = ((rec.site, "its module was called here"),) if rec is not None else ()
    from gradtrace.runtime.trace.diagnose import STORED_FIX, CUT_KIND, grad_off_line, stored_list
    c = cuts[0]
    stored = stored_list(c)
    if stored is not None:
        return (code_for(CUT_KIND.get(c.reason, "graph-cut"), "GT820"), stored,
                f"this line stores plain numbers (from `{c.origin.op}()` at line "
                f"{c.origin.site.line}) in the list that line {c.site.line} turns into a "
                "tensor without a graph", STORED_FIX, related)
    code, lead = code_for(CUT_KIND.get(c.reason, "graph-cut"), "GT820"), grad_off_line(c)
    return st_loss_reason(state, c, code, related) or (code, lead or c.site,
            f"it is used, but the graph was cut here: {c.describe()}",
            "keep the path from this parameter to the loss attached (no .detach()/.item()/"
            "no_grad on it)", related)


def cuts_upstream_of(state: TraceState, p: Tensor, rec: ModuleRecord | None) -> list[Any]:
    """The cuts with ``p`` upstream, the likeliest cause first.

    A cut made by library code comes last, then (when ``p``'s module also ran with grad on)
    a cut made with grad mode off: that is an evaluation pass under ``no_grad`` (nanoGPT's
    ``estimate_loss()`` before the first step), not the training forward whose loss was
    back-propagated. An ``.item()`` comes after other cuts (a logged number is common).

    # NOTE [snapshot cuts]
    A ``.detach()`` of the leaf itself (``before = [p.detach().clone() for p in
    model.parameters()]``) is the program's own copy of the weights, made to compare them
    later: it comes after every cut of a value computed from the leaf, which is where the
    loss's path was cut. Alone, it still leads (``F.linear(x, self.w.detach())``).

    A ``no_grad`` block inside a ``forward`` (the switch read from the stack) is part of the
    model, not an evaluation pass: its cut keeps its place (LEAF's Gabor constraint).

    A cut that made the leaf a backward() started from leads them all
    (NOTE [backward of a leaf] in :mod:`.root_leaf`): nothing flowed from that backward()."""
    # NOTE [cut after the last backward]
    # A cut first made after the run's last backward() (the cuts are kept in the order they
    # were first made) is on no path a backward() took: a measurement after training
    # (`sum((p - q).norm() for ...).item()`), never why a parameter got no gradient.
    trained = rec is not None and rec.grad_runs > 0
    last = state.cuts_by_last_backward if state.backward_count else None
    cuts = [c for i, (c, ids) in enumerate(state.cut_upstream.items())
            if id(p) in ids and (last is None or i < last) and not unused_snapshot(state, c)]
    cuts.sort(key=lambda c: (c not in state.root_cuts, c.library, c in state.leaf_cuts, trained and c.reason == "no_grad"
                             and not (c.switch and c.switch.function == "forward"),  # a block
                             c.reason in ("item", "grad"),  # inside the model: no evaluation
                             c not in state.reached))  # NOTE [cut that reaches the loss]
    return cuts


def why_no_grad(state: TraceState, data: HookState, p: Tensor,
                owners: dict[int, ModuleRecord] | None = None) -> Finding | None:
    """Why parameter ``p`` never got a gradient (``None`` if it has one)."""
    if p.grad is not None or data.graded(p):
        return None
    code, site, why, fix, related = unreached_reason(state, data, p, owners or param_owners(data))
    return make(code, site, f"{param_name(data, p)} never received a gradient: {why}", fix=fix,
                related=list(related), severity="warning")


def defined_at(data: HookState, p: Tensor) -> Site | None:
    """Where the module owning ``p`` was assigned in its parent's ``__init__`` (best effort)."""
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None:
            continue
        for name, child in m.named_children():
            if any(q is p for q in child.parameters(recurse=False)):
                return attribute_site(type(m), name)
    return None


def held_at(data: HookState, p: Tensor) -> Site | None:
    """Where the optimizer holding ``p`` was built (else where it steps): the best line for a
    parameter whose module was never seen running."""
    from gradtrace.runtime.trace.wiring import built_at

    for rec in list(data.optimizers.values()):
        opt = rec.ref()
        if opt is not None and any(q is p for g in opt.param_groups for q in g["params"]):
            return built_at(rec.site) or rec.site
    return None


def _params_without_grad(state: TraceState, data: HookState,
                         replaced: frozenset[int] = frozenset()) -> list[Finding]:
    if state.backward_count == 0:
        return []
    owners = param_owners(data)
    groups: dict[Reason, list[str]] = {}
    seen: set[int] = set()
    explained = [id(r) for r, _ in _ungraded_steppers(data) if not never_graded(state, r)]
    declared = declared_unused(data)
    for rec, p in _optimizer_params(data):
        if rec.wiped is not None or id(rec) in explained:  # reported as such
            continue
        if id(p) in seen or not p.requires_grad or p.grad is not None or data.graded(p) \
                or read_where_cut(state, p):  # NOTE [parameter read where it is detached]
            continue
        seen.add(id(p))
        reason = unreached_reason(state, data, p, owners)
        if reason[2].startswith(NEVER_RAN) and (parent_idle(data, p) or id(p) in replaced):
            continue  # a piece of a model whose parts are called one by one: left out on purpose
        if reason[2].startswith(NEVER_RAN) and (read_as_none(state, p) or norm_left_out(data, p)):
            continue  # NOTE [read as None by the program], NOTE [normalisation left out]
        if reason[0] == "GT820" and reason[2].startswith((OUTPUT_UNUSED, NEVER_RAN)) \
                and id(p) in declared:
            continue  # DDP(find_unused_parameters=True) was told some parameters go unused
        groups.setdefault(reason, []).append(param_name(data, p))
    # one finding per cause: the parameters of several modules cut at one line are one
    # problem (their modules' call sites are kept as related places, a few of them)
    merged: dict[tuple[Any, ...], tuple[list[str], list[tuple[Any, str]]]] = {}
    for (code, site, why, fix, related), names in groups.items():
        m = merged.setdefault((code, site, why, fix), ([], []))
        m[0].extend(names)
        m[1].extend(r for r in related if r not in m[1])
    out = []
    for (code, site, why, fix), (names, related) in merged.items():
        shown = listed(names)
        out.append(make(code, site, f"{shown} never received a gradient: {why}", fix=fix,
                        related=related[:3], severity="warning"))
    return sorted(out, key=lambda f: UNTAKEN not in f.message)  # NOTE [call in a branch that never ran]


def _cut_first_pass(state: TraceState, data: HookState) -> bool:
    """The program crashed before any optimizer stepped twice: an optimizer built and not
    yet stepped may have its step later in the pass the crash cut (FactorVAE: `optim_VAE
    .step()`, then the discriminator's backward raises before `optim_D.step()`), so 'never
    stepped' says nothing of the program."""
    return bool(state.crash_findings) and all(
        r.steps < 2 for r in list(data.optimizers.values()) if r.steps)


def _params_in_no_optimizer(state: TraceState, data: HookState) -> list[Finding]:
    pairs = _optimizer_params(data)
    if not pairs:
        return _empty_optimizers(data)
    in_opt = {id(p) for _, p in pairs}
    owners = param_owners(data)
    training = any(owners[id(p)].ref() is not None and owners[id(p)].ref().training
                   for _, p in pairs if id(p) in owners)
    stale = [p for _, p in pairs
             if p.requires_grad and not data.graded(p) and p.grad is None]
    if stale:  # NOTE [unused layer of a model that ran]
        live = _ran_tree_params(data)
        stale = [p for p in stale if id(p) not in live]
    # Every optimized tensor is a plain tensor, no Parameter of any module: an input is trained
    # (adversarial examples, style transfer...), the modules are fixed (not a re-created model).
    inputs_trained = not any(isinstance(p, torch.nn.Parameter) or id(p) in owners
                             for _, p in pairs)
    groups: dict[tuple[str, Site | None, str, str], list[str]] = {}
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None or rec.grad_runs == 0 or inputs_trained:
            continue
        missed = [p for p in m._parameters.values()  # (not a rewrap: the cut says it)
                  if p is not None and p.requires_grad and p.grad is not None
                  and id(p) not in in_opt and state.cut_of(p) is None]
        if missed and (not m.training and training or rec.copied_into(m, data, in_opt)
                       or left_out_on_purpose(data, [param_name(data, q) for q in missed])
                       or climbed_module(rec.site) or crossed_only(state, missed)):
            continue  # eval mode, a copy the program refreshes (target net), left out on
            # purpose, a critic the loss climbs (NOTE [maximized module output]), a model it
            # runs through (NOTE [model the climbed objective runs through])
        if missed:
            owner, owner_site = unregistered_owner(data, m)
            kind, why, fix = _not_optimized_reason(owner, len(stale),
                                                   [state.frozen_at(q) for q in missed])
            site = owner_site
            if kind == "model-recreated-after-optimizer":
                from gradtrace.runtime.trace.wiring import other_instance_at, replaced_at

                site = replacement_site(data, m)
                site, why, fix = (None if site else other_instance_at(data, m, stale)) or (
                    site or replaced_at(data, m, rec.site), why, fix)
            elif kind == "unfrozen-after-optimizer":
                site = state.unfrozen_at(missed) or site
            elif kind == "parameter-in-no-optimizer":  # NOTE [replaced after the optimizer],
                # then NOTE [the other optimizer stepped]
                late = registered_after(data, missed)
                other = None if late else other_stepped(data, missed)
                if other is not None and _cut_first_pass(state, data):
                    continue
                site, why, fix = late or other or teacher_target(state, missed) or \
                    detached_feed(state, missed, in_opt) or (single_optimizer_built_at(data)
                                                             or partial_optimizer_site(data, m),
                                                             why, fix)
            bypass = None if owner else bypassed_store(data, m)  # NOTE [layer stored past registration]
            if bypass is not None:
                kind, (site, why, fix) = "unregistered-submodule", bypass
            groups.setdefault((kind, site or rec.site, why, fix), []).extend(
                param_name(data, q) for q in missed)
    _plain_tensor_attributes(data, in_opt, groups)
    loose_leaf_findings(state, data, in_opt, groups)
    refrozen_findings(state, data, in_opt, groups)  # NOTE [trained while switched on, built while switched off]
    plain_object_parameters(data, in_opt, groups)
    # NOTE [uncalled layers in a plain container] (plain_held.py)
    uncalled_in_plain_container(data, in_opt, groups)
    step = next((r.site for r in data.optimizers.values() if r.steps), None)
    out = []  # a detach that made a term useless first: NOTE [term detached from the model it should train]
    for (kind, site, why, fix), names in sorted(groups.items(),
                                                key=lambda kv: DETACHED not in kv[0][2]):
        shown = listed(names)
        out.append(make(code_for(kind, "GT821"), site, f"{shown} receive gradients but no "
                        f"optimizer updates them: {why}", fix=fix,
                        related=[(step, "optimizer.step() here")], severity="warning"))
    return out


# NOTE [unused layer of a model that ran]
# An optimizer holding parameters that never got a gradient says the model was re-created,
# copied or replaced after it was built only when those parameters belong to no module that ran
# (the old model's, or a layer swapped out). A layer registered in a model that ran but never
# called in its forward (a head the reduced model leaves out) is still the model's own: its
# parameters being idle says nothing of the others that got gradients and no step, which are
# then simply in no optimizer (nerf_pl: the embeddings next to the networks the optimizer took).
def _ran_tree_params(data: HookState) -> set[int]:
    """The ids of the parameters of every module that ran with grad, its submodules' included."""
    out: set[int] = set()
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is not None and rec.grad_runs:
            out.update(id(p) for p in m.parameters())
    return out


def _empty_optimizers(data: HookState) -> list[Finding]:
    """Optimizers that step while holding no tensor at all (parameter groups left empty by a
    filter that kept nothing: torch raises only for an empty list, not for empty groups),
    while the modules that ran got gradients."""
    steppers = [r for r in list(data.optimizers.values()) if r.steps and r.ref() is not None]
    if not steppers:
        return []
    graded = [param_name(data, p) for rec in list(data.modules.values())
              if rec.ref() is not None and rec.grad_runs
              for p in rec.ref()._parameters.values() if p is not None and p.grad is not None]
    if not graded:
        return []
    site = single_optimizer_built_at(data) or steppers[0].site
    shown = listed(graded)
    return [make(code_for("parameter-in-no-optimizer", "GT821"), site,
                 f"{shown} receive gradients but no optimizer updates them: the optimizer built "
                 "here holds no parameters (its parameter groups are empty), so step() changes "
                 "nothing", fix="check the filter that builds the parameter groups: it kept "
                 "nothing", related=[(steppers[0].site, "optimizer.step() here")],
                 severity="warning")]


def _plain_tensor_attributes(data: HookState, in_opt: set[int],
                             groups: dict[tuple[str, Site | None, str, str], list[str]]) -> None:
    """Learnable tensors kept as plain module attributes (not nn.Parameter) that get gradients
    but are in no optimizer."""
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None or rec.grad_runs == 0:
            continue
        for attr, value in vars(m).items():
            if isinstance(value, Tensor) and not isinstance(value, torch.nn.Parameter) \
                    and value.is_leaf and value.requires_grad and value.grad is not None \
                    and id(value) not in in_opt:
                site = tensor_made_at(type(m), attr) or attribute_site(type(m), attr)
                key = ("learnable-tensor-attribute", site or rec.site,
                       "it is a plain tensor attribute, not an nn.Parameter, so "
                       "model.parameters() does not include it",
                       "wrap it in nn.Parameter(...) (or register_buffer if it is not learnable)")
                groups.setdefault(key, []).append(f"{type(m).__name__}.{attr}")


def _not_optimized_reason(owner: str, stale: int,
                          frozen: list[Site | None]) -> tuple[str, str, str]:
    if owner:
        return ("unregistered-submodule",
                f"the layer is held in the plain container {owner}, which does not register it "
                "as a submodule, so model.parameters() misses it",
                "hold layers in nn.ModuleList / nn.ModuleDict (parameters in nn.ParameterList)")
    if stale:
        return ("model-recreated-after-optimizer",
                f"the optimizer holds {stale} other parameter(s) that never received a gradient:"
                " the model (or this layer) was re-created, copied or replaced after the "
                "optimizer was built", "build the optimizer after the final model exists")
    was_frozen = next((f for f in frozen if f is not None), None)
    if was_frozen is not None:
        return ("unfrozen-after-optimizer",
                f"they were frozen ({src(was_frozen)}) when the optimizer was built and only "
                "unfrozen later, so the optimizer never received them",
                "build the optimizer (or add a param group) after unfreezing")
    return ("parameter-in-no-optimizer", "they were not passed to any optimizer",
            "pass these parameters to the optimizer (or add a param group)")


