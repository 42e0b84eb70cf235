"""Where a part of a model that a statement names was last built anew, NOTE [part built anew]:
in the same function (``model.fc = nn.Linear(512, 10)``), or in a function of the file or of
the project whose result the name holds (``model = get_model(...)``, with ``net.fc =
nn.Linear(...)`` then ``return net`` inside), and whether anything gives that part values
after it was built (a load, an ``nn.init`` call, a copy)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, NamedTuple

from gradtrace.lint.analysis.calls import own_nodes
from gradtrace.lint.analysis.objects import strip_same
from gradtrace.lint.analysis.project import foreign_function, home
from gradtrace.lint.analysis.steps import spelled
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope


class Built(NamedTuple):
    """``stmt`` (of ``scope``, in the file of ``ctx``) assigns the part a new value."""

    stmt: ast.Assign
    ctx: Context
    scope: Scope


def _under(path: str, name: str | None) -> bool:
    return name is not None and (name == path or name.startswith(path + "."))


def built_part(scope: Scope, part: str, stmt: ast.stmt) -> Built | None:
    """# NOTE [part built anew]
    The assignment that last set ``part`` (``model.fc``, an attribute of an object that is not
    the enclosing method's own ``self``, or ``model.classifier[6]``, an item by a constant
    index, set in this scope) before ``stmt``: a statement of ``scope`` on no arm
    ``stmt``'s ``if`` rules out, with the object not rebound in between; else, when ``part``'s
    first name holds the result of a call (``model = get_model(...).to(dev)``) to a function of
    the file or of another file of the project, an assignment of ``<n>.<rest>`` in that
    function followed (on the same arm) by ``return <n>``, ``n`` not rebound in between.
    Nothing that gives the part values afterwards is checked here: :func:`given_values`."""
    owner, _, _ = part.rpartition(".")
    if not owner or owner == "self":
        return None
    if part.endswith("]"):  # ``model.classifier[6] = nn.Linear(...)``: this scope only
        got = [s for s in scope.stmts if s.lineno < stmt.lineno and isinstance(s, ast.Assign)
               and len(s.targets) == 1 and spelled(s.targets[0]) == part
               and not scope.exclusive(s, stmt)]
        return Built(got[-1], scope.ctx, scope) if got else None
    b = scope.binding_before(part, stmt.lineno)
    if b is not None:
        if isinstance(b.stmt, ast.Assign) and len(b.stmt.targets) == 1 \
                and not scope.exclusive(b.stmt, stmt) \
                and not any(not scope.exclusive(x.stmt, b.stmt) for x in
                            scope.bindings_within(owner, b.line + 1, stmt.lineno - 1)):
            return Built(b.stmt, scope.ctx, scope)
        return None
    return _built_by_callee(scope, part, stmt)


def _built_by_callee(scope: Scope, part: str, stmt: ast.stmt) -> Built | None:
    """:func:`built_part` across the call whose result ``part``'s first name holds."""
    base, _, rest = part.partition(".")
    if base == "self":
        return None
    hb = scope.binding_before(base, stmt.lineno)
    if hb is None or not isinstance(hb.value, ast.expr) or any(
            _under(base, name) and name != base for name in _stored_between(scope, hb.line,
                                                                          stmt.lineno)):
        return None
    call = strip_same(hb.value)
    if not isinstance(call, ast.Call):
        return None
    ctx = scope.ctx
    fn = ctx.analysis.local_callee(call, scope, hb.line) or foreign_function(ctx, call)
    if fn is None:
        return None
    hctx = home(ctx, fn)
    inner = hctx.scope(fn)
    for r in inner.stmts:
        if not (isinstance(r, ast.Return) and r.value is not None):
            continue
        name = dotted(strip_same(r.value))
        if name is None or "." in name:
            continue
        got = inner.binding_before(f"{name}.{rest}", r.lineno)
        if got is not None and isinstance(got.stmt, ast.Assign) \
                and len(got.stmt.targets) == 1 and not inner.exclusive(got.stmt, r) \
                and not any(not inner.exclusive(x.stmt, got.stmt) for x in
                            inner.bindings_within(name, got.line + 1, r.lineno)):
            return Built(got.stmt, hctx, inner)
    return None


def _stored_between(scope: Scope, first: int, last: int) -> list[str | None]:
    """The dotted targets stored by the statements of ``scope`` on lines after ``first``
    and before ``last``."""
    return [dotted(n) for s in scope.stmts if first < s.lineno < last
            for n in walk(s) if isinstance(n, (ast.Attribute, ast.Name))
            and isinstance(n.ctx, ast.Store)]


def _path(e: ast.AST) -> str | None:
    """The spelling of a chain of names, attributes and items by a constant index
    (``model.classifier[6].weight``), else None."""
    n = e
    while isinstance(n, (ast.Attribute, ast.Subscript)):
        if isinstance(n, ast.Subscript) and not isinstance(n.slice, ast.Constant):
            return None
        n = n.value
    return ast.unparse(e) if isinstance(n, ast.Name) else None


_VALUES = frozenset({"load_state_dict", "apply", "copy_", "set_", "fill_", "zero_",
                     "from_pretrained", "load_pretrained"})


def given_values(scope: Scope, part: str, after: int, freeze: ast.stmt) -> bool:
    """Whether a statement of ``scope`` after line ``after`` may give ``part`` values other
    than its initialisation: a method in place, a load or an ``apply`` on it or inside it
    (``model.fc.weight.data.normal_()`` too: a value chosen by hand), the part or one of
    its tensors handed to a call (``nn.init.eye_(model.fc.weight)``, ``load(model.fc)``) or
    stored to (``model.fc.weight.data = w``), the part built again, or a load into an object holding the part
    (``model.load_state_dict(sd)``) on every path that runs ``freeze`` (a load only under an
    ``if`` of its own is a resume, which restores the same never-trained part)."""
    arms = scope.branches.get(id(freeze), ())
    for s in scope.stmts:
        if s.lineno <= after or isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                               ast.ClassDef)):
            continue
        for n in own_nodes(s):
            if isinstance(n, (ast.Attribute, ast.Name)) and isinstance(n.ctx, ast.Store) \
                    and _under(part, _path(n)):  # a value, or the part built again
                return True
            if not isinstance(n, ast.Call):
                continue
            if any(_under(part, _path(a)) for a in (*n.args, *(k.value for k in n.keywords))):
                return True
            f = n.func
            if not isinstance(f, ast.Attribute) or f.attr == "requires_grad_":
                continue
            recv = _path(f.value)
            if _under(part, recv) and (f.attr in _VALUES or f.attr.endswith("_")):
                return True
            own = scope.branches.get(id(s), ())
            if f.attr == "load_state_dict" and recv and _under(recv, part) \
                    and own == arms[:len(own)]:
                return True
    return False
