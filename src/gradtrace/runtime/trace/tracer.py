"""``gradtrace.trace()``: record, in-process, where gradients stop flowing.

Example::

    import gradtrace
    with gradtrace.trace() as tr:
        train_one_epoch()
    for f in tr.findings:
        print(f.code, f.path, f.line, f.message)

The tracer installs one TorchFunctionMode and three global hooks (module forward pre-hook,
optimizer step pre/post) and removes all of them on exit, also when the body raises. It keeps
weak references only (and notes in ``grad_fn.metadata``, which die with the graph).

API for tools built on top (pytest plugin, ``gradtrace.testing``)::

    with trace() as tr:            # Tracer
        ...
    tr.findings                    # list[Finding]: crash diagnoses first, then silent problems,
                                   # then static findings on the code that ran (NOTE [ranking]
                                   # in gradtrace.runtime.fuse), the general crash finding last
    tr.diagnosis                   # list[Finding]: only the findings that explain the crash
    tr.why_no_grad(param)          # Finding | None: not used in forward / cut at file:line /
                                   # frozen at file:line / only ran under no_grad
    diagnose(exc, tr)              # list[Finding] for an exception (tr optional)

Findings are ``gradtrace.findings.Finding`` with ``source="runtime"`` (``"static+runtime"`` when
a static finding on the code that ran accounts for what was seen, ``"static"`` for a static
finding no symptom confirmed; ``trace(static=False)`` leaves the checker out); render them with
``gradtrace.runtime.render.render_text``. Set ``GRADTRACE_STRICT=1`` to make a failure inside
gradtrace's own recording raise instead of being logged (for tests).
"""
from __future__ import annotations

import logging
import os
import warnings
from types import TracebackType
from typing import Any

from gradtrace.env import strict
from gradtrace.findings import Finding

LOG = logging.getLogger(__name__)
__all__ = ["Tracer", "active_tracer", "diagnose", "trace"]


class Tracer:
    """One tracing session. Use through :func:`trace` (a context manager)."""

    def __init__(self, *, reentrant: bool = False, static: bool = True, every: int | None = None,
                 budget: float = 0.03) -> None:
        from gradtrace.runtime.trace.arming import Arming
        from gradtrace.runtime.frames import refresh_prefixes
        from gradtrace.runtime.trace.diagnose import diagnose_failure
        from gradtrace.runtime.trace.hooks import Hooks
        from gradtrace.runtime.trace.provenance import ProvenanceMode
        from gradtrace.runtime.trace.silent import parameter_findings
        from gradtrace.runtime.trace.state import TraceState

        refresh_prefixes()
        self.state = TraceState(diagnose_failure)
        self.mode = ProvenanceMode(self.state)
        self.hooks = Hooks(self.state, self.mode, parameter_findings)
        self.arming = self.hooks.arming = Arming(self.mode, self.state, self.hooks,
                                                       every, budget)
        self.arming.ran.enabled = static  # NOTE [code that ran]: only the fuse reads it
        self.state.hooks_data = self.hooks.data
        self.active = False
        self.reentrant = reentrant
        self._silent: list[Finding] | None = None
        self.static = static
        self.crash_line: tuple[str, int] | None = None  # the user line the program crashed at
        self._codes: list[Any] = []  # user code objects seen, kept when the session ends
        self._fused: tuple[list[Finding], list[Finding]] | None = None
        # path -> line spans of user code that ran in forked children (NOTE [forked ranks])
        self.forked_spans: dict[str, list[tuple[int, int]]] = {}
        # findings of autograd errors the program caught before the one it died of (set by
        # diagnose()): something seen, not the diagnosis of this crash
        self._caught: list[Finding] = []

    # -- context manager ---------------------------------------------------------------------
    def __enter__(self) -> Tracer:
        if self.active:
            raise RuntimeError("this gradtrace tracer is already active")
        if self._silent is not None and not self.reentrant:
            raise RuntimeError("a gradtrace tracer can be entered once; call gradtrace.trace() "
                               "again for a new session")
        self._silent = None
        _relocate_warnings(True)
        self.hooks.install()
        try:
            self.arming.enter()
        except BaseException:
            self.hooks.remove()
            _relocate_warnings(False)
            raise
        self.active = True
        _ACTIVE.append(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        unarmed = not self.arming.armed
        try:
            self.arming.exit(exc_type, exc, tb)
        finally:
            self.hooks.remove()
            self.active = False
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            _LAST[:] = [self]
            _relocate_warnings(False)
            self._codes = self._seen_codes()
        if exc is not None:
            from gradtrace.runtime.frames import hide_own_frames

            hide_own_frames(exc)
            # an unarmed crash is diagnosed now (NOTE [trace arming]); an armed one that no
            # traced torch call diagnosed too (post-hoc, else NOTE [general crash])
            if isinstance(exc, Exception) and (unarmed or not getattr(exc, "__gradtrace__", None)):
                try:  # a rank session's diagnosis, already made, leaves no room for GT839
                    diagnose(exc, self, general=not self.state.crash_findings)
                except Exception:
                    LOG.debug("gradtrace: diagnosis failed", exc_info=True)
        try:
            self._silent = self._silent_findings()
        except Exception:  # diagnosis must never hide the user's own outcome
            if strict():
                raise
            LOG.debug("gradtrace: silent analysis failed", exc_info=True)
            self._silent = []

    # -- results -------------------------------------------------------------------------------
    @property
    def findings(self) -> list[Finding]:
        """Crash diagnoses (most likely root cause first), then the silent problems seen."""
        silent = self._silent if self._silent is not None else self._silent_findings()
        out: list[Finding] = []
        for f in [*self.state.crash_findings, *silent]:
            if f not in out:
                out.append(f)
        from gradtrace.runtime.fuse import GENERAL_CRASH

        return sorted(self._fuse(out), key=lambda f: 2 if f.source == "static"  # NOTE [ranking]
                      else int(f.code == GENERAL_CRASH))

    @property
    def diagnosis(self) -> list[Finding]:
        """The findings that explain the crash (``[]`` if the program did not crash or torch
        has no part in the error; GT839, the error itself, when no specific diagnosis applies:
        NOTE [general crash]); each fused with the static finding that accounts for it."""
        crash = [f for f in self.state.crash_findings if f not in self._caught]
        return self._fuse(crash, unconfirmed=False)

    def _fuse(self, runtime: list[Finding], unconfirmed: bool = True) -> list[Finding]:
        if not self.static:
            return runtime
        if self._fused is not None and self._fused[0] == runtime + [unconfirmed] \
                and not self.active:
            return list(self._fused[1])
        from gradtrace.runtime.fuse import fuse_session, ran_codes

        codes = ran_codes(self.hooks.data, self._seen_codes() if self.active else self._codes)
        progress = (self.state.backward_count, self.hooks.data.steps)
        out = fuse_session(runtime, codes, self.crash_line, unconfirmed, progress,
                           self.forked_spans)
        self._fused = (runtime + [unconfirmed], out)  # type: ignore[list-item]
        return list(out)

    def ran_spans(self) -> dict[str, Any]:
        """The line spans of the user code that ran so far, per file (NOTE [forked ranks])."""
        from gradtrace.runtime.ran import code_spans, ran_codes

        return code_spans(ran_codes(self.hooks.data, self._seen_codes()))

    def _seen_codes(self) -> list[Any]:
        from gradtrace.runtime.frames import INTERNAL_FILES

        seen = [c for c, internal in list(INTERNAL_FILES.items()) if not internal]
        started = self.arming.ran.user_codes()  # NOTE [code that ran]
        return list(dict.fromkeys([*self._codes, *seen, *started]))

    def _silent_findings(self) -> list[Finding]:
        from gradtrace.runtime.trace.silent import silent_findings

        return silent_findings(self.state, self.hooks.data)

    def why_no_grad(self, param: Any) -> Finding | None:
        """Why ``param`` has no ``.grad``: not used in forward, graph cut at file:line, frozen.

        Returns ``None`` if ``param.grad`` is set (or nothing is known about it).
        """
        from gradtrace.runtime.trace.silent import why_no_grad

        return why_no_grad(self.state, self.hooks.data, param)

    def diagnose(self, exc: BaseException, *, general: bool = True) -> list[Finding]:
        """The diagnosis of an exception raised while (or after) this session traced
        (``general=False``: without the general crash finding, NOTE [general crash])."""
        return diagnose(exc, self, general=general)


_ACTIVE: list[Tracer] = []
_LAST: list[Tracer] = []  # the session that ended last (it holds weak references only)
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_RELOCATE: list[Any] = []  # [original showwarning, our wrapper] while any tracer is active
_DEPTH = [0]


def _relocate_warnings(on: bool) -> None:
    """Show warnings raised inside traced torch calls at the user's line, not at ours.

    A torch warning is attributed to the innermost Python frame, which under tracing is the
    TorchFunctionMode handler; ``warnings.showwarning`` is the documented hook to replace.
    """
    if on:
        _DEPTH[0] += 1
        if _DEPTH[0] > 1:
            return
        orig = warnings.showwarning

        def showwarning(message: Any, category: Any, filename: str, lineno: int,
                        file: Any = None, line: Any = None) -> None:
            if filename.startswith(_PKG_DIR) and _raised_by_us():
                return  # NOTE [warnings our own code raised]
            _note_warning(str(message), filename, lineno)
            if filename.startswith(_PKG_DIR):
                from gradtrace.runtime.frames import user_frame

                f = user_frame(1)
                if f is not None:
                    filename, lineno, line = f.f_code.co_filename, f.f_lineno, None
            orig(message, category, filename, lineno, file, line)

        _RELOCATE[:] = [orig, showwarning]
        warnings.showwarning = showwarning
        return
    _DEPTH[0] = max(0, _DEPTH[0] - 1)
    if _DEPTH[0] == 0 and _RELOCATE:
        orig, ours = _RELOCATE
        if warnings.showwarning is ours:
            warnings.showwarning = orig
        _RELOCATE.clear()


def _raised_by_us() -> bool:
    """# NOTE [warnings our own code raised]
    A torch warning whose innermost frame is ours comes either from a user's torch call that a
    mode of ours forwards (its ``__torch_function__`` is on the stack between that frame and the
    user's line: shown at the user's line, as above) or from our own analysis: the optimizer
    step hook reading ``.grad`` of a module's "parameters" that a functional inner loop
    replaced by non-leaf tensors (torchopt's MetaAdam) makes torch warn that the ``.grad`` of a
    non-leaf is read. That warning is not the program's: a plain run shows none, so it is
    neither shown nor noted (it would be GT307 at the ``optimizer.step()`` line)."""
    import sys

    from gradtrace.runtime.frames import is_internal

    f: Any = sys._getframe(2)
    while f is not None:
        code = f.f_code
        if code.co_name == "__torch_function__":
            return False
        if not is_internal(code):
            return True  # the user's line reached without a forwarded call
        f = f.f_back
    return True


def _note_warning(text: str, filename: str, lineno: int) -> None:
    """Record a torch warning that reveals a problem, at the user line it points to
    (NOTE [revealing warnings] in :mod:`gradtrace.runtime.trace.warned`)."""
    tracer = active_tracer()
    if tracer is None:
        return
    try:
        from gradtrace.runtime.frames import Site, user_frame
        from gradtrace.runtime.trace.warned import note_warning

        f = user_frame(2)
        site = Site(filename, lineno)
        if filename.startswith("<frozen") or filename.startswith(_PKG_DIR) or _internal(filename):
            site = Site(f.f_code.co_filename, f.f_lineno, f.f_code.co_name) if f else None
        elif f is not None and (f.f_code.co_filename, f.f_lineno) != (filename, lineno):
            f = None  # the warning names a line of its own (stacklevel): no frame to read
        if site is not None:
            note_warning(text, site, f, tracer)
    except Exception:
        if strict():
            raise
        LOG.debug("gradtrace: reading a warning failed", exc_info=True)


def _internal(filename: str) -> bool:
    from gradtrace.runtime.frames import INTERNAL_PREFIXES

    return filename.startswith(INTERNAL_PREFIXES)


def active_tracer() -> Tracer | None:
    """The innermost tracer currently active, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


def last_tracer() -> Tracer | None:
    """The innermost active tracer, else the one that ended last (explain/graph after the block)."""
    return active_tracer() or (_LAST[0] if _LAST else None)


def trace(*, static: bool = True, every: int | None = None, budget: float = 0.03) -> Tracer:
    """Trace autograd in a ``with`` block; the yielded :class:`Tracer` has ``.findings``.

    ``static=False`` leaves out the static check of the code that ran (NOTE [ranking]).
    Every torch call is recorded during the first 16 optimizer steps, then during one step in N
    chosen so that recording costs about ``budget`` of a step; ``every=N`` fixes N, ``every=1``
    records every step (NOTE [trace arming])."""
    if every is not None and (not isinstance(every, int) or every < 1):
        raise ValueError(f"every must be a positive int or None (auto), got {every!r}")
    return Tracer(static=static, every=every, budget=budget)


def diagnose(exc: BaseException, tracer: Tracer | None = None, *,
             general: bool = True) -> list[Finding]:
    """Findings for an exception: the diagnosis made when torch raised it, or one made now;
    when none applies and torch is part of the error, the error itself at the user's line
    (NOTE [general crash]; ``general=False`` leaves that to :func:`diagnose_general`, for a
    caller with another diagnoser to ask first).

    Works without a tracer too (from the message and the traceback alone), with less detail.
    """
    from gradtrace.runtime.trace.posthoc import diagnose_traceback, user_tb_frame

    found = list(getattr(exc, "__gradtrace__", None) or ())
    if not found:
        found = diagnose_traceback(exc, tracer.state if tracer is not None else None)
    if not found and general:
        found = _general(exc)
    if tracer is None:
        return found
    hit = user_tb_frame(exc)
    if hit is not None:
        tracer.crash_line = (hit[1].path, hit[1].line)
    tracer._caught = [f for f in tracer.state.crash_findings if f not in found]
    tracer.state.crash_findings.extend(f for f in found if f not in tracer.state.crash_findings)
    return tracer._fuse(found, unconfirmed=False) if found else found


def diagnose_general(exc: BaseException, tracer: Tracer) -> list[Finding]:
    """The general crash finding for ``exc`` (NOTE [general crash]) added to ``tracer``'s
    diagnosis; for a caller whose diagnosers all found nothing."""
    found = _general(exc)
    tracer.state.crash_findings.extend(f for f in found if f not in tracer.state.crash_findings)
    return found


def _general(exc: BaseException) -> list[Finding]:
    from gradtrace.runtime.trace.crash_general import general_finding
    from gradtrace.runtime.trace.posthoc import user_tb_frame

    try:
        hit = user_tb_frame(exc)
        f = general_finding(exc, hit[1], hit[0]) if hit is not None else None
    except Exception:  # diagnosis must never hide the user's own error
        if strict():
            raise
        LOG.debug("gradtrace: general crash finding failed", exc_info=True)
        return []
    return [f] if f is not None else []
