"""``gradtrace.trace()``: record, in-process, where gradients stop flowing.

Example::

    import gradtrace
    with gradtrace.trace() as tr:
        train_one_epoch()
    for f in tr.findings:
        print(f.code, f.path, f.line, f.message)

The tracer installs one TorchFunctionMode and four global hooks (module forward pre/post,
optimizer step pre/post) and removes all of them on exit, also when the body raises. It keeps
weak references only.
"""
from __future__ import annotations

import logging
from types import TracebackType
from typing import Any

from gradtrace.findings import Finding

LOG = logging.getLogger(__name__)


class Tracer:
    """One tracing session. Use through :func:`trace` (a context manager)."""

    def __init__(self) -> None:
        from gradtrace.runtime.frames import refresh_prefixes
        from gradtrace.runtime.hooks import Hooks
        from gradtrace.runtime.provenance import ProvenanceMode
        from gradtrace.runtime.state import TraceState

        refresh_prefixes()
        self.state = TraceState()
        self.mode = ProvenanceMode(self.state)
        self.hooks = Hooks(self.state, self.mode)
        self.active = False
        self._silent: list[Finding] | None = None

    # -- context manager ---------------------------------------------------------------------
    def __enter__(self) -> Tracer:
        self.hooks.install()
        try:
            self.mode.__enter__()
        except BaseException:
            self.hooks.remove()
            raise
        self.active = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.mode.__exit__(exc_type, exc, tb)
        finally:
            self.hooks.remove()
            self.active = False
        try:
            self._silent = self._silent_findings()
        except Exception:  # diagnosis must never hide the user's own outcome
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
        return out

    def _silent_findings(self) -> list[Finding]:
        from gradtrace.runtime.silent import silent_findings

        return silent_findings(self.state, self.hooks.data)

    def why_no_grad(self, param: Any) -> Finding | None:
        """Why ``param`` has no ``.grad``: not used in forward, graph cut at file:line, frozen.

        Returns ``None`` if ``param.grad`` is set (or nothing is known about it).
        """
        from gradtrace.runtime.silent import why_no_grad

        return why_no_grad(self.state, self.hooks.data, param)

    def diagnose(self, exc: BaseException) -> list[Finding]:
        """The diagnosis of an exception raised while (or after) this session traced."""
        return diagnose(exc, self)


def trace() -> Tracer:
    """Trace autograd in a ``with`` block; the yielded :class:`Tracer` has ``.findings``."""
    return Tracer()


def diagnose(exc: BaseException, tracer: Tracer | None = None) -> list[Finding]:
    """Findings for an exception: the diagnosis made when torch raised it, or one made now.

    Works without a tracer too (from the message and the traceback alone), with less detail.
    """
    found = getattr(exc, "__gradtrace__", None)
    if found:
        return list(found)
    from gradtrace.runtime.posthoc import diagnose_traceback

    state = tracer.state if tracer is not None else None
    found = diagnose_traceback(exc, state)
    if found and tracer is not None:
        tracer.state.crash_findings.extend(f for f in found
                                           if f not in tracer.state.crash_findings)
    return found
