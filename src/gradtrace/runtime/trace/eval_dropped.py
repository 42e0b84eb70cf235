"""A trained model evaluated with its dropout still active: outputs no backward() reaches.

# NOTE [dropout left on in evaluation]
A validation loop that never calls ``model.eval()`` (ZOO-Attack's ``fit`` runs its ``'val'``
phase through the training loop's body) keeps every ``nn.Dropout`` dropping at random: the
reported figures are those of a thinned network and the dropped features draw from the global
RNG. Nothing fails, with grad on or off. NOTE [evaluated in train mode] reads the norm layers
under ``no_grad``; this reads the dropout layers, in either grad mode.

Run-time facts, on armed steps only (NOTE [trace arming]): the global forward pre-hook notes
each dropout layer (``p > 0``) it sees running in train mode, and one global forward hook
(in only while the tracer is armed, like the pre-hook; nothing on the layer itself) watches the
noted layers. Each of its train-mode calls is a run: with grad on, a pre-hook on
the output's node marks the run *reached* when a backward() goes through it; with grad off it
is never reached. At each optimizer step the runs made since the previous step are settled, in
order: a layer reached by a backward() is trained; two or more runs in a row of a trained layer
(trained before the first of them) that no backward() reached, between two optimizer steps, are
an evaluation in train mode. Not a target or a second view computed once per step
(one run at a time), a second forward summed into the same loss (reached), a teacher or copy no
backward ever reaches (never trained), nor Monte-Carlo sampling after the last step (no step
settles it). The line named is the innermost loop, in the function that called the model, that
holds the call (the loop over the evaluated batches), else the call. One finding per line.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import torch

from gradtrace.runtime.frames import Site, is_internal

DROPOUT = torch.nn.modules.dropout._DropoutNd
_CALLS = frozenset({"forward", "_call_impl", "_wrapped_call_impl"})
_RUNS = 256  # runs kept between two steps
_LAYERS = 64  # dropout layers hooked


@dataclass
class Run:
    layer: int
    at: Site | None  # the model's call in the user frame that called it
    model: str
    reached: bool = False

    def mark(self, *_: Any) -> None:
        self.reached = True


@dataclass
class Drops:
    hooked: set[int] = field(default_factory=set)
    runs: list[Run] = field(default_factory=list)
    trained: set[int] = field(default_factory=set)
    seen: dict[Site, tuple[int, str]] = field(default_factory=dict)  # line -> (runs, model)


def note_dropout(hooks: Any, module: torch.nn.Module) -> None:
    """From the global pre-hook: watch ``module`` (a dropout layer in train mode) once.

    The layers are watched by one *global* forward hook, never a hook on the layer itself:
    ``torch.save(model)`` pickles a module's own hook dicts and fails on a closure there
    (NOTE [nothing on the user's modules] in gradtrace.runtime.watch.watcher)."""
    if not module.p:
        return
    data = hooks.data
    if data.drops is None:
        data.drops = Drops()
        hooks.armed_forward_hook(_after(hooks, data.drops))
    d = data.drops
    if id(module) not in d.hooked and len(d.hooked) < _LAYERS:
        d.hooked.add(id(module))


def _after(hooks: Any, d: Drops) -> Any:
    def after(mod: torch.nn.Module, args: Any, out: Any) -> None:
        if id(mod) not in d.hooked or hooks._module_handle is None or not mod.training \
                or len(d.runs) >= _RUNS:
            return  # not a watched layer, not armed, or an eval-mode call
        try:
            at, model = _caller()
            run = Run(id(mod), at, model)
            if isinstance(out, torch.Tensor) and out.grad_fn is not None:
                out.grad_fn.register_prehook(run.mark)
            d.runs.append(run)
        except Exception:  # pragma: no cover - never break the user's forward
            pass
    return after


def _caller() -> tuple[Site | None, str]:
    """The call of the outermost module running now, in the user frame that made it."""
    top, g = None, sys._getframe(2)
    while g is not None:
        code = g.f_code
        slf = g.f_locals.get("self") if code.co_name in _CALLS else None
        if isinstance(slf, torch.nn.Module):
            top = slf
        elif not is_internal(code) and top is not None:
            return Site(code.co_filename, g.f_lineno, code.co_name), type(top).__name__
        g = g.f_back
    return None, ""


def settle_drops(d: Drops) -> None:
    """At an optimizer step: decide the runs made since the previous one."""
    runs, d.runs = d.runs, []
    streak: dict[int, list[Run]] = {}
    for r in runs:
        if r.reached:
            d.trained.add(r.layer)
            _close(d, streak.pop(r.layer, []))
        elif r.layer in d.trained:
            streak.setdefault(r.layer, []).append(r)
    for s in streak.values():
        _close(d, s)


def _close(d: Drops, streak: list[Run]) -> None:
    if len(streak) < 2 or streak[0].at is None:
        return
    site = _loop_line(streak[0].at)
    if site not in d.seen:
        d.seen[site] = (len(streak), streak[0].model)


def _loop_line(at: Site) -> Site:
    from gradtrace.runtime.trace.locate import enclosing_loop

    loop = enclosing_loop(at)
    return at if loop is None else Site(at.path, loop.lineno, at.function, loop.col_offset)


def dropout_findings(data: Any) -> list[Any]:
    """GT874 for every line that evaluated a trained model with its dropout active."""
    d = data.drops
    if d is None or not d.seen:
        return []
    from gradtrace.runtime.build import make

    return [make("GT874", site,
                 f"the {model} runs here in train mode over {n} batches whose outputs no "
                 "backward() reaches, between optimizer steps: an evaluation with its dropout "
                 "still active, so every figure is that of a randomly thinned network (and the "
                 "dropped units draw from the RNG the training uses)",
                 fix="call model.eval() before evaluating (and model.train() before training "
                     "again), or switch the mode by phase",
                 severity="warning")
            for site, (n, model) in d.seen.items()]


__all__ = ["DROPOUT", "Drops", "dropout_findings", "note_dropout", "settle_drops"]
