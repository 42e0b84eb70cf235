"""GT546: one module object handed to two submodule slots of a module class of the file."""
from __future__ import annotations

import ast
from collections import deque
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import calls_of
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import statements
from gradtrace.lint.rule import Bad, Good, Rule

# NOTE [one module in two slots]
# Assigning a module to an attribute of another module registers that very object
# (`Module.__setattr__` stores it in `_modules`, no copy): a class whose `__init__` stores two
# of its parameters as two submodules (`self.self_attn = a; self.cross_attn = b`) given the
# same object for both holds one module under two names. `parameters()` lists its weights
# once, both roles run the same weights and train them with the sum of both gradients; the
# model has fewer parameters than its design, silently (checked on torch 2.13: two
# attributes, one `id`). A copy made inside the class (`copy.deepcopy(b)`) is not this.


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(fn: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``'s statements of ``fn`` in its order (breadth first; no expression holds a
    statement, so skipping them changes no depth), without visiting any expression."""
    todo = deque([fn])
    while todo:
        node = todo.popleft()
        yield node
        for field in node._fields:
            v = getattr(node, field, None)
            if isinstance(v, list):
                todo.extend(c for c in v if isinstance(c, _BLOCKS))


def _stored_params(cls_node: ast.ClassDef) -> dict[str, str]:
    """``parameter -> attribute`` for ``self.<attr> = <parameter>`` in ``__init__`` (the
    parameter stored as it comes)."""
    init = next((s for s in cls_node.body if isinstance(s, ast.FunctionDef)
                 and s.name == "__init__"), None)
    if init is None:
        return {}
    params = {a.arg for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs)}
    out: dict[str, str] = {}
    # the same assignments from the cheap stack walk of the bodies (not ``_statements``'
    # breadth-first order): the order decides only for a parameter stored under two names
    # (the first in ``_statements``' order is kept), and then the breadth-first walk runs
    for s in statements(init):
        if s.__class__ is ast.Assign and len(s.targets) == 1 \
                and s.value.__class__ is ast.Name and s.value.id in params:
            t = s.targets[0]
            if t.__class__ is ast.Attribute and t.value.__class__ is ast.Name \
                    and t.value.id == "self" and out.setdefault(s.value.id, t.attr) != t.attr:
                return _stored_first(init, params)
    return out


def _stored_first(init: ast.FunctionDef, params: set[str]) -> dict[str, str]:
    """:func:`_stored_params` in ``_statements``' order (a parameter stored twice)."""
    out: dict[str, str] = {}
    for s in _statements(init):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.value, ast.Name) and s.value.id in params:
            t = s.targets[0]
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                    and t.value.id == "self":
                out.setdefault(s.value.id, t.attr)
    return out


class ModulePassedToTwoSlots(Rule):
    """One module object is passed for two parameters of a module class of the file that
    stores each as its own submodule.

    Why: `DecoderLayer(d, p, mha, mha, ffn)` gives the self-attention and the cross-attention
    slots one `MultiHeadedAttention` object (NOTE [one module in two slots]): the layer has
    one attention under two names, both roles share and co-train its weights, and the model
    has fewer parameters than designed, silently (gordicaleksa/pytorch-original-transformer
    before 332d838: found by counting `named_parameters()`). Pass a copy to each slot
    (`copy.deepcopy(mha)`) or build two modules.
    Known limits: the class is of the file, its `__init__` stores the two parameters as they
    come on `self` under two names, the call passes one plain name bound to a module for both.
    """

    code = "GT546"
    name = "module-passed-to-two-slots"
    message = ("`{arg}` is passed as both `{p1}` and `{p2}` of `{cls}`, which stores them as "
               "two submodules (`self.{a1}`, `self.{a2}`): they are one module, one set of "
               "weights shared by both roles; pass a copy to one of them")
    triggers = ("Module",)
    examples = [
        Bad("""
            import torch.nn as nn
            class Layer(nn.Module):
                def __init__(self, self_attn, cross_attn):
                    super().__init__()
                    self.self_attn = self_attn
                    self.cross_attn = cross_attn
            attn = nn.MultiheadAttention(16, 2)
            layer = Layer(attn, attn)
            """, at=(8, 8)),
        Good("""
            import copy
            import torch.nn as nn
            class Layer(nn.Module):
                def __init__(self, self_attn, cross_attn):
                    super().__init__()
                    self.self_attn = self_attn
                    self.cross_attn = cross_attn
            attn = nn.MultiheadAttention(16, 2)
            layer = Layer(attn, copy.deepcopy(attn))
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        # only a class storing two of its parameters under two names can be reported: its
        # calls are the only ones worth finding (the file's other calls are never read)
        names = [n for n, c in ctx.analysis.classes.items() if c.is_module and len(set(
            ctx.memo("gt546-stored", c.node, lambda c=c: _stored_params(c.node)).values())) > 1]
        for call, _, fn in calls_of(ctx, names):  # NOTE [call sites]
            yield from self._check(call, fn or ctx.tree, ctx)

    def _check(self, node: ast.Call, where: ast.AST, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not isinstance(f, ast.Name) or len(node.args) + len(node.keywords) < 2:
            return
        cls = ctx.analysis.classes.get(f.id)
        if cls is None or not cls.is_module:
            return
        init = cls.methods.get("__init__")
        if init is None:
            return
        names = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]
        given: list[tuple[str, ast.expr]] = list(zip(names, node.args))
        given += [(k.arg, k.value) for k in node.keywords if k.arg]
        by_arg: dict[str, list[str]] = {}
        for p, a in given:
            if isinstance(a, ast.Name):
                by_arg.setdefault(a.id, []).append(p)
        twice = {a: ps for a, ps in by_arg.items() if len(ps) > 1}
        if not twice:
            return
        stored = ctx.memo("gt546-stored", cls.node, lambda: _stored_params(cls.node))
        for arg, ps in twice.items():
            slots = [(p, stored[p]) for p in ps if p in stored]
            if len({s for _, s in slots}) < 2:
                continue
            k = ctx.analysis.kind(ast.Name(id=arg, ctx=ast.Load(), lineno=node.lineno),
                                  ctx.scope(where), node.lineno)
            if k is None or k.what != MODULE:
                continue
            (p1, a1), (p2, a2) = slots[0], slots[1]
            yield self.report(node, ctx, related=(Related(
                ctx.path, cls.node.lineno, f"`{cls.name}` stores them as two submodules",
                ctx.column(cls.node)),), arg=arg, p1=p1, p2=p2, cls=cls.name, a1=a1, a2=a2)
            return
