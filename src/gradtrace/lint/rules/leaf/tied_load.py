"""GT309: ``load_state_dict(..., assign=True)`` into a model whose parameters are tied.

# NOTE [tied parameters]
A module class ties two of its parameters in ``__init__`` when it assigns one attribute chain
of ``self`` from another (``self.head.weight = self.embed.weight``, the language-model tie), or
hands one local ``w = nn.Parameter(...)`` to two constructors or two ``self`` attributes
(``self.enc = Proj(w)``; ``self.dec = Proj(w)``): ``parameters()`` then yields that tensor once.
A tie made elsewhere (a ``tie_weights()`` the caller runs) is read only as a re-tie after a
load.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule


def _self_chain(e: ast.AST) -> bool:
    """``self.<a>.<b>...`` (two attributes at least, no call)."""
    n = 0
    while isinstance(e, ast.Attribute):
        e, n = e.value, n + 1
    return isinstance(e, ast.Name) and e.id == "self" and n >= 2


def _parameter_names(fn: ast.AST, ctx: Context) -> set[str]:
    """Local names ``fn`` binds to a new ``nn.Parameter(...)``."""
    return {t.id for st in walk(fn) if isinstance(st, ast.Assign)
            and isinstance(st.value, ast.Call)
            and ctx.call_name(st.value) == "torch.nn.Parameter"
            for t in st.targets if isinstance(t, ast.Name)}


def ties(fn: ast.AST, ctx: Context) -> ast.stmt | None:
    """The statement of ``fn`` that makes two attributes of ``self`` hold one Parameter:
    ``self.head.weight = self.embed.weight``, or one ``w = nn.Parameter(...)`` given to two
    constructors or stored twice (NOTE [tied parameters])."""
    params = _parameter_names(fn, ctx)
    uses: dict[str, list[ast.stmt]] = {}
    for st in walk(fn):
        if not isinstance(st, ast.Assign) or len(st.targets) != 1:
            continue
        t = st.targets[0]
        if isinstance(t, ast.Attribute) and _self_chain(t) and isinstance(st.value, ast.Attribute) \
                and _self_chain(st.value) and dotted(st.value) != dotted(t):
            return st
        if not (isinstance(t, ast.Attribute) and dotted(t.value) == "self"):
            continue
        v = st.value
        if isinstance(v, ast.Name) and v.id in params:
            uses.setdefault(v.id, []).append(st)
        elif isinstance(v, ast.Call):
            for a in (*v.args, *(k.value for k in v.keywords)):
                if isinstance(a, ast.Name) and a.id in params:
                    uses.setdefault(a.id, []).append(st)
    return next((sts[1] for sts in uses.values() if len(sts) > 1), None)


def _tied_class(info: ClassInfo, ctx: Context) -> ast.stmt | None:
    init = info.method("__init__")
    if init is None:
        return None
    got = ties(init, ctx)
    for n in walk(init) if got is None else ():  # `self.tie_weights()` run by `__init__`
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and dotted(n.func.value) == "self" and n.func.attr != "__init__":
            m = info.method(n.func.attr)
            got = ties(m, ctx) if m is not None else None
            if got is not None:
                break
    return got


class AssignLoadUntiesWeights(Rule):
    """`model.load_state_dict(sd, assign=True)` on a model whose parameters are tied.

    Why: with `assign=True` every entry of the state dict is assigned as its own new
    `nn.Parameter`, so two attributes that held one tied Parameter (`self.head.weight =
    self.embed.weight`, or one `nn.Parameter` handed to two submodules) now hold two: the
    optimizer sees both, each step moves the shared storage twice (or the two copies drift
    apart), and the model no longer trains as tied (pytorch/pytorch#188346; checked on torch
    2.13: `len(list(model.parameters()))` goes from 1 to 2). Load without `assign=True`, or
    tie the weights again after loading (`model.tie_weights()`).
    Known limits: the model's class (or a base) is in the file and ties in `__init__` (or a
    method of `self` that `__init__` calls); a
    re-tie after the load (an assignment to an attribute of the model, or a call of a method
    of the model that assigns one attribute of `self` from another) silences it.
    """

    code = "GT309"
    name = "assign-load-unties-weights"
    message = ("`load_state_dict(..., assign=True)` gives every entry its own Parameter, and "
               "`{model}` ties two of its parameters (line {line}): after the load they are two "
               "parameters, trained separately; load without `assign=True` or tie them again")
    triggers = ("assign",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(10, 4)
                    self.head = nn.Linear(4, 10, bias=False)
                    self.head.weight = self.embed.weight
            model = LM()
            model.load_state_dict(torch.load("lm.pt"), assign=True)
            """, at=(10, 0)),
        Good("""
            import torch
            from torch import nn
            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(10, 4)
                    self.head = nn.Linear(4, 10, bias=False)
                    self.head.weight = self.embed.weight
            model = LM()
            model.load_state_dict(torch.load("lm.pt"), assign=True)
            model.head.weight = model.embed.weight
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "load_state_dict" and any(
                k.arg == "assign" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in node.keywords)):
            return
        recv = dotted(f.value)
        scope = ctx.scope()
        k = ctx.analysis.kind(f.value, scope, node.lineno) if recv else None
        info = ctx.analysis.classes.get((k.cls or "").rpartition(".")[2]) \
            if k is not None and k.what == MODULE else None
        tie = _tied_class(info, ctx) if info is not None else None
        if tie is None or self._retied(scope, recv, node.lineno, info, ctx):  # type: ignore[arg-type]
            return
        yield self.report(node, ctx, related=[Related(
            ctx.path, tie.lineno, "the parameters are tied here", ctx.column(tie))],
            model=recv, line=tie.lineno)

    @staticmethod
    def _retied(scope, recv: str, line: int, info: ClassInfo, ctx: Context) -> bool:
        """After the load: an attribute of ``recv`` assigned, or a method of its class called
        that ties (``model.tie_weights()``)."""
        for st in scope.stmts:
            if st.lineno <= line:
                continue
            for n in walk(st):
                if isinstance(n, ast.Assign) and any(
                        (dotted(t) or "").startswith(recv + ".") for t in n.targets):
                    return True
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and dotted(n.func.value) == recv:
                    m = info.method(n.func.attr)
                    if m is not None and ties(m, ctx) is not None:
                        return True
        return False
