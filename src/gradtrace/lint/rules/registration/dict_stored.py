"""GT498: a layer or parameter stored past ``nn.Module.__setattr__`` (never registered)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.params import module_ctor
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.rule import Bad, Good, Rule

PARAMETER_CTORS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def _self_name(ctx: Context) -> str | None:
    """The first parameter of the enclosing method of an ``nn.Module`` class of the file."""
    fn = ctx.function
    cls = ctx.analysis.class_of(fn)
    if cls is None or not cls.is_module or not isinstance(fn, FUNCTION_TYPES) or not fn.args.args:
        return None
    return fn.args.args[0].arg


def _is_instance_dict(e: ast.AST, me: str) -> bool:
    """``self.__dict__`` or ``vars(self)``."""
    if isinstance(e, ast.Attribute) and e.attr == "__dict__":
        return isinstance(e.value, ast.Name) and e.value.id == me
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "vars" \
        and len(e.args) == 1 and isinstance(e.args[0], ast.Name) and e.args[0].id == me


def _new_part(e: ast.AST, ctx: Context) -> str | None:
    """"layer" or "parameter" when ``e`` builds one here (a constructor of ``torch.nn`` or of a
    module class of the file, ``nn.Parameter(...)``; a name of the function bound only to
    one). A loaded model (``from_pretrained``) is left alone: hiding it may be deliberate."""
    if isinstance(e, ast.Name) and isinstance(ctx.function, FUNCTION_TYPES):
        binds = [s.value for s in bfs_walk(ctx.function) if isinstance(s, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == e.id for t in s.targets)]
        kinds = {_new_part(v, ctx) for v in binds if not isinstance(v, ast.Name)}
        return kinds.pop() if len(kinds) == 1 and None not in kinds else None
    if not isinstance(e, ast.Call):
        return None
    if (ctx.call_name(e) or "") in PARAMETER_CTORS:
        return "parameter"
    if isinstance(e.func, ast.Attribute) and e.func.attr == "from_pretrained":
        return None
    return "layer" if module_ctor(e, ctx) else None


def _lists_by_hand(ctx: Context) -> bool:
    """The file builds a `torch.optim` optimizer over something other than one
    ``X.parameters()`` call (a list it assembles itself), once per file."""
    def make() -> bool:
        for n in ast.walk(ctx.tree):
            q = ctx.qualified_name(n.func) or "" if isinstance(n, ast.Call) else ""
            if q.startswith("torch.optim.") and q.count(".") == 2 and n.args \
                    and q[12:13].isupper():  # an optimizer class, not a scheduler module
                a = n.args[0]
                if not (isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute)
                        and a.func.attr in ("parameters", "named_parameters")):
                    return True
        return False
    return ctx.memo("gt498-lists-by-hand", ctx.tree, make)


class StoredPastRegistration(Rule):
    """A module stores a new layer or parameter past `nn.Module.__setattr__`.

    Why: `nn.Module` registers a submodule or an `nn.Parameter` only when it is assigned
    through its own `__setattr__` (`self.head = nn.Linear(...)`, `setattr(self, name, ...)`,
    `add_module`, `register_parameter`) (pytorch-facts.md#registration).
    `self.__dict__[name] = nn.Linear(...)`, `vars(self)[name] = ...` and
    `object.__setattr__(self, name, ...)` put it in the instance dictionary only: the forward
    can still call it, but `model.parameters()` never yields its weights, so the optimizer
    never updates them (and `state_dict()`, `.to(device)` and `.train()` skip it). Use
    `setattr(self, name, layer)` or an `nn.ModuleDict`.
    Known limits: only a layer or parameter built in the same method (a constructor of
    `torch.nn` or of a module class of the file, or a name bound only to one); a model handed
    in or loaded with `from_pretrained` may be hidden on purpose (a frozen teacher) and is left
    alone; so is a file that builds an optimizer over a parameter list it assembles by hand
    (`list(model.body.parameters()) + list(model.head.parameters())`): the stored layer may be
    in it.
    """

    code = "GT498"
    gate_statements = True
    name = "stored-past-registration"
    message = ("`{target}` stores a new {kind} in the instance dictionary, past "
               "`nn.Module.__setattr__`: it is never registered, so `parameters()` and the "
               "optimizer never see its weights")
    triggers = ("__dict__", "__setattr__", "vars")
    examples = [
        Bad("""
            import torch.nn as nn

            class MultiHead(nn.Module):
                def __init__(self, tasks):
                    super().__init__()
                    self.trunk = nn.Linear(8, 16)
                    for t in tasks:
                        self.__dict__["head_" + t] = nn.Linear(16, 1)
            """, at=(8, 12)),
        Bad("""
            import torch
            import torch.nn as nn

            class Scaled(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    scale = nn.Parameter(torch.ones(d))
                    object.__setattr__(self, "scale", scale)
            """, at=(8, 8)),
        Good("""
            import torch.nn as nn

            class MultiHead(nn.Module):
                def __init__(self, tasks):
                    super().__init__()
                    for t in tasks:
                        setattr(self, "head_" + t, nn.Linear(16, 1))
                    self.__dict__["tasks"] = list(tasks)
            """),
        Good("""
            import torch.nn as nn

            class Student(nn.Module):
                def __init__(self, teacher):
                    super().__init__()
                    self.body = nn.Linear(8, 8)
                    object.__setattr__(self, "teacher", teacher)
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        targets = [t for t in node.targets if isinstance(t, ast.Subscript)]
        if not targets or _lists_by_hand(ctx):
            return
        me = _self_name(ctx)
        if me is None or not any(_is_instance_dict(t.value, me) for t in targets):
            return
        kind = _new_part(node.value, ctx)
        if kind is not None:
            t = next(t for t in targets if _is_instance_dict(t.value, me))
            yield self.report(node, ctx, target=ctx.source(t), kind=kind)

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if dotted(node.func) != "object.__setattr__" or len(node.args) != 3:
            return
        me = _self_name(ctx)
        if me is None or not (isinstance(node.args[0], ast.Name) and node.args[0].id == me) \
                or _lists_by_hand(ctx):
            return
        kind = _new_part(node.args[2], ctx)
        if kind is not None:
            yield self.report(node, ctx, target=f"object.__setattr__({me}, ...)", kind=kind)
