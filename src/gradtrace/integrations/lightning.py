"""gradtrace as a Lightning callback: one line in ``Trainer(callbacks=[...])``.

Example::

    from gradtrace.integrations.lightning import GradtraceCallback

    cb = GradtraceCallback()
    trainer = lightning.pytorch.Trainer(max_epochs=3, callbacks=[cb])
    trainer.fit(model, loader)
    for f in cb.findings:          # most likely root cause first
        print(f.path, f.line, f.message)

Works with ``lightning.pytorch`` and with the older ``pytorch_lightning`` package (the callback
subclasses the ``Callback`` of each one already imported, else of whichever is installed).

During the first optimizer steps ``gradtrace.trace()`` is armed: every trainable parameter
that got no gradient is printed once, with the reason and the user's line, and kept in
``findings`` (``fail_fast=True`` raises :class:`NoGradientError` at the first step instead).
Over the whole run ``gradtrace.watch`` records the gradient flow (a step of its report is one
backward pass) and the callback logs, through ``trainer.loggers`` (``log_metrics``), at the
trainer's ``log_every_n_steps`` (or every ``every`` optimizer steps):

- ``gradtrace/grad_norm_total``: the 2-norm of all gradients together;
- ``gradtrace/grad_norm/<layer>``: the same per layer group (``encoder.layer.3``);
- ``gradtrace/nonfinite_grads`` (and ``/<layer>`` where not 0): NaN/Inf entries;
- ``gradtrace/update_ratio/<layer>``: ``||w_after - w_before|| / ||w_before||`` of the step.

The gradients are those of ``on_before_optimizer_step``: unscaled under AMP and *before*
gradient clipping (the norm clipping acts on), once per optimizer step under gradient
accumulation. The HTML report goes to the first logger's ``log_dir`` (else
``default_root_dir``) as ``gradtrace.html``, written by global rank 0.
"""
from __future__ import annotations

import sys
from typing import Any

from gradtrace.integrations._common import CallbackCore, NoGradientError

__all__ = ["GradtraceCallback", "NoGradientError"]


def _callback_bases() -> tuple[type, ...]:
    """``Callback`` of each Lightning package already imported, else of the installed one."""
    bases = []
    for mod in ("lightning.pytorch", "pytorch_lightning"):
        if mod in sys.modules:
            bases.append(sys.modules[mod].Callback)
    if bases:
        return tuple(dict.fromkeys(bases))
    try:
        from lightning.pytorch import Callback
    except ImportError:
        try:
            from pytorch_lightning import Callback
        except ImportError as exc:
            raise ImportError("gradtrace.integrations.lightning needs Lightning: pip install "
                              "lightning (or pytorch_lightning)") from exc
    return (Callback,)


def _step(trainer: Any) -> int:
    """The step Lightning's own loggers use now (optimizer steps taken so far)."""
    loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
    return int(getattr(loop, "_batches_that_stepped", trainer.global_step))


def _log_dir(trainer: Any) -> str | None:
    """The first logger's directory, else the trainer's root (no collective, unlike
    ``trainer.log_dir``, so it is safe on one rank and after an exception)."""
    for lg in getattr(trainer, "loggers", None) or ():
        d = getattr(lg, "log_dir", None)
        if d:
            return str(d)
    return getattr(trainer, "default_root_dir", None)


def _ranks(trainer: Any) -> tuple[Any, Any]:
    """(RankInfo, environment naming the ranks' meeting directory) under DDP, else Nones.

    Lightning's launcher sets no ``RANK`` and makes rank 0 the parent of the other ranks, so
    the rank comes from the trainer and a run key broadcast by rank 0 names the directory
    (in ``GRADTRACE_DDP_DIR``, else the temp dir: ranks on other nodes need a shared one)."""
    if getattr(trainer, "world_size", 1) <= 1:
        return None, None
    import os
    import tempfile
    import uuid

    from gradtrace.env import DDP_DIR as ENV_DIR
    from gradtrace.runtime.distributed.info import RankInfo

    key = trainer.strategy.broadcast(f"lightning-{uuid.uuid4().hex[:16]}", src=0)
    environ = {**os.environ, "TORCHELASTIC_RUN_ID": str(key),
               ENV_DIR: os.environ.get(ENV_DIR) or tempfile.gettempdir()}
    return RankInfo(trainer.global_rank, trainer.world_size, trainer.local_rank), environ


class GradtraceCallback(*_callback_bases(), CallbackCore):  # type: ignore[misc]
    """Gradient diagnosis for a Lightning ``Trainer``; see the module docstring.

    ``watch``: log the gradient flow and keep the watch report (False: only the check of
    the first optimizer steps). ``every``: log every N optimizer steps (None: the trainer's
    ``log_every_n_steps``). ``report``: path of the HTML report (None: the log dir, False:
    none). ``fail_fast``: raise at the first optimizer step if a trainable parameter got no
    gradient.
    """

    def __init__(self, watch: bool = True, every: int | None = None, report: Any = None,
                 fail_fast: bool = False) -> None:
        super().__init__()
        self._configure(watch, every, report, fail_fast)

    # -- Lightning hooks ---------------------------------------------------------------------
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        s = self._new_session("Lightning")

        def watch() -> Any:
            import gradtrace

            return gradtrace.watch(pl_module)
        ranks, environ = _ranks(trainer)
        s.guard(lambda: s.start(pl_module, watch, ranks, environ))

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        s = self._session
        if s is None or s.finished:
            return
        step = _step(trainer)
        s.guard(lambda: s.before_step(step, s.due(step, trainer.log_every_n_steps)))

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        s = self._session
        if s is None or s.finished:
            return
        got = s.guard(s.after_step)
        if got:
            step, metrics = got
            for lg in trainer.loggers:
                lg.log_metrics(metrics, step=step)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._end(trainer, None)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._end(trainer, exception)

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._end(trainer, None)

    # -- end of a run ------------------------------------------------------------------------
    def _end(self, trainer: Any, exc: BaseException | None) -> None:
        self._finish_run(exc, getattr(trainer, "is_global_zero", True), _log_dir(trainer))
