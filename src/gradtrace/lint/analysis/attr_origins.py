"""Where ``self.x`` comes from when one method reads what others stored.

# NOTE [attribute origins]
The tracer (:mod:`.origins`) takes ``self.x`` as live: it may hold a layer's output. When the
class stores ``self.x`` only by plain assignments (``self.x = v`` as the only target; ``None``
aside) and every stored value is cut where it is stored (``self.feats = out.detach()`` in a
forward hook, ``self.logits = out.new_tensor(out)`` in ``forward``), a read of ``self.x`` in
another method is that cut: the loss a method builds from it has no path to the model. Any
other store (``self.x += v``, ``self.x[i] = v``, ``self.x.append(v)``, tuple targets,
``setattr``, a store of ``.x`` outside the class's own methods, including a subclass or the
script) leaves ``self.x`` live. Only the cut is new information: an attribute whose values are
all dead stays what it was. A leaf made to require grad from Python numbers only (SAC's
``self.log_ent_coef = torch.log(torch.ones(1) * float(cfg)).requires_grad_(True)``) is a
trainable scalar of its own, not a cut.

# NOTE [read in the constructor before any store]
``__init__`` runs before any other method of the object. In it, ``self.alpha`` read before the
constructor stores it and before it calls a method of ``self`` holds what construction handed
in (``self.__dict__.update(kwargs)``, ``setattr``: the agent's settings), not what ``train()``
stores there later (SAC's ``self.alpha = self.log_alpha.exp()`` cannot reach
``self.log_alpha = torch.tensor(np.log(self.alpha), requires_grad=True)`` in ``__init__``).
Only for a class with no base class (a base's ``__init__`` may store a tensor there).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.calls import ascii_code, word_lines
from gradtrace.lint.analysis.data_attrs import data_attribute
from gradtrace.lint.analysis.init_data import STORES_OF, init_data_attribute
from gradtrace.lint.analysis.file_parents import enclosing_class
from gradtrace.lint.analysis.cuts import (
    DEAD, NUMBER, Trace, constant_default_args, registered_buffer, self_assignments)
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import child_nodes
from gradtrace.lint.words import holds

if TYPE_CHECKING:
    from gradtrace.lint.analysis.origins import Tracer
    from gradtrace.lint.context import Context

Store = tuple[ast.expr, ast.stmt, ast.AST]  # value, statement, method
MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "add", "__setitem__"})


def cut_attribute(ctx: Context, cls: ast.ClassDef, attr: str,
                  tracer_of: Callable[[Context, ast.AST], Tracer]) -> Trace | None:
    """The cuts of ``self.<attr>`` of ``cls`` when every value stored there is cut
    (NOTE [attribute origins]); None: not known to be cut. ``tracer_of(ctx, method)`` is the
    tracer of a method (:func:`.origins.origins`, handed down: no import cycle)."""
    memo: dict[tuple[int, str], Trace | None] = ctx.memo("attr-origins", ctx.tree, dict)
    key = (id(cls), attr)
    if key in memo:
        return memo[key]
    memo[key] = None  # recursion guard: a value read back from the attribute itself
    stores = _stores_of(ctx, attr)
    if stores and init_data_attribute(  # NOTE [made in the constructor from data]
            ctx, cls, stores, tracer_of):
        memo[key] = DEAD
        return DEAD
    if not stores or any(owner is not cls for owner, _ in stores):
        return None
    if data_attribute(ctx, cls, attr, tracer_of):  # NOTE [data attributes]
        memo[key] = DEAD
        return DEAD
    cuts = []
    for _, store in stores:
        if store is None:
            return None
        value, stmt, method = store
        if isinstance(value, ast.Constant) and value.value is None:
            continue
        t = tracer_of(ctx, method).trace(value, stmt, stmt.lineno)
        if t.live or not t.cuts or (_new_leaf(value) and all(c.kind == NUMBER for c in t.cuts)):
            return None  # `log_alpha = torch.log(ones * float(cfg)).requires_grad_()`
        cuts.extend(t.cuts)
    memo[key] = Trace(False, tuple(cuts)) if cuts else None
    return memo[key]


def _stores_of(ctx: Context, attr: str) -> list[tuple[ast.ClassDef | None, Store | None]] | None:
    """``_stores(ctx).get(attr)``, from the statements whose lines name ``attr``
    (NOTE [stores of one attribute])."""
    if not ascii_code(ctx) or "setattr" in ctx.code:
        return _stores(ctx).get(attr)
    memo: dict[str, list | None] = ctx.memo("attr-stores-of", ctx.tree, dict)
    if attr not in memo:
        memo[attr] = _walk_stores(ctx, word_lines(ctx, (attr,))).get(attr)
    return memo[attr]


STORES_OF[:] = [_stores_of]  # NOTE [made in the constructor from data]


# NOTE [stores of one attribute]
# The tracer asks for the stores of one attribute at a time, and the stores of the whole file
# took one walk of every node (a few ms on a large model file, for the one or two attributes
# a loss path reads). Every store :func:`_stores` records under ``x`` is a node that spells
# ``x`` (``self.x = v``, ``.x`` stored, ``.x.append(v)``, ``.x[i] = v``) inside a statement
# whose lines (decorators included) then hold the word ``x`` in the code; so a walk that skips
# the statements whose lines do not hold it records the same stores of ``x``, in the same
# order (the skipped subtrees leave the order of the rest as it was, and each node keeps its
# class and method). Only when the code is ASCII (a non-ASCII name may normalise to ``x``) and
# never spells ``setattr`` (it adds a store to every attribute); otherwise the whole walk.
def _stores(ctx: Context) -> dict[str, list[tuple[ast.ClassDef | None, Store | None]]]:
    """``attr -> [(class whose method stores it through self, or None), (value, statement,
    method) for a plain assignment, else None)]`` over the whole file (one walk)."""
    def make() -> dict[str, list[tuple[ast.ClassDef | None, Store | None]]]:
        out = _walk_stores(ctx, None)
        if "*" in out:
            return {k: v + [(None, None)] for k, v in out.items()}
        return out
    return ctx.memo("attr-stores", ctx.tree, make)


def _walk_stores(ctx: Context, lines: list[int] | None
                 ) -> dict[str, list[tuple[ast.ClassDef | None, Store | None]]]:
    """The stores of :func:`_stores` before ``setattr``'s are added, from the statements
    whose lines hold one of the sorted ``lines`` (None: every statement)."""
    out: dict[str, list[tuple[ast.ClassDef | None, Store | None]]] = {}
    plain: set[int] = set()
    todo: list[tuple[ast.AST, ast.ClassDef | None, ast.AST | None]] = [(ctx.tree, None, None)]
    while todo:
        node, cls, method = todo.pop()
        if lines is not None and isinstance(node, ast.stmt):
            decorators = getattr(node, "decorator_list", None)
            first = min(node.lineno, *(d.lineno for d in decorators)) \
                if decorators else node.lineno
            if not holds(lines, first, node.end_lineno or node.lineno):
                continue  # it names no such attribute (NOTE [stores of one attribute])
        if isinstance(node, ast.ClassDef):
            cls, method = node, None
        elif isinstance(node, FUNCTION_TYPES):
            method = node if method is None and cls is not None else method
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            t, v = targets[0], node.value
            pairs = list(zip(t.elts, v.elts)) if len(targets) == 1 and isinstance(
                t, ast.Tuple) and isinstance(v, ast.Tuple) and len(t.elts) == len(
                v.elts) else [(t, v)] if len(targets) == 1 else []
            for tt, vv in pairs:  # `self.a, self.b = a, b` pairs them up
                if _self_attr(tt) and method is not None:
                    plain.add(id(tt))
                    out.setdefault(tt.attr, []).append(  # type: ignore[attr-defined]
                        (cls, (vv, node, method)))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and id(node) not in plain:
            owner = cls if _self_attr(node) and method is not None else None
            out.setdefault(node.attr, []).append((owner, None))
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute) and (
                    f.attr in MUTATORS or f.attr.endswith("_")):
                out.setdefault(f.value.attr, []).append((None, None))
            elif isinstance(f, ast.Name) and f.id == "setattr":
                out.setdefault("*", []).append((None, None))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Attribute):
            out.setdefault(node.value.attr, []).append((None, None))
        todo.extend((c, cls, method) for c in child_nodes(node))
    return out


def _new_leaf(v: ast.expr) -> bool:
    """``x.requires_grad_()``, ``torch.tensor(..., requires_grad=True)``, ``nn.Parameter(...)``:
    a leaf made to require grad (from a number, a trainable scalar such as SAC's log-alpha)."""
    if not isinstance(v, ast.Call):
        return False
    f = v.func
    if isinstance(f, ast.Attribute) and f.attr == "requires_grad_":
        return not (v.args and isinstance(v.args[0], ast.Constant) and v.args[0].value is False)
    return (isinstance(f, (ast.Name, ast.Attribute)) and
            (f.id if isinstance(f, ast.Name) else f.attr) == "Parameter") or any(
        k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in v.keywords)


def _self_attr(t: ast.AST) -> bool:
    return isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"


def setting_attr(t: Tracer, name: str) -> bool:
    """``self.lam`` only ever assigned a constant, a constant-default argument or a
    Python number (``float(rate)``); or ``self.p`` a buffer of the class
    (``self.register_buffer('p', ...)``, never assigned): no gradient reaches it."""
    key = "attr:" + name
    hit = t._pure.get(key)
    if hit is None:
        hit = False
        cls = enclosing_class(t.ctx, t.scope.node)
        values = self_assignments(cls, name, t.ctx)  # `self.x   = ...` aligned too
        if values:
            settings = constant_default_args(cls)
            hit = bool(values) and all(
                (isinstance(v, ast.Constant) and isinstance(v.value, (int, float))) or
                (isinstance(v, ast.Name) and v.id in settings) or
                (isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                 and v.func.id in ("float", "int") and v.func.id not in t.scope.bindings)
                or (isinstance(v, ast.Name) and cls is not None
                    and numbers_given(t.ctx, cls, v.id))
                for v in values)
        elif cls is not None and class_number(t.ctx, cls, name.partition(".")[2]):
            hit = True  # `margin = 0.1` in the class body, never stored on an instance
        elif cls is not None and t.ctx.mentions("register_buffer"):
            hit = registered_buffer(cls, name.partition(".")[2])
        t._pure[key] = hit
    return hit


def numbers_given(ctx: Context, cls: ast.ClassDef, param: str) -> bool:
    """Every construction ``Cls(...)`` of the plain class ``cls`` in the file gives its
    ``__init__`` argument ``param`` Python numbers: a number literal or a list/tuple of them
    (``MultiTaskLoss([1.0, 0.5])``), or leaves a number default: ``self.<x> = param`` holds no
    tensor, so no gradient reaches it (at least one construction must be seen)."""
    from gradtrace.lint.analysis.init_arguments import init_arguments
    info = ctx.analysis.classes.get(cls.name)
    if info is None or info.node is not cls or info.is_module:
        return False
    calls = ctx.memo("constructions", ctx.tree, lambda: _constructions(ctx)).get(cls.name, [])
    seen = False
    for call in calls:
        given = dict(init_arguments(info, call, None))
        if param not in given or not _numbers(given[param]):
            return False
        seen = True
    return seen


def _constructions(ctx: Context) -> dict[str, list[ast.Call]]:
    out: dict[str, list[ast.Call]] = {}
    names = set(ctx.analysis.classes)
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names:
            out.setdefault(n.func.id, []).append(n)
    return out


def _numbers(e: ast.expr | None) -> bool:
    if isinstance(e, (ast.List, ast.Tuple)):
        return bool(e.elts) and all(_numbers(x) for x in e.elts)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        e = e.operand
    return isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) \
        and not isinstance(e.value, bool)


def constructor_input(t: Tracer, attr: str, line: int) -> bool:
    """``self.<attr>`` read at ``line`` of ``__init__`` before the constructor stores it or calls
    a method of ``self`` (NOTE [read in the constructor before any store])."""
    fn = t.scope.node
    if not isinstance(fn, FUNCTION_TYPES) or fn.name != "__init__":
        return False
    info = t.ctx.analysis.class_of(fn)
    if info is None or any(not (isinstance(b, ast.Name) and b.id == "object")
                           for b in info.node.bases):
        return False
    first = t.ctx.memo("constructor-stores", fn, lambda: _first_stores(fn))
    return line <= min(first.get(attr, line), first.get("", line))


def _first_stores(fn: ast.AST) -> dict[str, int]:
    """``attr -> first line of __init__ storing self.<attr>``; ``""`` -> the first line calling
    a method of ``self`` (which may store anything): one walk per constructor."""
    out: dict[str, int] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and _self_attr(n):
            out[n.attr] = min(out.get(n.attr, n.lineno), n.lineno)
        elif isinstance(n, ast.Call) and _self_attr(n.func):
            out[""] = min(out.get("", n.lineno), n.lineno)
    return out


def class_number(ctx: Context, cls: ast.ClassDef, attr: str) -> bool:
    """``attr`` is a Python number set in the body of ``cls`` (``margin = 0.1`` in a loss
    mixin), every class body of the file that sets it sets a number, and no statement of the
    file stores it on an object (``self.margin = ...``, ``obj.margin = ...``): ``self.<attr>``
    read in a method of ``cls`` is that number, with no gradient."""
    owners = ctx.memo("class-numbers", ctx.tree, lambda: _class_numbers(ctx)).get(attr)
    return owners is not None and id(cls) in owners and not _stores_of(ctx, attr)


def _class_numbers(ctx: Context) -> dict[str, set[int] | None]:
    """``attr -> ids of the classes whose body sets it to a number``; None when some class
    body sets it to anything else."""
    out: dict[str, set[int] | None] = {}
    for c in ast.walk(ctx.tree):
        if not isinstance(c, ast.ClassDef):
            continue
        for s in c.body:
            targets = s.targets if isinstance(s, ast.Assign) else [s.target] if isinstance(
                s, ast.AnnAssign) else []
            for x in targets:
                if isinstance(x, ast.Name):
                    got = out.setdefault(x.id, set())
                    if got is not None and _number(s.value):  # type: ignore[union-attr]
                        got.add(id(c))
                    else:
                        out[x.id] = None
    return out


def _number(v: ast.expr | None) -> bool:
    if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub):
        v = v.operand
    return isinstance(v, ast.Constant) and type(v.value) in (int, float)
