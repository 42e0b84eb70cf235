"""gradtrace as a Hugging Face ``Trainer`` callback: one line in ``callbacks=[...]``.

Example::

    from gradtrace.integrations.transformers import GradtraceCallback

    cb = GradtraceCallback()
    trainer = transformers.Trainer(model, args, train_dataset=ds, callbacks=[cb])
    trainer.train()
    for f in cb.findings:          # most likely root cause first
        print(f.path, f.line, f.message)

During the first optimizer steps ``gradtrace.trace()`` is armed: every trainable parameter
that got no gradient is printed once with the reason and the user's line, and kept in
``findings`` (``fail_fast=True`` raises :class:`NoGradientError` at the first step instead).
``gradtrace.watch(model, optimizer)`` records the gradient flow of the whole run, and the
callback logs through ``Trainer.log`` (so ``state.log_history`` and every ``report_to``
integration get them), at the Trainer's ``logging_steps`` (or every ``every`` optimizer
steps): ``gradtrace/grad_norm_total``, ``gradtrace/grad_norm/<layer>``,
``gradtrace/nonfinite_grads`` and ``gradtrace/update_ratio/<layer>`` (see the README).

The gradients are those of ``on_pre_optimizer_step``, i.e. *after* gradient clipping (the
Trainer's own ``grad_norm`` log is the norm before clipping); on transformers without that
event, a step pre-hook on the torch optimizer gives the same point. Once per optimizer step
under gradient accumulation. The HTML report goes to ``args.output_dir/gradtrace.html``,
written by the main process.

Limit: the Trainer tells callbacks nothing when training raises. If it raises during the
first optimizer steps (while the tracer is armed), the tracer's hooks stay until this callback
starts its next run; run the script under ``gradtrace run`` to diagnose crashes.
"""
from __future__ import annotations

import sys
from typing import Any

from transformers import TrainerCallback

from gradtrace.integrations._common import LOG, CallbackCore, NoGradientError

__all__ = ["GradtraceCallback", "NoGradientError"]

# transformers >= 4.45 calls on_pre_optimizer_step after clipping, right before the step
HAS_PRE_STEP = hasattr(TrainerCallback, "on_pre_optimizer_step")


def _find_trainer(limit: int = 12) -> Any:
    """The ``Trainer`` whose training loop is calling us (callbacks get no reference to it)."""
    from transformers import Trainer

    try:
        f: Any = sys._getframe(2)
    except ValueError:
        return None
    while f is not None and limit > 0:
        obj = f.f_locals.get("self")
        if isinstance(obj, Trainer):
            return obj
        f, limit = f.f_back, limit - 1
    return None


def _torch_optimizer(opt: Any) -> Any:
    """The torch optimizer inside accelerate's ``AcceleratedOptimizer`` wrapper(s)."""
    import torch

    while isinstance(getattr(opt, "optimizer", None), torch.optim.Optimizer):
        opt = opt.optimizer
    return opt if isinstance(opt, torch.optim.Optimizer) else None


def _interval(args: Any, state: Any) -> int | None:
    """The Trainer's own logging interval in steps (None: it does not log by steps)."""
    strategy = getattr(args.logging_strategy, "value", args.logging_strategy)
    if strategy != "steps":
        return None
    n = getattr(state, "logging_steps", None) or args.logging_steps
    return int(n) if n and n >= 1 else None


class GradtraceCallback(TrainerCallback, CallbackCore):
    """Gradient diagnosis for a Hugging Face ``Trainer``; see the module docstring.

    ``watch``: log the gradient flow and keep the watch report (False: only the check of
    the first optimizer steps). ``every``: log every N optimizer steps (None: the Trainer's
    ``logging_steps``). ``report``: path of the HTML report (None: ``output_dir``, False:
    none). ``fail_fast``: raise at the first optimizer step if a trainable parameter got no
    gradient.
    """

    def __init__(self, watch: bool = True, every: int | None = None, report: Any = None,
                 fail_fast: bool = False) -> None:
        self._configure(watch, every, report, fail_fast)
        self._trainer: Any = None
        self._hook: Any = None

    # -- Trainer events ----------------------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       optimizer: Any = None, **kwargs: Any) -> None:
        self._end(args, state, None)  # a run that raised never reached on_train_end
        s = self._new_session("transformers")
        self._trainer = _find_trainer()
        inner = _torch_optimizer(optimizer)

        def watch() -> Any:
            import gradtrace

            return gradtrace.watch(model, inner)
        from gradtrace.runtime.distributed.info import rank_info

        ranks = rank_info()  # torchrun / accelerate launch set RANK and WORLD_SIZE
        s.guard(lambda: s.start(model, watch, ranks))
        if not HAS_PRE_STEP and inner is not None and s.enabled:
            self._hook = inner.register_step_pre_hook(lambda o, a, k: self._before(args, state))

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if HAS_PRE_STEP:
            self._before(args, state)

    def _before(self, args: Any, state: Any) -> None:
        s = self._session
        if s is None or s.finished:
            return
        idx = state.global_step  # 0-based here; HF logs the step as global_step + 1
        log = s.due(idx, _interval(args, state)) or (
            idx == 0 and self.every is None and self.watch and bool(args.logging_first_step))
        try:
            s.guard(lambda: s.before_step(idx + 1, log))
        except NoGradientError:
            self._end(args, state, None)  # findings, report; nothing else will tell us
            raise

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        s = self._session
        if s is None or s.finished:
            return
        got = s.guard(s.after_step)
        if not got:
            return
        tr = self._trainer
        if tr is not None:
            # Trainer.log's on_log clears control.should_log, which would cancel the
            # Trainer's own log of this step (loss, grad_norm): keep the flag as it was
            due = control.should_log
            tr.log(dict(got[1]))
            control.should_log = due
            tr.control.should_log = due
        elif len(s.logged) == 1:
            LOG.warning("gradtrace: the Trainer was not found; the gradient-flow metrics are "
                        "kept in callback.logged only")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._end(args, state, None)

    # -- end of a run ------------------------------------------------------------------------
    def _remove_hook(self) -> None:
        h, self._hook = self._hook, None
        if h is not None:
            h.remove()

    def _end(self, args: Any, state: Any, exc: BaseException | None) -> None:
        self._remove_hook()
        self._trainer = None
        self._finish_run(exc, getattr(state, "is_world_process_zero", True),
                         getattr(args, "output_dir", None))
