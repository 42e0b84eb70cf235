"""GT450-GT452: parameters that DistributedDataParallel's reducer waits for in vain."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import TYPE_CHECKING, Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import statements, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed._frozen_calls import frozen_by_calls
from gradtrace.lint.rules.distributed._ruled_out import ruled_out_layers
from gradtrace.lint.rules.distributed._selected import called_per_entry, selected_entries
from gradtrace.lint.rules.distributed._ddp import (
    TRIGGERS, Wrap, holds_wrapper, wrapped_at, wrapped_by_earlier_call, wrapped_class, wraps,
)
from gradtrace.lint.rules.leaf._tensors import is_parameter_call
from gradtrace.lint.rules.registration._grad_flags import GradFlag, flag_statement, grad_flags
from gradtrace.lint.rules.registration._modules import owns_params
from gradtrace.lint.rules.registration._unused import unused_layers

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope

REDUCTION_ERROR = ("'Expected to have finished reduction in the prior iteration before starting "
                   "a new one'")


def _learnable_attr(cls: ClassInfo, name: str, ctx: Context) -> bool:
    v = cls.attrs[name].value
    return v is not None and (owns_params(v, ctx) or is_parameter_call(v, ctx))


class DdpUnusedSubmodule(Rule):
    """A layer of a model wrapped in `DistributedDataParallel` is never used: DDP waits for its
    gradient forever.

    Why: DDP's reducer expects a gradient for every parameter that requires grad, once per
    iteration. A layer built in `__init__` but never called in `forward` gets none, so the
    first backward never finishes its reduction and the next forward raises `RuntimeError:
    Expected to have finished reduction in the prior iteration before starting a new one`
    (verified on torch 2.13, one process and two). Remove the layer, freeze it before wrapping,
    or pass `find_unused_parameters=True` (or `static_graph=True`).
    Known limits: only a class of the same file wrapped by `DistributedDataParallel(...)`
    there, whose attribute (a layer with parameters or an `nn.Parameter`) is named nowhere
    else in the file, or only in `if` arms the wrapped instance's constructor arguments rule
    out (constants, enum members), in a class that does not reach its children dynamically.
    """

    code = "GT450"
    name = "ddp-unused-submodule"
    message = ("`self.{attr}` is never used{how}, but `{cls}` is wrapped in "
               "DistributedDataParallel (line {line}) without `find_unused_parameters=True`: its parameters never get a "
               "gradient and the next forward raises " + REDUCTION_ERROR + "; remove it (or "
               "freeze it before wrapping)")
    triggers = TRIGGERS
    examples = [
        Bad("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP
            class UNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(8, 8)
                    self.highway = nn.Linear(8, 8)
                def forward(self, x):
                    return self.encoder(x)
            def run(rank):
                model = DDP(UNet().to(rank), device_ids=[rank])
            """, at=(7, 8)),
        Good("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP
            class UNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(8, 8)
                    self.highway = nn.Linear(8, 8)
                    self.aux = nn.Linear(8, 8)
                def forward(self, x):
                    return self.encoder(x)
            def run(rank):
                a = DDP(UNet(), find_unused_parameters=True)
                net = UNet()
                net.aux.requires_grad_(False)
                net.highway = None
                b = DDP(net)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        seen: set[str] = set()
        for w in wraps(ctx):
            cls = wrapped_class(w, ctx) if not (w.finds_unused or w.static_graph) else None
            if cls is None or cls.name in seen:
                continue
            seen.add(cls.name)
            ruled = ruled_out_layers(w, cls, ctx)  # NOTE [layers a construction rules out]
            for name, info in [*unused_layers(cls, ctx), *ruled]:
                yield self.report(info.stmt, ctx, related=(Related(
                    ctx.path, w.line, "the model is wrapped here", ctx.column(w.call)),),
                    attr=name, cls=cls.name, line=w.line, how=(
                        " by the instance wrapped (its constructor's arguments rule out the "
                        "arms that read it)" if (name, info) in ruled else ""))


def _data_test(test: ast.expr, params: set[str], fn: ast.AST, ctx: Context,
               optional: frozenset[str] = frozenset()) -> bool:
    """Whether an ``if`` test depends on the data ``forward`` is given (a parameter, or a local
    made from one), not on ``self.training``, ``is None`` or ``isinstance`` alone; ``is None``
    counts on a parameter in ``optional`` (the training loop passes None on some passes)."""
    if isinstance(test, ast.Compare) and all(isinstance(o, (ast.Is, ast.IsNot))
                                             for o in test.ops):
        return isinstance(test.left, ast.Name) and test.left.id in optional
    if isinstance(test, ast.UnaryOp) and isinstance(test.operand, ast.Compare):
        return _data_test(test.operand, params, fn, ctx, optional)
    if isinstance(test, ast.Call) and dotted(test.func) in ("isinstance", "hasattr"):
        return False
    if isinstance(test, ast.UnaryOp):
        return _data_test(test.operand, params, fn, ctx)
    if isinstance(test, ast.BoolOp):
        return all(_data_test(v, params, fn, ctx, optional) for v in test.values)
    names = {n.id for n in walk(test) if isinstance(n, ast.Name)}
    if "self" in names:
        return False
    scope = ctx.scope(fn)
    for n in list(names):
        b = scope.binding_before(n, test.lineno)
        if b is not None and b.value is not None:
            names |= {x.id for x in walk(b.value) if isinstance(x, ast.Name)}
    return bool(names & params)


def _called_attrs(nodes: list[ast.stmt] | ast.AST) -> dict[str, int]:
    """``self.<x>(...)`` calls in ``nodes``: attribute -> how many."""
    out: dict[str, int] = {}
    for s in nodes if isinstance(nodes, list) else [nodes]:
        for n in walk(s):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and dotted(n.func.value) == "self":
                out[n.func.attr] = out.get(n.func.attr, 0) + 1
    return out


def _sometimes_none(v: ast.expr | None, scope: Scope, line: int) -> bool:
    """``x if c else None`` (or a name bound to one): None on some passes only."""
    if isinstance(v, ast.Name):
        b = scope.binding_before(v.id, line)
        v = b.value if b is not None and isinstance(b.stmt, ast.Assign) else None
    return isinstance(v, ast.IfExp) and sum(
        isinstance(a, ast.Constant) and a.value is None for a in (v.body, v.orelse)) == 1


def _optional_params(w: Wrap, fwd: ast.FunctionDef | ast.AsyncFunctionDef,
                     ctx: Context) -> frozenset[str]:
    """Parameters of the wrapped model's ``forward`` that a call of the wrapper (bound to
    ``w.target`` in the function that wraps) passes None on some passes and a value on
    others (``model(agents, route if step == 0 else None)``)."""
    if not w.target:
        return frozenset()
    scope = ctx.scope(w.owner)
    names = [x.arg for x in (*fwd.args.posonlyargs, *fwd.args.args)][1:]
    out: set[str] = set()
    for n in walk(w.owner):
        if isinstance(n, ast.Call) and dotted(n.func) == w.target and n.lineno > w.line:
            binds = dict(zip(names, n.args))
            binds.update((k.arg, k.value) for k in n.keywords if k.arg)
            out.update(p for p, v in binds.items() if _sometimes_none(v, scope, n.lineno))
    return frozenset(out)


def _conditional_layers(cls: ClassInfo, ctx: Context, w: Wrap | None = None
                        ) -> Iterator[tuple[str, ast.If]]:
    """(attribute, if) for each layer ``forward`` calls only on one side of a data-dependent
    ``if`` (or only after an ``if`` whose body returns early); an ``is None`` test counts on
    an argument the training loop passes as None on some passes only."""
    fwd = cls.methods.get("forward")
    if fwd is None:
        return
    optional = _optional_params(w, fwd, ctx) if w is not None else frozenset()
    a = fwd.args
    params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self"}
    total = _called_attrs(fwd)
    layers = {n for n in total if n in cls.attrs and _learnable_attr(cls, n, ctx)}
    done: set[str] = set()
    for s in statements(fwd):
        if not isinstance(s, ast.If) or not _data_test(s.test, params, fwd, ctx, optional):
            continue
        sides = [_called_attrs(s.body), _called_attrs(s.orelse)]
        if s.body and isinstance(s.body[-1], ast.Return) and not s.orelse:
            block = _block_of(fwd, s)
            if block is not None:
                sides.append(_called_attrs(block[block.index(s) + 1:]))
        for side in sides:
            for name, k in side.items():
                if name in layers and name not in done and k == total[name] and \
                        sum(name in o for o in sides) == 1:
                    done.add(name)
                    yield name, s


def _block_of(fn: ast.AST, stmt: ast.stmt) -> list[ast.stmt] | None:
    for s in [fn, *statements(fn)]:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(s, field, None)
            if isinstance(block, list) and stmt in block:
                return block
    return None


class DdpBranchLeavesLayerUnused(Rule):
    """`forward` of a model wrapped in `DistributedDataParallel` calls a layer only on some
    inputs, and DDP is not told to look for unused parameters.

    Why: without `find_unused_parameters=True`, DDP's reducer waits for a gradient of every
    parameter in every iteration. When a data-dependent branch (`if gt_boxes.numel() > 0:`,
    a flag argument) skips a layer, its parameters get no gradient in that iteration (on that
    rank), and the next forward raises `RuntimeError: Expected to have finished reduction in
    the prior iteration before starting a new one` (verified on torch 2.13). Pass
    `find_unused_parameters=True` to the wrapper, or make every branch use the layer (a
    zero-weighted loss term). A wrapper given a parameter whose false default every call of
    the file keeps is reported at that default (NOTE [left at a false default]).
    Known limits: only a class of the same file, wrapped there; the branch must test an
    argument of `forward` (or a local made from one); `isinstance` tests, tests on `self`
    (`self.training`, configuration), and `is None` tests are left alone, unless the training
    code calls the wrapper with that argument None on some passes only (`route if step == 0
    else None`, or a name bound to such a choice).
    """

    code = "GT451"
    name = "ddp-branch-leaves-layer-unused"
    message = ("`{cls}.forward` calls `self.{attr}` only on one side of `if {test}` (line "
               "{line}): in an iteration (or on a rank) where it is skipped its parameters get no "
               "gradient, and this DistributedDataParallel without `find_unused_parameters=True` "
               "raises " + REDUCTION_ERROR + " at the next forward")
    message_selected = ("`{cls}.forward` runs only the entry of `self.{attr}` that `{index}` "
                        "picks (line {line}): the other entries get no gradient in that "
                        "iteration (or on that rank), and this DistributedDataParallel without "
                        "`find_unused_parameters=True` raises " + REDUCTION_ERROR + " at the "
                        "next forward")
    triggers = TRIGGERS
    examples = [
        Bad("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel
            class Detector(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.rpn = nn.Linear(8, 2)
                    self.roi_head = nn.Linear(8, 4)
                def forward(self, img, gt_boxes):
                    losses = {"rpn": self.rpn(img).mean()}
                    if gt_boxes.numel() > 0:
                        losses["bbox"] = self.roi_head(img).mean()
                    return losses
            model = DistributedDataParallel(Detector())
            """, at=(13, 8)),
        Bad("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP
            class TwoStage(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.rpn = nn.Linear(8, 4)
                    self.roi = nn.Linear(4, 2)
                def forward(self, x, with_roi):
                    p = self.rpn(x)
                    if not with_roi:
                        return p.mean()
                    return self.roi(p).mean()
            def main(rank):
                net = TwoStage()
                model = DDP(net, device_ids=[rank])
            """, at=(15, 12)),
        Good("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel as DDP
            class TwoStage(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.rpn = nn.Linear(8, 4)
                    self.roi = nn.Linear(4, 2)
                    self.mask = nn.Linear(4, 2)
                def forward(self, x, with_roi, mask=None):
                    p = self.rpn(x)
                    if mask is not None:
                        p = p + self.mask(p)
                    if self.training:
                        p = p * 2
                    if not with_roi:
                        return p.mean()
                    return self.roi(p).mean()
            a = DDP(TwoStage(), find_unused_parameters=True)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        for w in wraps(ctx):
            cls = wrapped_class(w, ctx) if not w.finds_unused else None
            if cls is None:
                continue
            found = False
            for attr, branch in _conditional_layers(cls, ctx, w):
                yield self.report(w.off_at or w.call, ctx, related=(Related(
                    ctx.path, branch.lineno, f"`self.{attr}` runs only on one side of this "
                    "branch", ctx.column(branch)), *wrapped_at(w, ctx)), cls=cls.name,
                    attr=attr, test=ctx.source(branch.test), line=branch.lineno)
                found = True
                break  # one finding per wrapper
            for attr, call in [] if found or called_per_entry(w.target, ctx) \
                    else selected_entries(cls, ctx):
                f = self.report(w.off_at or w.call, ctx, related=(Related(
                    ctx.path, call.lineno, f"one entry of `self.{attr}` runs here",
                    ctx.column(call)), *wrapped_at(w, ctx)), cls=cls.name, attr=attr, test="",
                    line=call.lineno)
                index = ctx.source(call.func.slice)  # type: ignore[attr-defined]
                yield replace(f, message=self.message_selected.format(
                    cls=cls.name, attr=attr, index=index, line=call.lineno))
                break


class FrozenAfterDdpWrap(Rule):
    """Parameters are frozen after the model was wrapped in `DistributedDataParallel`.

    Why: DDP records which parameters require grad when it is built, and its reducer waits for
    a gradient of each of them in every iteration. Setting `requires_grad = False` afterwards
    (`for p in model.module.backbone.parameters(): p.requires_grad = False` in the middle of
    training) leaves the reducer waiting: the next forward raises `RuntimeError: Expected to
    have finished reduction in the prior iteration before starting a new one` (verified on
    torch 2.13). Freeze before wrapping (and wrap again if the set changes), or pass
    `find_unused_parameters=True`.
    Freezing every parameter of the wrapped model (a teacher that is never trained) is fine:
    no backward reaches the reducer.
    Known limits: the freeze must reach the wrapper through a name bound to
    `DistributedDataParallel(...)` in the same function, through a parameter of a helper
    that the file calls with such a name, or be made by a function or method of the file
    called after the wrap on the wrapped model (NOTE [frozen through calls]).
    """

    code = "GT452"
    name = "frozen-after-ddp-wrap"
    message = ("the parameters of `{root}` are frozen after the model was wrapped in "
               "DistributedDataParallel (line {line}) without `find_unused_parameters=True`: "
               "its reducer still waits for their gradients and the next forward raises "
               + REDUCTION_ERROR + "; freeze before wrapping")
    triggers = ("requires_grad",)
    gate_statements = True
    examples = [
        Bad("""
            import torch.nn as nn
            from torch.nn.parallel import DistributedDataParallel
            def freeze_backbone(model):
                for p in model.module.backbone.parameters():
                    p.requires_grad = False
            def main(net, loader):
                model = DistributedDataParallel(net)
                for it, batch in enumerate(loader):
                    if it == 1000:
                        freeze_backbone(model)
            """, at=(5, 8)),
        Bad("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            def main(net):
                ddp = DDP(net)
                ddp.module.encoder.requires_grad_(False)
            """, at=(4, 4)),
        Good("""
            from torch.nn.parallel import DistributedDataParallel as DDP
            def freeze_backbone(model):
                for p in model.backbone.parameters():
                    p.requires_grad = False
            def main(net):
                freeze_backbone(net)
                model = DDP(net)
                other = DDP(net, find_unused_parameters=True)
                other.module.head.requires_grad_(False)
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions(*TRIGGERS):
            return
        for flag in grad_flags(ctx.scope(node)):
            if flag.value or flag.conditional:
                continue
            root = flag.root.partition(".")[0]
            w = holds_wrapper(root, node, flag.stmt.lineno, ctx)
            if w is None and root == "self" and flag.root.count(".") >= 1:
                root = ".".join(flag.root.split(".")[:2])  # NOTE [wrapped by an earlier method]
                w = wrapped_by_earlier_call(root, node, flag.stmt.lineno, ctx)
            if w is None or w.finds_unused or _whole_model(flag, root, node, ctx):
                continue
            at = flag_statement(flag.stmt)
            yield self.report(at, ctx, related=(Related(
                ctx.path, w.line, "the model is wrapped here", ctx.column(w.call)),),
                root=flag.root, line=w.line)
        for call, w, root in frozen_by_calls(node, ctx):  # NOTE [frozen through calls]
            yield self.report(call, ctx, related=(Related(
                ctx.path, w.line, "the model is wrapped here", ctx.column(w.call)),),
                root=root, line=w.line)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]


def _whole_model(flag: GradFlag, root: str, fn: ast.AST, ctx: Context) -> bool:
    """Every parameter of the wrapped model is frozen (``for p in teacher.parameters()``, a
    DINO/BYOL teacher) and none is unfrozen later in the function: no backward reaches the
    reducer, so it waits for nothing (checked on torch 2.13)."""
    if flag.root not in (root, root + ".module"):
        return False
    return not any(g.value and g.stmt.lineno > flag.stmt.lineno and
                   (g.root.partition(".")[0] == root or _from_root(g.root, root, fn))
                   for g in grad_flags(ctx.scope(fn)))


def _from_root(name: str, root: str, fn: ast.AST, depth: int = 0) -> bool:
    """``name`` is a loop variable over submodules of ``root`` (``for heads in
    self.model.get_heads().values(): for h in heads.values()``: unfreezing ``h`` unfreezes
    part of ``self.model``)."""
    head = name.partition(".")[0]
    if depth > 3 or "." in root and head == root.partition(".")[0]:
        return False
    for n in walk(fn):
        if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.target, ast.Name) \
                and n.target.id == head:
            for x in walk(n.iter):
                d = dotted(x) if isinstance(x, (ast.Name, ast.Attribute)) else None
                if d is not None and (d == root or d.startswith(root + ".")):
                    return True
                if isinstance(x, ast.Name) and x.id != head \
                        and _from_root(x.id, root, fn, depth + 1):
                    return True
    return False
