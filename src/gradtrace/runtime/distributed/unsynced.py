"""Optimizer steps that apply gradients DDP never all-reduced (GT887), seen on one rank.

# NOTE [steps without all-reduce]
DistributedDataParallel all-reduces gradients only for a backward whose forward went through
the wrapper with ``require_backward_grad_sync`` on (outside ``no_sync()``; the choice is made
at forward time, torch 2.13). Between two optimizer steps the rank session records, per DDP
wrapper: a synced forward through it, a forward through it inside ``no_sync()``, and a forward
with grad of its inner module that did not come from the wrapper (``model.module(x)``: DDP's
own call of its module directly follows DDP's pre-hook). At an optimizer step that holds
parameters of a wrapper, after a backward, with no synced forward through that wrapper since
the last step but an unsynced or bypassing one, this rank applied its own gradients: the
replicas drift apart. Facts are plain values (first occurrence, count); no collective is used.

The line of a bypass is the call that entered the inner module from outside it: user frames
that are methods of that very module (``self._get_model().compute_loss(batch)`` runs
``self(batch['x'])`` inside ``compute_loss``, OpenTSLM's curriculum trainer) are skipped, so
the caller that picked the unwrapped module is named, not the module's own ``self(...)``.
"""
from __future__ import annotations

import weakref
from typing import Any


def outside_line(module: Any) -> tuple[str, int] | None:
    """``(file, line)`` of the first user frame that is not a method of ``module``."""
    import sys

    from gradtrace.runtime.frames import is_internal

    f: Any = sys._getframe(1)
    while f is not None:
        code = f.f_code
        if not is_internal(code) and not (code.co_argcount and code.co_varnames[0] == "self"
                                          and f.f_locals.get("self") is module):
            return code.co_filename, f.f_lineno
        f = f.f_back
    return None


def no_sync_choice() -> tuple[str, int] | None:
    """# NOTE [last micro-batch inside no_sync]
    DDP all-reduces, in a synced backward, every gradient accumulated since the last one
    (those of ``no_sync()`` passes included), so what matters at an optimizer step is the last
    forward through the wrapper before it: inside ``no_sync()``, the gradients accumulated
    since the last synced backward are this rank's own (FunASR before PR 3472: ``no_sync``
    when ``batch_idx % accum_grad != 0`` while the step comes at ``(batch_idx + 1) %
    accum_grad == 0``: the first micro-batch is reduced, the last is not). A synced forward
    clears the window's no-sync record; a no-sync forward after a synced one clears its synced
    mark. The line: the innermost ``with`` around a user frame's running line whose context is
    ``<...>.no_sync(...)`` (that ``with``), or a name assigned in the same function from an
    expression that reads ``.no_sync`` (``my_context = model.no_sync if ... else
    nullcontext``: that assignment); None when the stack shows neither."""
    import sys

    from gradtrace.runtime.frames import is_internal
    from gradtrace.runtime.trace.locate import tree_of

    f: Any = sys._getframe(1)
    depth = 0
    while f is not None and depth < 12:
        code = f.f_code
        if not is_internal(code):
            depth += 1
            tree = tree_of(code.co_filename)
            hit = _choice_in(tree, code, f.f_lineno) if tree is not None else None
            if hit is not None:  # (a `with` in the forward's own frame: merge.py names it)
                return None if depth == 1 and hit < 0 else (code.co_filename, abs(hit))
        f = f.f_back
    return None


def _choice_in(tree: Any, code: Any, line: int) -> int | None:
    import ast

    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.name == code.co_name and n.lineno <= line <= (n.end_lineno or n.lineno)),
              tree)
    withs = [n for n in ast.walk(fn) if isinstance(n, ast.With) and n.body
             and n.body[0].lineno <= line <= (n.end_lineno or n.lineno)]
    for w in sorted(withs, key=lambda n: -n.lineno):
        for item in w.items:
            call = item.context_expr
            f = call.func if isinstance(call, ast.Call) else None
            if isinstance(f, ast.Attribute) and f.attr == "no_sync":
                return -w.lineno  # (negative: a `with` written on no_sync itself)
            if isinstance(f, ast.Name):
                sets = [a for a in ast.walk(fn) if isinstance(a, ast.Assign) and a.lineno < w.lineno
                        and any(isinstance(t, ast.Name) and t.id == f.id for t in a.targets)
                        and any(isinstance(x, ast.Attribute) and x.attr == "no_sync"
                                for x in ast.walk(a.value))]
                if sets:
                    return max(a.lineno for a in sets)
    return None


class SyncWindow:
    """Per-step bookkeeping of forwards through (or around) each DDP wrapper."""

    def __init__(self) -> None:
        self.inner: dict[int, weakref.ref[Any]] = {}  # id(ddp.module) -> ddp
        self.pending: int | None = None   # id of the inner module DDP is about to call
        self.synced: set[int] = set()     # id(ddp) with a synced forward since the last step
        self.unsynced: dict[int, tuple[str, Any]] = {}  # id(ddp) -> (how, site) first seen
        self.flag_off: set[int] = set()  # id(ddp) whose flag was off with no no_sync() seen
        self.flag_at_backward: dict[int, bool] = {}  # ... and its flag when a backward began
        self.backward_at_step = 0
        self.facts: list[dict[str, Any]] = []
        self._params: dict[int, tuple[weakref.ref[Any], frozenset[int]]] = {}

    def registered(self, ddp: Any, submodule: Any) -> None:
        """DDP's constructor set ``ddp.module``."""
        self.inner[id(submodule)] = weakref.ref(ddp)

    def ddp_forward(self, ddp: Any, site: Any) -> None:
        self.pending = id(ddp.module)
        self.inner.setdefault(self.pending, weakref.ref(ddp))
        if getattr(ddp, "require_backward_grad_sync", True):
            self.synced.add(id(ddp))
            if self.unsynced.get(id(ddp), ("",))[0] == "no-sync":  # this backward reduces them
                del self.unsynced[id(ddp)]  # NOTE [last micro-batch inside no_sync]
        else:
            self.synced.discard(id(ddp))
            if id(ddp) not in self.unsynced:
                choice = no_sync_choice()
                self.unsynced[id(ddp)] = ("no-sync", choice or site)
                if choice is None:  # NOTE [sync flag turned on after the forward]
                    self.flag_off.add(id(ddp))

    def module_forward(self, module: Any, site_of: Any) -> None:
        """A module ran with grad enabled (not DDP itself)."""
        key = id(module)
        if key == self.pending:
            self.pending = None  # DDP calling its own module
            return
        ref = self.inner.get(key)
        ddp = ref() if ref is not None else None
        if ddp is not None and getattr(ddp, "module", None) is module \
                and id(ddp) not in self.unsynced:
            self.unsynced[id(ddp)] = ("bypass", outside_line(module))

    def step(self, opt: Any, backwards: int, step: int, site_of: Any) -> None:
        """Before optimizer step number ``step``: record a step that applies unsynced grads."""
        try:
            if backwards > self.backward_at_step:
                for key, (how, site) in self.unsynced.items():
                    if key not in self.synced and self._steps_ddp(opt, key):
                        self._note(self._late_flag(key, how, site), site, step, site_of)
        finally:
            self.backward_at_step = backwards
            self.synced.clear()
            self.unsynced.clear()
            self.flag_off.clear()
            self.flag_at_backward.clear()
            self.pending = None

    def _late_flag(self, key: int, how: str, site: Any) -> str:
        """# NOTE [sync flag turned on after the forward]
        DDP reads ``require_backward_grad_sync`` in its forward: NOTE [steps without all-reduce].
        A window whose last forward saw the flag off with no ``no_sync()`` on the
        stack, and whose wrapper has the flag on again at the step, had it set between that
        forward and the backward: the assignment that should have come before the forward
        (build-nanogpt's ``model.require_backward_grad_sync = (micro_step == last)`` written
        just before ``loss.backward()``). The flag is read when each backward begins (a loss
        listener: one attribute read, only while such a forward is pending); on at the last
        one, it is reported as ``late-flag`` at the forward, and the static GT542 names the
        assignment. A context that turns it off around forward and backward (``no_sync()``
        entered through a library's own context manager) leaves it off there: ``no-sync``."""
        if how == "no-sync" and key in self.flag_off and self.flag_at_backward.get(key):
            return "late-flag"
        return how

    def backward_started(self) -> None:
        """A backward began: note the sync flag of each wrapper whose forward had it off."""
        for key in self.flag_off:
            ddp = next((r() for r in self.inner.values() if r() is not None and id(r()) == key),
                       None)
            if ddp is not None:
                self.flag_at_backward[key] = getattr(ddp, "require_backward_grad_sync", 0) is True

    def _steps_ddp(self, opt: Any, key: int) -> bool:
        ddp = next((r() for r in self.inner.values() if r() is not None and id(r()) == key),
                   None)
        if ddp is None:
            return False
        hit = self._params.get(key)
        if hit is None or hit[0]() is not ddp:
            hit = (weakref.ref(ddp), frozenset(id(p) for p in ddp.module.parameters()))
            self._params[key] = hit
        return any(id(p) in hit[1] for g in opt.param_groups for p in g["params"])

    def _note(self, how: str, site: Any, step: int, site_of: Any) -> None:
        for f in self.facts:
            if f["kind"] == how and f["site"] == (list(site) if site else None):
                f["count"] += 1
                return
        if len(self.facts) < 4:
            here = site_of()
            self.facts.append({"kind": how, "site": list(site) if site else None, "step": step,
                               "count": 1, "step_site": list(here) if here else None})
