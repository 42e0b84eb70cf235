"""``%load_ext gradtrace``: autograd errors in a cell get gradtrace's diagnosis under the traceback.

Each cell runs under one long-lived tracer (re-entered per cell, so what earlier cells did,
e.g. building the optimizer, is remembered). ``%unload_ext gradtrace`` removes everything.
"""
from __future__ import annotations

import sys
from typing import Any

_STATE: dict[int, Any] = {}


class _Extension:
    def __init__(self, ip: Any) -> None:
        from gradtrace.runtime.trace.tracer import Tracer

        self.ip = ip
        self.tracer = Tracer(reentrant=True)
        self.saved_exc: tuple[Any, Any] = ((), None)

    def pre_run_cell(self, *args: Any) -> None:
        if not self.tracer.active:
            self.tracer.__enter__()

    def post_run_cell(self, *args: Any) -> None:
        if self.tracer.active:
            self.tracer.__exit__(None, None, None)

    def custom_exc(self, shell: Any, etype: type, value: BaseException, tb: Any,
                   tb_offset: int | None = None) -> Any:
        try:
            from gradtrace.runtime.frames import hide_own_frames

            hide_own_frames(value)
        except Exception:  # never break the shell's error display
            pass
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        try:
            from gradtrace.runtime.render import render_text
            from gradtrace.runtime.trace.tracer import diagnose

            found = diagnose(value, self.tracer)
            if found:
                sys.stderr.write(render_text(found, title="gradtrace: diagnosis"))
        except Exception:  # never break the shell's error display
            pass
        return None


def load_ipython_extension(ip: Any) -> None:
    """Install the diagnosis into an IPython shell (``%load_ext gradtrace``)."""
    if id(ip) in _STATE:
        return
    ext = _Extension(ip)
    ext.saved_exc = (getattr(ip, "custom_exceptions", ()), getattr(ip, "CustomTB", None))
    _STATE[id(ip)] = ext
    ip.events.register("pre_run_cell", ext.pre_run_cell)
    ip.events.register("post_run_cell", ext.post_run_cell)
    ip.set_custom_exc((Exception,), ext.custom_exc)


def unload_ipython_extension(ip: Any) -> None:
    """Remove everything :func:`load_ipython_extension` installed."""
    ext = _STATE.pop(id(ip), None)
    if ext is None:
        return
    for name, fn in (("pre_run_cell", ext.pre_run_cell), ("post_run_cell", ext.post_run_cell)):
        try:
            ip.events.unregister(name, fn)
        except ValueError:
            pass
    ext.post_run_cell()
    exceptions, handler = ext.saved_exc
    if exceptions and handler is not None:  # give back what was there before us
        ip.custom_exceptions, ip.CustomTB = exceptions, handler
    else:
        ip.set_custom_exc((), None)
