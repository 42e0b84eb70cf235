"""The project around a file: its imports resolved to files of the same checkout, read lazily.

# NOTE [project index]
Every per-file fact stops at an import. This index resolves an imported name to a file of the
checked tree and gives the function or class it names there, with that file's own
:class:`~gradtrace.lint.context.Context`: the facts of that function (does it cut what it
returns, return under grad-off, return a graph, ...) are then the SAME per-file facts, computed
in the other file's context (:func:`home`), not a second implementation.

What resolves: ``from .commons import f`` and ``from . import commons`` (relative to the
file's package), ``from utils.misc import f``, ``import models.vits as m`` then ``m.f(...)``,
``import commons`` then ``commons.f(...)`` (absolute: from the file's own folder and each
parent up to the project root, and the ``src/`` folder of each), ``from models import Net``
where ``models/__init__.py`` re-exports ``Net`` from a module of the package (one hop). The
project root is the nearest folder upward without ``__init__.py``, or a root given to
``check`` (:func:`set_roots`) when that is higher; nothing outside it, nothing under
``site-packages``/``dist-packages``, nothing named like ``torch``. Unknown: no fact.

When: only when a rule asks about a name imported from another file (most files never do),
each file parsed once per process (cached by path, mtime and size; at most ``MAX_BYTES``; a
file that cannot be read, decoded or parsed gives no fact, never an error). Depth: the other
file's own imports are followed the same way, up to ``MAX_DEPTH`` files away from the checked
one (a forward that calls a helper of a third file); beyond that, no fact.

Unsaved buffers: the flake8 plugin and the editor check one buffer; the files it imports are
read from disk, so an unsaved edit of a sibling is not seen until it is saved.

Findings of a file now depend on the files its facts read: :func:`begin_reads` and
:func:`reads` give the digests of those files for the result cache (NOTE [cache]).
"""
from __future__ import annotations

import ast
import hashlib
import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

Def = ast.FunctionDef | ast.AsyncFunctionDef
MAX_BYTES = 1_000_000  # a larger file is not read (generated code, vendored bundles)
MAX_DEPTH = 2  # files away from the checked one
MAX_FILES = 400  # foreign files kept per process (least recently used go first)
_SKIP_TOP = frozenset({"torch", "torchvision", "torchaudio", "numpy", "__future__"})
_NOT_OURS = ("site-packages", "dist-packages")

_ROOTS: list[str] = []  # absolute roots given to `check`
_FILES: dict[str, _Foreign | None] = {}  # realpath -> parsed file (None: no fact)
_STAMPS: dict[str, tuple[int, int]] = {}  # realpath -> (mtime_ns, size) when read
_OWNERS: dict[int, tuple[ast.AST, Context]] = {}  # id(def node) -> (node, its context)
_READS: list[dict[str, str]] = [{}]  # per checked file: path -> digest of what facts read
_CLOCK = [0]
_TOUCHED: list[set[str]] = []  # the files a resolution in progress used


class _Foreign:
    __slots__ = ("ctx", "digest", "depth", "used", "deps")

    def __init__(self, ctx: Context, digest: str, depth: int) -> None:
        self.ctx = ctx
        self.digest = digest
        self.depth = depth
        self.used = 0
        self.deps: dict[str, str] = {}  # files its own facts read (path -> digest)


def set_roots(paths: list[str] | tuple[str, ...]) -> None:
    """The folders given to ``check`` (a file given: its folder)."""
    _ROOTS[:] = [os.path.realpath(p if os.path.isdir(p) else os.path.dirname(p) or ".")
                 for p in paths]


def roots() -> list[str]:
    return list(_ROOTS)


def begin_reads() -> None:
    """A new checked file: forget which other files the last one's facts read."""
    _READS[0] = {}


def reads() -> dict[str, str]:
    """The other files (path -> blake2b of their bytes) the facts of this file read."""
    return dict(_READS[0])


def home(ctx: Context, node: ast.AST | None) -> Context:
    """The context ``node`` belongs to: ``ctx``, or another file's for a node of it."""
    if node is None or not _OWNERS:
        return ctx
    got = _OWNERS.get(id(node))
    if got is None or got[0] is not node:
        return ctx
    return got[1]


def foreign_path(ctx: Context, node: ast.AST) -> str | None:
    """The path of the other file ``node`` belongs to (None: ``ctx``'s own)."""
    h = home(ctx, node)
    return None if h is ctx else h.path


def shown_path(path: str, beside: str) -> str:
    """``path`` spelled as the checked file ``beside`` is: relative to the current folder
    when that one is relative (a finding's other locations read like its own)."""
    if os.path.isabs(beside):
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel


def _depth(ctx: Context) -> int:
    f = _FILES.get(ctx.path) if _OWNERS else None
    return f.depth if f is not None and f.ctx is ctx else 0


def _imports(ctx: Context) -> dict[str, tuple[int, str, str | None]]:
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


def _find_module(ctx: Context, level: int, module: str) -> str | None:
    """The file an import of ``module`` at ``level`` in ``ctx``'s file names (looked up once
    per process for each folder: a sibling made while an editor runs needs a restart)."""
    if not level and module.partition(".")[0] in _SKIP_TOP:
        return None
    me = ctx.memo("project-realpath", ctx.tree, lambda: os.path.realpath(ctx.path))
    key = (os.path.dirname(me), level, module, tuple(_ROOTS))
    if key not in _MODULES:
        if len(_MODULES) > 100_000:
            _MODULES.clear()
        _MODULES[key] = next((got for base in _bases(me, level)
                              if (got := _module_file(base, module)) is not None), None)
    got = _MODULES[key]
    return None if got == me else got


_MODULES: dict[tuple[str, int, str, tuple[str, ...]], str | None] = {}


def _load(path: str, depth: int) -> _Foreign | None:
    """The parsed file at ``path`` (once per process while its mtime and size hold)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size)
    if path in _FILES and _STAMPS.get(path) == stamp:
        got = _FILES[path]
        if got is not None and depth < got.depth:
            got.depth = depth
        return got
    _drop(path)
    _FILES[path] = None
    _STAMPS[path] = stamp
    if st.st_size > MAX_BYTES:
        return None
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    _READS[0][path] = digest  # an unparsable sibling is read too: fixing it changes answers
    from gradtrace.lint import decode
    text, problem = decode(data, path)
    if text is None or problem is not None:
        return None
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    ctx = _context(path, text, tree)
    got = _FILES[path] = _Foreign(ctx, digest, depth)
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            _OWNERS[id(n)] = (n, ctx)
    _evict()
    return got


def _context(path: str, text: str, tree: ast.Module) -> Context:
    """A context for another file, leaving the checked file's walk index alone."""
    from gradtrace.lint import nodes
    from gradtrace.lint.context import Context
    from gradtrace.lint.names import Imports
    imports = Imports()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            imports.add(n)
    saved = nodes._FILE[0]
    try:
        return Context(path, text, tree, imports)
    finally:
        nodes._FILE[0] = saved


def _drop(path: str) -> None:
    got = _FILES.pop(path, None)
    _STAMPS.pop(path, None)
    if got is not None:
        for n in ast.walk(got.ctx.tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                _OWNERS.pop(id(n), None)


def _evict() -> None:
    live = [(f.used, p) for p, f in _FILES.items() if f is not None]
    if len(live) > MAX_FILES:
        for _, p in sorted(live)[:len(live) - MAX_FILES]:
            _drop(p)


def _use(f: _Foreign) -> Context:
    """``f``'s context, recorded as read by the checked file with every file ``f``'s own
    facts read (they may be cached in ``f``'s context from an earlier checked file)."""
    _CLOCK[0] += 1
    f.used = _CLOCK[0]
    _READS[0][f.ctx.path] = f.digest
    _READS[0].update(f.deps)
    if _TOUCHED:
        _TOUCHED[-1].add(f.ctx.path)
    return f.ctx


def module_context(ctx: Context, level: int, module: str) -> Context | None:
    """The context of the module file an import names, or None."""
    depth = _depth(ctx) + 1
    if depth > MAX_DEPTH:
        return None
    path = _find_module(ctx, level, module)
    f = _load(path, depth) if path is not None else None
    if f is None:
        return None
    owner = _FILES.get(ctx.path) if depth > 1 else None
    if owner is not None and owner.ctx is ctx:
        owner.deps[f.ctx.path] = f.digest
        owner.deps.update(f.deps)
    return _use(f)


def _defined(octx: Context, name: str, hops: int = 1) -> tuple[Context, ast.AST] | None:
    """The function or class ``name`` of ``octx``'s file, or re-exported by it (``from .x
    import name`` in a package ``__init__``: ``hops`` such steps)."""
    a = octx.analysis
    fn = a.functions.get(name)
    if fn is not None:
        return octx, fn
    cls = a.classes.get(name)
    if cls is not None and cls.node in octx.tree.body:
        return octx, cls.node
    if hops and name in _imports(octx):
        got = imported(octx, name, hops - 1)
        if isinstance(got, tuple):
            return got
    return None


def imported(ctx: Context, name: str, hops: int = 1
             ) -> tuple[Context, ast.AST] | Context | None:
    """What the local ``name`` imports from a file of the project: (its context, the function
    or class definition), or the context of an imported module; None: not known."""
    if name not in ctx.imports.aliases and name not in ctx.imports.package:
        return None
    spec = _imports(ctx).get(name)
    if spec is None:
        return None
    level, module, attr = spec
    memo: dict = ctx.memo("project-imported", ctx.tree, dict)
    if name in memo:
        got, used = memo[name]
        for path in used:  # read again for this checked file (NOTE [cache])
            f = _FILES.get(path)
            if f is not None:
                _use(f)
        return got
    memo[name] = (None, ())
    _TOUCHED.append(set())
    try:
        if attr is None:  # `import commons`, `import models.vits as m`
            got = module_context(ctx, level, module)
        else:
            sub = module_context(ctx, level, (module + "." + attr).strip("."))
            if sub is not None:  # `from . import commons`, `from models import vits`
                got = sub
            else:
                octx = module_context(ctx, level, module)
                got = _defined(octx, attr, hops) if octx is not None else None
    finally:
        used = _TOUCHED.pop()
    if _TOUCHED:
        _TOUCHED[-1].update(used)
    memo[name] = (got, tuple(used))
    return got


def foreign_def(ctx: Context, func: ast.expr) -> tuple[Context, ast.AST] | None:
    """The definition (function or class) of another file that ``func`` names: ``helper``
    imported from it, ``mod.helper`` / ``pkg.mod.Net`` through an imported module."""
    if not _ROOTS and not ctx.imports.aliases and not ctx.imports.package:
        return None
    parts: list[str] = []
    n = func
    while isinstance(n, ast.Attribute):
        parts.append(n.attr)
        n = n.value
    if not isinstance(n, ast.Name) or len(parts) > 3:
        return None
    got = imported(ctx, n.id)
    for p in reversed(parts):
        if got is None or isinstance(got, tuple):
            return None
        octx = got
        sub = _defined(octx, p)
        if sub is not None:
            got = sub
            continue
        spec = _imports(octx).get(p)
        got = imported(octx, p) if spec is not None else None
    return got if isinstance(got, tuple) else None


def foreign_function(ctx: Context, call: ast.Call) -> Def | None:
    """The function of another file of the project ``call`` runs (``helper(x)``,
    ``utils.helper(x)``), registered so that :func:`home` gives its context."""
    got = foreign_def(ctx, call.func)
    return got[1] if got is not None and isinstance(got[1], (ast.FunctionDef,
                                                             ast.AsyncFunctionDef)) else None


def foreign_class(ctx: Context, func: ast.expr) -> ClassInfo | None:
    """The class of another file of the project ``func`` names (``Net``, ``models.Net``)."""
    got = foreign_def(ctx, func)
    if got is None or not isinstance(got[1], ast.ClassDef):
        return None
    return got[0].analysis.classes.get(got[1].name)


_WRAPPERS = frozenset({"torch.nn.parallel.DistributedDataParallel", "torch.nn.DataParallel",
                       "torch.nn.parallel.DataParallel",
                       "torch.nn.parallel.distributed.DistributedDataParallel"})
_SAME_MODULE = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "double", "half",
                          "bfloat16", "requires_grad_"})


def foreign_callee(ctx: Context, call: ast.Call, scope: object, line: int) -> Def | None:
    """The function of another file of the project that ``call`` (read at ``line`` in
    ``scope``) runs: ``helper(x)`` / ``utils.helper(x)`` imported, not rebound here; or the
    ``forward`` of a module class of another file called through an instance made here
    (``net = Net(...).cuda()``, ``net = DDP(net)``, then ``net(x)``) (NOTE [project index])."""
    f = call.func
    root = f
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name) or root.id == "self":
        return None
    b = _binding(ctx, scope, root.id, line)
    if b is None or isinstance(b.stmt, (ast.Import, ast.ImportFrom)):
        return foreign_function(ctx, call)  # bound by an import only
    if f is not root:
        return None
    cls = _instance_class(ctx, scope, b, 0)
    fwd = cls.methods.get("forward") if cls is not None and cls.is_module else None
    return fwd


def _binding(ctx: Context, scope: object, name: str, line: int):  # type: ignore[no-untyped-def]
    """The binding of ``name`` read at ``line``: in ``scope``, else the module's."""
    b = scope.binding_before(name, line)  # type: ignore[attr-defined]
    if b is None and scope.node is not ctx.tree:  # type: ignore[attr-defined]
        b = ctx.scope(ctx.tree).binding_before(name, 10**9)
    return b


def _instance_class(ctx: Context, scope: object, b: object, depth: int) -> ClassInfo | None:
    """The class of another file whose instance the binding ``b`` holds (through ``.to()``,
    ``.cuda()``, ``DDP(...)``), or None."""
    st = getattr(b, "stmt", None)
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)):
        return None  # `a, b = f()`: not one value
    v = st.value
    while depth < 6 and isinstance(v, ast.Call):
        depth += 1
        f = v.func
        if isinstance(f, ast.Attribute) and f.attr in _SAME_MODULE:
            v = f.value
            continue
        if (ctx.qualified_name(f) or "") in _WRAPPERS and v.args:
            v = v.args[0]
            continue
        return foreign_class(ctx, f)
    if isinstance(v, ast.Name) and depth < 6:
        nb = _binding(ctx, scope, v.id, getattr(b, "line", 0))
        if nb is not None and nb is not b:
            return _instance_class(ctx, scope, nb, depth + 1)
    return None


_TEXTS: dict[str, tuple[tuple[int, int], bytes]] = {}


def imported_mentioning(ctx: Context, text: str, words: tuple[str, ...]) -> bool:
    """Whether ``text`` (code of ``ctx``'s file) calls a name bound by an import to a function
    of another file of the project whose text holds one of ``words`` (``from utils import
    compute_loss``; through a package ``__init__`` re-export), or to a module of the project
    holding one (``import utils`` then ``utils.f(...)``): found in the files' bytes, not
    parsed. A rule that needs a word in the file to have anything to say may still have it
    through such a function (NOTE [project index])."""
    if _depth(ctx) >= MAX_DEPTH:
        return False
    memo: dict[str, bool] = ctx.memo("project-mentions:" + "|".join(words), ctx.tree, dict)
    for local, spec in _imports(ctx).items():
        if local + "(" not in text and local + "." not in text:
            continue
        got = memo.get(local)
        if got is None:
            got = memo[local] = _mentions(ctx, spec, words)
        if got:
            return True
    return False


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
    if len(_TEXTS) > 4 * MAX_FILES:
        _TEXTS.clear()
    _TEXTS[path] = (stamp, data)
    return data


def _function_holds(path: str, name: str, words: tuple[str, ...], hops: int) -> bool:
    """Whether the text of the top-level ``def name`` of the file at ``path`` holds one of
    ``words``; for a package ``__init__`` importing ``name`` from a module of the package,
    that module's (``hops`` such steps)."""
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
_DEF = re.compile(rb"^(?:async[ \t]+)?def[ \t]+(\w+)|^[^\s#)]", re.M)


def _outline(path: str) -> tuple[dict[str, bytes], dict[str, str]]:
    """(top-level function name -> its text, name -> the module of the package a
    ``from .module import name`` takes it from) of the file at ``path``, from its bytes."""
    data = _text(path)
    got = _OUTLINES.get(path)
    if got is not None and got[0] is data:
        return got[1]
    defs: dict[str, bytes] = {}
    name, start = None, 0
    for m in _DEF.finditer(data):
        if name is not None:
            defs[name] = data[start:m.start()]
            name = None
        if m.group(1):
            name, start = m.group(1).decode(), m.start()
    if name is not None:
        defs[name] = data[start:]
    exports: dict[str, str] = {}
    for r in _RE_EXPORT.finditer(data):
        rest = data[r.end():r.end() + 4000].lstrip(b" \t")
        names = rest[1:rest.find(b")")] if rest.startswith(b"(") else rest.split(b"\n", 1)[0]
        for n in re.findall(rb"(\w+)(?:\s+as\s+(\w+))?", names):
            exports[(n[1] or n[0]).decode()] = r.group(1).decode()
    if len(_OUTLINES) > 4 * MAX_FILES:
        _OUTLINES.clear()
    _OUTLINES[path] = (data, (defs, exports))
    return defs, exports


_RE_EXPORT = re.compile(rb"^[ \t]*from[ \t]+\.([\w.]+)[ \t]+import", re.M)
