"""GT531's settings: the ``name == constant`` facts the ``if`` tests around a node give (and
the constants set right after a plateau is built), to tell that a plateau's build and a bare
``step()`` never run in one configuration; with each node's enclosing function, which GT527
reads too."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.analysis.settings import setting_name as _setting_name
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes, walk
from gradtrace.lint.rules.training_loop._factories import factory_of

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _enclosing(ctx: Context, node: ast.AST) -> dict[int, ast.AST]:
    """id of every node -> its innermost enclosing function (or the module), one walk."""
    def make() -> dict[int, ast.AST]:
        out: dict[int, ast.AST] = {}
        todo = [(node, node)]
        while todo:
            n, owner = todo.pop()
            for child in child_nodes(n):
                out[id(child)] = owner
                todo.append((child, child if isinstance(child, FUNCS) else owner))
        return out
    return ctx.memo("gt527-owner", node, make)


Setting = tuple[str, object, bool]  # (dotted name, constant, equal?)


def _exclusive_through_parameter(ctx: Context, a: ast.AST, b: ast.AST,
                                 owner: dict[int, ast.AST]) -> bool:
    """``a`` is built in a factory under a test of one of its parameters (``def make(opt,
    policy): ... elif policy == 'plateau':``), ``b`` runs under the opposite test of a
    setting of that name at the caller (``if self.policy == 'plateau': ... else:``): the
    caller hands its setting to the factory (NOTE [factory-built value])."""
    fn = factory_of(a, owner) if isinstance(a, ast.Call) else None
    if fn is None:
        return False
    params = {x.arg for x in fn.args.args + fn.args.kwonlyargs}  # type: ignore[attr-defined]
    guards = _guards(ctx)
    ga = [(x, c, e) for x, c, e in guards.get(id(a), ()) if x in params]
    gb = [(y.rpartition(".")[2], d, e) for y, d, e in guards.get(id(b), ())]
    return _apart(ga, gb)


def _apart(ga: list[Setting] | tuple[Setting, ...],
           gb: list[Setting] | tuple[Setting, ...]) -> bool:
    """Some setting of ``ga`` and some of ``gb`` cannot both hold: one name equal to two
    constants, or equal and unequal to one (two parts may both be in one string), or apart
    by a part (:func:`_apart_by_part`)."""
    return any(x == y and (ex and ey and c != d and not x.startswith(PART)
                           or ex != ey and c == d)
               or _apart_by_part(x, c, ex, y, d, ey) or _apart_by_part(y, d, ey, x, c, ex)
               for x, c, ex in ga for y, d, ey in gb)


def _apart_by_part(x: str, c: object, ex: bool, y: str, d: object, ey: bool) -> bool:
    """``name == "automatic"`` (``x``, ``c``, holds ``ex``) and ``"cosine" in name`` (``y``
    = :data:`PART` + name, ``d``, holds ``ey``) cannot both hold when ``d`` is no part of
    ``c``; the ``else`` of ``"cos" in name`` cannot hold with ``name == "cosine"`` (vilbert's
    ``ReduceLROnPlateau`` under ``lr_scheduler == "automatic"``, its bare ``step()`` under
    ``"cosine" in lr_scheduler``)."""
    return ex and y == PART + x and isinstance(c, str) and isinstance(d, str) \
        and (d in c) != ey


def _exclusive_settings(ctx: Context, a: ast.AST, b: ast.AST, built: str | None = None
                        ) -> bool:
    """``a`` and ``b`` sit under ``if`` tests that compare one setting with constants that
    cannot both hold (``if args.sched == 'plateau':`` builds, ``if args.sched == 'step':``
    steps; or ``== c`` and the ``else`` of ``== c``): no run reaches both. ``built``: the name
    the plateau ``a`` is bound to, which is then a plateau, so the ``else`` of ``if
    isinstance(built, ReduceLROnPlateau):`` (or the body of ``if not isinstance(...)``) holds
    another scheduler (the FNO repository's ``train_burgers_pino.py``)."""
    guards = _guards(ctx)
    ga, gb = guards.get(id(a), ()) + _set_with(ctx, a), guards.get(id(b), ())
    if built is not None:
        ga += ((ISA + built, PLATEAU, True),)
    return _apart(ga, gb)


def _set_with(ctx: Context, a: ast.AST) -> tuple[Setting, ...]:
    """The settings the statements after ``a``'s, in its block, give one constant each
    (``scheduler = ReduceLROnPlateau(...)`` then ``opt.scheduler = 'ReduceLROnPlateau'``),
    when the file sets that name nowhere else: every run that builds ``a`` holds them
    (deep_gcns_torch's ppi ``main.py`` then steps with the metric under ``if opt.scheduler ==
    'ReduceLROnPlateau':`` and without it in the ``else``)."""
    owner = _enclosing(ctx, ctx.tree).get(id(a), ctx.tree)
    for n in walk(owner):
        for block in (getattr(n, k, None) for k in ("body", "orelse", "finalbody")):
            if not isinstance(block, list):
                continue
            at = next((i for i, st in enumerate(block) if isinstance(
                st, (ast.Assign, ast.AnnAssign, ast.Expr)) and any(x is a for x in walk(st))),
                None)
            if at is None:
                continue
            out: list[Setting] = []
            chain = _chain_top(owner, n) if isinstance(n, ast.If) else None
            for st in block[at + 1:]:
                if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(
                        st.value, ast.Constant) and (name := _setting_name(st.targets[0])) \
                        and (_set_once(ctx, name) or chain is not None
                             and _set_only_in(ctx, name, chain)):
                    out.append((name, st.value.value, True))
                    out.append((TRUTH + name, bool(st.value.value), True))
            return tuple(out)
    return ()


def _chain_top(owner: ast.AST, n: ast.If) -> ast.If:
    """The first ``if`` of the ``if``/``elif`` chain ``n`` belongs to."""
    parent = {id(c.orelse[0]): c for c in walk(owner) if isinstance(c, ast.If)
              and len(c.orelse) == 1 and isinstance(c.orelse[0], ast.If)}
    while id(n) in parent:
        n = parent[id(n)]
    return n


def _set_only_in(ctx: Context, name: str, chain: ast.If) -> bool:
    """Every binding of ``name`` in the file is inside the ``if``/``elif`` chain ``chain``
    (``lr_scheduler_each_iter = True`` in the arms building a per-batch scheduler, ``=
    False`` in the one building the plateau): a run holds the value its arm gave."""
    return _bound(ctx.tree, name) == _bound(chain, name)


def _bound(node: ast.AST, name: str) -> int:
    return [_setting_name(t) for n in walk(node) if isinstance(n, (ast.Assign, ast.AugAssign,
            ast.AnnAssign)) for t in walk(ast.Tuple(elts=n.targets if isinstance(
                n, ast.Assign) else [n.target]))].count(name)


def _set_once(ctx: Context, name: str) -> bool:
    return [_setting_name(t) for n in walk(ctx.tree) if isinstance(n, (ast.Assign, ast.AugAssign,
            ast.AnnAssign)) for t in walk(ast.Tuple(elts=n.targets if isinstance(
                n, ast.Assign) else [n.target]))].count(name) == 1


def _guards(ctx: Context) -> dict[int, tuple[Setting, ...]]:
    """id of every node -> the ``name == constant`` facts its enclosing ``if``s give (one walk
    per file)."""
    def make() -> dict[int, tuple[Setting, ...]]:
        out: dict[int, tuple[Setting, ...]] = {}
        stack: list[tuple[ast.AST, tuple[Setting, ...], dict[str, str]]] = [(ctx.tree, (), {})]
        while stack:
            n, facts, kept = stack.pop()
            out[id(n)] = facts
            if isinstance(n, ast.ClassDef):
                stack.extend((c, facts, _kept_arguments(c)) for c in n.body)
                continue
            if isinstance(n, ast.If) and (fact := _setting(n.test, ctx)) is not None:
                name, const, eq = fact
                name = _as_field(name, kept)
                stack.append((n.test, facts, kept))
                stack.extend((c, facts + ((name, const, eq),), kept) for c in n.body)
                stack.extend((c, facts + ((name, const, not eq),), kept) for c in n.orelse)
                continue
            if isinstance(n, ast.If) and isinstance(n.test, ast.BoolOp) \
                    and isinstance(n.test.op, ast.And):  # `if "cos" in s and step > w:`:
                parts = tuple((_as_field(f[0], kept), f[1], f[2]) for v in n.test.values
                              if (f := _setting(v, ctx)) is not None)  # each part holds
                stack.append((n.test, facts, kept))
                stack.extend((c, facts + parts, kept) for c in n.body)
                stack.extend((c, facts, kept) for c in n.orelse)
                continue
            if isinstance(n, FUNCS) and kept and kept.get("") != str(id(n)):
                kept = {}  # the names are the method's own arguments only there
            stack.extend((c, facts, kept) for c in child_nodes(n))
        return out
    return ctx.memo("gt531-guards", ctx.tree, make)


def _kept_arguments(fn: ast.stmt) -> dict[str, str]:
    """For a method, its arguments that it keeps on ``self`` unchanged (``self.params =
    params`` in a constructor, ``self.sched_name = lrsch`` in the method that builds the
    scheduler): argument -> field, with ``""`` -> the method's id. Its tests of
    ``params.sched`` and the other methods' of ``self.params.sched`` read one setting
    (FourCastNet's ``Trainer``)."""
    if not isinstance(fn, FUNCS):
        return {}
    args = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args[1:], *fn.args.kwonlyargs)}
    bound = [dotted(t) for n in walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign,
             ast.AnnAssign, ast.For)) for t in _targets(n)]
    out: dict[str, str] = {}
    for st in fn.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(
                st.value, ast.Name) and st.value.id in args and bound.count(st.value.id) == 0:
            t = dotted(st.targets[0])
            if t is not None and t.startswith("self.") and bound.count(t) == 1:
                out[st.value.id] = t
    return {"": str(id(fn)), **out} if out else {}


def _targets(n: ast.AST) -> Iterator[ast.expr]:
    """The names and fields a statement rebinds (``params.x = 1`` rebinds ``params.x``, not
    ``params``)."""
    todo = list(n.targets) if isinstance(n, ast.Assign) else [n.target]  # type: ignore[attr-defined]
    while todo:
        t = todo.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            todo.extend(t.elts)
        elif isinstance(t, ast.Starred):
            todo.append(t.value)
        else:
            yield t


def _as_field(name: str, kept: dict[str, str]) -> str:
    """``params.sched`` in a constructor that keeps ``params`` as ``self.params``: the name
    the other methods spell it by."""
    head, dot, rest = name.partition(".")
    head, br, key = head.partition("[")
    return kept[head] + br + key + dot + rest if head in kept else name


ISA, PLATEAU, TRUTH = "isinstance ", "ReduceLROnPlateau", "truth "
PART = "part of "  # `"cos" in args.sched`: a piece of the setting's string


def _setting(test: ast.expr, ctx: Context) -> Setting | None:
    """``args.sched == 'step'`` -> ("args.sched", "step", True); ``!=`` gives False.
    ``isinstance(sched, ReduceLROnPlateau)`` -> ("isinstance sched", PLATEAU, True); ``not``
    turns it over. A bare flag, ``if each_iter:`` -> ("truth each_iter", True, True): its
    truth, against the truth of a constant it is set to. ``"cos" in args.sched`` -> ("part of
    args.sched", "cos", True): a piece of the string, against a whole one (``_apart_by_part``)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _setting(test.operand, ctx)
        return None if inner is None or not inner[0].startswith((ISA, TRUTH)) else \
            (inner[0], inner[1], not inner[2])
    if isinstance(test, (ast.Name, ast.Attribute, ast.Subscript)) \
            and (name := _setting_name(test)):  # `if cfg["per_iter"]:` too
        return TRUTH + name, True, True
    if isinstance(test, ast.Call) and dotted(test.func) == "isinstance" \
            and len(test.args) == 2 and (name := dotted(test.args[0])):
        kind = ctx.qualified_name(test.args[1]) or dotted(test.args[1]) or ""
        return (ISA + name, PLATEAU, True) if kind.rpartition(".")[2] == PLATEAU else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and isinstance(test.ops[0], (ast.In, ast.NotIn)) \
            and isinstance(test.left, ast.Constant) and isinstance(test.left.value, str) \
            and (name := _setting_name(test.comparators[0])):
        return PART + name, test.left.value, isinstance(test.ops[0], ast.In)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and isinstance(test.ops[0], (ast.Eq, ast.NotEq)) \
            and isinstance(test.comparators[0], ast.Constant) and (name := _setting_name(
                test.left)):
        return name, test.comparators[0].value, isinstance(test.ops[0], ast.Eq)
    return None
