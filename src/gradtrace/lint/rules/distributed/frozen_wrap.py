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
from gradtrace.lint.analysis.frozen_params import file_unfreezes
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed._ddp import TRIGGERS, Wrap, wrapped_class, wraps
from gradtrace.lint.rules.leaf._tensors import is_parameter_call
from gradtrace.lint.rules.registration._grad_flags import grad_flags
from gradtrace.lint.rules.registration._modules import covers, owns_params

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


def frozen_local(w: Wrap, ctx: Context) -> tuple[ast.expr, ast.stmt] | None:
    """(the call that built it, the last freeze) when ``w`` wraps a name holding a module
    built and then frozen whole, in the wrapping function itself (``net = nn.Sequential(...);
    net.requires_grad_(False); DDP(net)``) or in a builder of the file that returns it
    (``def define_F(): net = ...; for p in net.parameters(): p.requires_grad = False;
    return net``), with no unfreeze of it there (NOTE [frozen at construction])."""
    arg = w.call.args[0]
    if not isinstance(arg, ast.Name) or file_unfreezes(ctx):
        return None
    scope = ctx.scope(w.owner)
    b = scope.binding_before(arg.id, w.call.lineno)
    if b is None or not isinstance(b.value, ast.Call) or not isinstance(b.stmt, ast.Assign):
        return None
    freeze = _frozen_in(w.owner, arg.id, b.stmt, ctx, w.call.lineno)
    if freeze is not None:
        return b.value, freeze
    fn = ctx.analysis.callee(b.value, w.owner)
    if fn is None or fn is w.owner or _grown(w.owner, arg.id, b.line, w.call.lineno):
        return None
    freeze = ctx.memo("gt456-builder", fn, lambda: _frozen_builder(fn, ctx))
    return (b.value, freeze) if freeze is not None else None


def _grown(fn: ast.AST, name: str, start: int, end: int) -> bool:
    """``name.head = nn.Linear(...)`` (or any attribute set) between lines ``start`` and
    ``end`` of ``fn``: the module may hold a new, trainable part."""
    return any(isinstance(n, ast.Assign) and start < n.lineno < end and any(
        (dotted(t) or "").startswith(name + ".") for t in n.targets) for n in walk(fn))


def _frozen_builder(fn: ast.AST, ctx: Context) -> ast.stmt | None:
    """The last freeze of the module every ``return`` of ``fn`` gives back, when it covers
    the whole module (see :func:`frozen_local`)."""
    names = set()
    for n in ast.walk(fn):
        if isinstance(n, (ast.Lambda, *FUNCTION_TYPES)) and n is not fn:
            return None
        if isinstance(n, ast.Return):
            if not isinstance(n.value, ast.Name):
                return None
            names.add(n.value.id)
    if len(names) != 1:
        return None
    name = names.pop()
    binds = ctx.scope(fn).bindings.get(name, ())
    if len(binds) != 1 or not isinstance(binds[0].stmt, ast.Assign):
        return None
    return _frozen_in(fn, name, binds[0].stmt, ctx, None)


def _frozen_in(fn: ast.AST, name: str, made: ast.Assign, ctx: Context,
               before: int | None) -> ast.stmt | None:
    """The last unconditional freeze of all of ``name``'s parameters after ``made`` (which
    builds a module with parameters) in the same block of ``fn`` (before line ``before``),
    when nothing in ``fn`` unfreezes any of them."""
    if not owns_params(made.value, ctx):
        return None
    block = getattr(fn, "body", [])
    if made not in block:
        return None
    flags = grad_flags(ctx.scope(fn))
    if any(f.value and (covers(f.root, name) or covers(name, f.root)) for f in flags):
        return None
    if _grown(fn, name, made.lineno, before or 10 ** 9):
        return None
    cover = [f.stmt for f in flags if not f.conditional and not f.value and f.root == name
             and f.stmt in block and f.stmt.lineno > made.lineno
             and (before is None or f.stmt.lineno < before)]
    return cover[-1] if cover else None


class DdpWrapsFrozenModule(Rule):
    """`DistributedDataParallel` is given a module whose class freezes every parameter it has.

    Why: DDP registers a gradient hook on each parameter that requires grad; given a module
    with none (a perceptual-loss network whose `__init__` freezes its VGG), its constructor
    raises `RuntimeError: DistributedDataParallel is not needed when a module doesn't have
    any parameter that requires a gradient` (pytorch/pytorch#25550, checked on torch 2.13).
    A frozen network needs no gradient synchronisation: call it unwrapped on every rank.
    The module may as well be built and frozen whole before it is wrapped, in the wrapping
    function or in a builder of the file that returns it (ESRGAN's `define_F()`: a VGG
    `nn.Sequential` whose `named_parameters()` all get `requires_grad = False`).
    Known limits: the module is an instance of a class of the file, built where it is
    wrapped (NOTE [frozen at construction]), or a name holding a module built and frozen in
    one block; an unfreeze anywhere in `__init__` (in that function) silences it.
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
        Bad("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP
            def build_teacher():
                teacher = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
                for p in teacher.parameters():
                    p.requires_grad = False
                return teacher
            def setup():
                teacher = build_teacher()
                return DDP(teacher)
            """, at=(10, 11)),
        Good("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP
            def build_teacher():
                teacher = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
                for p in teacher[0].parameters():
                    p.requires_grad = False
                return teacher
            def setup():
                teacher = build_teacher()
                return DDP(teacher)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        for w in wraps(ctx):
            cls = wrapped_class(w, ctx)
            freeze = frozen_at_construction(cls, ctx) if cls is not None else None
            if freeze is None:
                local = frozen_local(w, ctx)
                if local is not None:
                    yield self.report(w.call, ctx, related=(Related(
                        ctx.path, local[1].lineno, "its parameters are frozen here",
                        ctx.column(local[1])),), cls=ctx.source(local[0])[:40],
                        line=local[1].lineno)
                continue
            yield self.report(w.call, ctx, related=(Related(
                ctx.path, freeze.lineno, f"`{cls.name}` freezes its parameters here",  # type: ignore[union-attr]
                ctx.column(freeze)),), cls=cls.name, line=freeze.lineno)  # type: ignore[union-attr]
