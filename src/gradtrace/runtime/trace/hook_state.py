"""What the global hooks record: one optimizer's record, and the module/optimizer bookkeeping of
one session. :mod:`hooks` fills them; the findings read them."""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.module_record import ModuleRecord

Tensor = torch.Tensor


@dataclass
class OptimizerRecord:
    """What happened to one optimizer while tracing."""

    ref: weakref.ref[torch.optim.Optimizer]
    site: Site | None
    steps: int = 0
    rep: tuple[int, int, int, int] | None = None  # (param id, grad id, grad version, backwards)
    rep_last: tuple[int, int, int, int] | None = None  # the same of the last: NOTE [clear of a part]
    partial: tuple[Site | None, str] | None = None  # (the partial clearing, a parameter it left)
    accumulate_site: Site | None = None  # the backward() that added into last step's .grad
    accumulate_step: Site | None = None  # the step() that then applied the sum
    accumulate_clear: Site | None = None  # where its gradients were cleared on an earlier pass
    nonfinite: tuple[str, int, Site | None] | None = None
    before: list[tuple[float, float]] | None = None  # checksums of the parameters with grads
    checks: int = 0  # steps whose effect was checked
    changed: bool = False  # some checked step changed some parameter
    stateful: bool = False  # the optimizer keeps per-parameter state (momentum, Adam moments)
    rebuilt: int = 0  # earlier optimizers that stepped the same parameters (re-created)
    # (where the gradients were cleared, the backward() that made them, the step()): a step
    # that found every gradient of the last backward() already erased
    wiped: tuple[Site, Site | None, Site | None] | None = None
    empty_steps: int = 0  # steps that found no gradient on any of its parameters, and at
    # each (the first 64), ids of a few parameters it does not hold that had gradients then
    graded_elsewhere: list[frozenset[int]] = field(default_factory=list)
    # the last step that found a gradient, the empty steps since, the steps at which none of
    # its parameters required grad, the first closure given to step() (NOTE [idle steps])
    last_graded: int = 0
    graded_backwards: int = 0  # backward() calls made by then
    trailing_empty: int = 0
    graded_others: int = 0  # trailing empty steps seen with other tensors graded
    stale: Any = None  # NOTE [replaced under the optimizer], as seen at its last due empty step
    frozen_steps: int = 0
    closure: Any = None
    pending: bool = False  # a step(closure) that found no gradient before the closure ran
    last_lr: Any = None  # the first group's lr at the last step (NOTE [schedule collapsed])
    lr_changes: int = 0
    schedule_checked: bool = False
    audit: Any = None  # applied.StepAudit (NOTE [one gradient, two steps])
    summed: Any = None  # NOTE [gradients summed outside the optimizer]
    windows: list[int] = field(default_factory=list)  # NOTE [accumulation window off by one]
    aliases: Any = None  # (name, name, site) of NOTE [aliased parameters]
    leak: Any = None  # (backward() line, its calls, window): NOTE [evaluation gradients applied]
    sig: tuple[int, bool] | None = None  # (parameters with a gradient, grad mode) at its last
    # step (NOTE [quiet warm-up])
    # id(grad) -> [grad, its version] of the gradients its last step applied that no backward()
    # has added to since, kept while several optimizers step
    # (NOTE [cleared gradients already used by a step] in loop_order.py)
    applied: dict[int, list[Any]] | None = None


@dataclass
class HookState:
    """Module/optimizer bookkeeping of one session."""

    modules: dict[int, ModuleRecord] = field(default_factory=dict)
    optimizers: dict[int, OptimizerRecord] = field(default_factory=dict)
    # parameters seen with a gradient at a step, by id; the weak reference tells a reused id
    # from the parameter itself (see :meth:`graded`)
    had_grad: dict[int, weakref.ref[Tensor]] = field(default_factory=dict)
    snapshot: list[Any] = field(default_factory=list)
    steps: int = 0
    prune_at: int = 1024
    leak_watch: dict[int, Any] = field(default_factory=dict)  # leaked_step.py
    # id of an optimizer's first parameter -> (that parameter, parameter count, optimizers seen)
    lineage: dict[int, tuple[weakref.ref[Tensor], int, int]] = field(default_factory=dict)
    unobserved: bool = False  # some steps ran without the module hook (NOTE [trace arming])
    step_stack: Any = None  # user frames of the first optimizer.step() call
    replaced: dict[int, Any] = field(default_factory=dict)  # id(new) -> Replaced
    # trained modules run in eval mode since the last step, and the models seen training in
    # eval mode (NOTE [eval-mode training])
    eval_pending: dict[int, ModuleRecord] = field(default_factory=dict)
    eval_trained: list[Any] = field(default_factory=list)
    # (id(container), id(layer)) -> shared_layers.Shared (NOTE [one layer at several positions])
    shared: dict[tuple[int, int], Any] = field(default_factory=dict)
    schedules: list[Any] = field(default_factory=list)  # NOTE [schedule collapsed]
    # id -> opt_state.OptEvent: optimizers loaded, built (NOTE [loaded state thrown away])
    opt_loads: dict[int, Any] = field(default_factory=dict)
    opt_built: dict[int, Any] = field(default_factory=dict)
    twice: Any = None  # applied.Twice: NOTE [one gradient, two steps]
    # id(optimizer) -> per-group lr asked; (record, asked, lr now): see lr_groups.py
    lr_asked: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    lr_erased: list[Any] = field(default_factory=list)
    decay_inverted: list[Any] = field(default_factory=list)  # NOTE [decay groups inverted]
    # id(norm layer) -> TrainEval; line -> (candidate, layer names): NOTE [evaluated in train mode]
    train_evals: dict[int, Any] = field(default_factory=dict)
    drops: Any = None  # eval_dropped.Drops: NOTE [dropout left on in evaluation]
    loaded_drops: dict[int, Any] = field(default_factory=dict)  # NOTE [evaluated as loaded, in train mode]
    frozen_served: dict[int, Any] = field(default_factory=dict)  # NOTE [frozen, then served in train mode]
    # id(extractor) -> (ref, call site, dropout class); dropout layers examined: NOTE [frozen extractor dropping]
    frozen_drops: dict[int, Any] = field(default_factory=dict)
    frozen_drop_seen: dict[int, tuple[int, int]] = field(default_factory=dict)
    train_evals_seen: dict[Site, tuple[Any, list[str]]] = field(default_factory=dict)
    train_eval_step: dict[int, int] = field(default_factory=dict)  # its last grad-off pass
    born_frozen: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # registered frozen
    rows_used: dict[int, list[Any]] = field(default_factory=dict)  # NOTE [decayed rows]
    # the last model input holding NaN, checks stopped, HookState.steps at the last finite
    # gradient check (see NOTE [NaN in the model's input])
    input_nan: Any = None
    input_nan_closed: bool = False
    finite_at: int = 0
    built: dict[int, Any] = field(default_factory=dict)  # NOTE [layer built here]
    # (NOTE [after the DDP wrap]) (DDP ref, builder code); param id -> (ref, site)
    ddp_wraps: list[Any] = field(default_factory=list)
    after_wrap: dict[int, Any] = field(default_factory=dict)
    eval_calls: int = 0  # module calls in eval mode with grad on, and in train mode
    train_calls: int = 0
    sig_changed: bool = False  # an optimizer's step signature changed (NOTE [quiet warm-up])
    # id(module) -> (module ref, its tensor inputs' refs): NOTE [hook input needs no grad]
    hooked_inputs: dict[int, Any] = field(default_factory=dict)

    def applied_unchanged(self, g: Any) -> bool:
        """Whether gradient ``g`` is the very tensor an optimizer's last step applied, and no
        backward() added to it since: NOTE [cleared gradients already used by a step]."""
        for rec in list(self.optimizers.values()):
            e = rec.applied.get(id(g)) if rec.applied else None
            if e is not None and e[0]() is g:
                return True
        return False

    def applied_around_backward(self, start: bool) -> None:
        """At a backward()'s start, the versions of the applied gradients (a clip or a user's
        scaling since the step changes them too); at its end, those it changed are no longer
        the step's: the backward() added to them."""
        for rec in list(self.optimizers.values()):
            if not rec.applied:
                continue
            for k, e in list(rec.applied.items()):
                g = e[0]()
                if g is None or not start and g._version != e[1]:
                    del rec.applied[k]
                elif start:
                    e[1] = g._version

    def graded(self, p: Tensor) -> bool:
        """Whether this very parameter had a gradient at some step."""
        r = self.had_grad.get(id(p))
        return r is not None and r() is p

    def note_backward_grads(self) -> None:
        """# NOTE [gradient cleared before the step]
        After one of the first backward() calls: the optimizers' parameters that hold a
        gradient had one, even if the program clears it before the step (DINO's
        ``cancel_last_layer_gradients`` sets ``p.grad = None`` during the first epoch, on
        purpose): such a parameter is not one that "never received a gradient"."""
        for rec in list(self.optimizers.values()):
            opt = rec.ref()
            if opt is None:
                continue
            for g in opt.param_groups:
                for p in g["params"]:
                    r = self.had_grad.get(id(p))
                    if p.grad is not None and (r is None or r() is not p):
                        self.had_grad[id(p)] = weakref.ref(p)  # (an id a dead tensor had)
