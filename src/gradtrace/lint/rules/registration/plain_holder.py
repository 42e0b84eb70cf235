"""GT413: a plain (non-module) class holds parameters, and a module stores an instance of it."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._modules import owns_params
from gradtrace.lint.nodes import bfs_walk

OWNING = frozenset({"register_parameter", "register_module", "add_module", "setattr",
                    "register_buffer"})


class ParametersInPlainClass(Rule):
    """A plain class (not an `nn.Module`) holds an `nn.Parameter` or a layer, and a module
    stores an instance of it and runs it in `forward`.

    Why: `nn.Module.__setattr__` registers a value only when it is an `nn.Module` or an
    `nn.Parameter` (pytorch-facts.md#registration). An object of a plain class is an
    ordinary attribute: the parameters it holds are not in the module's `parameters()`, so
    the optimizer never updates them, and `state_dict()` and `.to(device)` skip them, while
    `forward` uses them and the rest of the model trains (EleutherAI/gpt-neox#267). Make the
    class an `nn.Module` (`class ParallelLinear(nn.Module)` and `super().__init__()`).
    Known limits: only a class of the file without bases, stored by a module class of the file
    (`self.out = Plain(...)`, also under a conditional expression) and read in that module's
    `forward` (or a method it calls); left alone when the module hands the held parameters on
    itself (`register_parameter`, `self.w = self.out.weight`, an optimizer given them), or
    gives them to the plain class from its own attributes (`Plain(self.emb, self.w)`).
    """

    code = "GT413"
    name = "parameters-in-plain-class"
    message = ("`{cls}` is a plain class, not an `nn.Module`: the {what} `self.{attr}` it holds "
               "is not registered on `{owner}` (which stores it as `self.{field}`), so "
               "`parameters()`, the optimizer, `state_dict()` and `.to()` miss it; make `{cls}` "
               "an `nn.Module` subclass")
    triggers = ("Module",)
    # every class statement's own lines say `class`: all classes are still visited, in walk
    # order, and the engine may skip the statements that hold no class (NOTE [quiet subtrees])
    gate_statements = True
    statement_triggers = ("class",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            class Head:
                def __init__(self, d, v):
                    self.weight = nn.Parameter(torch.randn(v, d))
                def __call__(self, h):
                    return F.linear(h, self.weight)
            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(8, 8)
                    self.head = Head(8, 50)
                def forward(self, x):
                    return self.head(self.body(x))
            """, at=(4, 0)),
        Good("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            class Head(nn.Module):
                def __init__(self, d, v):
                    super().__init__()
                    self.weight = nn.Parameter(torch.randn(v, d))
                def forward(self, h):
                    return F.linear(h, self.weight)
            class Config:
                def __init__(self):
                    self.dim = 8
            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.cfg = Config()
                    self.head = Head(8, 50)
                def forward(self, x):
                    return self.head(x[..., :self.cfg.dim])
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        an = ctx.analysis
        cls = an.classes.get(node.name)
        if cls is None or cls.node is not node or cls.is_module or node.keywords \
                or any(dotted(b) != "object" for b in node.bases):
            return
        helds = self._held(cls, ctx)
        if not helds:
            return
        for owner in an.classes.values():
            if not owner.is_module:
                continue
            for field, info in owner.attrs.items():
                builds = [] if info.value is None or field not in owner.forward_uses else [
                    n for n in bfs_walk(info.value) if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Name) and n.func.id == node.name]
                if not builds or _handed_on(owner.node, field, ctx):
                    continue
                held = next((h for h in helds if not any(
                    _owner_attr_given(node, h[2], b) for b in builds)), None)
                if held is None:
                    continue  # every held thing is one of the owner's own attributes
                attr, what, _ = held
                yield self.report(node, ctx, related=[Related(
                    ctx.path, info.stmt.lineno, f"`{owner.name}` stores it here as a plain "
                    "attribute", ctx.column(info.stmt))], cls=node.name, what=what,
                    attr=attr, owner=owner.name, field=field)
                return

    @staticmethod
    def _held(cls: object, ctx: Context) -> list[tuple[str, str, str | None]]:
        """Each ``self.<x>`` of the plain class that is a Parameter or a layer: (attribute,
        what, the ``__init__`` argument it stores, or None)."""
        out = []
        for name, info in cls.attrs.items():  # type: ignore[attr-defined]
            k = cls.attr_kind(name)  # type: ignore[attr-defined]
            if k is None:
                continue
            arg = info.value.id if isinstance(info.value, ast.Name) else None
            if k.what == PARAMETER:
                out.append((name, "`nn.Parameter`", arg))
            elif k.what == MODULE and info.value is not None and owns_params(info.value, ctx):
                out.append((name, "layer", arg))
        return out


def _handed_on(owner: ast.ClassDef, field: str, ctx: Context) -> bool:
    """Whether the file hands the held things on itself: ``register_parameter``/``setattr`` in
    the module class, ``x.<field>.<attr>`` stored on ``self``, passed to a call or listed."""
    def make() -> bool:
        for n in bfs_walk(owner):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in OWNING or isinstance(n, ast.Call) \
                    and isinstance(n.func, ast.Name) and n.func.id == "setattr":
                return True
        for n in bfs_walk(ctx.tree):
            vals: list[ast.AST] = []
            if isinstance(n, ast.Call):
                vals = [*n.args, *(k.value for k in n.keywords)]
            elif isinstance(n, (ast.List, ast.Tuple, ast.Set)):
                vals = list(n.elts)
            elif isinstance(n, ast.Assign):
                vals = [n.value]
            for v in vals:
                if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Attribute) \
                        and v.value.attr == field:
                    return True  # `opt = SGD([model.head.weight])`, `self.w = self.head.weight`
                if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                        and v.func.attr in ("parameters", "named_parameters") \
                        and isinstance(v.func.value, ast.Attribute) \
                        and v.func.value.attr == field:
                    return True  # `SGD(model.head.parameters())`
        return False
    return ctx.memo("gt413-handed-on", owner, make)


def _owner_attr_given(cls: ast.ClassDef, arg: str | None, build: ast.Call) -> bool:
    """``build`` (``Plain(...)`` in the owner) gives the ``__init__`` argument ``arg`` one of
    the owner's own attributes (``Decoder(self._embedding, self._attn_wq)``, fast_abs_rl): a
    Parameter or layer the owner already holds, and registers, not one the plain class made."""
    init = next((m for m in cls.body if isinstance(m, ast.FunctionDef)
                 and m.name == "__init__"), None)
    if arg is None or init is None:
        return False
    params = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
    given = next((k.value for k in build.keywords if k.arg == arg), None)
    if given is None and arg in params and params.index(arg) < len(build.args):
        given = build.args[params.index(arg)]
    return isinstance(given, ast.Attribute) and isinstance(given.value, ast.Name) \
        and given.value.id == "self"
