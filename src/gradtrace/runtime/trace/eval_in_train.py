"""An evaluation pass run in train mode: batch-norm statistics learn from the evaluated data.

# NOTE [evaluated in train mode]
A validation or test loop (``with torch.no_grad(): out = model(x)``) over a model that trained
and was never put in ``eval()``: every normalisation layer still normalises with the batch's
own statistics and writes them into ``running_mean``/``running_var``, so the figures depend on
the batch and the evaluated data moves the statistics used later (VAAL's ``test``, the 3D U-Net
trainer's ``validate``). The global forward pre-hook (armed steps, NOTE [trace arming]) sees a
norm layer that keeps running statistics run in train mode with grad off. It is a candidate when

- the layer trained: it ran with grad on in train mode before and one of its parameters had a
  gradient at an optimizer step (a teacher or an EMA copy that only ever runs under no_grad is
  not evaluated, it is used);
- its statistics are live: ``momentum`` is set (a cumulative re-estimation, ``momentum=None`` as
  ``swa_utils.update_bn`` sets it, is on purpose) and ``num_batches_tracked`` is not 0 (statistics
  reset for a re-estimation, AdaBN-style, are on purpose too);
- a grad-off switch of user code is on the stack (``off_switch``'s walk): the line reported is
  the running line of the frame holding that switch, the call that evaluates the model; or,
  when the model is called by an evaluation helper that the caller runs inside its switch
  (``with torch.no_grad(): test(model)``), the model's call in that helper (a helper the
  model also trained through, a shared ``_forward_pass``, is skipped).

- at least two optimizer steps ran since the layer's previous grad-off pass (or the start): an
  evaluation comes between stretches of training (an epoch, the end), while grad-off passes at
  every step collect data (an RL rollout) or compute targets.

- when a function run under the switch (a shared ``make_train(phase)`` helper) calls
  ``<model>.train()`` before it runs the model (``probe_stats.train_call`` below the switch's
  frame), that call is the line named: the helper puts the model back in train mode for every
  phase.

- the switch's line is not the model's call alone, its output dropped (``model(x)`` as a
  statement): a pass that only refreshes the running statistics (schedule-free's recipe runs
  training batches under ``no_grad`` in train mode before validating) reads no output.

A candidate is settled at the layer's next forward with grad on, at the next optimizer step, or
at the end. It is reported when it ran at least twice (a loop over batches: one grad-off forward
per step is a pseudo-label, a GAN's sample or a target computed with the training model) and no
``backward()`` ran in between (the outputs fed no training). One finding per reported line.
A policy whose rollouts come once per several optimizer steps (PPO's epochs over one rollout)
and that keeps BatchNorm in train mode while acting is reported too: it acts on batch
statistics of the rollout batch, which is the same mistake.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.loaded_in_train import loaded_in_train_findings
from gradtrace.runtime.trace.frozen_dropout import frozen_dropout_findings, note_frozen_dropout
from gradtrace.runtime.trace.eval_dropped import DROPOUT, dropout_findings, note_dropout, \
    settle_drops

_NormBase = torch.nn.modules.batchnorm._NormBase
_LIMIT = 8  # open candidates and reported lines kept at most


@dataclass
class TrainEval:
    """Grad-off forwards in train mode of one trained norm layer since ``backwards``."""

    ref: weakref.ref[torch.nn.Module]
    site: Site  # the running line of the frame holding the grad-off switch
    switch: Site  # that switch
    backwards: int  # state.backward_count when the first of them ran
    runs: int = 1
    on: bool = False  # ``site`` is a ``.train()`` call that a helper run under the switch made


def note_train_eval(data: Any, state: Any, module: torch.nn.Module, frame: Any) -> None:
    """``module`` (a norm layer in train mode) runs with grad off: open or count a candidate."""
    open_ = data.train_evals
    c = open_.get(id(module))
    if c is not None and c.ref() is module:
        if c.backwards == state.backward_count:
            c.runs += 1
            return
        del open_[id(module)]  # a backward() ran since: the earlier runs fed training
    last = data.train_eval_step.get(id(module), 0)
    data.train_eval_step[id(module)] = data.steps
    if data.steps - last < 2:
        return  # grad-off passes at every step: data collection or targets, not evaluation
    if len(open_) >= _LIMIT or len(data.train_evals_seen) >= _LIMIT or not _live(module) \
            or not any(data.graded(p) for p in module._parameters.values() if p is not None):
        return
    from gradtrace.runtime.trace.offstack import switch_frame

    found = switch_frame(frame)
    if found is None:
        return
    f, switch = found
    from gradtrace.runtime.trace.probe_stats import train_call

    on = train_call(frame, module, stop=f)  # a helper run under the switch turns train on
    if on is not None and _helper_refreshes(frame, f, on):
        return
    site = on or _evaluating_line(data, frame, f)
    if site is None:
        site = Site(f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
        if _refresh(site, f):
            return
    open_[id(module)] = TrainEval(weakref.ref(module), site, switch, state.backward_count,
                                  on=on is not None)


def _helper_refreshes(frame: Any, stop: Any, on: Site) -> bool:
    """The helper holding the ``.train()`` call ``on`` runs the model and drops its output (a
    statistics refresh, see :func:`_refresh`)."""
    g = frame
    while g is not None and g is not stop:
        if (g.f_code.co_filename, g.f_code.co_name) == (on.path, on.function):
            return _refresh(Site(on.path, g.f_lineno, on.function), g)
        g = g.f_back
    return False


def _evaluating_line(data: Any, frame: Any, switch_frame: Any) -> Site | None:
    """Between the layer's call and the frame holding the switch: the model's call in the
    innermost user function that runs it in a loop over batches and is not the function the
    model trained from (an evaluation helper called inside the caller's ``no_grad``: GACNet's
    ``test()``); None when that is the switch's own frame (a loop-free ``_forward_pass``, or a
    helper the model also trained through, is skipped: U-Net 3D's ``validate``). The model's
    own ``forward`` frames are skipped; its record's first call site says where it trained
    from."""
    from gradtrace.runtime.frames import is_internal
    from gradtrace.runtime.trace.locate import enclosing_loop

    top, g = None, frame
    while g is not None and g is not switch_frame:
        code = g.f_code
        slf = g.f_locals.get("self") if code.co_name in _CALLS else None
        if isinstance(slf, torch.nn.Module):
            top = slf
        elif not is_internal(code) and top is not None:
            rec = data.modules.get(id(top))
            trained = rec.site if rec is not None and rec.ref() is top else None
            here = Site(code.co_filename, g.f_lineno, code.co_name)
            if (trained is None or (trained.path, trained.function) != (
                    code.co_filename, code.co_name)) and (
                    code.co_name.startswith("<") and code.co_name != "<module>"
                    or enclosing_loop(here) is not None):
                return here
        g = g.f_back
    return None


_CALLS = frozenset({"forward", "_call_impl", "_wrapped_call_impl"})


def _refresh(site: Site, frame: Any) -> bool:
    """The switch's line calls the model and drops what it returns (``model(x)`` alone under
    ``no_grad``, after an explicit ``model.train()``): a pass that only refreshes the running
    statistics (schedule-free's recipe before validation, a BN re-estimation), not an
    evaluation, which reads its outputs."""
    from gradtrace.runtime.frame_values import read_chain, stored_attr
    from gradtrace.runtime.trace.locate import bare_call

    call = bare_call(site)
    if call is None:
        return False
    return isinstance(read_chain(call.func, frame, stored_attr), torch.nn.Module)


def train_run(hooks: Any, module: torch.nn.Module, args: Any = ()) -> None:
    """A train-mode call with grad on of a norm layer with a candidate, or of a dropout layer
    (NOTE [dropout left on in evaluation], NOTE [frozen extractor dropping])."""
    if isinstance(module, DROPOUT):
        note_dropout(hooks, module)
        note_frozen_dropout(hooks, module, args)
    else:
        settle(hooks.data, hooks.state, id(module))


def settle(data: Any, state: Any, key: int | None = None, step: bool = False) -> None:
    """Decide the candidate of the layer ``key`` (all of them when None); at an optimizer
    ``step``, the dropout runs since the previous one too."""
    if step and data.drops is not None:
        settle_drops(data.drops)
    for k in [key] if key is not None else list(data.train_evals):
        c = data.train_evals.pop(k, None)
        if c is not None and c.runs >= 2 and c.backwards == state.backward_count:
            m = c.ref()
            if m is not None:
                data.train_evals_seen.setdefault(c.site, (c, []))[1].append(type(m).__name__)


def _live(m: torch.nn.Module) -> bool:
    """Running statistics updated with a momentum, not freshly reset."""
    n = getattr(m, "num_batches_tracked", None)
    if n is not None:
        with torch._C.DisableTorchFunction():
            n = int(n)
    return bool(getattr(m, "track_running_stats", False)) and m.momentum is not None \
        and getattr(m, "running_mean", None) is not None \
        and (n is None or n > 0)


def train_eval_findings(data: Any, state: Any) -> list[Finding]:
    """GT874 for every line that evaluated a trained model in train mode."""
    from gradtrace.runtime.build import make

    settle(data, state)
    out = []
    for site, (c, layers) in data.train_evals_seen.items():
        names = ", ".join(dict.fromkeys(layers))
        if c.on:
            out.append(make("GT874", site,
                            f"this `.train()` runs inside an evaluation (grad mode is off, and no "
                            f"backward() follows): it puts the model's {names} in train mode, "
                            "so each evaluated batch is normalised with its own statistics and "
                            "written into running_mean/running_var, changing the statistics "
                            "the model keeps",
                            fix="switch the mode by phase (`model.train(phase == 'train')`), or "
                                "call model.eval() after it when evaluating",
                            related=[(c.switch, "grad mode is turned off here")],
                            severity="warning"))
            continue
        out.append(make("GT874", site,
                        f"the model runs here with grad off and its {names} in train mode, "
                        "after it trained, with no backward() following: an evaluation in train "
                        "mode. Each batch is normalised with its own statistics and written "
                        "into running_mean/running_var, so the results depend on the batch and "
                        "the evaluated data changes the statistics the model keeps",
                        fix="call model.eval() before evaluating (and model.train() before "
                            "training again)",
                        related=[(c.switch, "grad mode is turned off here")],
                        severity="warning"))
    return out + dropout_findings(data) + loaded_in_train_findings(data, state) \
        + frozen_dropout_findings(data, state)


__all__ = ["DROPOUT", "TrainEval", "note_train_eval", "settle", "train_eval_findings",
           "train_run"]
