"""Training in eval mode: a model that trained in train mode and later runs its training
forward (grad on, stepped by an optimizer) in eval mode, its dropout and batch-norm off.

# NOTE [eval-mode training]
The global forward pre-hook (armed steps only, NOTE [trace arming]) notes per module whether it
ran in train mode with grad on (``trained``) and, at the first forward in eval mode since then
(a validation pass, or the training forward itself), the chain of user frames that led to it
(``off``: frame ids and lines, no frame is kept). A trained module running with grad on in eval
mode is *pending*; the next ``optimizer.step()`` decides it, once:

- it is excused when a module holding it is in train mode (a BatchNorm frozen on purpose inside
  a training model), or when it is back in train mode by the step (a grad-on evaluation);
- it is reported when its outermost eval-mode holder has a layer that acts differently in eval
  mode (dropout with p > 0, batch/instance norm tracking statistics, RNN dropout) and the
  stepping optimizer holds one of that model's parameters with a gradient.

The line reported is where the model was switched off, as seen from the training loop: the
frame of the ``optimizer.step()`` call chain that also led to the first eval-mode forward,
at the line it was on then (the ``validate()`` call inside the loop, the ``model.train()`` that
ran once, before the loop, shows through the static GT516 fused with it).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import torch

from gradtrace.runtime.frames import FRAME_BY_ID, Site, is_internal
from gradtrace.runtime.trace.eval_sibling import fresh_roots, train_call

Stack = tuple[tuple[int, Any, int], ...]  # (id(frame), code, line), innermost first


@dataclass
class EvalTrained:
    """One model seen training in eval mode."""

    name: str
    cause: Site | None  # the line in the training loop that led to the switch
    forward: Site | None  # where the model was called in eval mode
    step: Site | None  # the optimizer.step() that applied its gradients
    steps: int  # optimizer steps made before
    layers: tuple[str, ...]  # its layers that act differently in eval mode
    beside: str = ""  # never trained in train mode, next to this model that did


def user_stack(limit: int = 48) -> Stack:
    """The user frames calling the current hook, innermost first (ids and lines only)."""
    out = []
    f = sys._getframe(2)
    while f is not None and limit > 0:
        code = f.f_code
        internal = FRAME_BY_ID.get(id(code))
        if internal is None:
            internal = is_internal(code)
        if not internal:
            out.append((id(f), code, f.f_lineno))
        f = f.f_back  # type: ignore[assignment]
        limit -= 1
    return tuple(out)


def _sensitive(top: torch.nn.Module) -> tuple[str, ...]:
    """Class names of the layers of ``top`` that compute differently in eval mode."""
    from torch.nn.modules.batchnorm import _NormBase
    from torch.nn.modules.dropout import _DropoutNd

    out: dict[str, None] = {}
    for m in top.modules():
        if isinstance(m, (_DropoutNd, torch.nn.Dropout, torch.nn.AlphaDropout)) and \
                getattr(m, "p", 0) > 0 or isinstance(m, _NormBase) and \
                m.track_running_stats or isinstance(m, torch.nn.RNNBase) and m.dropout > 0:
            out.setdefault(type(m).__name__)
    return tuple(out)


def common_line(off: Stack, now: Stack) -> Site | None:
    """The line, at the time of ``off``, of the innermost frame both stacks share."""
    frames = {(fid, id(code)): line for fid, code, line in off}
    for fid, code, _ in now:
        line = frames.get((fid, id(code)))
        if line is not None:
            return Site(code.co_filename, line, code.co_name)
    return None


def check_eval(data: Any, opt: torch.optim.Optimizer, steps: int,
               step_site: Site | None) -> None:
    """Decide the modules pending since the last step (NOTE [eval-mode training])."""
    pending = [r for r in data.eval_pending.values() if not r.mode_verdict]
    data.eval_pending.clear()
    if not pending or len(data.eval_trained) >= 4:
        return
    parents: dict[int, torch.nn.Module] = {}
    recs: dict[int, Any] = {}
    for r in list(data.modules.values()):
        m = r.ref()
        if m is not None:
            recs[id(m)] = r
            for c in m.children():
                parents[id(c)] = m
    fresh = [r for r in pending if not r.trained]  # NOTE [left in eval beside a trained model]
    if fresh:
        for r in fresh:
            r.mode_verdict = 3  # decided once
        for top, rec, layers, other in fresh_roots(data, opt, fresh, parents):
            now, off = user_stack(), rec.off or ()
            call = common_line(off, now)
            data.eval_trained.append(EvalTrained(
                type(top).__name__, train_call(off, now, call) or call, call or rec.site,
                step_site, steps, layers, type(other).__name__))
        pending = [r for r in pending if r.trained]
    tops: dict[int, tuple[torch.nn.Module, Any]] = {}
    for rec in pending:
        m = rec.ref()
        if m is None or m.training:
            continue  # back in train mode by the step: an evaluation with grad on
        top, up = m, parents.get(id(m))
        while up is not None and not up.training:
            top, up = up, parents.get(id(up))
        if up is not None:
            rec.mode_verdict = 2  # held by a module in train mode: switched off on purpose
            continue
        tops.setdefault(id(top), (top, rec))
    if not tops:
        return
    held = {id(p) for g in opt.param_groups for p in g["params"]}
    now: Stack | None = None
    for top, rec in tops.values():
        if not any(id(p) in held and p.grad is not None for p in top.parameters()):
            continue  # not what this optimizer trains (another optimizer's step may be)
        inside = {id(x) for x in top.modules()}
        for r in pending:
            if id(r.ref()) in inside:
                r.mode_verdict = 1
        layers = _sensitive(top)
        if not layers:
            continue  # nothing computes differently in eval mode
        trec = recs.get(id(top), rec)
        off = trec.off or rec.off or ()
        now = user_stack() if now is None else now
        cause = common_line(off, now)
        forward = trec.site or rec.site
        data.eval_trained.append(EvalTrained(type(top).__name__, cause, forward, step_site,
                                             steps, layers))


def eval_findings(data: Any) -> list[Any]:
    """GT516 findings for the models seen training in eval mode (one per switch line)."""
    from gradtrace.runtime.build import code_for, make

    groups: dict[tuple[Any, ...], list[EvalTrained]] = {}
    for e in data.eval_trained:
        groups.setdefault((e.cause or e.forward, e.steps), []).append(e)
    out = []
    for (site, steps), es in groups.items():
        names = " and ".join(dict.fromkeys(f"`{e.name}`" for e in es))
        layers = tuple(dict.fromkeys(n for e in es for n in e.layers))
        effects = " and ".join(x for x, hit in (
            ("dropout is off", any("Dropout" in n or "RNN" in n or "LSTM" in n or "GRU" in n
                                   for n in layers)),
            ("batch-norm statistics are frozen", any("Norm" in n for n in layers))) if hit)
        e = es[0]
        if e.beside:
            msg = (f"{names} is trained in eval mode, never put in train mode, while `{e.beside}`"
                   f", stepped by the same optimizer, is switched to train mode here: its "
                   f"{', '.join(layers[:3])} act as at inference ({effects}) for the whole "
                   "training")
            fix = "put every model the optimizer trains in train mode (`.train()` each of them)"
        else:
            msg = (f"{names} trained in eval mode from optimizer step {steps + 1} on, "
                   f"after training in train mode before: its {', '.join(layers[:3])} "
                   f"act as at inference ({effects}). It was switched to eval here"
                   f"{'' if e.cause else ' (or before this call)'} and nothing switched it "
                   "back before the next training step")
            fix = "call model.train() at the start of every training pass (after each evaluation)"
        out.append(make(code_for("model-left-in-eval-mode", "GT516"), site, msg, fix=fix,
                        related=[(e.forward, "it runs its training forward in eval mode here"),
                                 (e.step, "the optimizer steps its gradients here")],
                        severity="warning"))
    return out
