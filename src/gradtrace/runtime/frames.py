"""Find the user's frame cheaply: the first frame outside torch, gradtrace and the stdlib glue.

Hot path: :func:`user_frame` walks ``f_back`` links and looks each code object up in a dict
cache, so the cost after warm-up is a few dict lookups per call. The cache is keyed by
``id(code)``: hashing a code object hashes its constants and names every time (about 1 us for
a large function such as ``Module._call_impl``), an ``id`` costs nothing. ``INTERNAL_FILES`` keeps
every code object seen alive, so its id is never reused while it is in the cache.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import itertools
from dataclasses import dataclass, field
from types import CodeType, FrameType, TracebackType

INTERNAL_FILES: dict[CodeType, bool] = {}  # every code object seen (alive) -> internal?
FRAME_BY_ID: dict[int, bool] = {}  # id(code) -> internal?, for the hot paths
_KEEP: list[CodeType] = []  # code objects equal to one in INTERNAL_FILES (kept alive for FRAME_BY_ID)


def _prefixes() -> tuple[str, ...]:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../gradtrace
    out = [here + os.sep]
    spec = sys.modules.get("torch")
    torch_file = getattr(spec, "__file__", None) if spec else None
    if torch_file:
        out.append(os.path.dirname(os.path.abspath(torch_file)) + os.sep)
    out.extend(_library_dirs())
    # the standard library and installed packages (numpy, copy.deepcopy...) are never the
    # user's line: a torch call they make is charged to the user line that called them
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = paths.get(key)
        if p:
            out.append(os.path.abspath(p) + os.sep)
    return tuple(out)


# Training libraries whose frames are never the user's line (their training loops call the
# user's code): located without importing them.
_LIBRARIES = ("lightning", "pytorch_lightning", "lightning_fabric", "transformers", "accelerate")


def _library_dirs() -> list[str]:
    import importlib.util

    out = []
    for name in _LIBRARIES:
        mod = sys.modules.get(name)
        origin = getattr(mod, "__file__", None) if mod is not None else None
        if origin is None and mod is None:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            origin = spec.origin if spec is not None else None
        if origin:
            out.append(os.path.dirname(os.path.abspath(origin)) + os.sep)
    return out


INTERNAL_PREFIXES: tuple[str, ...] = ()


def refresh_prefixes() -> None:
    """Recompute which files count as internal (call after torch is imported)."""
    global INTERNAL_PREFIXES
    INTERNAL_PREFIXES = _prefixes()
    INTERNAL_FILES.clear()
    FRAME_BY_ID.clear()
    _KEEP.clear()


def is_internal(code: CodeType) -> bool:
    """True if ``code`` belongs to torch, gradtrace or stdlib glue (cached per code object)."""
    hit = FRAME_BY_ID.get(id(code))
    if hit is None:
        fn = code.co_filename
        hit = fn.startswith("<frozen") or fn.startswith(INTERNAL_PREFIXES)
        if code not in INTERNAL_FILES:  # an equal code object already there: keep this one too
            INTERNAL_FILES[code] = hit
        else:
            _KEEP.append(code)
        FRAME_BY_ID[id(code)] = hit
    return hit


def user_frame(start: int = 1) -> FrameType | None:
    """The first frame, from ``start`` frames up, whose code is not internal."""
    try:
        f: FrameType | None = sys._getframe(start + 1)
    except ValueError:
        return None
    cache = FRAME_BY_ID
    while f is not None:
        code = f.f_code
        hit = cache.get(id(code))
        if hit is None:
            hit = is_internal(code)
        if not hit:
            return f
        f = f.f_back
    return None


def user_line() -> tuple[str, int] | None:
    """``(file, line)`` of the user's frame under the caller of the caller (a hook's site)."""
    f = user_frame(2)
    return None if f is None else (f.f_code.co_filename, f.f_lineno)


def raw_site(start: int = 1) -> tuple[CodeType, int, int] | None:
    """``(code, lineno, lasti)`` of the user's frame: the cheap form stored on hot paths."""
    f = user_frame(start + 1)
    return None if f is None else (f.f_code, f.f_lineno, f.f_lasti)


_GLUE = tuple(os.sep + os.path.join("torch", name) for name in ("overrides.py", "_tensor.py"))


def called_by_library(start: int = 1) -> bool:
    """Whether the torch call being recorded was made by library code (a distribution's
    argument check, a helper of an installed package) rather than by the user's own line:
    the first frame above gradtrace and torch's dispatch glue is not the user's."""
    try:
        f: FrameType | None = sys._getframe(start + 1)
    except ValueError:
        return False
    own = INTERNAL_PREFIXES[0]
    while f is not None:
        fn = f.f_code.co_filename
        if not (fn.startswith(own) or fn.endswith(_GLUE)):
            return is_internal(f.f_code)
        f = f.f_back
    return False


_OPTIM = os.sep + os.path.join("torch", "optim") + os.sep


def called_by_optimizer(start: int = 1) -> bool:
    """Whether the torch call being recorded was made by a ``torch.optim`` optimizer's own code
    (LBFGS's work between the evaluations of its closure)."""
    try:
        f: FrameType | None = sys._getframe(start + 1)
    except ValueError:
        return False
    own = INTERNAL_PREFIXES[0]
    while f is not None:
        fn = f.f_code.co_filename
        if not (fn.startswith(own) or fn.endswith(_GLUE)):
            return _OPTIM in fn
        f = f.f_back
    return False


def internal_names(start: int = 1, limit: int = 12) -> list[str]:
    """Function names of the internal frames between here and the user's frame."""
    names: list[str] = []
    try:
        f: FrameType | None = sys._getframe(start + 1)
    except ValueError:
        return names
    while f is not None and limit > 0 and is_internal(f.f_code):
        names.append(f.f_code.co_name)
        f = f.f_back
        limit -= 1
    return names


@dataclass(frozen=True)
class Site:
    """A place in user code: file, 1-based line, the enclosing function and the 0-based column
    of the call (not part of equality: one line is one place)."""

    path: str
    line: int
    function: str = ""
    column: int = field(default=0, compare=False)

    def source(self) -> str:
        """The stripped source text of the line, or '' if unavailable."""
        import linecache

        return linecache.getline(self.path, self.line).strip()

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def site_of(raw: tuple[CodeType, int] | tuple[CodeType, int, int] | None) -> Site | None:
    """Turn a cheap ``(code, lineno[, lasti])`` tuple into a :class:`Site`."""
    if raw is None:
        return None
    code, line = raw[0], raw[1]
    return Site(code.co_filename, line, code.co_name,
                column_at(code, raw[2], line) if len(raw) > 2 else 0)  # type: ignore[misc]


def column_at(code: CodeType, lasti: int, line: int) -> int:
    """0-based column where the expression of the instruction at ``lasti`` starts (0 if
    unknown, e.g. before Python 3.11 or when it starts on another line)."""
    positions = getattr(code, "co_positions", None)
    if positions is None or lasti < 0:
        return 0
    try:
        start, _, col, _ = next(itertools.islice(positions(), lasti // 2, None))
    except (StopIteration, ValueError):
        return 0
    return col if start == line and col is not None else 0


refresh_prefixes()


def _dispatch(tb: TracebackType | None) -> bool:
    code = tb.tb_frame.f_code if tb is not None else None
    return code is not None and code.co_name == "handle_torch_function" and \
        code.co_filename.endswith("overrides.py")


def _hidden(tb: TracebackType) -> bool:
    """Ours, torch's dispatch to a TorchFunctionMode, and the torch call that dispatched
    (the same function appears again, called by the mode)."""
    return tb.tb_frame.f_code.co_filename.startswith(INTERNAL_PREFIXES[0]) or _dispatch(tb) or \
        _dispatch(tb.tb_next)


def hide_own_frames(exc: BaseException | None) -> None:
    """Unlink gradtrace's frames (and torch's dispatch into them) from ``exc``'s traceback, and
    from its causes', so the user's traceback reads as without gradtrace. An error raised in
    gradtrace's own code keeps every frame."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        last = exc.__traceback__
        while last is not None and last.tb_next is not None:
            last = last.tb_next
        if last is not None and not last.tb_frame.f_code.co_filename.startswith(INTERNAL_PREFIXES[0]):
            node = exc.__traceback__
            while node is not None:
                nxt = node.tb_next
                while nxt is not None and _hidden(nxt):
                    nxt = nxt.tb_next
                if nxt is not node.tb_next:
                    node.tb_next = nxt
                node = nxt
        exc = exc.__cause__ or exc.__context__
