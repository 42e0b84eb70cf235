"""Weight-decay groups the wrong way round, read from the optimizer's groups.

# NOTE [decay groups inverted]
A program that splits its parameters into a group with weight decay and one without means to
exempt the biases and the norm layers' weights (1-D tensors) and to decay the weight matrices
and embeddings. When every trained tensor of the decayed groups is 1-D and every one of the
groups without decay has two dimensions or more, the split is inverted (a name test whose two
branches were swapped): the norm scales shrink towards 0 and the matrices are never
regularised. Nothing fails. The run reads the groups of each optimizer at its first step. The
line named is the one ``append`` into the list the decayed group's ``"params"`` names, in the
function that built the optimizer (or the group's dict, or the construction when the groups
are not spelled there).
"""
from __future__ import annotations

import ast
from numbers import Number
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import tree_of


def note_inverted(data: Any, rec: Any, opt: Any) -> None:
    """At an optimizer's first step: its groups, when inverted, and where it was built."""
    from gradtrace.runtime.trace.opt_state import built_line

    if len(data.decay_inverted) >= 2 or len(opt.param_groups) < 2:
        return
    split = _split(opt.param_groups)
    if split is not None:
        data.decay_inverted.append((split, built_line(data, rec)))


def inverted_decay_findings(data: Any) -> list[Finding]:
    """NOTE [decay groups inverted]."""
    out = []
    for split, built in data.decay_inverted:
        site = _append_line(built, split[0]) or built
        if site is None:
            continue
        out.append(make(
            "GT889", site,
            f"the optimizer's groups are the wrong way round: the {split[1]} tensors it decays "
            f"(weight_decay {split[2]:g}) are all 1-D (biases, norm weights) and the "
            f"{split[3]} it does not decay all have two dimensions or more (weight matrices, "
            "embeddings): weight decay shrinks the norm scales and leaves the matrices "
            "unregularised", fix="swap the two groups: decay the tensors with two dimensions "
            "or more, exempt the biases and norm weights",
            related=[(built, "the optimizer is built here")] if built != site else [],
            severity="warning"))
    return out


def _split(groups: list[dict[str, Any]]) -> tuple[int, int, float, int] | None:
    """(index of the first decayed group, its trained tensors, its decay, trained tensors
    without decay) when the groups are inverted, else None."""
    decayed: list[Any] = []
    plain: list[Any] = []
    first, rate = -1, 0.0
    for i, g in enumerate(groups):
        wd = g.get("weight_decay", 0)
        if not isinstance(wd, Number) or isinstance(wd, bool):
            return None
        params = [p for p in g.get("params", ()) if p.requires_grad]
        if wd > 0 and params and first < 0:
            first, rate = i, float(wd)
        (decayed if wd > 0 else plain).extend(params)
    if not decayed or not plain or any(p.dim() > 1 for p in decayed) \
            or any(p.dim() < 2 for p in plain):
        return None
    return first, len(decayed), rate, len(plain)


def _append_line(built: Site | None, index: int) -> Site | None:
    """The one ``<name>.append(...)`` into the list that group ``index`` of the list of group
    dicts names as ``"params"``, in the function around ``built``; else that dict's line."""
    tree = tree_of(built.path) if built is not None else None
    if tree is None or built is None:
        return None
    scope: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.lineno <= built.line <= (node.end_lineno or node.lineno) and \
                node.lineno > getattr(scope, "lineno", 0):
            scope = node
    lists = [n for n in ast.walk(scope) if isinstance(n, ast.List) and n.elts and all(
        isinstance(e, ast.Dict) and _params_of(e) is not None for e in n.elts)]
    if len(lists) != 1 or index >= len(lists[0].elts):
        return None
    group = lists[0].elts[index]
    name = _params_of(group)
    appends = [n.lineno for n in ast.walk(scope) if isinstance(n, ast.Call)
               and isinstance(n.func, ast.Attribute) and n.func.attr == "append"
               and isinstance(n.func.value, ast.Name) and n.func.value.id == name]
    line = appends[0] if len(appends) == 1 else group.lineno
    return Site(built.path, line, built.function)


def _params_of(d: ast.Dict) -> str | None:
    """The name a group dict gives as ``"params"`` (``""`` when it is not a plain name)."""
    for k, v in zip(d.keys, d.values):
        if isinstance(k, ast.Constant) and k.value == "params":
            return v.id if isinstance(v, ast.Name) else ""
    return None
