"""GT839: a crash that no diagnosis claims, reported at the user's line (issue #13).

# NOTE [general crash]
When the traced program dies of an exception that no diagnoser explains (no catalogue entry,
no post-hoc analysis, no rank session), the run used to print the traceback alone: the JSON,
SARIF and report were empty. :func:`general_finding` reports the exception itself (its type and
torch's message, shortened) at the innermost user frame of the traceback, with a fix line for
the messages that say what to change (:data:`_FIXES`), else a general one.

It applies only when torch is part of the error:

- a traceback frame below the innermost user frame lies in torch's package (an ``nn.Module``
  method, ``torch.optim``, a loader...), outside ``torch.testing`` (a failed ``assert_close``
  is a test's verdict, not a rejected value);
- or a traced torch call raised it (the provenance mode saw it fail);
- or it was raised on the user's line itself, by a statement that hands torch a value: a
  RuntimeError, ValueError or IndexError on a line that calls torch or computes on a tensor,
  or a TypeError/AttributeError about a value that came from torch (its type is torch's, a
  generator a torch method made, ``None`` read from a torch object's attribute, or a torch
  callable the message names).

Never for the user's own ``raise``/``assert``, OSError (a missing file), MemoryError,
ImportError, StopIteration, an error the user's code raised in a DataLoader worker or a spawned
process and torch re-raised, an error raised while torch or a library imports one of its
modules (a stand-in left in ``sys.modules`` breaking a lazy import: no argument is at fault),
nor for BaseExceptions that are not errors (KeyboardInterrupt, SystemExit). The finding ranks
after every other finding the run saw (``rank_key`` in
:mod:`gradtrace.runtime.fuse`), before the static findings no symptom confirmed: it never
displaces a specific diagnosis or a problem the run saw, and leads when alone. ``gradtrace run``
prints the problems seen before it.
"""
from __future__ import annotations

import ast
import linecache
import os
import re
import sys
import types
from typing import Any, Iterator

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site

CODE = "GT839"
_NEVER = (OSError, MemoryError, ImportError, StopIteration, StopAsyncIteration, SyntaxError,
          RecursionError)
# Raised on the user's line: the types torch's own calls raise there (C++ errors are
# RuntimeError; argument checks TypeError/ValueError/IndexError)
_AT_LINE = (RuntimeError, ValueError, IndexError)
_ABOUT_VALUE = (TypeError, AttributeError)
# Python's own words for its own containers and conversions: the value is not torch's
_PYTHON_WORDS = re.compile(r"\b(list|tuple|str|string|range|dict|deque) index\b|values to unpack|"
                           r"invalid literal|could not convert string|math domain|is not in list|"
                           r"empty sequence|dictionary changed size")
_RERAISED = re.compile(r"^Caught \w+ in (DataLoader worker|replica|pin memory)|"
                       r"terminated with the following error")


def torch_dir() -> str | None:
    torch = sys.modules.get("torch")
    f = getattr(torch, "__file__", None)
    return os.path.dirname(os.path.abspath(f)) + os.sep if f else None


def general_finding(exc: BaseException, site: Site | None,
                    frame: types.FrameType | None) -> Finding | None:
    """The GT839 finding for ``exc`` when it applies (NOTE [general crash]), else None."""
    if site is None or not applies(exc, site, frame):
        return None
    text = " ".join(str(exc).split()) if str(exc) else ""
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        text = exc.args[0]  # KeyError's str() quotes the text
    short = text if len(text) <= 160 else text[:157].rstrip() + "..."
    where = _torch_function(exc)
    inside = f" in `{where}`" if where else ""
    what = f"{type(exc).__name__}: {short}" if short else type(exc).__name__
    stmt = _code_text(site.source())
    call = f"`{stmt}`" if stmt and len(stmt) <= 80 else "this line"
    msg = (f"{call} crashed{inside} with {what}; no specific diagnosis of gradtrace applies, "
           "so this is the error itself at the line that made it")
    made = _deferred_call(exc, text)
    if made is not None:  # torch checked a call of the user's after its function returned
        return make(CODE, made, f"`{_code_text(made.source())}`: torch refused what this call "
                    f"handed it once the function returned ({what}), at {call}",
                    fix=fix_for(text), related=[(site, "torch raised the error at this call")])
    return make(CODE, site, msg, fix=fix_for(text))


def _deferred_call(exc: BaseException, text: str) -> Site | None:
    """``ctx.save_for_backward(a, shape)`` in a Function's forward: torch checks what was saved
    only after forward returned, so the traceback ends at ``.apply``. When the message starts
    with the name of a method and a user class handed to torch (a local of torch's frame)
    calls that method at exactly one place, that call."""
    from gradtrace.runtime.fuse import is_user_file

    m = re.match(r"([a-z_][a-z0-9_]*) ", text)
    tdir = torch_dir()
    if m is None or not tdir:
        return None
    name, tb, found = m.group(1), exc.__traceback__, set()
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(tdir):
            for v in list(tb.tb_frame.f_locals.values()):
                if not isinstance(v, type) or (v.__module__ or "").split(".")[0] == "torch":
                    continue
                for fn in list(vars(v).values()):
                    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
                    if code is None or not is_user_file(code.co_filename):
                        continue
                    tree = _tree(code.co_filename)
                    for node in ast.walk(tree) if tree is not None else ():
                        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                                code.co_firstlineno in {node.lineno, *(d.lineno for d in
                                                                       node.decorator_list)}:
                            found |= {Site(code.co_filename, n.lineno) for n in ast.walk(node)
                                      if isinstance(n, ast.Call) and
                                      isinstance(n.func, ast.Attribute) and n.func.attr == name}
        tb = tb.tb_next
    return found.pop() if len(found) == 1 else None


def applies(exc: BaseException, site: Site, frame: types.FrameType | None) -> bool:
    if not isinstance(exc, Exception) or isinstance(exc, _NEVER):
        return False
    if _RERAISED.search(str(exc)) or type(exc).__module__.startswith("torch.multiprocessing"):
        return False
    stmt = statement_at(site)
    if isinstance(stmt, (ast.Raise, ast.Assert)):
        return False  # the user's own raise/assert
    from gradtrace.runtime.frames import INTERNAL_PREFIXES

    own = INTERNAL_PREFIXES[0] if INTERNAL_PREFIXES else "\0"
    deeper = [f for f in _frames_below(exc, site) if not f.f_code.co_filename.startswith(own)]
    if any(_importing(f) for f in deeper):
        return False  # torch (or a library) failed while importing its own modules
    tdir = torch_dir()
    if tdir and deeper:
        files = [f.f_code.co_filename for f in deeper]
        if any(p.startswith(tdir) for p in files):
            return not any(p.startswith(tdir + "testing" + os.sep) for p in files)
        return False  # raised in another library's code (or the standard library's)
    if getattr(exc, "__gradtrace__", None) is not None:
        return True  # a traced torch call raised it
    if frame is None or stmt is None:
        return False
    if isinstance(exc, _ABOUT_VALUE):
        return _torch_value_named(exc, stmt, frame)
    if isinstance(exc, _AT_LINE):
        return not _PYTHON_WORDS.search(str(exc)) and _hands_torch(stmt, frame)
    return False


def _importing(frame: types.FrameType) -> bool:
    """A frame of the import machinery or of a module body being executed (an import)."""
    return frame.f_code.co_name == "<module>" or \
        frame.f_code.co_filename.startswith("<frozen importlib")


def _frames_below(exc: BaseException, site: Site) -> Iterator[types.FrameType]:
    """The traceback's frames after the innermost user frame (the one at ``site``)."""
    tb, frames = exc.__traceback__, []
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    last = None
    for i, (f, line) in enumerate(frames):
        if f.f_code.co_filename == site.path and line == site.line:
            last = i
    if last is None:
        return
    for f, _ in frames[last + 1:]:
        yield f


def _code_text(line: str) -> str:
    """A source line without its comment."""
    import io
    import tokenize

    try:
        for tok in tokenize.generate_tokens(io.StringIO(line).readline):
            if tok.type == tokenize.COMMENT:
                return line[:tok.start[1]].rstrip()
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return line.strip()


def _torch_function(exc: BaseException) -> str:
    """The innermost function of torch's package the traceback passed through, or ''."""
    tdir = torch_dir()
    tb, name = exc.__traceback__, ""
    while tb is not None and tdir:
        code = tb.tb_frame.f_code
        if code.co_filename.startswith(tdir) and (not code.co_name.startswith("_") or
                                                  code.co_name.endswith("__")):
            name = getattr(code, "co_qualname", code.co_name)
        tb = tb.tb_next
    return name


# -- the failing statement ---------------------------------------------------------------------
_TREES: dict[str, tuple[int, ast.Module | None]] = {}


def _tree(path: str) -> ast.Module | None:
    """The file's syntax tree (cached by its text; None if unparsable)."""
    lines = linecache.getlines(path)
    if not lines:
        return None
    key = hash("".join(lines))
    hit = _TREES.get(path)
    if hit is None or hit[0] != key:
        try:
            tree: ast.Module | None = ast.parse("".join(lines))
        except (SyntaxError, ValueError, RecursionError):
            tree = None
        _TREES[path] = hit = (key, tree)
    return hit[1]


def statement_at(site: Site) -> ast.stmt | None:
    """The innermost statement of the file that spans ``site.line`` (None if unparsable)."""
    tree = _tree(site.path)
    if tree is None:
        return None
    best: ast.stmt | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= site.line <= (node.end_lineno or 0):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For,
                                 ast.While, ast.If, ast.With, ast.Try)) and \
                    node.body and site.line >= node.body[0].lineno:
                continue  # a compound statement: its own line only (the header)
            if best is None or node.lineno >= best.lineno:
                best = node
    return best


def _header(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions a statement evaluates on its own line(s) (a compound's header only)."""
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter]
    if isinstance(stmt, (ast.While, ast.If)):
        return [stmt.test]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [i.context_expr for i in stmt.items]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try)):
        return []
    return [stmt]


def _nodes(stmt: ast.stmt) -> Iterator[ast.AST]:
    for part in _header(stmt):
        yield from ast.walk(part)


def _eval(node: ast.AST, frame: types.FrameType) -> tuple[bool, Any]:
    from gradtrace.runtime.trace.posthoc import _eval_chain

    return _eval_chain(node, frame)


def is_torch_value(v: Any) -> bool:
    """A value torch made or defines: a tensor, a module, an optimizer, a torch function, a
    generator of a torch method."""
    if v is None or isinstance(v, (int, float, str, bool, bytes)):
        return False
    if isinstance(v, types.ModuleType):
        return v.__name__.split(".")[0] == "torch"
    if isinstance(v, types.GeneratorType):
        tdir = torch_dir()
        return bool(tdir) and v.gi_code.co_filename.startswith(tdir)
    if callable(v) and not isinstance(v, type):
        mod = getattr(v, "__module__", None) or ""
        if mod.split(".")[0] == "torch":
            return True
        owner = getattr(v, "__self__", None)
        if owner is not None and owner is not v and not isinstance(owner, types.ModuleType):
            return is_torch_value(owner)
    cls = v if isinstance(v, type) else type(v)
    return any((c.__module__ or "").split(".")[0] == "torch" for c in cls.__mro__)


def _torch_callable(v: Any) -> bool:
    """A callable whose code is torch's (a torch function or builtin, a torch method)."""
    fn = getattr(v, "__func__", v)
    code = getattr(fn, "__code__", None)
    if code is not None:
        tdir = torch_dir()
        return bool(tdir) and code.co_filename.startswith(tdir)
    return is_torch_value(v)


def _hands_torch(stmt: ast.stmt, frame: types.FrameType) -> bool:
    """The statement calls a torch callable or computes on a torch value."""
    for node in _nodes(stmt):
        if isinstance(node, ast.Call):
            ok, fn = _eval(node.func, frame)
            if ok and (_torch_callable(fn) or is_torch_value(fn)):
                return True
        elif isinstance(node, (ast.BinOp, ast.Subscript, ast.Compare, ast.UnaryOp)):
            parts = [node.left, node.right] if isinstance(node, ast.BinOp) else \
                [node.value] if isinstance(node, ast.Subscript) else \
                [node.left, *node.comparators] if isinstance(node, ast.Compare) else \
                [node.operand]  # type: ignore[attr-defined]
            for part in parts:
                ok, v = _eval(part, frame)
                if ok and is_torch_value(v):
                    return True
    if isinstance(stmt, (ast.Assign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for t in targets:
            if isinstance(t, (ast.Subscript, ast.Attribute)):
                ok, v = _eval(t.value, frame)
                if ok and is_torch_value(v):
                    return True
    return False


_QUOTED = re.compile(r"'([\w.]+)'")


def _torch_value_named(exc: BaseException, stmt: ast.stmt, frame: types.FrameType) -> bool:
    """A TypeError/AttributeError about a value that came from torch."""
    if isinstance(exc, AttributeError):
        obj = getattr(exc, "obj", None)
        if obj is not None:
            return is_torch_value(obj)
        name = getattr(exc, "name", None)
        return any(_none_from_torch(n, frame) for n in _nodes(stmt)
                   if isinstance(n, ast.Attribute) and n.attr == name)
    text = str(exc)
    named = set(_QUOTED.findall(text))
    for node in _nodes(stmt):
        if isinstance(node, ast.Call):
            ok, fn = _eval(node.func, frame)
            if not ok or not _torch_callable(fn):
                continue
            qual = getattr(fn, "__qualname__", "") or getattr(fn, "__name__", "")
            short = qual.rsplit(".", 1)[-1]
            if qual and (text.startswith(f"{qual}()") or text.startswith(f"{short}(")
                         or text.startswith(short + " ")):
                return True  # the torch callable's own argument check
            code = getattr(getattr(fn, "__func__", fn), "__code__", None)
            if code is not None and code.co_flags & 0x20 and "generator" in named:
                return True  # a generator made by a torch method (parameters())
        elif isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
            ok, v = _eval(node, frame)
            if ok and v is not None and is_torch_value(v) and (
                    {c.__name__ for c in type(v).__mro__} & named):
                return True
            if ok and v is None and "NoneType" in named and isinstance(node, ast.Attribute) \
                    and _none_from_torch(node, frame, own=True):
                return True
    return False


def _none_from_torch(node: ast.AST, frame: types.FrameType, own: bool = False) -> bool:
    """``x.a`` (or, with ``own``, ``node`` itself) is None read from a torch object's
    attribute (``p.grad`` of a parameter that got no gradient)."""
    target = node if own else getattr(node, "value", None)
    if not isinstance(target, ast.Attribute):
        return False
    ok, v = _eval(target, frame)
    if not ok or v is not None:
        return False
    ok, owner = _eval(target.value, frame)
    return ok and is_torch_value(owner)


# -- what to change -----------------------------------------------------------------------------
_FIXES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(a), b) for a, b in (
    (r"missing \d+ required positional argument: '(\w+)'",
     "pass `{0}` to this call (the method needs it every time, e.g. "
     "`scheduler.step(val_loss)` for ReduceLROnPlateau)"),
    (r"unsupported operand type\(s\) for \+: 'generator' and 'generator'",
     "join the parameter generators with `[*a.parameters(), *b.parameters()]` or "
     "`itertools.chain(...)`; generators cannot be added"),
    (r"unsupported operand type\(s\) for .*'NoneType'",
     "a `.grad` (or another torch attribute) is None here: skip tensors whose `.grad is None` "
     "(frozen or unused parameters), or make sure backward() reached them"),
    (r"module name can't contain \"\.\"",
     "use a module name without '.' (e.g. 'norm1'); a dot separates submodule names"),
    (r"attribute '(\w+)' already exists",
     "use a key that is not already an attribute of nn.Module (e.g. '{0}_')"),
    (r"save_for_backward can only save variables, but argument \d+ is of type (\w+)",
     "give save_for_backward tensors (or None) only: unpack a {0} of tensors (`*{0}`), and "
     "keep other values (a shape, a flag) as attributes of ctx (`ctx.shape = shape`)"),
    (r"index -?\d+ is out of range",
     "the container is shorter than the index: append() to a ModuleList/ParameterList built "
     "empty instead of assigning by index"),
    (r"No inf checks were recorded for this optimizer",
     "step the GradScaler only for an optimizer whose parameters got gradients from the "
     "scaled loss this iteration (skip it, or call scaler.step only when its network ran)"),
    (r"all elements of input should be between 0 and 1",
     "apply torch.sigmoid to the scores first, or use BCEWithLogitsLoss on the raw scores"),
    (r"Expected all tensors to be on the same device",
     "move every tensor of this call to one device (`.to(device)`)"),
    (r"(expected|found) (scalar type|dtype)",
     "convert the operands to one dtype (`.float()`, `.long()` or `.to(dtype)`)"),
    (r"shapes cannot be multiplied|size of tensor a \(\d+\) must match|shape '\[.*\]' is "
     r"invalid for input", "make the shapes agree: check the layer sizes and the shape of the "
     "batch at this call"),
    (r"object is not callable", "this name holds a value, not the module or function meant; "
                                "check what it was assigned"),
    (r"object has no attribute '(\w+)'", "`{0}` does not exist on this object: check what the "
                                          "value is (a module, a tensor, a generator)"),
))


def fix_for(text: str) -> str:
    """The fix line for an error message (a general one when no entry matches)."""
    for rx, fix in _FIXES:
        m = rx.search(text)
        if m is not None:
            return fix.format(*m.groups())
    return "the call at this line passed torch a value it rejects: change that argument"
