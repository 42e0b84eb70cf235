"""Which of the user's code ran during a tracing session (NOTE [code that ran]).

# NOTE [code that ran]
The fuse (NOTE [ranking] in :mod:`gradtrace.runtime.fuse`) keeps a static finding only on code
that ran. Three sources say which user functions ran:

1. the frames the tracer walked to from torch calls and hooks (:data:`frames.INTERNAL_FILES`):
   every function that called torch while the tracer recorded;
2. the methods of the module classes that ran (their ``__init__`` ran before a hook could see
   it);
3. a function-entry recorder (:class:`RanRecorder`), for the functions that never call torch
   themselves: an ``adjust_learning_rate`` that writes into ``optimizer.param_groups``, a
   freezing helper that only sets ``requires_grad``. On Python 3.12+ it is a
   ``sys.monitoring`` ``PY_START`` callback that disables itself per code object after the
   first call, on for the whole session (a later session in the same process calls
   ``restart_events()``, which also re-enables other tools' disabled events once). Before 3.12
   it is a ``sys.settrace`` function that sees 'call' events only (no line events): the
   interpreter then runs every Python frame on its slow path, gradtrace's own recording
   included (measured: +16% of a plain small-MLP step, +40% of an armed one; on whole armed
   stretches `run` on REINFORCE went from 1.09x to 1.19x). So it is on from the tracer's entry
   to the end of the first ``RAN_STEPS`` optimizer steps (the setup, and one whole loop
   iteration with what runs after its step), off during the optimizer's own work in
   ``step()``, and then off for good. A function that first runs later (an evaluation after
   epoch 1, an unfreeze at epoch 5) is seen only if it calls torch itself. A library
   module's import pauses it (NOTE [imports unrecorded]).
   A trace or profile function of someone else's (a debugger, coverage.py under pytest-cov)
   is never replaced: the recorder then stays off and only sources 1 and 2 count.
"""
from __future__ import annotations

import ast
import importlib._bootstrap
import os
import sys
import sysconfig
import threading
from types import CodeType, FrameType
from typing import Any, Iterable

_CO_NEWLOCALS = 0x2  # inspect.CO_NEWLOCALS: set on functions, not on module or class bodies

# -- user files ------------------------------------------------------------------------------
_PREFIXES: dict[str | None, tuple[str, ...]] = {}


def library_prefixes() -> tuple[str, ...]:
    """The folders of the standard library, site-packages, torch and gradtrace (read once per
    process and torch location: ``sysconfig`` costs about half a millisecond a call, and the
    hooks ask on training steps)."""
    torch = sys.modules.get("torch")
    key = getattr(torch, "__file__", None)
    got = _PREFIXES.get(key)
    if got is None:
        got = _PREFIXES[key] = _read_prefixes()
    return got


def _read_prefixes() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    out = {os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = paths.get(key)
        if p:
            out.add(os.path.abspath(p) + os.sep)
    torch = sys.modules.get("torch")
    if getattr(torch, "__file__", None):
        out.add(os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)  # type: ignore
    return tuple(sorted(out))


def is_user_file(path: str, prefixes: tuple[str, ...] | None = None) -> bool:
    """A file of the user's own code (an IPython cell counts; libraries and torch do not)."""
    if not path:
        return False
    if path.startswith("<"):
        return path.startswith("<ipython-input-")
    full = os.path.abspath(path)
    parts = full.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    return not full.startswith(prefixes if prefixes is not None else library_prefixes())


def code_spans(codes: Iterable[CodeType]) -> dict[str, list[tuple[int, int]]]:
    """path -> line spans of the user code objects that ran. A function counts from its first
    line to its last; module-level code and class bodies only on their own lines and those of
    the class bodies they hold (not the functions they define: a class statement that ran says
    nothing of its methods; NOTE [class bodies ran with their statement])."""
    prefixes = library_prefixes()
    spans: dict[str, list[tuple[int, int]]] = {}
    for code in codes:
        path = code.co_filename
        if not is_user_file(path, prefixes):
            continue
        key = path if path.startswith("<") else os.path.abspath(path)
        lines = [ln for _, _, ln in code.co_lines() if ln is not None]
        if not lines:
            continue
        if not code.co_flags & _CO_NEWLOCALS:  # a module's or a class's body: its own lines
            spans.setdefault(key, []).extend((ln, ln) for ln in set(_body_lines(code)))
        else:
            spans.setdefault(key, []).append((code.co_firstlineno, max(lines)))
    return spans


def _body_lines(code: CodeType) -> list[int]:
    """The lines of a module's or class's body, with those of the class bodies it defines
    (NOTE [class bodies ran with their statement])."""
    out = [ln for _, _, ln in code.co_lines() if ln is not None]
    for const in code.co_consts:
        if isinstance(const, CodeType) and not const.co_flags & _CO_NEWLOCALS:
            out.extend(_body_lines(const))
    return out


# NOTE [class bodies ran with their statement]
# A class body runs when its `class` statement does, and the recorder may not see its frame
# start (before 3.12 it is paused during an import, NOTE [imports unrecorded], and the module's
# classes are often defined right after one), so the lines of a module's body that ran include
# those of the class bodies it holds (recursively): a `def` line, a class attribute. Not the
# methods (a function object made is not a function called).


def ran_codes(hooks_data: Any, seen: Iterable[CodeType]) -> list[CodeType]:
    """The user code objects that ran: every frame the tracer walked to or the recorder saw
    start, plus the methods of the module classes that ran (NOTE [code that ran])."""
    out = list(seen)
    classes: set[type] = set()
    for rec in list(getattr(hooks_data, "modules", {}).values()):
        m = rec.ref()
        if m is not None:
            classes.add(type(m))
    for cls in classes:
        for value in vars(cls).values():
            code = getattr(value, "__code__", None)
            if isinstance(code, CodeType):
                out.append(code)
    return out


# -- the function-entry recorder ---------------------------------------------------------------
_MONITORING = hasattr(sys, "monitoring")
RAN_STEPS = 2  # before 3.12: optimizer steps recorded (see the NOTE)
_SINKS: list[dict[int, CodeType]] = []  # the recorders that are on (nested tracers: several)
_TOOL: list[int] = []  # the sys.monitoring tool id gradtrace holds (3.12+), while any is on
_STARTS = [0]  # sys.monitoring recordings started in this process


def _call(frame: FrameType, event: str, arg: Any) -> None:
    """The ``sys.settrace`` function: 'call' events only (returns no local trace function).
    A library module's body pauses it (NOTE [imports unrecorded])."""
    code = frame.f_code
    if code.co_name == "<module>" and frame.f_back is not None \
            and frame.f_back.f_code is _IMPORT_EXEC and not is_user_file(code.co_filename):
        sys.settrace(None)
        PAUSED[:] = [frame, threading.get_ident()]
        return
    for sink in _SINKS:
        sink[id(code)] = code


# NOTE [imports unrecorded]
# Before 3.12 the recorder's ``sys.settrace`` slows every Python frame, and the largest stretch
# of frames while it is on is often an import: a script's own imports after the tracer entered,
# or a first call that imports lazily (``torch.optim``'s first optimizer imports
# ``torch._dynamo``, about 1 s of module bodies: +0.3 s under the recorder). A library module's
# body is not the user's code and what it calls during its import is library code too, so the
# recorder takes itself off (``sys.settrace(None)``) when the import system starts a library
# module's body (not for code run by ``exec``: a dataclass's generated methods), and
# ``resume_after_import`` puts it back once that body's frame is no longer on the stack; it
# is asked on the tracer's next torch call and optimizer step hook, and it records the code of
# every frame on the stack then (a user function that started after the import and called
# torch). A user module's body and the functions it runs are recorded as before. What an
# import leaves unrecorded: a user function called from a library's module body, and one that
# starts and returns between the end of an import and the tracer's next torch call without
# calling torch itself.
PAUSED: list[Any] = []  # [the library module frame, the thread] while paused for an import
_IMPORT_EXEC = importlib._bootstrap._call_with_frames_removed.__code__  # runs a module's body


def resume_after_import() -> None:
    """Record again once the paused import's module body is off the stack (see the NOTE)."""
    if not PAUSED or PAUSED[1] != threading.get_ident():
        return
    paused, frames = PAUSED[0], []
    f: FrameType | None = sys._getframe(1)
    while f is not None:
        if f is paused:
            return
        frames.append(f.f_code)
        f = f.f_back
    PAUSED.clear()
    if not _SINKS or sys.gettrace() is not None or sys.getprofile() is not None:
        return
    for code in frames:
        for sink in _SINKS:
            sink[id(code)] = code
    sys.settrace(_call)


def _started(code: CodeType, offset: int) -> Any:
    for sink in _SINKS:
        sink[id(code)] = code
    return sys.monitoring.DISABLE  # type: ignore[attr-defined]


class RanRecorder:
    """Records the code objects whose frames start while it is on (NOTE [code that ran]).
    ``start``/``stop`` only act on the thread that created it; both are cheap to call often."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.codes: dict[int, CodeType] = {}  # id -> code (kept alive: ids are not reused)
        self.on = False
        self.enabled = True  # False: never records (``trace(static=False)`` has no use for it)
        self.blind = False  # someone else's trace function was there: recorded nothing

    def user_codes(self) -> list[CodeType]:
        """The recorded code objects of user files."""
        prefixes = library_prefixes()
        return [c for c in list(self.codes.values()) if is_user_file(c.co_filename, prefixes)]

    def start(self) -> None:
        """Record from now on (before 3.12: unless another trace function is installed)."""
        if self.on or not self.enabled or threading.get_ident() != self.thread:
            return
        if _MONITORING:
            if not _TOOL and not _claim_tool():
                self.blind = True
                return
            if _STARTS[0]:  # an earlier recording's DISABLE still holds for the code it saw
                sys.monitoring.restart_events()  # type: ignore[attr-defined]
            _STARTS[0] += 1
        elif PAUSED:  # inside a library's import: resume_after_import() puts it on
            pass
        elif sys.gettrace() is not _call:
            if sys.gettrace() is not None or sys.getprofile() is not None:
                self.blind = True
                return
            sys.settrace(_call)
        _SINKS.append(self.codes)
        self.on = True

    def stop(self) -> None:
        """Stop recording (before 3.12 each armed stretch starts and stops it)."""
        if not self.on or threading.get_ident() != self.thread:
            return
        if _MONITORING:
            return  # on for the whole session: see close()
        self._detach()

    def first_steps_done(self) -> None:
        """The first ``RAN_STEPS`` optimizer steps ended: stop unless it costs nothing."""
        if not _MONITORING:
            self.close()

    def close(self) -> None:
        """Stop for good (the tracer's exit)."""
        if self.on and threading.get_ident() == self.thread:
            self._detach()

    def _detach(self) -> None:
        self.on = False
        if any(s is self.codes for s in _SINKS):
            _SINKS[:] = [s for s in _SINKS if s is not self.codes]
        if _SINKS:
            return
        PAUSED.clear()
        if _MONITORING:
            _release_tool()
        elif sys.gettrace() is _call:
            sys.settrace(None)


def _claim_tool() -> bool:
    mon = sys.monitoring  # type: ignore[attr-defined]
    for tool in (4, 3, 2, 1):  # 0 is the debugger's, 5 the optimizer's: a free one between
        if mon.get_tool(tool) is None:
            mon.use_tool_id(tool, "gradtrace")
            mon.register_callback(tool, mon.events.PY_START, _started)
            mon.set_events(tool, mon.events.PY_START)
            _TOOL.append(tool)
            return True
    return False


def _release_tool() -> None:
    mon = sys.monitoring  # type: ignore[attr-defined]
    tool = _TOOL.pop()
    try:
        mon.set_events(tool, 0)
        mon.register_callback(tool, mon.events.PY_START, None)
        mon.free_tool_id(tool)
    except ValueError:
        pass


def scripted_spans(ran: dict[str, list[tuple[int, int]]]) -> None:
    """Add to ``ran`` the bodies of ``@torch.jit.script`` functions whose ``def`` ran: TorchScript
    compiles their source and runs it outside Python, so no frame of theirs is ever seen
    (NOTE [scripted bodies ran with their def]); and the ``__init__`` of a class one of whose
    instance methods ran (NOTE [constructed before its method ran])."""
    for path, spans in ran.items():
        if path.startswith("<"):
            continue
        try:
            with open(path, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
            continue
        ran_lines = {a for a, b in spans if a == b}  # module-level lines that ran
        starts = {a for a, b in spans if b > a}  # the first lines of functions that ran
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                spans.extend(_constructor_span(node, starts))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    _is_script(d) for d in node.decorator_list) and (
                    node.lineno in ran_lines or any(d.lineno in ran_lines
                                                    for d in node.decorator_list)):
                spans.append((node.lineno, node.end_lineno or node.lineno))


# NOTE [constructed before its method ran]
# An instance method that ran was called on an instance, so the class's own `__init__` ran
# before it. The recorder misses it when it ran after the first steps without calling torch
# (NOTE [code that ran]): a predictor object built after training that keeps the trained
# network, whose `predict` (calling torch) is all the tracer sees. A static finding in that
# `__init__` (the network kept as it is, never put in eval mode) is then on code that ran.
# Only methods spanning more than one line count (a one-line method's span is that of a line
# of the class body, which ran with the `class` statement), and not static or class methods.
def _constructor_span(cls: ast.ClassDef, starts: set[int]) -> list[tuple[int, int]]:
    init, ran_method = None, False
    for node in cls.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        if node.name == "__init__":
            init = (first, node.end_lineno or node.lineno)
        elif first in starts and node.args.args and not any(
                isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")
                for d in node.decorator_list):
            ran_method = True
    return [init] if init is not None and ran_method and init[0] not in starts else []


def _is_script(dec: ast.expr) -> bool:
    """``@torch.jit.script``, ``@jit.script``, ``@script`` (called or not)."""
    if isinstance(dec, ast.Call):
        dec = dec.func
    return (isinstance(dec, ast.Attribute) and dec.attr == "script") or (
        isinstance(dec, ast.Name) and dec.id == "script")


# NOTE [scripted bodies ran with their def]
# A function decorated with `torch.jit.script` is compiled from its source when its `def` runs;
# its calls run TorchScript, never a Python frame, so neither the tracer's frames nor the entry
# recorder see it (NOTE [code that ran]). Its body counts as run when its `def` (or decorator)
# line ran: a static finding there (a saved input written in place by a scripted helper) is on
# code that ran.
