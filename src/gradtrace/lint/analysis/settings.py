"""Statements that one setting keeps apart: ``if mode in ["autoregressive"]:`` and a later
``if mode in ["single"]:`` test one name against constants that cannot both hold, so no run
enters both bodies (PDEBench's FNO and U-Net trainers keep one loss per batch, backpropagated
in whichever of the two blocks the run's ``training_type`` selects). Read from the ``if``
statements around each statement: ``name == c``, ``name in (c1, c2)``, a flag tested for
truth (``if self.auto:``), their negations and ``else`` arms, and each part of an ``and`` in a
body, with the name bound nowhere between the two tests (nor, for a flag, given to a method
call, nor a call on its object that may set it: ``self.eval()`` between two tests of
``self.training``). A setting may be read through a configuration accessor called without
arguments (``if config().sim.agent.step == "ICM":`` ... ``if config().sim.agent.step ==
"RF":``, a curiosity agent's one update per run): the accessor gives the run's one
configuration, read the same at both tests.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import parent_map

if TYPE_CHECKING:
    from gradtrace.lint.flow import MethodCall, Scope

Guard = tuple[str, frozenset[object], bool, ast.If]  # (name, constants, holds?, the `if`)
_TRUE = frozenset({"<true>"})  # the one "constant" of a flag tested for truth


def exclusive_settings(scope: Scope, a: ast.stmt, b: ast.stmt) -> bool:
    """Whether ``a`` and ``b`` (statements of ``scope``) sit under tests of one setting that
    cannot both hold in one run."""
    parents = scope.ctx.memo("setting-parents", scope.node, lambda: parent_map(scope.node))
    gb = _guards(b, parents)
    if not gb:
        return False
    for name, ca, ha, ia in _guards(a, parents):
        for other, cb, hb, ib in gb:
            if other != name or ia is ib or (ca == _TRUE) != (cb == _TRUE):
                continue  # `if mode:` and `if mode == "a":` both hold for "a"
            if not (ha and hb and not ca & cb or ha and not hb and ca <= cb
                    or hb and not ha and cb <= ca):
                continue
            lo = min(ia.lineno, ib.lineno)
            if not _rebound(scope, name, lo, b.lineno) and not (ca == _TRUE and any(
                    lo <= m.stmt.lineno <= b.lineno and _may_change(scope, name, m)
                    for m in scope.method_calls)):
                return True
    return False


def setting_name(e: ast.expr) -> str | None:
    """``args.sched`` by its dotted name; ``config['scheduler']`` or ``self.args['optim']`` (a
    setting read from a dict by a constant key, as nested-unet's ``train.py`` does) by its
    dotted name and key; so is a flag kept in a dict entry (``cfg["per_iter"] = False`` in the
    plateau's arm, then ``if cfg["per_iter"]: scheduler.step()``); so is an attribute of a
    configuration accessor called without arguments (``config().sim.agent.step``)."""
    if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) \
            and isinstance(e.slice.value, (str, int)) and (base := dotted(e.value)):
        return f"{base}[{e.slice.value!r}]"
    return dotted(e) or _accessed(e)


def _accessed(e: ast.expr) -> str | None:
    """``config().sim.agent.step`` as ``config().sim.agent.step``: attributes of what an
    accessor called without arguments returns (the run's configuration)."""
    parts: list[str] = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    root = dotted(e.func) if isinstance(e, ast.Call) and not e.args and not e.keywords else None
    return f"{root}()." + ".".join(reversed(parts)) if parts and root else None


def _rebound(scope: Scope, name: str, first: int, last: int) -> bool:
    """``name`` is bound on lines ``first`` to ``last``; for a keyed setting, its dict is
    rebound there or the key is stored into (``cfg['mode'] = ...``)."""
    base, key, _ = name.partition("[")
    if not key:
        return bool(scope.bindings_within(name, first, last))
    return bool(scope.bindings_within(base, first, last)) or any(
        first <= st.lineno <= last and any(
            isinstance(t, ast.Subscript) and setting_name(t) == name
            for t in (st.targets if isinstance(st, ast.Assign) else [st.target]))
        for st in scope.stmts if isinstance(st, (ast.Assign, ast.AugAssign, ast.AnnAssign)))


def _may_change(scope: Scope, flag: str, m: MethodCall) -> bool:
    """The call ``m`` may change what the truth test of ``flag`` reads: a method of the flag
    itself (``buf.append(x)``), or of its object (``self.eval()`` sets ``self.training``)
    unless that method is one of this file's class that assigns no ``self.<flag>`` or the call
    runs a part the object holds (``self.policy(obs)``)."""
    if m.receiver == flag:
        return True
    if m.receiver != "self" or not flag.startswith("self."):
        return False
    cls = scope.ctx.analysis.class_of(scope.node)
    fn = cls.methods.get(m.method) if cls is not None else None
    if fn is None:  # `self.policy(obs)`: a part the object holds, not a method that sets it
        return cls is None or m.method not in cls.attrs
    return any(
        isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
            dotted(t) == flag for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))
        or isinstance(n, ast.Call) and dotted(n.func) in ("setattr", "self.__setattr__")
        for n in ast.walk(fn))


def _guards(s: ast.stmt, parents: dict[int, ast.AST]) -> list[Guard]:
    out: list[Guard] = []
    child: ast.AST = s
    p = parents.get(id(s))
    while p is not None:
        if isinstance(p, ast.If) and child is not p.test:
            body = any(x is child for x in p.body)
            for name, consts, holds in _tests(p.test, body):
                out.append((name, consts, holds == body, p))
        child, p = p, parents.get(id(p))
    return out


def _tests(e: ast.expr, body: bool) -> list[tuple[str, frozenset[object], bool]]:
    """The tests that hold (``body``) or fail in an arm of ``if e:``: ``e`` itself, or each
    part of an ``and`` in its body (``if self.auto and not self.fixed:`` runs only when
    ``self.auto`` is true), each part of an ``or`` in its ``else`` arm."""
    if isinstance(e, ast.BoolOp) and isinstance(e.op, ast.And if body else ast.Or):
        return [t for v in e.values for t in _tests(v, body)]
    t = _test(e)
    return [t] if t is not None else []


def _test(e: ast.expr) -> tuple[str, frozenset[object], bool] | None:
    """``name == c`` / ``name in (c1, c2)`` (True) or their negations (False); a flag tested
    for truth (``if self.auto:``, ``if not use_bias:``) as ``name in {TRUE}``."""
    negated = isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not)
    flag = dotted(e.operand if negated else e)  # type: ignore[attr-defined]
    if flag is not None and (flag.count(".") == 0 or flag.startswith("self.")
                             and flag.count(".") == 1):
        return flag, _TRUE, not negated
    if not (isinstance(e, ast.Compare) and len(e.ops) == 1):
        return None
    name, op, right = setting_name(e.left), e.ops[0], e.comparators[0]
    if name is None:
        return None
    if isinstance(op, (ast.Eq, ast.NotEq)) and isinstance(right, ast.Constant):
        return name, frozenset({right.value}), isinstance(op, ast.Eq)
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.List, ast.Tuple, ast.Set)) \
            and right.elts and all(isinstance(x, ast.Constant) for x in right.elts):
        consts = frozenset(x.value for x in right.elts if isinstance(x, ast.Constant))
        return name, consts, isinstance(op, ast.In)
    return None


def exclusive_flags(cls: ast.ClassDef, a: ast.stmt, fa: ast.AST, b: ast.stmt,
                    fb: ast.AST) -> bool:
    """Whether ``a`` (a statement of method ``fa``) and ``b`` (of method ``fb``) sit in arms of
    tests of one ``self`` setting that cannot both hold (``if self.use_over_param:`` in
    ``forward``, its ``else`` arm in ``__init__``; ``if hparams.task == "hit":`` in
    ``__init__`` that stores ``self.hparams = hparams``, ``if self.hparams.task ==
    "vertical":`` in a method) that no method but ``__init__`` assigns: the setting is fixed
    when the module is built, so no instance runs both (NOTE [setting fixed at build])."""
    ga = [(_as_self(n, fa), c, h) for n, c, h, _ in _guards(a, parent_map(fa))]
    gb = [(_as_self(n, fb), c, h) for n, c, h, _ in _guards(b, parent_map(fb))]
    hit: set[str] = set()
    for name, ca, ha in ga:
        for other, cb, hb in gb:
            if other != name or not name.startswith("self.") or (ca == _TRUE) != (cb == _TRUE):
                continue
            if ha and hb and not ca & cb or ha and not hb and ca <= cb \
                    or hb and not ha and cb <= ca:
                hit.add(name)
    if not hit:
        return False
    prefixes = {".".join(h.split(".")[:k]) for h in hit for k in range(2, h.count(".") + 2)}
    for m in cls.body:
        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name != "__init__":
            for n in ast.walk(m):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
                    n, (ast.AugAssign, ast.AnnAssign)) else []
                if any(dotted(t) in prefixes for t in targets):
                    return False
    return True


# NOTE [setting fixed at build]
# A setting is fixed when the module is built if it is a `self` attribute (or an attribute
# of one: `self.hparams.task`) that only `__init__` assigns. `__init__` often tests the
# argument it then stores (`if hparams.task == "hit": ...`, later `self.hparams = hparams`):
# a name read from that parameter is the stored attribute's (`hparams.task` is
# `self.hparams.task`) when `__init__` stores the parameter in one `self` attribute. Known
# limit: a parameter rebound after the store is still read as the stored object.
def _as_self(name: str, fn: ast.AST) -> str:
    root, _, rest = name.partition(".")
    if not rest or root == "self" or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or fn.name != "__init__" or root not in {x.arg for x in fn.args.args}:
        return name
    stored = [dotted(s.targets[0]) for s in ast.walk(fn) if isinstance(s, ast.Assign)
              and len(s.targets) == 1 and isinstance(s.value, ast.Name) and s.value.id == root]
    selfs = [t for t in stored if t and t.startswith("self.") and t.count(".") == 1]
    return f"{selfs[0]}.{rest}" if len(selfs) == 1 else name
