"""GT606: a full backward hook on a layer whose output the next layer overwrites in place."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.hook_walks import admits, hook_walk, hooked_writes, model_layers
from gradtrace.lint.analysis.input_writes import inplace_layer
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.nodes import bfs_walk

SEQUENTIAL = frozenset({"torch.nn.Sequential"})
ACTIVATION = "make that activation out of place"
WRITE = "write it out of place (`out = out + skip`)"


class FullBackwardHookBeforeInplace(Rule):
    """`register_full_backward_hook` on a layer of an `nn.Sequential` whose next layer is an
    in-place activation (`nn.ReLU(inplace=True)`).

    Why: a full backward hook wraps the module's outputs in a `BackwardHookFunction`, which
    returns them as views; the next layer's in-place write to such a view raises
    `RuntimeError: Output 0 of BackwardHookFunction is a view and is being modified
    inplace ...` in the forward pass (pytorch/pytorch#61519, checked on torch 2.13). CAM and
    saliency tools hook the last convolution of DenseNet/ResNet-like models, where this is
    the usual layout. Use `nn.ReLU()` (not in place) after the hooked layer, or hook the
    output tensor instead (`out.register_hook(...)` in a forward hook).
    Per-sample-gradient extensions, attribution tools (DeepLIFT) and curvature optimizers
    hook every module of a model (NOTE [layers a hook walk reaches]): `for m in
    model.modules()` (all, the leaves, or the classes of an `isinstance` test), a helper that
    calls itself on each child, or `model.apply(fn)`. Then an in-place activation the walk
    hooks writes its own wrapped input, one right after a hooked layer (in its `nn.Sequential`,
    or `self.act(self.conv(x))` in a `forward`) writes that layer's output, and `out += skip`
    on a hooked layer's output (`out = self.bn(...)`) writes it too: each is reported where
    it is written (the activation's construction, or the in-place statement).
    Known limits: the hooked module must be an element `seq[i]` of an `nn.Sequential(...)`
    built from positional layers in the same file (the element may reach the call through a
    parameter of the function or constructor that registers the hook, one call away), or a
    module of a model whose kind is known (a class of the file or an `nn.Sequential(...)`)
    reached by a walk whose tests are read; dropouts are left out (they write nothing in
    eval mode).
    """

    code = "GT606"
    name = "full-backward-hook-before-inplace"
    message = ("{hooked} gets a full backward hook, and {nxt} writes {what} in place: the "
               "forward raises `RuntimeError: Output 0 of "
               "BackwardHookFunction is a view and is being modified inplace`; {remedy}")
    triggers = ("register_full_backward_hook",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            net = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.1, inplace=True), nn.Linear(8, 2))
            grads = []
            net[0].register_full_backward_hook(lambda m, gi, go: grads.append(go[0]))
            net(torch.randn(3, 4)).sum().backward()
            """, at=(6, 0)),
        Bad("""
            import torch.nn as nn

            class Saliency:
                def __init__(self, layer):
                    self.handle = layer.register_full_backward_hook(self.keep)

                def keep(self, module, grad_in, grad_out):
                    self.grad = grad_out[0]

            body = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(True), nn.Flatten())
            probe = Saliency(body[0])
            """, at=(5, 22)),
        Bad("""
            import torch.nn as nn

            def per_sample(model):
                for m in model.modules():
                    if not list(m.children()):
                        m.register_full_backward_hook(lambda mod, gi, go: None)

            net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(inplace=True), nn.Linear(8, 2))
            per_sample(net)
            """, at=(8, 37)),
        Good("""
            import torch.nn as nn

            net = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.1), nn.Linear(8, 2))
            grads = []
            net[0].register_full_backward_hook(lambda m, gi, go: grads.append(go[0]))
            net(torch.randn(3, 4)).sum().backward()
            """),
        Good("""
            import torch.nn as nn

            net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(inplace=True), nn.Linear(8, 2))
            feats = []
            net[0].register_forward_hook(lambda m, i, o: feats.append(o.detach()))
            net[2].register_full_backward_hook(lambda m, gi, go: feats.append(go[0]))
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "register_full_backward_hook"):
            return
        for element in _elements(f.value, ctx):
            got = _next_inplace(element, ctx)
            if got is not None:
                related = [] if got.lineno == node.lineno else [
                    Related(ctx.path, got.lineno, "the in-place layer is built here",
                            ctx.column(got))]
                yield self.report(node, ctx, related=related, hooked=f"`{ctx.source(element)}`",
                                  nxt=f"the next layer `{ctx.source(got)}` (line {got.lineno})",
                                  what="its output", remedy=ACTIVATION)
                return
        yield from self._walked(node, ctx)

    def _walked(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        """Every module of a model hooked in a walk (NOTE [layers a hook walk reaches]): an
        in-place layer the walk hooks writes its own hooked input; one right after a hooked
        layer of its ``nn.Sequential`` writes that layer's hooked output."""
        done: set[int] = set()
        for walk in hook_walk(node, ctx):
            for layer, before in model_layers(walk, ctx):
                if id(layer) in done or not _writes_input(layer, ctx):
                    continue
                if admits(walk.classes, layer, ctx):
                    what = "its input (the module is hooked too)"
                elif before is not None and admits(walk.classes, before, ctx):
                    what = f"the output of the hooked `{ctx.source(before.func)}`"
                else:
                    continue
                done.add(id(layer))
                yield self._hooked(layer, what, ACTIVATION, node, walk.model, ctx)
            for st, layer in hooked_writes(walk, ctx):
                if id(st) not in done:
                    done.add(id(st))
                    yield self._hooked(st, f"the output of the hooked "
                                       f"`{ctx.source(layer.func)}`", WRITE, node, walk.model,
                                       ctx)

    def _hooked(self, writer: ast.AST, what: str, remedy: str, node: ast.Call,
                model: ast.expr, ctx: Context) -> Finding:
        return self.report(writer, ctx, related=[Related(
            ctx.path, node.lineno, "the hook is registered here", ctx.column(node))],
            hooked=f"each module of `{ctx.source(model)}` it reaches",
            nxt=f"`{ctx.source(writer)}`", what=what, remedy=remedy)


def _elements(recv: ast.expr, ctx: Context) -> list[ast.expr]:
    """``recv`` itself, or what the callers pass for it when it is a parameter of the
    enclosing function (``Cls(model[2])`` for ``__init__(self, layer)``)."""
    fn = ctx.function
    if isinstance(recv, ast.Name) and isinstance(fn, FUNCTION_TYPES) and recv.id in {
            a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}:
        return [v for v, _ in ctx.analysis.argument_values(fn, recv.id)]
    return [recv]


def _next_inplace(element: ast.expr, ctx: Context) -> ast.Call | None:
    """For ``seq[i]`` with ``seq = nn.Sequential(l0, l1, ...)`` bound once at module level or
    in the function of ``element``: layer ``i + 1`` when it is built with ``inplace=True``."""
    if not (isinstance(element, ast.Subscript) and isinstance(element.value, ast.Name)
            and isinstance(element.slice, ast.Constant)
            and isinstance(element.slice.value, int)):
        return None
    seq = _sequential(element.value.id, element, ctx)
    i = element.slice.value
    if seq is None or any(isinstance(a, ast.Starred) for a in seq.args) \
            or not 0 <= i < len(seq.args) - 1:
        return None
    nxt = seq.args[i + 1]
    return nxt if isinstance(nxt, ast.Call) and _inplace_layer(nxt, ctx) else None


def _sequential(name: str, at: ast.expr, ctx: Context) -> ast.Call | None:
    found = [s.value for s in bfs_walk(ctx.tree) if isinstance(s, ast.Assign)
             and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
             and s.targets[0].id == name]
    if len(found) != 1 or not isinstance(found[0], ast.Call) or \
            (ctx.qualified_name(found[0].func) or "") not in SEQUENTIAL:
        return None
    return found[0]


def _writes_input(layer: ast.Call, ctx: Context) -> bool:
    """An activation built to work in place (a dropout does not write in eval mode)."""
    return "Dropout" not in (ctx.qualified_name(layer.func) or "") and (
        _inplace_layer(layer, ctx) or inplace_layer(layer, ctx))


def _inplace_layer(call: ast.Call, ctx: Context) -> bool:
    """``nn.ReLU(inplace=True)``, ``nn.ReLU(True)``, ``nn.LeakyReLU(0.1, inplace=True)``: a
    torch.nn layer asked to work in place (its ``inplace`` argument by keyword, or the only
    positional argument of a layer whose first parameter it is)."""
    q = ctx.qualified_name(call.func) or ""
    if not q.startswith("torch.nn."):
        return False
    kw = next((k.value for k in call.keywords if k.arg == "inplace"), None)
    if kw is None and q.rpartition(".")[2] in ("ReLU", "ReLU6", "SELU", "SiLU", "Mish",
                                               "Hardswish", "Hardsigmoid") and call.args:
        kw = call.args[0]
    if isinstance(kw, ast.Name):  # `inplace=INPLACE`, a constant of the module
        kw = _module_constant(kw.id, ctx)
    return isinstance(kw, ast.Constant) and kw.value is True


def _module_constant(name: str, ctx: Context) -> ast.expr | None:
    """The value of ``name`` when the module binds it once, at top level, and nothing else."""
    found = [n for n in ast.walk(ctx.tree) if isinstance(n, ast.Name) and n.id == name
             and isinstance(n.ctx, (ast.Store, ast.Del))]
    if len(found) != 1:
        return None
    bound = [s.value for s in ctx.tree.body if isinstance(s, ast.Assign)
             and len(s.targets) == 1 and s.targets[0] is found[0]]
    return bound[0] if bound else None
