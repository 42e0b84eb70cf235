"""GT407-GT410: freezing and unfreezing that does not do what it says."""
from __future__ import annotations

import ast
import dataclasses
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import (
    is_false, is_parameter_call, is_true, keyword, node_mentions, scope_mentions,
)
from gradtrace.lint.rules.registration._caller_modules import submodule_by_callers
from gradtrace.lint.rules.registration._fresh_head import freeze_victim
from gradtrace.lint.rules.registration._grad_flags import grad_flags
from gradtrace.lint.analysis.held_parts import holds_part
from gradtrace.lint.analysis.module_receivers import handled_as_module
from gradtrace.lint.rules.registration._modules import (
    covers, is_module_expr, optimizer_builds, rebound_between, step_lines,
)
from gradtrace.lint.rules.registration._frozen_copy import frozen_copy
from gradtrace.lint.rules.registration._rewrapped import file_freeze, rewrapped_loop
from gradtrace.lint.rules.registration._freeze_sites import (
    _class_module_attr, _fresh_unfrozen, _new_part, _set_to_tensor_before,
    trainable_only_filter)


class RequiresGradAttributeOnModule(Rule):
    """`module.requires_grad = False` sets a plain attribute and freezes nothing.

    Why: `requires_grad` is a tensor flag. On an `nn.Module`, assignment just creates an
    ordinary Python attribute; every parameter keeps `requires_grad=True` and keeps
    training (verified on torch 2.13). Use `module.requires_grad_(False)` (which sets it on
    all parameters) or loop over `module.parameters()`.
    Known limits: the object must be known to be a module (built from `nn.*`, a module class
    of the file, a `torchvision`/`timm` model, or a loop over `.modules()`/`.children()`).
    """

    code = "GT407"
    gate_statements = True
    name = "requires-grad-attribute-on-module"
    message = ("`{name}` is an `nn.Module`: `{name}.requires_grad = ...` only sets a Python "
               "attribute; its parameters are not {verb}")
    fix_title = "Call `requires_grad_()`"
    fix_safety = "unsafe"
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torchvision
            model = torchvision.models.resnet18(weights="DEFAULT")
            model.requires_grad = False
            """, fixed="""
            import torchvision
            model = torchvision.models.resnet18(weights="DEFAULT")
            model.requires_grad_(False)
            """, at=(3, 0)),
        Bad("""
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.LSTM(8, 16)
                    self.encoder.requires_grad = False
                    for child in self.children():
                        child.requires_grad = False
            """, count=2),
        Bad("""
            from transformers import AutoModelForSequenceClassification
            model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
            model.bert.requires_grad = False
            """, fixed="""
            from transformers import AutoModelForSequenceClassification
            model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")
            model.bert.requires_grad_(False)
            """, at=(3, 0)),
        Good("""
            import timm
            vit = timm.create_model("vit_base_patch16_224", pretrained=True)
            vit.cls_token.requires_grad = False
            vit.pos_embed.requires_grad = False
            """),
        Good("""
            import torchvision
            model = torchvision.models.resnet18(weights="DEFAULT")
            model.requires_grad_(False)
            for p in model.parameters():
                p.requires_grad = False
            for name, p in model.named_parameters():
                p.requires_grad = "fc" in name
            x.requires_grad = True
            """),
    ]

    def visit_Attribute(self, t: ast.Attribute, ctx: Context) -> Iterator[Finding]:
        node = ctx.statement
        if t.attr != "requires_grad" or not isinstance(t.ctx, ast.Store) \
                or not isinstance(node, ast.Assign) or node.targets != [t]:
            return
        recv = t.value
        name = dotted(recv)
        if name is None:
            return
        is_mod = is_module_expr(ctx.scope(), recv, node.lineno) or (
            name.startswith("self.") and name.count(".") == 1
            and _class_module_attr(ctx, name[5:])) or (
            name != "self" and ctx.analysis.is_module(recv, line=node.lineno)) or \
            handled_as_module(ctx.scope(), name, strict=True, at=node) or \
            submodule_by_callers(ctx, name)  # NOTE [module receivers], [submodule by callers]
        # (`def freeze(m)`: the callers' m; a module's own `self.requires_grad = flag` is a
        # setting its code reads; a part just built has nothing to undo: NOTE [fresh part unfrozen])
        if not is_mod or _set_to_tensor_before(ctx, name, node) or _fresh_unfrozen(ctx, name, node):
            return
        fix = self.fix(ctx.edit(node, f"{name}.requires_grad_({ctx.source(node.value)})"))
        verb = "unfrozen" if is_true(node.value) else \
            "frozen" if is_false(node.value) else "changed"
        yield self.report(node, ctx, fix=fix, name=name, verb=verb)


class FreezeUndoesTraining(Rule):
    """A freeze reaches the new head (freezing all, or the head itself), or undoes an unfreeze.

    Why: `for p in model.parameters(): p.requires_grad = False` (or
    `model.requires_grad_(False)`) reaches *every* parameter that exists at that moment. Run
    after `model.fc = nn.Linear(...)` it freezes the new head too; run after
    `for p in model.fc.parameters(): p.requires_grad = True` it undoes it. Then nothing (or
    not the intended part) trains: backward raises `element 0 of tensors does not require
    grad` when all is frozen (pytorch-facts.md#all-frozen), or the head silently stays at init.
    Freeze first, then replace or unfreeze the head. Freezing the new head itself
    (`model.fc.requires_grad_(False)` right after `model.fc = nn.Linear(...)`, here or in the
    function of the project that built the model) with an optimizer over it leaves the
    only randomly initialised layer fixed (NOTE [new part frozen]).
    Known limits: statements of one function, in source order. A module freezing all of
    `self` in its own constructor (prefix or adapter tuning) is taken as intended.
    """

    code = "GT408"
    name = "freeze-undoes-training"
    message = "this freezes every parameter of `{root}`, including {what} `{part}` (line {line})"
    message_new = ("`{root}` was just built anew (line {line}), with random weights: frozen "
                   "here, it never trains, although the optimizer is built over it")
    triggers = ("requires_grad",)
    gate_statements = True
    examples = [
        Bad("""
            import torch, torchvision
            model = torchvision.models.resnet50(weights="DEFAULT")
            model.fc = torch.nn.Linear(2048, 10)
            for p in model.parameters():
                p.requires_grad = False
            opt = torch.optim.SGD(model.fc.parameters(), lr=0.01)
            """, at=(4, 0)),
        Bad("""
            import torch, torchvision
            model = torchvision.models.resnet50(weights="DEFAULT")
            for p in model.fc.parameters():
                p.requires_grad = True
            model.requires_grad_(False)
            """, at=(5, 0)),
        Bad("""
            import torch, torchvision
            model = torchvision.models.resnet50(weights="DEFAULT")
            model.fc = torch.nn.Linear(2048, 10)
            model.fc.requires_grad_(False)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            """, at=(4, 0)),
        Good("""
            import torch, torchvision
            model = torchvision.models.resnet50(weights="DEFAULT")
            for p in model.parameters():
                p.requires_grad = False
            model.fc = torch.nn.Linear(2048, 10)
            for p in model.layer4.parameters():
                p.requires_grad = True
            opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        defs = (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)
        top = [s for s in node.body if not isinstance(s, defs)]
        if any("requires_grad" in ln for s in top
               for ln in ctx.code_lines[s.lineno - 1:s.end_lineno]):
            yield from self._scan(ctx.scope(node), ctx)

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if node_mentions(ctx, node, "requires_grad"):
            yield from self._scan(ctx.scope(node), ctx)

    def _scan(self, scope: Scope, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions("requires_grad"):
            return
        flags = grad_flags(scope)
        for i, f in enumerate(flags):
            hit = None if f.value or f.conditional else freeze_victim(scope, f, flags[:i])
            if hit is None or any(g.value and (covers(g.root, hit.part) or covers(
                    hit.part, g.root)) and not scope.exclusive(f.stmt, g.stmt)
                    for g in flags[i + 1:]):
                continue
            seen = Related(hit.path or ctx.path, hit.line, f"`{hit.part}` is set up to train here",
                           hit.column)
            found = self.report(f.stmt, ctx, related=[seen], root=f.root, what=hit.what,
                                part=hit.part, line=hit.line)
            if hit.what == "new":  # NOTE [new part frozen]
                where = hit.line if hit.path is None else f"{hit.line} of {hit.path}"
                found = dataclasses.replace(found, message=self.message_new.format(
                    root=f.root, line=where))
            yield found


class ParameterWrapResetsRequiresGrad(Rule):
    """`nn.Parameter(t)` makes a frozen tensor trainable again.

    Why: `nn.Parameter(data)` has `requires_grad=True` by default, whatever `data.requires_grad`
    was (verified on torch 2.13: `nn.Parameter(frozen).requires_grad` is True). Wrapping a
    tensor that was just frozen, or assigning a new Parameter into a module frozen earlier,
    re-enables training for it. Pass `requires_grad=False` when it should stay frozen.
    A function that registers a new Parameter made from each parameter of a module
    (`for name, p in self.named_parameters(): self.register_parameter(name,
    nn.Parameter(shard(p)))`, torchtitan's re-distribution of states) brings every frozen one
    back, in a file that freezes parameters (NOTE [parameters re-wrapped]).
    The same flag is lost when a function of the file freezes what it returns and a module
    copies those values into a Parameter it made trainable (`self.pos.data.copy_(table(...))`,
    NOTE [frozen values copied into a trainable parameter]): freeze the Parameter after the
    copy.
    Known limits: the freeze and the wrapping must be in one function, or the wrapped value
    must come from a loop over `parameters()`/`named_parameters()` (in the function, or
    passed by every caller of the file); a copy is judged only from a helper that freezes
    every value it returns, in a file that freezes nothing else.
    """

    code = "GT409"
    gate_statements = True
    name = "parameter-wrap-resets-requires-grad"
    message = ("`nn.Parameter({arg})` requires grad by default: {why} (line {line}) is undone; "
               "pass `requires_grad=False` to keep it frozen")
    message_loop = ("`nn.Parameter({arg})` requires grad by default: it re-wraps each "
                    "parameter of `{it}`, and one frozen (the file freezes parameters, line "
                    "{line}) comes back trainable; pass `requires_grad=` the old parameter's "
                    "flag")
    message_copy = ("`{dest}` is a trainable Parameter, and `.copy_` gives it only the "
                    "values of `{helper}(...)`, which that function froze: the fixed values "
                    "train with the model; set `{dest}.requires_grad = False` after the copy")
    triggers = ("Parameter", "copy_")
    examples = [
        Bad("""
            import torch
            from torch import nn
            emb = torch.load("glove.pt")
            emb.requires_grad = False
            model.embed.weight = nn.Parameter(emb)
            """, at=(5, 21)),
        Bad("""
            import torch
            from torch import nn
            model.requires_grad_(False)
            model.classifier.bias = nn.Parameter(torch.zeros(10))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """, at=(4, 24)),
        Bad("""
            import torch
            from torch import nn
            class Encoder(nn.Module):
                def __init__(self, vectors):
                    super().__init__()
                    self.embed = nn.Embedding(*vectors.shape)
                    self.embed.weight.requires_grad = False
                    self.embed.weight = nn.Parameter(vectors)
            """, at=(8, 28)),
        Bad("""
            import torch
            from torch import nn

            def sinusoid(n, d):
                return nn.Parameter(torch.sin(torch.randn(n, d)), requires_grad=False)

            class Tokens(nn.Module):
                def __init__(self, n, d):
                    super().__init__()
                    self.pos = nn.Parameter(torch.zeros(n, d))
                    self.pos.data.copy_(sinusoid(n, d))
            """, at=(11, 8)),
        Good("""
            import torch
            from torch import nn

            def sinusoid(n, d):
                return nn.Parameter(torch.sin(torch.randn(n, d)), requires_grad=False)

            class Tokens(nn.Module):
                def __init__(self, n, d):
                    super().__init__()
                    self.pos = nn.Parameter(torch.zeros(n, d), requires_grad=False)
                    self.pos.data.copy_(sinusoid(n, d))
            """),
        Good("""
            import torch
            from torch import nn
            emb = torch.load("glove.pt")
            model.embed.weight = nn.Parameter(emb, requires_grad=False)
            model.requires_grad_(False)
            model.head.weight = nn.Parameter(torch.zeros(10))
            model.head.weight.requires_grad = False
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not is_parameter_call(node, ctx) or not node.args or len(node.args) > 1 \
                or keyword(node, "requires_grad") is not None:
            return
        if not scope_mentions(ctx, "requires_grad"):
            yield from self._rewrapped(node, ctx)  # NOTE [parameters re-wrapped]
            return
        scope = ctx.scope()
        stmt = scope.statement_of(node)
        if stmt is None:
            return
        arg = dotted(node.args[0])
        target = dotted(stmt.targets[0]) if isinstance(stmt, ast.Assign) \
            and len(stmt.targets) == 1 and stmt.value is node else None
        if target and self._refrozen(scope, target, stmt.lineno):
            return
        if arg is not None:
            line = self._frozen_at(scope, arg, stmt.lineno)
            if line:
                yield self.report(node, ctx, arg=arg, why=f"the freeze of `{arg}`", line=line)
                return
        if target and "." in target:
            line = self._frozen_at(scope, target, stmt.lineno)
            if line:
                yield self.report(node, ctx, arg=ctx.source(node.args[0])[:40],
                                  why=f"the freeze of `{target}`", line=line)
                return
            for f in grad_flags(scope):
                if f.stmt.lineno < stmt.lineno and not f.value and not f.conditional \
                        and covers(f.root, target) and not _new_part(scope, f, target, stmt.lineno):
                    yield self.report(node, ctx, arg=ctx.source(node.args[0])[:40],
                                      why=f"the freeze of `{f.root}`", line=f.stmt.lineno)
                    return

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        got = frozen_copy(node, ctx)  # NOTE [frozen values copied into a trainable parameter]
        if got is not None:
            dest, helper, made = got
            f = self.report(node, ctx, arg="", why="", line=0, related=[
                Related(ctx.path, made.lineno, f"`{dest}` is made trainable here",
                        ctx.column(made)),
                Related(ctx.path, helper.lineno, f"`{helper.name}` freezes what it returns",  # type: ignore[attr-defined]
                        ctx.column(helper))])
            yield dataclasses.replace(f, message=self.message_copy.format(
                dest=dest, helper=helper.name))  # type: ignore[attr-defined]

    def _rewrapped(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        loop = rewrapped_loop(node, ctx)
        freeze = file_freeze(ctx) if loop is not None else None
        if loop is not None and freeze is not None:
            it = ctx.source(loop.iter)[:50]  # type: ignore[attr-defined]
            f = self.report(node, ctx, arg=ctx.source(node.args[0])[:40], why="", line=0,
                            related=[Related(ctx.path, loop.lineno, f"each parameter of `{it}` "
                                             "is re-wrapped", ctx.column(loop)),
                                     Related(ctx.path, freeze, "a parameter is frozen here",
                                             0)])
            yield dataclasses.replace(f, message=self.message_loop.format(
                arg=ctx.source(node.args[0])[:40], it=it, line=freeze))

    @staticmethod
    def _frozen_at(scope: Scope, name: str, line: int) -> int | None:
        found = None
        for b in scope.bindings.get(f"{name}.requires_grad", ()):
            if b.line < line:
                found = b.line if is_false(b.value) else None
        for m in scope.calls_to("requires_grad_"):
            if m.receiver == name and m.stmt.lineno < line and m.call.args \
                    and is_false(m.call.args[0]):
                found = m.stmt.lineno
        return found

    @staticmethod
    def _refrozen(scope: Scope, target: str, line: int) -> bool:
        if any(b.line > line for b in scope.bindings.get(f"{target}.requires_grad", ())):
            return True
        if any(m.stmt.lineno > line and m.receiver == target for m in scope.calls_to(
                "requires_grad_")):
            return True
        return any(f.stmt.lineno > line and covers(f.root, target) for f in grad_flags(scope))


class UnfrozenAfterOptimizer(Rule):
    """Parameters are unfrozen after the optimizer was built from the trainable ones only.

    Why: an optimizer built from `filter(lambda p: p.requires_grad, model.parameters())` holds
    only the parameters trainable at that moment. Setting `requires_grad = True` later gives
    the others gradients, but `opt.step()` never updates them: silent. Add them with
    `opt.add_param_group({"params": ...})` or rebuild the optimizer after unfreezing.
    (An optimizer given all parameters does update them once they are unfrozen.)
    Known limits: the optimizer, the unfreeze and the step must be in one function.
    """

    code = "GT410"
    name = "unfrozen-after-optimizer"
    message = ("`{root}` is unfrozen after `{opt}` was built from the then-trainable "
               "parameters only (line {line}): `{opt}.step()` will not update them")
    triggers = ("requires_grad",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            for p in model.backbone.parameters():
                p.requires_grad = False
            opt = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()))
            for epoch in range(10):
                if epoch == 5:
                    for p in model.backbone.parameters():
                        p.requires_grad = True
                train_one_epoch(model, opt)
                opt.step()
            """, at=(8, 12)),
        Good("""
            import torch
            for p in model.backbone.parameters():
                p.requires_grad = False
            opt = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()))
            for epoch in range(10):
                if epoch == 5:
                    for p in model.backbone.parameters():
                        p.requires_grad = True
                    opt.add_param_group({"params": model.backbone.parameters()})
                opt.step()
            """),
        Good("""
            import torch
            for p in model.backbone.parameters():
                p.requires_grad = False
            opt = torch.optim.Adam(model.parameters())
            for p in model.backbone.parameters():
                p.requires_grad = True
            opt.step()
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
                and it.func.attr in ("parameters", "named_parameters") \
                and scope_mentions(ctx, "optim"):
            yield from self._check(node, ctx)

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        if isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute) \
                and node.value.func.attr == "requires_grad_" and scope_mentions(ctx, "optim"):
            yield from self._check(node, ctx)

    def _check(self, node: ast.stmt, ctx: Context) -> Iterator[Finding]:
        scope = ctx.scope()
        flag = next((f for f in grad_flags(scope) if f.stmt is node and f.value), None)
        if flag is None:
            return
        for opt in optimizer_builds(scope):
            if opt.stmt.lineno >= node.lineno or not trainable_only_filter(opt.call, scope) or not any(
                    covers(s, flag.root) or covers(flag.root, s) or holds_part(
                        scope, s, flag.root.partition(".")[0], opt.stmt.lineno)
                    for s in opt.sources):
                continue
            if not self._stepped_after(scope, opt.name, node):
                continue
            if any(m.receiver == opt.name and m.stmt.lineno > node.lineno
                   for m in scope.calls_to("add_param_group")):
                continue
            yield self.report(_flag_statement(node), ctx, related=[Related(ctx.path, opt.stmt.lineno,
                              f"`{opt.name}` is built here", ctx.column(opt.stmt))],
                              root=flag.root, opt=opt.name, line=opt.stmt.lineno)
            return

    @staticmethod
    def _stepped_after(scope: Scope, opt: str, node: ast.stmt) -> bool:
        loops = scope.loops_of(node)
        end = node.end_lineno or node.lineno
        for line in step_lines(scope, opt):
            if rebound_between(scope, opt, node.lineno, line):
                continue
            if line > end or any(lp.lineno <= line <= (lp.end_lineno or lp.lineno)
                                 for lp in loops):
                return True
        return False


def _flag_statement(node: ast.stmt) -> ast.stmt:
    """The statement of a loop over ``.parameters()`` that sets ``requires_grad = True``
    (``p.requires_grad = True`` / ``p.requires_grad_()``): the line that unfreezes."""
    if not isinstance(node, ast.For):
        return node
    for st in node.body:
        t = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else None
        if isinstance(t, ast.Attribute) and t.attr == "requires_grad" or isinstance(
                st, ast.Expr) and isinstance(st.value, ast.Call) and isinstance(
                st.value.func, ast.Attribute) and st.value.func.attr == "requires_grad_":
            return st
    return node
