"""Module classes of a file that another file of the project trains.

# NOTE [trained abroad]
A model file builds no optimizer: ``train.py`` makes the model, an optimizer over it and runs
the backward (``model = Net(); opt = torch.optim.Adam(model.parameters()); loss =
crit(model(x), y); loss.backward()``). :func:`trained_abroad` says a module class of the
checked file is trained so: another file of the project (one that holds the class's name)
builds an instance of it, or of a class of the file whose ``__init__`` builds it (three
levels up), binds it to a name (``model = Net(cfg).to(dev)``, ``self.net = Net()``), builds a
``torch.optim`` optimizer over that name's parameters (NOTE [grouped parameters]) and calls
``backward``.
:func:`named_abroad` says whether another file of the project names an attribute
(``.encoder``: frozen there, given to an optimizer, updated as an EMA); not knowing counts as
named. Both need the checked file on disk, in a project of at most ``callers.MAX_FILES``
Python files.
"""
from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callers import holders, project_files, readers
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.grouped_params import param_calls
from gradtrace.lint.analysis.project import foreign_def
from gradtrace.lint.analysis.project_files import _decoded, _text, real_path
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.code_text import code_text
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

LEVELS = 3


def in_project(ctx: Context) -> bool:
    """The file is on disk in a project small enough to search (cached listing)."""
    me = real_path(ctx)
    if not os.path.isfile(me):
        return False
    files = project_files(me)
    return files is not None and len(files) > 1


def trainer_abroad(ctx: Context) -> bool:
    """Another file of the project may train a class of this one: its code (comments and
    strings out) holds both ``backward`` and ``optim``, as :func:`_trained_in` needs of it.
    False: no class of the file is trained abroad, whatever its ``forward`` cuts (one search
    per file, instead of each module class's cuts looked for first: the model files of a
    library, whose comments say "backward compatible")."""
    return any(map(_trains, holders(ctx, b"backward", b"optim") or ()))


def _trains(path: str) -> bool:
    """The code text of the file at ``path`` holds ``backward`` and ``optim`` (kept while
    its bytes are the project index's)."""
    data = _text(path)
    got = _CODE_WORDS.get(path)
    if got is None or got[0] is not data:
        text = _decoded(data)
        code = code_text(text) if text is not None else ""
        if len(_CODE_WORDS) > 2_000:
            _CODE_WORDS.clear()
        got = _CODE_WORDS[path] = (data, "backward" in code and "optim" in code)
    return got[1]


_CODE_WORDS: dict[str, tuple[bytes, bool]] = {}


def _builders(ctx: Context) -> dict[str, set[str]]:
    """Class -> the module classes of the file whose ``__init__`` builds it by name."""
    a = ctx.analysis
    out: dict[str, set[str]] = {}
    for name in a.module_classes:
        init = a.classes[name].methods.get("__init__")
        for n in ast.walk(init) if init is not None else ():
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                    and n.func.id in a.module_classes and n.func.id != name:
                out.setdefault(n.func.id, set()).add(name)
    return out


def _optimized_names(octx: Context) -> set[str]:
    """The dotted names whose parameters an optimizer of the file is built over
    (NOTE [grouped parameters])."""
    out: set[str] = set()
    scopes = [octx.tree, *(n for n in ast.walk(octx.tree) if isinstance(n, FUNCTION_TYPES))]
    for fn in scopes:
        stack = list(child_nodes(fn))
        while stack:
            n = stack.pop()
            if isinstance(n, (*FUNCTION_TYPES, ast.ClassDef, ast.Lambda)):
                continue
            stack.extend(child_nodes(n))
            q = octx.qualified_name(n.func) if isinstance(n, ast.Call) else None
            if q and q.startswith("torch.optim.") and "lr_scheduler" not in q:
                for m in param_calls(n, fn):  # type: ignore[arg-type]
                    d = dotted(m.func.value) if isinstance(m.func, ast.Attribute) else None
                    if d:
                        out.add(d)
    return out


def _trained_in(octx: Context, name: str, me: str) -> bool:
    """``octx``'s file builds an instance of the class ``name`` of the file ``me``
    (``model = Net(...)``, ``self.net = Net(...).to(dev)``), builds an optimizer over its
    parameters and runs a backward."""
    code = octx.code
    if "backward" not in code or "optim" not in code:
        return False
    builds = set()
    for call, _, _ in call_sites(octx, name):
        got = foreign_def(octx, call.func)
        if got is not None and getattr(got[1], "name", None) == name \
                and os.path.realpath(got[0].path) == me:
            builds.add(id(call))
    made: set[str] = set()
    for s in ast.walk(octx.tree) if builds else ():
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and id(_base(s.value)) in builds:
            d = dotted(s.targets[0])
            if d:
                made.add(d)
    return bool(made) and bool(made & octx.memo(
        "trained-abroad-optimized", octx.tree, lambda: _optimized_names(octx)))


def _base(v: ast.AST) -> ast.AST:
    """The call a method chain starts from (``Net(cfg).to(dev)`` -> ``Net(cfg)``)."""
    while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
            and isinstance(v.func.value, ast.Call):
        v = v.func.value
    return v


def trained_abroad(ctx: Context, name: str) -> bool:
    """NOTE [trained abroad] for the module class ``name`` of the file."""
    me = real_path(ctx)
    builders = ctx.memo("trained-abroad-builders", ctx.tree, lambda: _builders(ctx))
    todo, seen = [name], {name}
    for _ in range(LEVELS + 1):
        nxt = []
        for c in todo:
            found = readers(ctx, c.encode()) if ctx.analysis.classes[c].node in ctx.tree.body \
                else None
            if found and any(_trained_in(o, c, me) for o in found):
                return True
            for b in builders.get(c, ()):
                if b not in seen:
                    seen.add(b)
                    nxt.append(b)
        todo = nxt
    return False


def named_abroad(ctx: Context, attr: str) -> bool:
    """Another file of the project holds ``.attr`` (or the search cannot say)."""
    found = readers(ctx, f".{attr}".encode())
    return found is None or bool(found)
