"""The files of the project index (NOTE [project index] in :mod:`.project`): where an import
of a file leads in the checkout, each other file read and parsed once per process (its own
context), and a search of their bytes for words (no parse) for the rules' word gates."""
from __future__ import annotations

import ast
import hashlib
import io
import itertools
import os
import re
import tokenize
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.owners import OWNERS, READS
from gradtrace.lint.nodes import bfs_walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_BYTES = 1_000_000  # a larger file is not read (generated code, vendored bundles)
MAX_DEPTH = 2  # files away from the checked one
MAXFILES = 400  # foreign files kept per process (least recently used go first)
_SKIP_TOP = frozenset({"torch", "torchvision", "torchaudio", "numpy", "__future__"})
_NOT_OURS = ("site-packages", "dist-packages")

_ROOTS: list[str] = []  # absolute roots given to `check`
FILES: dict[str, _Foreign | None] = {}  # realpath -> parsed file (None: no fact)
_STAMPS: dict[str, tuple[int, int]] = {}  # realpath -> (mtime_ns, size) when read
_CLOCK = [0]
TOUCHED: list[set[str]] = []  # the files a resolution in progress used


class _Foreign:
    __slots__ = ("ctx", "digest", "depth", "used", "deps")

    def __init__(self, ctx: Context, digest: str, depth: int) -> None:
        self.ctx = ctx
        self.digest = digest
        self.depth = depth
        self.used = 0
        self.deps: dict[str, str] = {}  # files its own facts read (path -> digest)


def set_roots(paths: list[str] | tuple[str, ...]) -> None:
    """The folders given to ``check`` (a file given: its folder); a new run forgets the
    listings of the last one (:data:`ON_RUN`)."""
    folders = dict.fromkeys(p if os.path.isdir(p) else os.path.dirname(p) or "." for p in paths)
    # each folder once (files of one folder: one realpath), the first of each in order: every
    # reader takes the first root that holds a file, or the shortest
    _ROOTS[:] = dict.fromkeys(map(os.path.realpath, folders))
    key = tuple(_ROOTS)
    if key not in _ROOT_IDS:
        if len(_ROOT_IDS) > 1_000:
            _ROOT_IDS.clear()
        _ROOT_IDS[key] = next(_NUMBERS)  # never a number given before (keys of _MODULES)
    _ROOTS_ID[0] = _ROOT_IDS[key]
    for reset in ON_RUN:
        reset()


_ROOTS_ID = [0]  # a number per distinct list of roots (for keys: NOTE [project index])
_ROOT_IDS: dict[tuple[str, ...], int] = {(): 0}
_NUMBERS = itertools.count(1)
ON_RUN: list[Callable[[], None]] = []  # what a check run starts afresh (NOTE [reverse index])
ON_DROP: list[Callable[[str], None]] = []  # what forgets a file dropped from FILES


def roots() -> list[str]:
    return list(_ROOTS)



def depth_of(ctx: Context) -> int:
    f = FILES.get(ctx.path) if OWNERS else None
    return f.depth if f is not None and f.ctx is ctx else 0


def imports_of(ctx: Context) -> dict[str, tuple[int, str, str | None]]:
    """Local name -> (level, module, imported name or None) of the file's imports."""
    def make() -> dict[str, tuple[int, str, str | None]]:
        out: dict[str, tuple[int, str, str | None]] = {}
        todo = list(ctx.tree.body)  # the module's statements, through `if`/`try` blocks
        for n in todo:
            if isinstance(n, ast.Import):
                for a in n.names:
                    if a.asname:
                        out[a.asname] = (0, a.name, None)
                    else:
                        top = a.name.partition(".")[0]
                        out.setdefault(top, (0, top, None))
            elif isinstance(n, ast.ImportFrom):
                for a in n.names:
                    if a.name != "*":
                        out[a.asname or a.name] = (n.level, n.module or "", a.name)
            elif isinstance(n, (ast.If, ast.Try)):
                todo.extend(n.body)
                todo.extend(n.orelse)
                for h in getattr(n, "handlers", ()):
                    todo.extend(h.body)
        return out
    return ctx.memo("project-imports", ctx.tree, make)


def _bases(path: str, level: int) -> list[str]:
    """The folders an import of ``level`` (0: absolute) is looked up from."""
    here = os.path.dirname(path)
    if level:
        for _ in range(level - 1):
            here = os.path.dirname(here)
        return [here]
    top = here
    while "__init__.py" in _listing(top) and os.path.dirname(top) != top:
        top = os.path.dirname(top)
    for r in _ROOTS:  # a root given to `check` above the package top
        if (top + os.sep).startswith(r + os.sep) and len(r) < len(top):
            top = r
    out = []
    d = here
    while True:
        out.append(d)
        if d == top or os.path.dirname(d) == d:
            break
        d = os.path.dirname(d)
    return out + [os.path.join(b, "src") for b in out if "src" in _listing(b)]


def _listing(folder: str) -> frozenset[str]:
    """The names in ``folder`` (read once per process: NOTE [project index])."""
    got = _LISTINGS.get(folder)
    if got is None:
        try:
            got = frozenset(os.listdir(folder))
        except OSError:
            got = frozenset()
        if len(_LISTINGS) > 20_000:
            _LISTINGS.clear()
        _LISTINGS[folder] = got
    return got


_LISTINGS: dict[str, frozenset[str]] = {}


def _module_file(base: str, module: str) -> str | None:
    parts = [p for p in module.split(".") if p]
    if any(s in base for s in _NOT_OURS):
        return None
    folder = os.path.join(base, *parts[:-1]) if parts else base
    names = _listing(folder)
    if parts and parts[-1] + ".py" in names:
        cand = os.path.join(folder, parts[-1] + ".py")
    elif not parts or parts[-1] in names:
        cand = os.path.join(folder, *parts[-1:], "__init__.py")
        if not parts and "__init__.py" not in names or parts and \
                "__init__.py" not in _listing(os.path.join(folder, parts[-1])):
            return None
    else:
        return None
    return cand  # the folders are real paths already (``_find_module``)


def real_path(ctx: Context) -> str:
    """``os.path.realpath`` of the checked file's path (once per file)."""
    return ctx.memo("project-realpath", ctx.tree, lambda: os.path.realpath(ctx.path))


def _find_module(ctx: Context, level: int, module: str) -> str | None:
    """The file an import of ``module`` at ``level`` in ``ctx``'s file names (looked up once
    per process for each folder: a sibling made while an editor runs needs a restart)."""
    if not level and module.partition(".")[0] in _SKIP_TOP:
        return None
    me = real_path(ctx)
    key = (os.path.dirname(me), level, module, _ROOTS_ID[0])
    if key not in _MODULES:
        if len(_MODULES) > 100_000:
            _MODULES.clear()
        _MODULES[key] = next((got for base in _bases(me, level)
                              if (got := _module_file(base, module)) is not None), None)
    got = _MODULES[key]
    return None if got == me else got


_MODULES: dict[tuple[str, int, str, int], str | None] = {}


def _load(path: str, depth: int) -> _Foreign | None:
    """The parsed file at ``path`` (once per process while its mtime and size hold)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size)
    if path in FILES and _STAMPS.get(path) == stamp:
        got = FILES[path]
        if got is not None and depth < got.depth:
            got.depth = depth
        return got
    _drop(path)
    FILES[path] = None
    _STAMPS[path] = stamp
    if st.st_size > MAX_BYTES:
        return None
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    READS[0][path] = digest  # an unparsable sibling is read too: fixing it changes answers
    text = _decoded(data)
    if text is None:
        return None
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    ctx = _context(path, text, tree)
    got = FILES[path] = _Foreign(ctx, digest, depth)
    for n in bfs_walk(tree):  # ast.walk's nodes and order, at half its cost
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            OWNERS[id(n)] = (n, ctx)
    _CLOCK[0] += 1  # the newest file is the most recently used: evict others first
    got.used = _CLOCK[0]
    _evict()
    return got


def _decoded(data: bytes) -> str | None:
    """The text of a file's bytes as Python reads it (BOM, coding cookie), or None."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return None
    return text[1:] if text.startswith("\ufeff") else text


# The class of a file's context, handed in by :mod:`gradtrace.lint.context` when it loads: the
# index makes contexts of other files without importing that module back (no import cycle).
CONTEXT_CLASS: list[type[Context]] = []


def _context(path: str, text: str, tree: ast.Module) -> Context:
    """A context for another file, leaving the checked file's walk index alone."""
    from gradtrace.lint import nodes
    from gradtrace.lint.names import Imports
    Context = CONTEXT_CLASS[0]
    imports = Imports()
    for n in bfs_walk(tree):  # ast.walk's order: a later import of a name wins
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            imports.add(n)
    imports.add_callable_aliases(tree.body)
    saved = nodes._FILE[0]
    try:
        return Context(path, text, tree, imports)
    finally:
        nodes._FILE[0] = saved


def _drop(path: str) -> None:
    got = FILES.pop(path, None)
    _STAMPS.pop(path, None)
    for forget in ON_DROP:  # answers holding the dropped context (NOTE [reverse index])
        forget(path)
    if got is not None:
        for n in ast.walk(got.ctx.tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                OWNERS.pop(id(n), None)


def _evict() -> None:
    live = [(f.used, p) for p, f in FILES.items() if f is not None]
    if len(live) > MAXFILES:
        for _, p in sorted(live)[:len(live) - MAXFILES]:
            _drop(p)


def use(f: _Foreign) -> Context:
    """``f``'s context, recorded as read by the checked file with every file ``f``'s own
    facts read (they may be cached in ``f``'s context from an earlier checked file)."""
    _CLOCK[0] += 1
    f.used = _CLOCK[0]
    READS[0][f.ctx.path] = f.digest
    READS[0].update(f.deps)
    if TOUCHED:
        TOUCHED[-1].add(f.ctx.path)
    return f.ctx


def module_context(ctx: Context, level: int, module: str) -> Context | None:
    """The context of the module file an import names, or None."""
    depth = depth_of(ctx) + 1
    if depth > MAX_DEPTH:
        return None
    path = _find_module(ctx, level, module)
    f = _load(path, depth) if path is not None else None
    if f is None:
        return None
    owner = FILES.get(ctx.path) if depth > 1 else None
    if owner is not None and owner.ctx is ctx:
        owner.deps[f.ctx.path] = f.digest
        owner.deps.update(f.deps)
    return use(f)


_TEXTS: dict[str, tuple[tuple[int, int], bytes]] = {}


def imported_mentioning(ctx: Context, text: str, words: tuple[str, ...]) -> bool:
    """Whether ``text`` (code of ``ctx``'s file) calls a name bound by an import to a function
    of another file of the project whose text holds one of ``words`` (``from utils import
    compute_loss``; through a package ``__init__`` re-export), or to a module of the project
    holding one (``import utils`` then ``utils.f(...)``): found in the files' bytes, not
    parsed. A rule that needs a word in the file to have anything to say may still have it
    through such a function (NOTE [project index])."""
    if depth_of(ctx) >= MAX_DEPTH:
        return False
    return any(import_holds(ctx, local, words) for local in imports_of(ctx)
               if local + "(" in text or local + "." in text)


def import_holds(ctx: Context, local: str, words: tuple[str, ...]) -> bool | None:
    """Whether what the import binding ``local`` names in ``ctx``'s file (a function of another
    file, or a module) holds one of ``words`` in its text (:func:`imported_mentioning`, for
    one name); None: ``local`` is not bound by an import of the project's files. A gate read
    from bytes before a parse of the other file."""
    spec = imports_of(ctx).get(local)
    if spec is None:
        return None
    memo: dict[str, bool] = ctx.memo("project-mentions:" + "|".join(words), ctx.tree, dict)
    got = memo.get(local)
    if got is None:
        got = memo[local] = _mentions(ctx, spec, words)
    return got


def _mentions(ctx: Context, spec: tuple[int, str, str | None], words: tuple[str, ...]
              ) -> bool:
    level, module, attr = spec
    whole = (module + "." + attr).strip(".") if attr else module
    path = _find_module(ctx, level, whole)
    if path is not None:  # a module: `import utils`, `from . import commons`
        return any(w.encode() in _text(path) for w in words)
    path = _find_module(ctx, level, module) if attr else None
    return path is not None and _function_holds(path, attr, words, 1)  # type: ignore[arg-type]


def _text(path: str) -> bytes:
    try:
        st = os.stat(path)
    except OSError:
        return b""
    stamp = (st.st_mtime_ns, st.st_size)
    got = _TEXTS.get(path)
    if got is not None and got[0] == stamp:
        return got[1]
    data = b""
    if st.st_size <= MAX_BYTES:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            pass
    if len(_TEXTS) > 4 * MAXFILES:
        _TEXTS.clear()
    _TEXTS[path] = (stamp, data)
    return data


def _function_holds(path: str, name: str, words: tuple[str, ...], hops: int) -> bool:
    """Whether the text of the top-level ``def name`` (or ``class name``, its methods
    included) of the file at ``path`` holds one of ``words``; for a package ``__init__``
    importing ``name`` from a module of the package, that module's (``hops`` such steps)."""
    key = (path, name, words)
    got = _HOLDS.get(key)
    if got is None:
        _HOLDS[key] = False  # guard: a package re-exporting itself
        defs, exports = _outline(path)
        body = defs.get(name)
        if body is not None:
            got = any(w.encode() in body for w in words)
        else:
            sub = exports.get(name)
            f = _module_file(os.path.dirname(path), sub) if sub and hops else None
            got = f is not None and _function_holds(f, name, words, hops - 1)
        if len(_HOLDS) > 100_000:
            _HOLDS.clear()
        _HOLDS[key] = got
    return got


_HOLDS: dict[tuple[str, str, tuple[str, ...]], bool] = {}
_OUTLINES: dict[str, tuple[bytes, tuple[dict[str, bytes], dict[str, str]]]] = {}
_DEF = re.compile(rb"^(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)|^[^\s#)]", re.M)


def _outline(path: str) -> tuple[dict[str, bytes], dict[str, str]]:
    """(top-level function or class name -> its text, name -> the module of the package a
    ``from .module import name`` takes it from) of the file at ``path``, from its bytes."""
    data = _text(path)
    got = _OUTLINES.get(path)
    if got is not None and got[0] is data:
        return got[1]
    defs: dict[str, bytes] = {}
    name, start, deco = None, 0, None
    for m in _DEF.finditer(data):
        if name is not None:
            defs[name] = data[start:m.start()]
            name = None
        if m.group(1):  # a def's text begins at its decorators (`@torch.no_grad()`)
            name, start, deco = m.group(1).decode(), m.start() if deco is None else deco, None
        else:
            deco = (m.start() if deco is None else deco) if data[m.start()] == 64 else None
    if name is not None:
        defs[name] = data[start:]
    exports: dict[str, str] = {}
    for r in _RE_EXPORT.finditer(data):
        rest = data[r.end():r.end() + 4000].lstrip(b" \t")
        names = rest[1:rest.find(b")")] if rest.startswith(b"(") else rest.split(b"\n", 1)[0]
        for n in re.findall(rb"(\w+)(?:\s+as\s+(\w+))?", names):
            exports[(n[1] or n[0]).decode()] = r.group(1).decode()
    if len(_OUTLINES) > 4 * MAXFILES:
        _OUTLINES.clear()
    _OUTLINES[path] = (data, (defs, exports))
    return defs, exports


_RE_EXPORT = re.compile(rb"^[ \t]*from[ \t]+\.([\w.]+)[ \t]+import", re.M)
