"""GT460: a reentrant checkpoint inside a DDP model whose reducer then sees a parameter twice."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis import ClassInfo
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed._ddp import TRIGGERS, wrapped_class, wraps
from gradtrace.lint.rules.distributed.reducer import _learnable_attr

CHECKPOINT = "torch.utils.checkpoint.checkpoint"
READY_TWICE = "'Expected to mark a variable ready only once'"


def _reentrant(call: ast.Call) -> bool:
    """``use_reentrant=True``, or not given (torch 2.13 still defaults to the reentrant
    variant, with a warning)."""
    k = next((k for k in call.keywords if k.arg == "use_reentrant"), None)
    if k is None:
        return not any(k.arg is None for k in call.keywords)
    return isinstance(k.value, ast.Constant) and k.value.value is True


def _reached(cls: ClassInfo, ctx: Context) -> list[ClassInfo]:
    """``cls`` and the module classes of the file its methods build, transitively."""
    out, todo = [cls], [cls]
    while todo:
        c = todo.pop()
        for n in walk(c.node):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                got = ctx.analysis.classes.get(n.func.id)
                if got is not None and got.is_module and got not in out:
                    out.append(got)
                    todo.append(got)
    return out


def _checkpoints(cls: ClassInfo, ctx: Context) -> list[ast.Call]:
    return [n for m in cls.methods.values() for n in walk(m) if isinstance(n, ast.Call)
            and ctx.qualified_name(n.func) == CHECKPOINT and n.args and _reentrant(n)]


def _shared(cls: ClassInfo, call: ast.Call, ctx: Context) -> bool:
    """Whether the module ``call`` checkpoints holds a module that another checkpointed call
    also runs: the same ``self.<attr>`` checkpointed twice, or ``for layer in self.<list>``
    over a list built by a comprehension that hands every element one module made outside it
    (``nn.ModuleList([Head(dim, E_proj) for _ in range(depth)])``)."""
    fn = call.args[0]
    name = dotted(fn)
    if name is not None and name.startswith("self."):
        same = sorted((c for c in _checkpoints(cls, ctx) if dotted(c.args[0]) == name),
                      key=lambda c: (c.lineno, c.col_offset))
        return len(same) > 1 and same[0] is call  # reported once, at the first
    if not isinstance(fn, ast.Name):
        return False
    loop = next((n for m in cls.methods.values() for n in walk(m) if isinstance(n, ast.For)
                 and isinstance(n.target, ast.Name) and n.target.id == fn.id
                 and any(x is call for x in walk(n))), None)
    seq = dotted(loop.iter) if loop is not None else None
    if seq is None or not seq.startswith("self.") or seq.count(".") != 1:
        return False
    info = cls.attrs.get(seq[5:])
    if info is None:
        return False
    stmts = [info.stmt, *info.later]  # every assignment (`if sharing: ... else: ...`)
    return any(_hands_one_module(st.value, info.method, st.lineno, ctx) for st in stmts
               if isinstance(st, ast.Assign))


def _hands_one_module(value: ast.AST, method: ast.AST, line: int, ctx: Context) -> bool:
    comp = next((n for n in walk(value) if isinstance(n, ast.ListComp)), None)
    if comp is None or not isinstance(comp.elt, ast.Call):
        return False
    inner = {t.id for g in comp.generators for t in walk(g.target) if isinstance(t, ast.Name)}
    for a in (*comp.elt.args, *(k.value for k in comp.elt.keywords)):
        if isinstance(a, ast.Name) and a.id not in inner:
            k = ctx.analysis.kind_in(a, method, line)
            if k is not None and k.what == MODULE:
                return True
    return False


def _layers(classes: list[ClassInfo], ctx: Context) -> int:
    """How many learnable attributes the classes hold (a model whose only layer is the shared
    one runs: every hook of the bucket fires in each nested backward, checked on torch 2.13)."""
    return sum(_learnable_attr(c, a, ctx) for c in classes for a in c.attrs)


class ReentrantCheckpointUnderDdp(Rule):
    """A model wrapped in `DistributedDataParallel` runs part of its forward through a reentrant
    `torch.utils.checkpoint.checkpoint`, with `find_unused_parameters=True`, or with a module
    that two checkpointed calls share.

    Why: the reentrant checkpoint recomputes its part of the forward inside the backward and
    runs a second, nested backward over it; the gradient hooks DDP put on those parameters then
    fire outside the pass DDP's reducer planned. With `find_unused_parameters=True` (FocalNet,
    Swin `use_checkpoint`), or with a parameter used by two checkpointed calls (Linformer's
    layer-wise shared projection), the first backward raises `RuntimeError: Expected to mark a
    variable ready only once` (pytorch#46166; checked on torch 2.13, where a checkpoint
    without `use_reentrant` is still the reentrant one). Pass `use_reentrant=False`, or wrap
    with `static_graph=True`.
    Known limits: the model must be a class of the file wrapped there; the checkpoint may sit in
    any module class of the file its constructor builds, transitively. Sharing is seen for the
    same `self.<attr>` checkpointed twice, and for a loop over a list built by a comprehension
    that hands each element one module made outside it, in a model with other layers too (a
    model whose only layer is the shared one runs).
    """

    code = "GT460"
    name = "reentrant-checkpoint-under-ddp"
    message = ("`{call}` is a reentrant checkpoint inside `{cls}`, wrapped in DDP at line "
               "{wrap} {why}: its nested backward marks a parameter ready twice and the "
               "backward raises " + READY_TWICE + "; pass `use_reentrant=False`")
    triggers = TRIGGERS
    examples = [
        Bad("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP
            from torch.utils.checkpoint import checkpoint

            class Stack(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])

                def forward(self, x):
                    for blk in self.blocks:
                        x = checkpoint(blk, x, use_reentrant=True)
                    return x

            model = DDP(Stack(), find_unused_parameters=True)
            """, at=(12, 16)),
        Good("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP
            from torch.utils.checkpoint import checkpoint

            class Stack(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])

                def forward(self, x):
                    for blk in self.blocks:
                        x = checkpoint(blk, x, use_reentrant=False)
                    return x

            model = DDP(Stack(), find_unused_parameters=True)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        seen: set[int] = set()
        for w in wraps(ctx):
            cls = wrapped_class(w, ctx) if not w.static_graph else None
            if cls is None:
                continue
            reached = _reached(cls, ctx)
            for c in reached:
                for call in _checkpoints(c, ctx):
                    if id(call) in seen:
                        continue
                    if w.finds_unused:
                        why = "with find_unused_parameters=True"
                    elif _shared(c, call, ctx) and _layers(reached, ctx) > 1:
                        why = "and a module it runs is shared with another checkpointed call"
                    else:
                        continue
                    seen.add(id(call))
                    yield self.report(call, ctx, call=ctx.source(call.func), cls=c.name,
                                      wrap=w.line, why=why, related=(Related(
                                          ctx.path, w.line, "the model is wrapped here",
                                          ctx.column(w.call)),))
