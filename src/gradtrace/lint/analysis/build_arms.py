"""Whether a statement of a class's ``__init__`` runs when one construction call builds it.

# NOTE [construction arms]
``Classification(**model_cfg)`` with ``model_cfg = dict(backbone=...)`` and an ``__init__``
that freezes under ``if frozen_backbone:`` (a parameter defaulting to False) never runs the
freeze for that instance: the call gives the argument nothing, so its default decides the
``if``. :func:`build_flags` reads the constants a call gives ``__init__``'s arguments (``$name``)
and the ``self.<attr>`` stored from them, a ``**cfg`` included when ``cfg`` is a dict literal (or
``dict(k=v, ...)``) bound once in the calling scope and read nowhere else than in ``**`` of a
call (a config that is mutated or passed around is unknown). :func:`decided_against` says
whether a node of ``__init__`` sits in an ``if`` arm those constants rule out. Anything not
shown (a ``*args``, an unknown ``**kw``, a test on something else) keeps the arm live.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.flag_truth import truth_under
from gradtrace.lint.analysis.module_results import constructor_flags, constructor_values
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.flow import Scope


def _config_keywords(name: str, scope: Scope, line: int) -> list[ast.keyword] | None:
    """The entries of the dict literal ``name`` holds at ``line``, as keywords; None when it is
    not one, is bound more than once, or is read other than through ``**`` of a call."""
    bs = scope.bindings_before(name, line)
    if len(bs) != 1 or not isinstance(bs[0].stmt, ast.Assign) or len(bs[0].stmt.targets) != 1:
        return None
    v = bs[0].stmt.value
    if isinstance(v, ast.Dict):
        if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in v.keys):
            return None
        kws = [ast.keyword(arg=k.value, value=x) for k, x in zip(v.keys, v.values)]  # type: ignore[union-attr]
    elif isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "dict" \
            and not v.args and all(k.arg is not None for k in v.keywords):
        kws = list(v.keywords)
    else:
        return None
    spread = {id(k.value) for n in walk(scope.ctx.tree) if isinstance(n, ast.Call)
              for k in n.keywords if k.arg is None}
    for n in walk(scope.ctx.tree):
        if isinstance(n, ast.Name) and n.id == name and id(n) not in spread \
                and not isinstance(n.ctx, ast.Store):
            return None
    return kws


def expanded_call(call: ast.Call, scope: Scope) -> ast.Call | None:
    """``call`` with each ``**cfg`` replaced by the entries of its dict literal; None when one
    is unknown (NOTE [construction arms])."""
    kws: list[ast.keyword] = []
    for k in call.keywords:
        if k.arg is not None:
            kws.append(k)
            continue
        if not isinstance(k.value, ast.Name):
            return None
        got = _config_keywords(k.value.id, scope, call.lineno)
        if got is None:
            return None
        kws.extend(got)
    return ast.Call(func=call.func, args=call.args, keywords=kws)


def build_flags(info: ClassInfo, call: ast.Call, scope: Scope) -> dict[str, object] | None:
    """``$arg`` and ``self.<attr>`` -> the constant ``call`` gives them; None when unknown."""
    full = expanded_call(call, scope)
    if full is None or any(isinstance(a, ast.Starred) for a in full.args):
        return None
    flags: dict[str, object] = dict(constructor_flags(info, full))
    flags.update(("$" + k, v) for k, v in constructor_values(info, full, None).items())
    return flags


def decided_against(fn: ast.AST, node: ast.AST, flags: dict[str, object]) -> bool:
    """Whether ``node`` of ``fn`` is in an ``if`` arm that ``flags`` rule out."""
    return bool(_against(getattr(fn, "body", []), node, flags))


def _against(body: list[ast.stmt], node: ast.AST, flags: dict[str, object]) -> bool | None:
    """:func:`decided_against` in ``body`` (None: ``node`` is not in it)."""
    for s in body:
        if not any(n is node for n in walk(s)):
            continue
        if isinstance(s, ast.If):
            t = truth_under(s.test, flags)
            if any(n is node for b in s.body for n in walk(b)):
                return True if t is False else _against(s.body, node, flags)
            if any(n is node for b in s.orelse for n in walk(b)):
                return True if t is True else _against(s.orelse, node, flags)
            return False
        for field in ("body", "orelse", "finalbody"):
            sub = getattr(s, field, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                got = _against(sub, node, flags)
                if got is not None:
                    return got
        return False
    return None
