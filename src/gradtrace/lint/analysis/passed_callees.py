"""What a callee handed in as a function's parameter is, read from the calls of that function.

# NOTE [passed callees]
``def get_train_step(model_and_loss, optimizer): ... loss, out = model_and_loss(x, y)``: the
callee is a parameter (of the function, or of the function enclosing a step closure), so the
function alone does not say whether it is a pure criterion or a module that runs a model and
returns its loss (NVIDIA's ImageNet ``ModelAndLoss``, whose ``forward`` is ``out =
self.model(x); return self.loss(out, y), out``). The calls of that function say it: each
passes a value for the parameter, and the value's kind (the analysis layer's, NOTE [kinds]) is
the class it was built from. A module class of the file whose ``forward`` (or ``__call__``)
calls a module it holds that is not a torch loss, or hands what one held callable returns to
another (``output = self.model(data)``, then ``self.loss(output, target)``: a model followed by
its criterion, whatever the analysis knows of ``self.model``), runs a model: its call is as
live as the model's weights. A caller that passes its own parameter on is read up the same
way. Calls are read in the file, and in the project's other files through the
reverse index (NOTE [reverse index]).
Answers: True (every value found runs a model), False (a value found is a torch loss), None
(no call found, a value whose class is not seen or runs no module of its own, a function):
the caller then decides by what it knew before (the callee's name).
"""
from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.kinds import MODULE, is_torch_loss
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def passed_runs_model(ctx: Context, fn: ast.AST, name: str, depth: int = 0) -> bool | None:
    """Whether the callee ``name`` read in ``fn`` (a parameter of ``fn`` or of a function
    enclosing it) is, at every call of that function, a module that runs a model of its own
    (NOTE [passed callees]); a caller passing its own parameter on is read the same way,
    three calls up."""
    if depth > 3:
        return None
    return ctx.memo(f"passed-runs-model:{name}:{depth}", fn,
                    lambda: _answer(ctx, fn, name, depth))


def _owner(ctx: Context, fn: ast.AST, name: str) -> ast.AST | None:
    """The function, ``fn`` or one enclosing it, whose parameter ``name`` is."""
    parents = file_parents(ctx)
    node: ast.AST | None = fn
    while node is not None:
        if isinstance(node, _FUNCS):
            a = node.args
            if name in {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}:
                return node
            if any(isinstance(t, ast.Name) and t.id == name
                   for s in walk(node) if isinstance(s, (ast.Assign, ast.AnnAssign))
                   for t in (s.targets if isinstance(s, ast.Assign) else [s.target])):
                return None  # bound in that function: not a parameter
        node = parents.get(id(node))
    return None


def passed_values(ctx: Context, fn: ast.AST, name: str, strict: bool = False
                  ) -> list[tuple[Context, ast.expr, ast.AST, int]] | None:
    """(calling file, value, function making the call, line) for the parameter ``name`` of
    ``fn`` or of a function enclosing it, at every call of that function, in the file and the
    others (NOTE [passed callees]); None: a method, a call whose value is not seen, no call,
    or (``strict``) callers in other files that cannot be searched."""
    owner = _owner(ctx, fn, name)
    if owner is None or ctx.analysis.class_of(owner) is not None:
        return None  # a method: its calls go through instances, not read here
    a = owner.args  # type: ignore[attr-defined]
    params = [x.arg for x in (*a.posonlyargs, *a.args)]
    pos = params.index(name) if name in params else None
    values: list[tuple[Context, ast.expr, ast.AST, int]] = []
    from gradtrace.lint.analysis.calls import call_sites
    for call, _, outer in call_sites(ctx, owner.name):  # type: ignore[attr-defined]
        if not isinstance(call.func, ast.Name):
            continue
        where = next((o for o in reversed(outer) if isinstance(o, _FUNCS)), ctx.tree)
        v = _argument(call, pos, name)
        if v is None:
            return None
        values.append((ctx, v, where, call.lineno))
    if owner in ctx.tree.body:  # type: ignore[attr-defined]
        from gradtrace.lint.analysis.callers import foreign_sites
        sites = foreign_sites(ctx, owner)
        if sites is None and strict and not _alone(ctx):
            return None
        for s in sites or ():
            v = _argument(s.call, pos, name)
            if v is None:
                return None
            values.append((s.ctx, v, s.where, s.call.lineno))
    return values or None


def _alone(ctx: Context) -> bool:
    """The file is on disk, the only Python file of its project: no caller elsewhere."""
    from gradtrace.lint.analysis.callers import project_files
    from gradtrace.lint.analysis.project_files import real_path
    me = real_path(ctx)
    files = project_files(me) if os.path.isfile(me) else None
    return files is not None and len(files) <= 1


def _answer(ctx: Context, fn: ast.AST, name: str, depth: int) -> bool | None:
    if not (values := passed_values(ctx, fn, name)):
        return None
    answers = [passed_runs_model(c, w, v.id, depth + 1)
               if isinstance(v, ast.Name) and _is_param(w, v.id)
               else _runs_model(c, v, w, line) for c, v, w, line in values]
    if False in answers:
        return False
    return True if all(answers) else None


def _argument(call: ast.Call, pos: int | None, name: str) -> ast.expr | None:
    if any(isinstance(x, ast.Starred) for x in call.args) or any(
            k.arg is None for k in call.keywords):
        return None
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return call.args[pos] if pos is not None and pos < len(call.args) else None


def _runs_model(ctx: Context, v: ast.expr, where: ast.AST, line: int) -> bool | None:
    """The value ``v`` passed at ``line`` in ``where``: a module that runs a model of its own
    (True), a torch loss (False), unknown (None)."""
    k = ctx.analysis.kind_in(v, where, line)
    if k is None or k.what != MODULE or not k.cls:
        return None
    if is_torch_loss(k.cls):
        return False
    info = ctx.analysis.classes.get(k.cls)
    if info is None or not info.is_module:
        return None
    run = info.methods.get("forward") or info.methods.get("__call__")
    if run is None:
        return None
    held: dict[str, str] = {}  # name bound to a held callable's result -> that callable
    for n in walk(run):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
            kk = ctx.analysis.kind_in(n.func, run, n.lineno)
            if kk is not None and kk.what == MODULE and not is_torch_loss(kk.cls):
                return True
    for s in walk(run):  # `output = self.model(data)` then `self.loss(output, target)`
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(
                s.targets[0], ast.Name) and (a := _held_call(s.value)) is not None:
            held[s.targets[0].id] = a
    for n in walk(run):
        b = _held_call(n)
        if b is not None and any(isinstance(x, ast.Name) and held.get(x.id, b) != b
                                 for x in n.args):  # type: ignore[attr-defined]
            return True
    return None  # a loss class of the file: what it holds is not read here


def _held_call(e: ast.AST) -> str | None:
    """``self.<attr>(...)``: the attribute called."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and isinstance(e.func.value, ast.Name) and e.func.value.id == "self":
        return e.func.attr
    return None


def _is_param(fn: ast.AST, name: str) -> bool:
    a = getattr(fn, "args", None)
    return a is not None and name in {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
