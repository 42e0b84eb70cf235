"""Global module and optimizer hooks: which modules ran, which optimizers stepped, and how.
Installed with torch's public registration functions (each returns a handle); removed on exit.
Modules and optimizers are held weakly."""
from __future__ import annotations

import logging
import math
import sys
import weakref
from typing import Any, Callable

import torch

from gradtrace.env import strict
from gradtrace.runtime.frames import Site, raw_site
from gradtrace.runtime.trace.attribute_site import attribute_site  # noqa: F401 - re-exported
from gradtrace.runtime.trace.after_wrap import note_wrap_registration
from gradtrace.runtime.trace.applied import after_step, before_step
from gradtrace.runtime.trace.clip_target import on_step
from gradtrace.runtime.trace.extra_step import watch_clears
from gradtrace.runtime.trace.partial_clear import check_partial
from gradtrace.runtime.trace.eval_in_train import DROPOUT, note_train_eval, settle, train_run
from gradtrace.runtime.trace.graph_walk import note_called_with
from gradtrace.runtime.trace.hook_input import note_hooked_input
from gradtrace.runtime.trace.first_break import note_step
from gradtrace.runtime.trace.input_nan import confirm, note_input
from gradtrace.runtime.trace.layer_sites import note_built
from gradtrace.runtime.trace.param_names import param_name  # noqa: F401 - re-exported
from gradtrace.runtime.trace.loaded_in_train import note_first_nograd
from gradtrace.runtime.trace.leaked_step import watch_call
from gradtrace.runtime.trace.loop_order import step_window
from gradtrace.runtime.trace.lr_groups import check_first_step
from gradtrace.runtime.trace.summed_outside import note_summed
from gradtrace.runtime.trace.opt_facts import (_all_zero, _applied, _checksums, _due,
                                               _graded_other, _lineage, _wiped, frozen_stats)
from gradtrace.runtime.trace.module_record import ModuleRecord, _plain_params, holds
from gradtrace.runtime.trace.modes import check_eval, user_stack as _user_stack
from gradtrace.runtime.trace.probe_stats import train_call
from gradtrace.runtime.trace.row_decay import note_rows
from gradtrace.runtime.trace.replaced import note_replaced, note_rewrap, prune_replaced
from gradtrace.runtime.trace.schedule import watch_lr
from gradtrace.runtime.trace.shared_layers import note_shared
from gradtrace.runtime.trace.state import TraceState
from gradtrace.runtime.trace.windows import note_window
from gradtrace.runtime.trace.random_buffer import note_buffer
from gradtrace.runtime.trace.default_freeze import note_born_frozen
from gradtrace.runtime.trace.state_alias import check_state_alias
from gradtrace.runtime.trace.step_nan import hunt_ends, hunt_starts
from gradtrace.runtime.trace.never_stepped import note_unstepped
from gradtrace.runtime.trace.hook_state import HookState, OptimizerRecord

Tensor = torch.Tensor
_grad_enabled = torch.is_grad_enabled
_NormBase = torch.nn.modules.batchnorm._NormBase
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


class Hooks:
    """Installs the global hooks into ``state``; :meth:`remove` takes them all out."""

    def __init__(self, state: TraceState, mode: Any = None,
                 snapshot: Callable[[TraceState, HookState], list[Any]] | None = None) -> None:
        self.state = state
        self.mode = mode
        # parameter findings from what was seen so far (the Tracer passes
        # :func:`gradtrace.runtime.trace.silent.parameter_findings`; hooks never import it)
        self.snapshot = snapshot
        self.data = HookState()
        self.handles: list[Any] = []
        self.arming: Any = None  # NOTE [trace arming]
        self._module_handle: Any = None
        # global forward hooks that act on armed steps only: in and out with the pre-hook
        self._armed_hooks: list[Any] = []
        self._armed_handles: list[Any] = []
        self._new_optimizer = False

    def install(self) -> None:
        from torch.optim import optimizer as om

        from torch.nn.modules import module as mm

        self.module_hook(True)
        self.handles.append(om.register_optimizer_step_pre_hook(_safe(self._step_pre)))
        self.handles.append(mm.register_module_module_registration_hook(_safe(self._registered)))
        self.handles.append(mm.register_module_parameter_registration_hook(
            _safe(self._registered)))
        self.handles.append(om.register_optimizer_step_post_hook(_safe(self._step_post)))
        # buffers registered: NOTE [random weight kept as a buffer]
        self.handles.append(mm.register_module_buffer_registration_hook(
            _safe(lambda _m, _n, v: note_buffer(self.state, self._site(), v))))

    def module_hook(self, on: bool, final: bool = False) -> None:
        """Put the global forward pre-hook in or take it out (out between unarmed steps:
        a global module hook sends every module call down torch's slow path)."""
        from torch.nn.modules import module as mm

        if on and self._module_handle is None:
            self._module_handle = mm.register_module_forward_pre_hook(_safe(self._pre))
            self._armed_handles = [mm.register_module_forward_hook(h) for h in self._armed_hooks]
        elif not on and self._module_handle is not None:
            self._module_handle.remove()
            self._module_handle = None
            while self._armed_handles:
                self._armed_handles.pop().remove()
            self.data.unobserved = self.data.unobserved or not final

    def armed_forward_hook(self, hook: Any) -> None:
        """Add a global forward hook that is in only while the tracer is armed, as the
        forward pre-hook (NOTE [trace arming]: any global module hook left in between armed
        steps sends every module call down torch's slow path: +7% of an unarmed REINFORCE step)."""
        from torch.nn.modules import module as mm

        self._armed_hooks.append(hook)
        if self._module_handle is not None:
            self._armed_handles.append(mm.register_module_forward_hook(hook))

    def remove(self) -> None:
        self.module_hook(False, final=True)
        while self.handles:
            self.handles.pop().remove()

    # -- modules -------------------------------------------------------------------------------
    def _pre(self, module: torch.nn.Module, args: Any) -> None:
        self.state.in_step = False  # a forward inside step(closure) is user code again
        rec = self.data.modules.get(id(module))
        if rec is None or rec.ref() is not module:
            if len(self.data.modules) >= self.data.prune_at:
                self._prune()
            raw = raw_site()
            rec = self.data.modules[id(module)] = ModuleRecord(
                weakref.ref(module), None if raw is None else self.state.site(raw))
        if getattr(module, "_backward_hooks", None):  # NOTE [hook input needs no grad]
            note_hooked_input(self.data, module, args)
        if _grad_enabled():
            note_called_with(args)  # NOTE [module input stamp]
            if not self.data.input_nan_closed:  # NOTE [NaN in the model's input]
                note_input(self.data, module, args)
            if id(module) in self.data.leak_watch:  # NOTE [another optimizer's gradient applied again]
                raw = raw_site()
                watch_call(self.state, self.data, module, raw and self.state.site(raw))
            rec.grad_runs += 1
            if isinstance(module, torch.nn.Embedding):
                note_rows(self.data, module, args)  # NOTE [decayed rows]
            if rec.grad_runs == 1 and module._parameters:  # NOTE [copied into]
                with torch._C.DisableTorchFunction():  # not the program's `.data`/detach
                    rec.start = [p.detach().sum(dtype=torch.float64)
                                 for p in _plain_params(module)]
            if module.training:  # NOTE [eval-mode training]
                rec.trained = True
                # layers (a loss module stays in train): NOTE [evaluation gradients applied]
                self.data.train_calls += bool(module._parameters)
                if not rec.stats_frozen and isinstance(module, _NormBase):
                    rec.stats_frozen = frozen_stats(module)  # NOTE [moving statistics]
                    if rec.stats_frozen:  # NOTE [probe statistics]
                        rec.train_site = train_call(sys._getframe(1), module)
                if rec.off is not None:
                    rec.off = None
                if id(module) in self.data.train_evals or isinstance(module, DROPOUT):
                    train_run(self, module, args)  # NOTE [evaluated in train mode] (and dropout)
            else:
                rec.eval_runs += 1  # NOTE [eval is no freeze]
                self.data.eval_calls += 1  # NOTE [evaluation gradients applied]
                if not rec.mode_verdict:  # untrained: NOTE [left in eval beside a trained model]
                    if rec.off is None:
                        rec.off = _user_stack()
                    self.data.eval_pending[id(rec)] = rec
        else:
            if rec.trained and rec.off is None and not module.training:
                rec.off = _user_stack()
            elif rec.trained and module.training and isinstance(module, _NormBase):
                note_train_eval(self.data, self.state, module, sys._getframe(1))
            rec.nograd_runs += 1
            if rec.nograd_runs == 1:
                from gradtrace.runtime.frames import internal_names

                from gradtrace.runtime.trace.offstack import off_switch
                from gradtrace.runtime.trace.shared_block import block_statement

                # the switch around this run (NOTE [grad off on the stack]), else the last one
                rec.nograd_site = off_switch(sys._getframe(1)) or self.state.grad_off
                rec.nograd_stmt = block_statement(rec.nograd_site, start=1)
                rec.in_checkpoint = any("checkpoint" in n.lower() or n == "CheckpointFunction"
                                        for n in internal_names(1, limit=40))
                note_first_nograd(self.data, self.state, module)  # NOTE [evaluated as loaded, in train mode]

    def _registered(self, module: torch.nn.Module, name: str, value: Any) -> None:
        """``module.<name> = value`` (a submodule or a Parameter): when it replaces another
        object, remember where (NOTE [replaced after the optimizer] in replaced.py)."""
        d = self.data
        note_wrap_registration(self.state, d, module, name, value)  # NOTE [after the DDP wrap]
        if value is None or len(d.replaced) >= 4096 and not prune_replaced(d):
            return
        if isinstance(value, torch.nn.Module):
            note_shared(d.shared, module, name, value, self._site)
            note_built(d.built, module, name, value, self._site)  # NOTE [layer built here]
        param = isinstance(value, torch.nn.Parameter)
        if param and not value.requires_grad and len(d.born_frozen) < 256:
            # a Parameter made with requires_grad=False (NOTE [registered frozen])
            note_born_frozen(self.state, d.born_frozen, value, self._site())
        table = module.__dict__.get("_parameters" if param else "_modules")
        old = table.get(name) if table is not None else None
        lazy = old is None and not d.optimizers and _in_forward()  # NOTE [built lazily in forward]
        if old is not None and old is not value or old is None and d.optimizers or lazy:
            # a replacement, or a new one after an optimizer exists (built in forward)
            note_replaced(d, module, value, lazy)
            if param and _grad_enabled():  # NOTE [rewrapped parameter]
                note_rewrap(self.state, value)

    def _prune(self) -> None:
        """Forget modules that died (e.g. an nn.ReLU() built inside forward on every call)."""
        d = self.data
        d.modules = {k: r for k, r in d.modules.items() if r.ref() is not None}
        d.prune_at = max(1024, 2 * len(d.modules))

    # -- optimizers ----------------------------------------------------------------------------
    def _step_pre(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        closure = (args[1] if len(args) > 1 else kwargs.get("closure")) is not None
        if self.arming is not None:  # NOTE [trace arming]: the mode is off during the step
            self.arming.step_start(closure, not closure and hunt_starts(self.state, opt))
        d, st = self.data, self.state
        st.closure_steps = st.closure_steps or closure  # NOTE [discarded gradients]
        if closure and st.closure_sum is None:  # NOTE [closure evaluations summed]
            from gradtrace.runtime.trace.closure_sum import step_starts
            step_starts(st, opt, args[1] if len(args) > 1 else kwargs.get("closure"),
                        self._site)
        rec = d.optimizers.get(id(opt))
        new = rec is None or rec.ref() is not opt
        # the step's line is read (a frame walk) only on the steps that may use it
        site = self._site() if new or d.eval_pending or st.wiped_at is not None \
            or _due(rec.steps + 1) else None  # type: ignore[union-attr]
        if new:
            rec = d.optimizers[id(opt)] = OptimizerRecord(weakref.ref(opt), site)
            if d.step_stack is None:
                d.step_stack = _user_stack()
            rec.rebuilt = _lineage(d, opt)
            self._new_optimizer = True
            check_first_step(d, rec, opt)  # lr_groups.py, decay_groups.py
            note_summed(d, st, rec, opt)  # summed_outside.py
        assert rec is not None
        rec.steps += 1
        check_state_alias(self.state, opt, rec.steps)  # NOTE [optimizer state holding the gradient]
        note_window(st, rec)
        if not rec.schedule_checked:
            watch_lr(rec, opt, d)
        st.in_step = True
        if d.eval_pending:
            check_eval(d, opt, d.steps, site)
        if st.clipped is not None:  # NOTE [clip of parameters no step uses]
            on_step(st, opt, closure, lambda: site or self._site(), d.optimizers.values())
        if d.train_evals or d.drops:
            settle(d, st, step=True)  # NOTE [evaluated in train mode] (and dropout)
        grads: list[Tensor] = []
        rep = None
        had, keep = d.had_grad, grads.append  # (per parameter, every step: names bound once)
        lp = lg = None
        for group in opt.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is not None:
                    r = had.get(id(p))
                    if r is None or r() is not p:
                        had[id(p)] = weakref.ref(p)
                    keep(g)
                    lp, lg = p, g
                    if rep is None and not g.is_sparse and not g.is_inference():
                        rep = (id(p), id(g), g._version, st.backward_count)
        last = None if lg is None or lg.is_sparse or lg.is_inference() else (
            id(lp), id(lg), lg._version, st.backward_count)
        sig = (len(grads), _grad_enabled())  # NOTE [quiet warm-up]
        if rec.sig != sig:
            d.sig_changed, rec.sig = d.sig_changed or rec.sig is not None, sig
        self._check_accumulate(rec, rep, site)
        if rec.rep_last is not None:  # NOTE [clear of a part]
            check_partial(st, rec, rep, last, lambda: site or self._site(), opt,
                          lambda p: param_name(d, p))
        step_window(st, rec)  # NOTE [another optimizer's gradient applied again]
        if st.wiped_at is not None and rec.wiped is None and _wiped(opt, st.wiped_ids) \
                and _all_zero(grads):
            rec.wiped = (st.wiped_at, st.backward_sites[-1] if st.backward_sites else None,
                         site)
        if grads:
            rec.last_graded, rec.trailing_empty, rec.graded_others = rec.steps, 0, 0
            rec.graded_backwards = st.backward_count
        elif rec.wiped is None:
            if not any(p.requires_grad for g in opt.param_groups for p in g["params"]):
                rec.frozen_steps += 1
            elif closure:  # the closure's backward() runs inside step(): decided after it
                rec.pending = True
                if rec.closure is None:
                    fn = args[1] if len(args) > 1 else kwargs.get("closure")
                    rec.closure = getattr(fn, "__code__", None)
            else:
                self._empty(rec, opt)
        watch_clears(st, rec.rep, rep)  # NOTE [clear on some passes only]
        watch_clears(st, rec.rep_last, last)
        rec.rep, rec.rep_last = rep, last
        if not rec.changed and _due(rec.steps) and grads:
            rec.before = _checksums(opt)
        if _due(rec.steps) and grads:
            note_unstepped(d, st, rec)  # NOTE [optimizer cleared, never stepped]
            busy = self.mode is not None and self.mode.busy
            if self.mode is not None:
                self.mode.busy = True
            try:
                before_step(d, rec, opt, param_name)  # NOTE [one gradient, two steps]
                if rec.nonfinite is None:
                    self._check_finite(opt, rec, grads, site)
            finally:
                if self.mode is not None:
                    self.mode.busy = busy

    def _empty(self, rec: OptimizerRecord, opt: torch.optim.Optimizer) -> None:
        rec.empty_steps += 1
        rec.trailing_empty += 1
        n = rec.trailing_empty
        # at 2, 4, 8... empty steps: NOTE [replaced under the optimizer]
        due = rec.last_graded and n >= 2 and not n & (n - 1)
        if len(rec.graded_elsewhere) < 64 or due:
            other = _graded_other(self.data, opt)
            rec.graded_others += bool(other)
            if len(rec.graded_elsewhere) < 64:
                rec.graded_elsewhere.append(other)
        if due:  # the optimizer may be gone when the run ends (a local of a `fit()`)
            from gradtrace.runtime.trace.stale_steps import stale_now

            rec.stale = stale_now(self.state, self.data, rec)

    def _site(self) -> Site | None:
        """The user's line that called the hook running now."""
        raw = raw_site()
        return None if raw is None else self.state.site(raw)

    def _check_accumulate(self, rec: OptimizerRecord, rep: Any, site: Site | None) -> None:
        old, st = rec.rep, self.state
        if old is None or rep is None or rec.accumulate_site is not None or st.zero_seen:
            return
        if old[0] == rep[0] and old[1] == rep[1] and rep[3] > old[3] and rep[2] > old[2]:
            # the cause is where the stale .grad was added to (zero_grad belongs before it)
            site = site or self._site()
            rec.accumulate_site = st.backward_sites[-1] if st.backward_sites else site
            rec.accumulate_step = site
            rec.accumulate_clear = st.clear_sites.get(rep[0])

    def _check_finite(self, opt: torch.optim.Optimizer, rec: OptimizerRecord,
                      grads: list[Tensor], site: Site | None) -> None:
        with torch.no_grad():
            try:
                norms = torch._foreach_norm([g for g in grads if not g.is_sparse])
                total = float(torch.stack(norms).sum())
            except (RuntimeError, TypeError, AttributeError):
                return
        if math.isfinite(total):
            self.data.finite_at = self.data.steps  # NOTE [NaN in the model's input]
            return
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is not None and not bool(torch.isfinite(p.grad).all()):
                    rec.nonfinite = (param_name(self.data, p), rec.steps, site)
                    self.state.nan_hunt_next = True  # NOTE [NaN origin]
                    confirm(self.data)  # NOTE [NaN in the model's input]
                    return

    def _step_post(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        rec = self.data.optimizers.get(id(opt))
        hunt_ends(self.state, opt)  # NOTE [NaN made by a step]
        if self.state.closure_watch is not None:
            from gradtrace.runtime.trace.closure_sum import step_ends
            step_ends(self.state)
        if rec is not None and rec.pending:
            rec.pending = False
            graded = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
            for p in graded:  # the closure's backward() ran inside step(): they had gradients
                r = self.data.had_grad.get(id(p))
                if r is None or r() is not p:
                    self.data.had_grad[id(p)] = weakref.ref(p)
            if graded:
                rec.last_graded, rec.trailing_empty, rec.graded_others = rec.steps, 0, 0
                rec.graded_backwards = self.state.backward_count
            else:
                self._empty(rec, opt)
        if rec is not None and rec.steps == 1:
            rec.stateful = bool(opt.state)
        if rec is not None and len(self.data.optimizers) > 1:
            rec.applied = _applied(opt)  # NOTE [cleared gradients already used by a step]
        if rec is not None and rec.before is not None:
            rec.checks += 1
            rec.changed = _checksums(opt) != rec.before
            rec.before = None
        if rec is not None and rec.audit is not None:
            after_step(self.data, rec, param_name)  # NOTE [decay without a gradient]
        self.state.stepped(rec.site if rec is not None else None, opt, raw_site())
        self.state.zero_seen = False
        self.state.fresh_grads = False
        self.state.clip_at = None
        self.state.clear_wiped()
        self.state.in_step = False
        self.state.step_seq = self.mode.seq if self.mode is not None else 0
        note_step(self.state, self.state.step_seq, rec.site if rec is not None else None, opt)
        self.state.steps_ended += 1
        self.data.steps += 1
        if _due(self.data.steps):
            self._snapshot()
        if self.arming is not None:
            new, self._new_optimizer = self._new_optimizer, False
            anomaly = rec is not None and rec.nonfinite is not None \
                and rec.nonfinite[1] == rec.steps
            self.arming.step_end(new, anomaly)

    def _snapshot(self) -> None:
        """Parameter findings now, in case the model dies before tracing ends."""
        if self.snapshot is None:
            return
        busy = self.mode is not None and self.mode.busy
        if self.mode is not None:
            self.mode.busy = True
        try:
            self.data.snapshot = self.snapshot(self.state, self.data)
        except Exception:  # a failed snapshot must not disturb training
            if strict():
                raise
        finally:
            if self.mode is not None:
                self.mode.busy = busy


def _safe(hook: Any) -> Any:
    """Wrap a hook so a bug of ours never reaches the user's program (strict mode raises).

    Inside a region ``torch.compile`` is tracing the hook does nothing, so it adds no graph
    break (the module calls there are the compiled model's, already seen outside)."""
    def wrapper(*args: Any) -> None:
        if _is_compiling():
            return None
        try:
            hook(*args)
        except Exception:
            if strict():
                raise
            logging.getLogger(__name__).debug("gradtrace: hook failed", exc_info=True)
        return None

    return wrapper


def unregistered_owner(data: HookState, module: torch.nn.Module) -> tuple[str, Site | None]:
    """``("Parent.attr", where it is assigned)`` if ``module`` sits in a plain list/tuple/dict
    attribute of a module that ran and is not registered as its submodule, else ``("", None)``."""
    for rec in list(data.modules.values()):
        parent = rec.ref()
        if parent is None or parent is module:
            continue
        for attr, value in vars(parent).items():
            items = value.values() if isinstance(value, dict) else value \
                if isinstance(value, (list, tuple)) else ()
            if any(holds(child, module) for child in items) \
                    and not any(m is module for m in parent.modules()):
                return f"{type(parent).__name__}.{attr}", attribute_site(type(parent), attr)
    return "", None


def _in_forward() -> bool:
    """Whether the user's code running now is a ``forward`` (a registration read once)."""
    from gradtrace.runtime.frames import user_frame

    f = user_frame(2)
    return f is not None and f.f_code.co_name == "forward"
