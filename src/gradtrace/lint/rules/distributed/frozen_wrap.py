"""GT456: DistributedDataParallel given a module whose class freezes every parameter it has.

# NOTE [frozen at construction]
``class VGGLoss(nn.Module): def __init__(self): self.vgg = ...; for p in self.vgg.parameters():
p.requires_grad = False`` builds a module with no trainable parameter: every submodule or
Parameter ``__init__`` assigns (directly, not under an ``if``) is covered by an unconditional
freeze of ``__init__`` after it (``for p in self.<x>.parameters(): p.requires_grad = False``,
``self.<x>.requires_grad_(False)``, the same on ``self``) and nothing there unfreezes.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed._ddp import TRIGGERS, wrapped_class, wraps
from gradtrace.lint.rules.leaf._tensors import is_parameter_call
from gradtrace.lint.rules.registration._modules import covers, grad_flags, owns_params

DDP_ERROR = ("'DistributedDataParallel is not needed when a module doesn't have any parameter "
             "that requires a gradient'")


def frozen_at_construction(cls: ClassInfo, ctx: Context) -> ast.stmt | None:
    """The last freeze of ``cls.__init__`` when it leaves no parameter of the class
    trainable (NOTE [frozen at construction]); None otherwise."""
    init = cls.methods.get("__init__")
    if init is None:
        return None
    owners = []
    for name, info in cls.attrs.items():
        v = info.value
        if info.method is not init or v is None:
            continue
        if is_parameter_call(v, ctx) or isinstance(v, ast.Call) and owns_params(v, ctx):
            if info.stmt not in init.body or info.later:
                return None  # assigned under an `if`, or again later: not judged
            owners.append((f"self.{name}", info.stmt.lineno))
    flags = grad_flags(ctx.scope(init))
    if not owners or any(f.value for f in flags):
        return None
    last = None
    for path, line in owners:
        cover = [f for f in flags if not f.conditional and f.stmt.lineno > line
                 and f.stmt in init.body  # not under an `if`
                 and (covers(f.root, path) or f.root == "self")]
        if not cover:
            return None
        last = max([last, *(f.stmt for f in cover)], key=lambda s: s.lineno if s else 0)
    return last


class DdpWrapsFrozenModule(Rule):
    """`DistributedDataParallel` is given a module whose class freezes every parameter it has.

    Why: DDP registers a gradient hook on each parameter that requires grad; given a module
    with none (a perceptual-loss network whose `__init__` freezes its VGG), its constructor
    raises `RuntimeError: DistributedDataParallel is not needed when a module doesn't have
    any parameter that requires a gradient` (pytorch/pytorch#25550, checked on torch 2.13).
    A frozen network needs no gradient synchronisation: call it unwrapped on every rank.
    Known limits: the module is an instance of a class of the file, built where it is
    wrapped (NOTE [frozen at construction]); an unfreeze anywhere in `__init__` silences it.
    """

    code = "GT456"
    name = "ddp-wraps-frozen-module"
    message = ("`{cls}` freezes every parameter it has when it is built (line {line}), and "
               "DistributedDataParallel raises " + DDP_ERROR + " on a module with none to "
               "train; use the frozen module unwrapped")
    triggers = TRIGGERS
    examples = [
        Bad("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP
            class Perceptual(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.features = nn.Conv2d(3, 8, 3)
                    for p in self.features.parameters():
                        p.requires_grad = False
                def forward(self, x, y):
                    return (self.features(x) - self.features(y)).abs().mean()
            criterion = DDP(Perceptual())
            """, at=(11, 12)),
        Good("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP
            class Perceptual(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.features = nn.Conv2d(3, 8, 3)
                    self.proj = nn.Linear(8, 8)
                    for p in self.features.parameters():
                        p.requires_grad = False
                def forward(self, x, y):
                    return (self.features(x) - self.features(y)).abs().mean()
            criterion = DDP(Perceptual())
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        for w in wraps(ctx):
            cls = wrapped_class(w, ctx)
            freeze = frozen_at_construction(cls, ctx) if cls is not None else None
            if freeze is None:
                continue
            yield self.report(w.call, ctx, related=(Related(
                ctx.path, freeze.lineno, f"`{cls.name}` freezes its parameters here",  # type: ignore[union-attr]
                ctx.column(freeze)),), cls=cls.name, line=freeze.lineno)  # type: ignore[union-attr]
