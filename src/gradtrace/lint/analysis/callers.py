"""Who calls a function of a file from the project's other files: the reverse project index.

# NOTE [reverse index]
The project index (NOTE [project index] in :mod:`.project`) follows a file's imports outward.
Many facts need the other way: how the callers in other files run a function (under
``no_grad``?), what they pass it, what they do with its value. :func:`foreign_sites` gives,
for a function or class of the checked file, its call sites in the project's other Python
files, each a :class:`Site`: the calling file's context, the call (its arguments:
``Analysis.arguments``), the function or module making it, whether grad is off there, and the
statement holding it (what is done with the result).

How: the project's files are listed once per process and root (the root given to ``check``,
else the package top; at most :data:`MAX_FILES`, a larger tree gives no fact); a cheap text
prefilter keeps the files whose bytes hold the name (at most :data:`MAX_READERS`, more: no
fact), and only those are parsed, through the project index's own cache (recorded as read for
the result cache, NOTE [cache]). A top-level function's or class's call counts when it
resolves through that file's imports to this very definition (same real path, same name), a
star import's included (NOTE [project index]); an import the index cannot follow makes the
answer unknown. A class's sites
are the calls of the instances made there (its ``forward``/``__call__`` runs). A method's
sites are every ``x.name(...)`` of the files whose text holds ``.name(`` (the receiver's type
is not resolved, and a file may call it on an instance it was handed without naming the
class: an over-approximation, so an *every caller* fact stays sound); its name read there as
a value (``f = net.name``) makes the answer unknown.

Answers are kept per process, keyed by the definition's file, name and the parsed readers
(a reader whose bytes changed is parsed again, and the answer recomputed); an answer goes
when one of its readers leaves the index's cache, so no reader's context outlives it. The result cache
(NOTE [cache]) records the readers' bytes and the search itself (:data:`SEARCH` + folder and
words, with a digest of the files that held the words): an edited caller, a new file naming
the function, a file that stops naming it each make the cached result of the checked file
stale; checking that costs one listing and read of the project per search when a warm run
looks the entry up.
"""
from __future__ import annotations

import ast
import hashlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.owners import READS
from gradtrace.lint.analysis.partial_files import partial_reader
from gradtrace.lint.analysis.project_files import (
    FILES, ON_DROP, ON_RUN, _bases, _load, _text, imports_of, real_path, roots, use)
from gradtrace.lint.grad_modes import FUNCTION_TYPES, grad_mode_of

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_FILES = 800     # Python files of a project searched; a larger one gives no fact
MAX_READERS = 12    # files holding the name that are parsed; more: no fact
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages",
                        "build", "dist", "venv", "env"})
_LISTED: dict[str, tuple[str, ...] | None] = {}
SEARCH = "<search>"  # a result-cache dependency that is a search, not a file (NOTE [cache])
_SEARCHED: dict[str, str] = {}
_TOPS: dict[str, str] = {}  # file -> :func:`_top` (the roots and listings of this run)
ON_RUN.append(lambda: (_LISTED.clear(), _SEARCHED.clear(), _TOPS.clear()))  # one tree a run
_ANSWERS: dict[tuple[str, str, str], tuple[tuple[object, ...], list[Site] | None]] = {}


def _forget(path: str) -> None:
    """Drop the answers whose readers include ``path``'s context, dropped from the index:
    an answer's sites hold their readers' contexts, which must not outlive the index's copy
    (NOTE [reverse index]: they are parsed through its cache)."""
    for key in [k for k, (stamp, _) in _ANSWERS.items()
                if any(s[0] == path for s in stamp)]:  # type: ignore[index]
        del _ANSWERS[key]


ON_DROP.append(_forget)


@dataclass(frozen=True)
class Site:
    """One call of the definition in another file (NOTE [reverse index])."""

    ctx: Context        # the file making the call
    call: ast.Call
    where: ast.AST      # the function making it, or the module
    off: bool           # grad off there: no_grad/inference_mode, a decorator, or a
                        # `torch.set_grad_enabled(False)` run before it in the same body

    @property
    def stmt(self) -> ast.stmt | None:
        """The statement holding the call (what is done with its value)."""
        return self.ctx.scope(self.where).statement_of(self.call)

    @property
    def in_eval(self) -> bool:
        """The call's receiver (``net.export()``) or one of its plain-name arguments
        (``evaluate(net, x)``) was put in eval mode (``net.eval()``, ``net.train(False)``)
        earlier in the same function or module body, by a statement of its straight line, and
        not back in train mode in between."""
        f = self.call.func
        names = {n.id for n in (f.value if isinstance(f, ast.Attribute) else None,
                                *self.call.args) if isinstance(n, ast.Name)}
        mode: dict[str, bool] = {}
        for s in _before(self.where, self.stmt):
            c = s.value if isinstance(s, ast.Expr) else None
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and \
                    isinstance(c.func.value, ast.Name) and c.func.value.id in names:
                if c.func.attr == "eval":
                    mode[c.func.value.id] = True
                elif c.func.attr == "train":
                    a = c.args[0] if c.args else None
                    mode[c.func.value.id] = isinstance(a, ast.Constant) and a.value is False
        return any(mode.values())


def project_files(me: str) -> tuple[str, ...] | None:
    """The Python files of the project holding the file ``me`` (None: more than
    :data:`MAX_FILES`)."""
    top = _TOPS.get(me)
    if top is None:
        if len(_TOPS) > 20_000:
            _TOPS.clear()
        top = _TOPS[me] = _top(me)
    if top not in _LISTED:
        _LISTED[top] = _walk(top)
    return _LISTED[top]


def _top(me: str) -> str:
    """The folder a search for ``me``'s callers lists: the root given to ``check`` holding
    it, else the package top."""
    top = next((r for r in roots() if (me + os.sep).startswith(r + os.sep)), None)
    if top is None:
        bases = [b for b in _bases(me, 0) if os.path.basename(b) != "src"]
        top = bases[-1] if bases else os.path.dirname(me)
    return top


def _walk(top: str) -> tuple[str, ...] | None:
    out: list[str] = []
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in _SKIP_DIRS]
        for f in files:
            if f.endswith(".py"):
                out.append(os.path.join(d, f))
                if len(out) > MAX_FILES:
                    return None
    return tuple(out)


def holders(ctx: Context, *words: bytes) -> list[str] | None:
    """The paths of the project's other files whose bytes hold every one of ``words``, the
    search recorded for the result cache (NOTE [cache]); None: a buffer, a project of one
    file, or too large."""
    me = real_path(ctx)
    if not os.path.isfile(me):
        return None  # a buffer or a snippet: no project around it
    files = project_files(me)
    key = SEARCH + "\n".join([_TOPS[me], *(w.decode() for w in words)])
    found = [] if files is None else [p for p in files if all(w in _text(p) for w in words)]
    READS[0][key] = "" if files is None else _holders_digest(found)  # NOTE [cache]
    if files is None or len(files) < 2:
        return None
    return [p for p in found if p != me]


def readers(ctx: Context, *words: bytes, limit: int = MAX_READERS) -> list[Context] | None:
    """The contexts of the project's other files whose bytes hold every one of ``words``
    (None: a buffer, a project of one file, too large, too many such files, or one of them
    unreadable)."""
    paths = holders(ctx, *words)
    if paths is None or len(paths) > limit:
        return None
    out = []
    for p in paths:
        f = _load(p, 1) or partial_reader(p, words)  # NOTE [unparsable reader]
        if f is None:
            return None
        out.append(use(f))
    return out


def foreign_sites(ctx: Context, node: ast.AST) -> list[Site] | None:
    """The calls of ``node`` (a top-level function or class of ``ctx``'s file, or a method of
    a top-level class) in the project's other files (NOTE [reverse index]); None: unknown."""
    cls = ctx.analysis.class_of(node) if isinstance(node, FUNCTION_TYPES) else None
    if isinstance(node, ast.ClassDef) or cls is None:
        if node not in ctx.tree.body:
            return None
        kind = "class" if isinstance(node, ast.ClassDef) else "function"
        words: tuple[bytes, ...] = (node.name.encode(),)  # type: ignore[attr-defined]
    else:
        if cls.node not in ctx.tree.body or cls.methods.get(node.name) is not node:
            return None
        kind = "method"
        words = (f".{node.name}(".encode(),)
    found = readers(ctx, *words)
    if found is None:
        return None
    me = real_path(ctx)
    key = (me, kind, node.name)  # type: ignore[attr-defined]
    stamp = tuple((o.path, getattr(FILES.get(o.path), "digest", ""), id(o)) for o in found)
    got = _ANSWERS.get(key)
    if got is not None and got[0] == stamp:
        return got[1]
    out: list[Site] | None = []
    for octx in found:
        sites = _method_sites(octx, node.name) if kind == "method" \
            else _sites_in(octx, node.name, me, kind == "class")  # type: ignore[attr-defined]
        if sites is None:
            out = None
            break
        out += [Site(octx, c, w, _off_at(octx, c, w)) for c, w in sites]  # type: ignore[operator]
    if len(_ANSWERS) > 20_000:
        _ANSWERS.clear()
    if all(getattr(FILES.get(o.path), "ctx", None) is o for o in found):
        _ANSWERS[key] = (stamp, out)  # not when a reader already left the index's cache
    return out


def unread_member(ctx: Context, fn: ast.AST) -> bool:
    """``fn``, a property of a top-level class of ``ctx``'s file, is read nowhere in the
    project: no other file's bytes hold its name, and its own file names it only where it is
    defined (no ``x.name``, no ``name`` string for ``getattr``). Its value reaches nothing
    (GraphMAE2's ``dec_params``: parameter groups no optimizer is built from). A property
    only: a framework installed outside the project calls hook methods by name, not
    properties. NOTE [reverse index]."""
    cls = ctx.analysis.class_of(fn) if isinstance(fn, FUNCTION_TYPES) else None
    if cls is None or cls.node not in ctx.tree.body or cls.methods.get(fn.name) is not fn \
            or not any((d.id if isinstance(d, ast.Name) else None) == "property"
                       for d in fn.decorator_list):  # type: ignore[attr-defined]
        return False
    name = fn.name  # type: ignore[attr-defined]
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Attribute) and n.attr == name or \
                isinstance(n, ast.Name) and n.id == name or \
                isinstance(n, ast.Constant) and isinstance(n.value, str) and name in n.value or \
                isinstance(n, ast.FunctionDef) and n.name == name and n is not fn:
            return False  # read here (or a setter, another class's member of that name)
    found = readers(ctx, name.encode())
    return found is not None and not found


def _method_sites(octx: Context, name: str) -> list[tuple[ast.Call, ast.AST]] | None:
    """Every ``x.name(...)`` of ``octx``'s file; None when ``x.name`` is read as a value."""
    from gradtrace.lint.analysis.calls import call_sites

    def make() -> list[tuple[ast.Call, ast.AST]] | None:
        called = set()
        out = []
        for call, _, outer in call_sites(octx, name):
            if isinstance(call.func, ast.Attribute):
                called.add(id(call.func))
                out.append((call, next((o for o in reversed(outer)
                                        if isinstance(o, FUNCTION_TYPES)), octx.tree)))
        for n in ast.walk(octx.tree):
            if isinstance(n, ast.Attribute) and n.attr == name and id(n) not in called \
                    and isinstance(n.ctx, ast.Load):
                return None
        return out
    return octx.memo("reverse-method-sites:" + name, octx.tree, make)


def _sites_in(octx: Context, name: str, me: str, is_class: bool
              ) -> list[tuple[ast.Call, ast.AST]] | None:
    """The calls in ``octx``'s file of ``name`` imported from the file ``me`` (for a class,
    of its instances); None when the imported name is also used as a value."""
    from gradtrace.lint.analysis.callees import module_sites, object_sites
    from gradtrace.lint.analysis.calls import call_sites
    from gradtrace.lint.analysis.project import foreign_def
    out: list[tuple[ast.Call, ast.AST]] = []
    local: set[str] = set()
    for call, _, outer in call_sites(octx, name):
        got = foreign_def(octx, call.func)
        if got is None and isinstance(call.func, ast.Name) and \
                name not in octx.analysis.functions and name not in octx.analysis.classes:
            return None  # a star import the index cannot follow: may be this one
        root = call.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if got is None and root is not call.func and isinstance(root, ast.Name) and \
                root.id in imports_of(octx):
            return None  # `losses.dice_loss(...)` through an import the index cannot follow
        if got is None or got[1].name != name or \
                os.path.realpath(got[0].path) != me:  # type: ignore[attr-defined]
            continue
        where = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), octx.tree)
        if isinstance(call.func, ast.Name):
            local.add(call.func.id)
        out.append((call, where))
    if is_class:
        if subclassed(octx, name):
            return None  # its `forward` runs for the instances of a subclass too
        sites: list[tuple[ast.Call, ast.AST]] = []
        for lname in local:
            cinfo = octx.analysis.classes.get(lname)
            if cinfo is not None:
                continue  # a class of that file by the same name
            sites += module_sites(octx.analysis, lname) + object_sites(octx.analysis, lname)
            qual = octx.imports.qualified_name(ast.Name(lname, ast.Load()))
            if qual and qual != lname:  # the kind of an imported class: `post.PostProcessor`
                sites += module_sites(octx.analysis, lname, qual)
        return None if out and not sites else sites  # built there, called where we do not see
    for lname in local:
        for n in ast.walk(octx.tree):
            if isinstance(n, ast.Name) and n.id == lname and isinstance(n.ctx, ast.Load) \
                    and not _called(octx, n):
                return None
    return out


def subclassed(octx: Context, name: str) -> bool:
    """A class of ``octx``'s file derives from a class spelled ``name`` (``class
    DiceLoss(_AbstractDiceLoss)``, or ``(base.Name)``)."""
    return any(isinstance(n, ast.ClassDef) and any(
        (b.id if isinstance(b, ast.Name) else getattr(b, "attr", None)) == name
        for b in n.bases) for n in ast.walk(octx.tree))


def _called(octx: Context, n: ast.Name) -> bool:
    parents = octx.memo("loss-callers-called", octx.tree, lambda: {
        id(c.func) for c in ast.walk(octx.tree) if isinstance(c, ast.Call)})
    return id(n) in parents


def _off_at(ctx: Context, call: ast.Call, where: ast.AST) -> bool:
    """Grad is off at ``call``: a grad-off ``with`` or decorator around it, or a
    ``torch.set_grad_enabled(False)`` statement run before it in the same body or an
    enclosing one (straight line: not inside an earlier ``if``/loop), none turning it on
    again in between."""
    scope = ctx.scope(where)
    if scope.grad_off_at(call) is not None:
        return True
    if not ctx.mentions("set_grad_enabled"):
        return False
    off = False
    for s in _before(where, scope.statement_of(call)):
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                _is_set_grad(ctx.qualified_name(s.value.func)):
            off = grad_mode_of(s.value, ctx.imports) == "off"
    return off


def _before(where: ast.AST, stmt: ast.stmt | None) -> list[ast.stmt]:
    """The statements run before ``stmt`` on its straight line in ``where``'s body: the
    earlier ones of its own block and of each enclosing block (not inside an earlier
    ``if``/loop/``with``), in order."""
    if stmt is None:
        return []
    line = stmt.lineno

    def holds(x: ast.stmt) -> bool:
        return x.lineno <= line <= (x.end_lineno or x.lineno)

    out: list[ast.stmt] = []
    body: list[ast.stmt] = getattr(where, "body", [])
    while body:
        inner: list[ast.stmt] = []
        for s in body:
            if holds(s):
                if s is not stmt:  # descend into the arm holding it
                    arms = (*(getattr(s, f, None) or () for f in ("body", "orelse",
                                                                  "finalbody")),
                            *(h.body for h in getattr(s, "handlers", ())))
                    inner = next((list(a) for a in arms if any(holds(x) for x in a)), [])
                break
            out.append(s)
        body = inner
    return out


def _is_set_grad(qual: str | None) -> bool:
    return qual in ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
                    "torch.autograd.grad_mode.set_grad_enabled")


def _holders_digest(paths: list[str]) -> str:
    return hashlib.blake2b("\n".join(sorted(paths)).encode(), digest_size=16).hexdigest()


def search_digest(key: str) -> str:
    """The digest a search recorded as a dependency (``SEARCH`` + the folder and the words)
    has now: the files of the folder holding every word, listed and read afresh (once per
    check run: a run sees one tree). A caller added in a file that never named the
    function changes it, so a cached result that read the search is recomputed."""
    got = _SEARCHED.get(key)
    if got is None:
        top, *words = key[len(SEARCH):].split("\n")
        files = _walk(top)
        got = "" if files is None else _holders_digest(
            [p for p in files if all(w.encode() in _text(p) for w in words)])
        if len(_SEARCHED) > 10_000:
            _SEARCHED.clear()
        _SEARCHED[key] = got
    return got
