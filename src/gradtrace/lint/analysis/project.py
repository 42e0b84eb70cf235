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
where ``models/__init__.py`` re-exports ``Net`` from a module of the package (one hop), and a
name bound by ``from .models import *`` (:func:`_starred`: the last star import whose module
exports it wins, honouring that module's ``__all__``; a name the file binds itself, a star
import of a module the index cannot read after it, or an ``__all__`` that is not a literal:
unknown). The
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
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.foreign_kinds import DEFINITIONS
from gradtrace.lint.analysis.carried import carried_call
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.owners import home, shown_path  # noqa: F401 - the index's API
from gradtrace.lint.analysis.project_files import (
    FILES, ON_DROP, TOUCHED, _find_module, imported_mentioning, imports_of, module_context, use)
from gradtrace.lint.analysis.module_names import (
    EVERY_PUBLIC, bound_names, module_names, public_names, stars_of)

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

Def = ast.FunctionDef | ast.AsyncFunctionDef
__all__ = ["foreign_callee", "foreign_class", "foreign_function", "home", "imported",
           "imported_mentioning", "shown_path"]


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
    if hops and name in imports_of(octx):
        got = imported(octx, name, hops - 1)
        if isinstance(got, tuple):
            return got
    elif hops and stars_of(octx):  # `models/__init__.py`: `from .net import *`
        got = _starred(octx, name, hops - 1)
        if isinstance(got, tuple):
            return got
    return None


_ABSENT = object()


def _starred(ctx: Context, name: str, hops: int) -> tuple[Context, ast.AST] | None:
    """What ``name``, bound by none of the file's own statements, takes from the file's star
    imports (``from .models import *``); None: not known (NOTE [project index])."""
    if name in bound_names(ctx):
        return None  # the file binds it itself (a parameter, a local, a def: not followed)
    got = _star_lookup(ctx, name, hops)
    return None if got is _ABSENT else got  # type: ignore[return-value]


def _star_lookup(ctx: Context, name: str, hops: int) -> object:
    """(context, definition), None (unknown) or ``_ABSENT`` (no star import binds it)."""
    for level, module in reversed(stars_of(ctx)):  # the last star import binding it wins
        octx = module_context(ctx, level, module)
        if octx is None:
            return None  # a module we cannot read may bind it
        listed = public_names(octx)
        if listed is None:
            return None  # `__all__` built at run time
        if name not in listed if listed is not EVERY_PUBLIC else name.startswith("_"):
            continue
        kind = module_names(octx).get(name)
        if kind in ("def", "class"):
            got = _defined(octx, name, 0)
            return got if got is not None else None
        if kind == "import":
            got = imported(octx, name, hops) if hops else None
            return got if isinstance(got, tuple) else None
        if kind is not None:
            return None  # bound by an assignment, a loop, ...: not a definition we read
        if stars_of(octx):  # its own star imports may bind it
            got = _star_lookup(octx, name, hops - 1) if hops else None
            if got is not _ABSENT:
                return got
    return _ABSENT


def _forget_imports(path: str) -> None:
    """Forget, in the files the index keeps, what was resolved through ``path``, dropped from
    the index: a kept file's resolution holds the dropped file's context, which must not
    outlive the index's copy (NOTE [project index])."""
    for f in FILES.values():
        memo = f.ctx._memo.get(("project-imported", id(f.ctx.tree))) if f is not None else None
        for name in [n for n, (_, used) in (memo or {}).items() if path in used]:
            del memo[name]  # type: ignore[union-attr]


ON_DROP.append(_forget_imports)


def imported(ctx: Context, name: str, hops: int = 1
             ) -> tuple[Context, ast.AST] | Context | None:
    """What the local ``name`` imports from a file of the project: (its context, the function
    or class definition), or the context of an imported module; None: not known."""
    spec = imports_of(ctx).get(name)
    if spec is None and not stars_of(ctx):
        return None
    memo: dict = ctx.memo("project-imported", ctx.tree, dict)
    if name in memo:
        got, used = memo[name]
        for path in used:  # read again for this checked file (NOTE [cache])
            f = FILES.get(path)
            if f is not None:
                use(f)
        return got
    memo[name] = (None, ())
    TOUCHED.append(set())
    try:
        if spec is None:  # `from .models import *`
            got = _starred(ctx, name, hops)
        elif spec[2] is None:  # `import commons`, `import models.vits as m`
            level, module, attr = spec
            got = module_context(ctx, level, module)
        else:
            level, module, attr = spec
            sub = module_context(ctx, level, (module + "." + attr).strip("."))
            if sub is not None:  # `from . import commons`, `from models import vits`
                got = sub
            else:
                octx = module_context(ctx, level, module)
                got = _defined(octx, attr, hops) if octx is not None else None
    finally:
        used = TOUCHED.pop()
    if TOUCHED:
        TOUCHED[-1].update(used)
    memo[name] = (got, tuple(used))
    return got


def foreign_def(ctx: Context, func: ast.expr) -> tuple[Context, ast.AST] | None:
    """The definition (function or class) of another file that ``func`` names: ``helper``
    imported from it, ``mod.helper`` / ``pkg.mod.Net`` through an imported module."""
    if not ctx.imports.aliases and not ctx.imports.package and not stars_of(ctx):
        return None
    parts: list[str] = []
    n = func
    while isinstance(n, ast.Attribute):
        parts.append(n.attr)
        n = n.value
    if not isinstance(n, ast.Name) or len(parts) > 3:
        return None
    spec = imports_of(ctx).get(n.id)
    if parts and spec is not None and spec[2] is not None and _find_module(
            ctx, spec[0], (spec[1] + "." + spec[2]).strip(".")) is None:
        return None  # `AutoModel.from_config`: a method of an imported class, no module's
    got = imported(ctx, n.id)
    for p in reversed(parts):
        if got is None or isinstance(got, tuple):
            return None
        octx = got
        sub = _defined(octx, p)
        if sub is not None:
            got = sub
            continue
        spec = imports_of(octx).get(p)
        got = imported(octx, p) if spec is not None else None
    return got if isinstance(got, tuple) else None


DEFINITIONS[:] = [foreign_def]  # the kinds layer's look-up (NOTE [foreign module kinds])


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
    (``net = Net(...).cuda()``, ``net = DDP(net)``, then ``net(x)``), or the ``__call__`` of a
    plain class of another file so called (``criterion = Criterion()``, ``criterion(p, y)``)
    (NOTE [project index])."""
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
    if cls is None:
        return None  # a plain object's call runs its `__call__` (a loss class of another file)
    return cls.methods.get("forward") if cls.is_module else cls.method("__call__")


def foreign_method(ctx: Context, call: ast.Call, scope: object, line: int) -> Def | None:
    """The method of a class of another file that ``call`` runs through an instance made
    here (``ada = AdaptiveAugment(...)``, then ``ada.tune(pred)``) or handed to the function
    by every caller (``train(net)``, ``model.compute_loss(out, y)`` inside), or None."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)) \
            or f.value.id == "self":
        return None
    b = _binding(ctx, scope, f.value.id, line)
    if b is None:
        cls = _handed_class(ctx, scope, f.value, line)
        return cls.method(f.attr) if cls is not None else None
    if isinstance(b.stmt, (ast.Import, ast.ImportFrom)):
        return None
    cls = _instance_class(ctx, scope, b, 0)
    return cls.methods.get(f.attr) if cls is not None else None


def _handed_class(ctx: Context, scope: object, name: ast.Name, line: int) -> ClassInfo | None:
    """The module class of another file whose instance every caller of the function hands
    its parameter ``name`` (NOTE [parameter kinds]: ``train(net, ...)`` with ``net =
    ClassificationModel(...)``), when the instance is made in this file."""
    k = ctx.analysis.kind(name, scope, line)  # type: ignore[arg-type]
    node = k.node if k is not None and k.what == MODULE else None
    if node is None and k is not None and k.what == MODULE:
        # made by callers in another file: NOTE [handed class across files]
        return carried_class(k.cls)
    if not isinstance(node, ast.Call) or id(node) not in file_parents(ctx):
        return None  # made in another file: its names are not this file's
    return foreign_class(ctx, node.func)


def carried_class(cls: str | None) -> ClassInfo | None:
    """# NOTE [handed class across files]
    The class of a module a parameter is handed by every caller, when those callers are in
    another file (NOTE [kinds by the callers]: ``fit(LitRegressor(), loader)`` in ``train.py``,
    ``def fit(module, loader)`` in ``loop.py``): the class that file's call builds, defined
    there or imported there from a third file of the project; None otherwise. The methods run
    through the parameter (``module.training_step(batch, i)``) are then that class's, read in
    its own file's context, as for an instance made in the checked file."""
    got = carried_call(cls)
    if got is None:
        return None
    octx, call = got
    f = call.func
    if isinstance(f, ast.Name) and f.id in octx.analysis.classes:
        own = octx.analysis.classes[f.id]
        return own if own.node in octx.tree.body else None
    return foreign_class(octx, f)


def handed_mentioning(ctx: Context, fn: ast.AST, text: str, words: tuple[str, ...]) -> bool:
    """Whether a parameter of ``fn`` (its code ``text``) that it calls a method of or calls
    (``module.training_step(batch)``, ``net(x)``) is handed, by every caller, an instance of a
    module class of another file whose code holds one of ``words``: a rule that needs such a
    word may find it through that class's methods. NOTE [handed class across files]."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.body:
        return False
    scope, line = ctx.scope(fn), fn.body[0].lineno
    for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
        if a.arg in ("self", "cls") or a.arg + "." not in text and a.arg + "(" not in text:
            continue
        cls = _handed_class(ctx, scope, ast.Name(a.arg, ast.Load()), line)
        if cls is not None and any(w in home(ctx, cls.node).code for w in words):
            return True
    return False


def held_foreign_method(ctx: Context, call: ast.Call, scope: object) -> Def | None:
    """``self.enc.encode(x)`` (or ``self.enc(x)``: its ``forward``) where every assignment of
    ``self.enc`` in the calling method's class makes an instance of a class of another file
    of the project (``self.enc = Encoder(...)``): that class's method, or None."""
    f = call.func
    held = f.value if isinstance(f, ast.Attribute) else None
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
        held, name = f, "forward"
    else:
        name = getattr(f, "attr", "")
    if not (isinstance(held, ast.Attribute) and isinstance(held.value, ast.Name)
            and held.value.id == "self"):
        return None
    cls = ctx.analysis.class_of(getattr(scope, "node", None))
    info = cls.attrs.get(held.attr) if cls is not None else None
    if info is None or info.later or not isinstance(info.value, ast.Call):
        return None
    other = foreign_class(ctx, info.value.func)
    if other is None or name == "forward" and not other.is_module:
        return None
    return other.methods.get(name)


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


def reexported(ctx: Context, name: str) -> str | None:
    """What ``name``, imported here from a file of the project that itself imports it, is
    there (``from xuance.tensorflow import Module`` with ``from tensorflow.keras import Model
    as Module`` in that package's ``__init__``: ``tensorflow.keras.Model``); None: not such a
    name, or not known."""
    spec = imports_of(ctx).get(name)
    if spec is None or spec[2] is None:
        return None
    octx = module_context(ctx, spec[0], spec[1])
    if octx is None or spec[2] not in imports_of(octx):
        return None
    return octx.qualified_name(ast.Name(spec[2], ast.Load()))
