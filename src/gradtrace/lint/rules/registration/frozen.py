"""GT430-GT433: freezes that do nothing, freeze everything, are undone before they matter, or
leave ``.grad`` at None where the code reads it.

Facts shared with GT407-GT410 (which statements freeze or unfreeze what) come from
:func:`._grad_flags.grad_flags`.
"""
from __future__ import annotations

import ast
import dataclasses
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER, TENSOR
from gradtrace.lint.analysis.param_children import param_children
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.flow_kinds import FACTORY_FUNCS
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import file_says_word
from gradtrace.lint.rules.leaf._tensors import node_mentions
from gradtrace.lint.rules.registration._grad_flags import GradFlag, grad_flags
from gradtrace.lint.rules.registration._helper_flags import helper_freezes
from gradtrace.lint.rules.registration._frozen_after import frozen_before_step
from gradtrace.lint.rules.registration._modules import (
    covers, is_module_expr, optimizer_builds,
)
from gradtrace.lint.rules.registration.freezing import trainable_only_filter

from gradtrace.lint.rules.registration._frozen import (
    FLAG, HARMLESS, _inner_flag_stmt, _loop_of_var, _own_touches, declared_frozen,
    declares_frozen, misspells_flag, param_loop_var, unguarded_grad_use,
)


class RequiresGradMisspelled(Rule):
    """A misspelled `requires_grad` (`p.require_grad = False`) sets an attribute torch ignores.

    Why: tensors and modules accept any new Python attribute, so `param.require_grad = False`
    (or `requires_grads`, `requires_grad_ = False`) raises nothing and freezes nothing: every
    parameter keeps `requires_grad=True` and keeps training (verified on torch 2.13).
    Known limits: the object must be known to be a parameter, tensor or module (a loop over
    `.parameters()`/`.named_parameters()`, a tensor factory, an `nn.*` layer or module class).
    """

    code = "GT430"
    gate_statements = True
    name = "requires-grad-misspelled"
    message = ("`{target}.{attr}` is not `requires_grad`: torch ignores this attribute and "
               "`{target}` is not {verb}")
    fix_title = "Spell it `requires_grad`"
    fix_safety = "safe"
    triggers = ("grad",)
    examples = [
        Bad("""
            for param in model.features.parameters():
                param.require_grad = False
            """, fixed="""
            for param in model.features.parameters():
                param.requires_grad = False
            """, at=(2, 4)),
        Bad("""
            import torch
            w = torch.zeros(3, 4)
            w.requires_grads = True
            """, fixed="""
            import torch
            w = torch.zeros(3, 4)
            w.requires_grad = True
            """, at=(3, 0)),
        Good("""
            for param in model.features.parameters():
                param.requires_grad = False
            args.require_grad = False
            self._requires_grad = False  # a module's own private flag
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Attribute):
            return
        t = node.targets[0]
        if not misspells_flag(t.attr):
            return
        target = dotted(t.value)
        if target is None or target == "self" or not self._torch_object(t.value, target, node, ctx):
            return
        v = node.value
        if isinstance(v, ast.Constant) and v.value is False and _made_without_grad(
                ctx.scope(), target, node.lineno, ctx):
            return  # the tensor never required grad: the freeze it meant holds already
        verb = "frozen" if isinstance(v, ast.Constant) and v.value is False else \
            "made to require grad" if isinstance(v, ast.Constant) and v.value is True \
            else "changed"
        fix = self.fix(ctx.edit(t, f"{ctx.source(t.value)}.{FLAG}"))
        yield self.report(node, ctx, fix=fix, target=target, attr=t.attr, verb=verb)

    @staticmethod
    def _torch_object(recv: ast.expr, target: str, node: ast.stmt, ctx: Context) -> bool:
        scope = ctx.scope()
        if _loop_of_var(scope, node, target) is not None:
            return True
        if is_module_expr(scope, recv, node.lineno):
            return True
        k = ctx.analysis.kind(recv, line=node.lineno)
        return k is not None and k.what in (MODULE, PARAMETER, TENSOR)


def _made_without_grad(scope: Scope, name: str, line: int, ctx: Context) -> bool:
    """Every binding of the local ``name`` before ``line`` is a tensor factory's new tensor
    without ``requires_grad=True`` (PytorchOCR's ``blank_mask = torch.ones_like(stu_out)``)
    and nothing in the function turns its flag on: it does not require grad, so a misspelled
    ``= False`` changes nothing either way."""
    bs = scope.bindings_before(name, line)
    if not bs or any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                     and n.func.attr == "requires_grad_" and dotted(n.func.value) == name
                     or isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                     and n.attr == "requires_grad" and dotted(n.value) == name
                     for n in walk(scope.node)):
        return False
    for b in bs:
        v = b.value
        if not (isinstance(v, ast.Call) and (ctx.qualified_name(v.func) or "") in FACTORY_FUNCS
                and not any(k.arg == "requires_grad" for k in v.keywords)):
            return False
    return True


class EverythingFrozenForOptimizer(Rule):
    """Every parameter the optimizer is given was frozen just before: nothing can train.

    Why: after `for p in model.parameters(): p.requires_grad = False`,
    `Adam(filter(lambda p: p.requires_grad, model.parameters()))` receives nothing and raises
    `ValueError: optimizer got an empty parameter list`; given all of them unfiltered, the
    loss has no path to a trainable parameter and `backward()` raises `element 0 of tensors
    does not require grad` (or nothing changes). Usually the freeze was meant for a part (the
    backbone), not for the whole model or the head that should train.
    The same holds when the whole freeze comes after an optimizer built over everything and
    before its first step (outside any loop or branch), and when the model is frozen part by
    part: each child of its class (of this file) that holds weights frozen on its own
    (`sam.image_encoder`, `sam.prompt_encoder`, `sam.mask_decoder`; or `model.net` when
    `net` is the only one: NOTE [parameter children]), reported at the last of those freezes.
    A loop whose `if` a script's fixed settings decide (`args = Namespace(adapter=False)`,
    then `if args.adapter and ...: unfreeze / else: freeze`) freezes all it walks
    (NOTE [fixed namespace settings]).
    Known limits: the freeze and the optimizer must be in one function (or script); nothing
    between them may add, unfreeze or hand the model to another function.
    """

    code = "GT431"
    gate_statements = "function"
    name = "everything-frozen-for-optimizer"
    message = ("this freezes every parameter of `{root}`, and `{opt}` (line {line}) is given "
               "only {what}: {effect}")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch
            for p in model.parameters():
                p.requires_grad = False
            opt = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()))
            """, at=(3, 4)),
        Bad("""
            import torch
            def train(llm, loader):
                llm.requires_grad_(False)
                opt = torch.optim.AdamW(llm.parameters(), lr=1e-4)
                for x, y in loader:
                    llm(x, y).backward()
                    opt.step()
            """, at=(3, 4)),
        Good("""
            import torch
            for p in model.parameters():
                p.requires_grad = False
            model.fc = torch.nn.Linear(512, 10)
            opt = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()))
            """),
        Good("""
            import torch
            model.requires_grad_(False)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(10):
                if epoch == 3:
                    model.requires_grad_(True)
                train_one_epoch(model, opt)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._scan(ctx.scope(node), ctx)

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if node_mentions(ctx, node, FLAG):
            yield from self._scan(ctx.scope(node), ctx)

    def _scan(self, scope: Scope, ctx: Context) -> Iterator[Finding]:
        flags = grad_flags(scope)
        if not any(not f.value for f in flags):
            return
        for opt in optimizer_builds(scope):
            if not opt.sources:
                continue
            filtered = trainable_only_filter(opt.call, scope)
            frozen = self._frozen_sources(scope, flags, opt, filtered)
            if frozen is None:
                continue
            what = "the trainable ones (none are left)" if filtered else "frozen ones" \
                if frozen[0].stmt.lineno < opt.stmt.lineno else "parameters frozen before it steps"
            effect = ("it raises `ValueError: optimizer got an empty parameter list`"
                      if filtered else "nothing trains (`backward()` finds no parameter "
                      "that requires grad)")
            f = frozen[0]
            yield self.report(_inner_flag_stmt(f), ctx, related=[Related(
                ctx.path, opt.stmt.lineno, f"`{opt.name}` is built here",
                ctx.column(opt.stmt))], root=f.root, opt=opt.name, line=opt.stmt.lineno,
                what=what, effect=effect)

    @staticmethod
    def _frozen_sources(scope: Scope, flags: list[GradFlag], opt, filtered: bool
                        ) -> list[GradFlag] | None:
        used: list[GradFlag] = []
        for src in opt.sources:
            f = _frozen_root(scope, flags, opt, filtered, src)
            if f is None:  # NOTE [parameter children]: each child that holds some, frozen
                k = scope.ctx.analysis.kind(ast.parse(src, mode="eval").body, scope,
                                            opt.stmt.lineno) if _dotted_name(src) else None
                children = param_children(scope.ctx, k.cls) if k is not None \
                    and k.what == MODULE else None
                parts = [_frozen_root(scope, flags, opt, filtered, f"{src}.{c}")
                         for c in children or ()]
                if not parts or None in parts or _touched(scope, opt, filtered, src, min(
                        p.stmt.end_lineno or p.stmt.lineno for p in parts)):  # type: ignore[union-attr]
                    return None
                last = max(parts, key=lambda p: p.stmt.lineno)  # type: ignore[union-attr]
                f = dataclasses.replace(last, root=src)  # type: ignore[arg-type]
            used.append(f)
        return used


def _dotted_name(src: str) -> bool:
    return all(p.isidentifier() for p in src.split("."))


def _frozen_root(scope: Scope, flags: list[GradFlag], opt, filtered: bool, src: str
                 ) -> GradFlag | None:
    """The freeze that covers every parameter of ``src`` for the optimizer ``opt``, when
    nothing unfreezes, adds to or hands ``src`` away afterwards."""
    line = opt.stmt.lineno
    f = next((g for g in reversed(flags) if not g.value and not g.conditional
              and covers(g.root, src) and not scope.exclusive(g.stmt, opt.stmt)
              and (g.stmt.lineno < line or not filtered
                   and frozen_before_step(scope, g.stmt, opt.name))), None)
    if f is None:
        return None
    end = f.stmt.end_lineno or f.stmt.lineno
    # unfrozen, added to or handed away before the optimizer (or, for an optimizer
    # over all parameters, anywhere later: gradual unfreezing)
    for g in flags:
        if g.value and g.stmt.lineno > end and (filtered is False or g.stmt.lineno < line) \
                and (covers(f.root, g.root) or covers(g.root, f.root)):
            return None
    return None if _touched(scope, opt, filtered, f.root, end) else f


def _touched(scope: Scope, opt, filtered: bool, root: str, end: int) -> bool:
    """A statement after line ``end`` may change which parameters ``root`` has."""
    line = opt.stmt.lineno
    for s in scope.stmts:
        if s.lineno <= end or s is opt.stmt or (filtered and s.lineno >= line):
            continue
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if _own_touches(s, root):
            return True
    return False


class UnfreezeUndoesFreeze(Rule):
    """A later unfreeze-everything loop undoes a freeze before anything trained with it.

    Why: `for k, v in model.named_parameters(): v.requires_grad = True` (or
    `model.requires_grad_()`) reaches every parameter, the ones frozen a few lines earlier
    included. Nothing ran between the freeze and the unfreeze, so the freeze has no effect at
    all and the "frozen" layers train (verified on torch 2.13). Drop the unconditional
    `requires_grad = True`, or apply the freeze after it.
    The freeze may be a call of a function of the file that freezes its argument
    (`apply_freeze(model, patterns)`, NOTE [freeze by a helper]); a mode switch or a move
    between the two (`model.train()`, `.to(device)`) trains nothing.
    Known limits: the unfreeze and the freeze (or its call) must be in one function (or
    script); a forward, backward or step between them (a temporary freeze) is taken as
    intended.
    """

    code = "GT432"
    gate_statements = "function"
    name = "unfreeze-undoes-freeze"
    message = ("this sets `requires_grad=True` on every parameter of `{root}` and undoes the "
               "freeze of {part} (line {line}) before anything was trained with it")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch
            for k, v in model.named_parameters():
                if k.startswith("backbone."):
                    v.requires_grad = False
            groups = []
            for k, v in model.named_parameters():
                v.requires_grad = True
                groups.append(v)
            opt = torch.optim.SGD(groups, lr=0.01)
            """, at=(7, 4)),
        Good("""
            import torch
            netD.requires_grad_(False)
            loss_g = -netD(netG(z)).mean()
            netD.requires_grad_(True)
            loss_g.backward()
            """),
        Good("""
            import torch
            model.requires_grad_(False)
            model.head.requires_grad_(True)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            train(model, opt, epochs=3)
            model.requires_grad_(True)
            train(model, opt, epochs=3)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._scan(ctx.scope(node), ctx)

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if node_mentions(ctx, node, FLAG):
            yield from self._scan(ctx.scope(node), ctx)

    def _scan(self, scope: Scope, ctx: Context) -> Iterator[Finding]:
        flags = sorted([*grad_flags(scope), *helper_freezes(scope)],
                       key=lambda f: f.stmt.lineno)  # NOTE [freeze by a helper]
        for i, g in enumerate(flags):
            if not g.value or g.conditional:
                continue
            for f in reversed(flags[:i]):
                if f.value and covers(f.root, g.root):
                    break  # an earlier unfreeze of the same (the freeze was already undone)
                if f.value or not covers(g.root, f.root) or scope.exclusive(f.stmt, g.stmt) \
                        or set(scope.loops_of(f.stmt)) != set(scope.loops_of(g.stmt)):
                    continue
                if self._used_between(scope, f, g):
                    break
                yield self.report(_inner_flag_stmt(g), ctx, related=[Related(
                    ctx.path, _inner_flag_stmt(f).lineno, f"`{f.root}` is frozen here")],
                    root=g.root, line=_inner_flag_stmt(f).lineno,
                    part=f"some parameters of `{f.root}`" if f.conditional else f"`{f.root}`")
                break

    @staticmethod
    def _used_between(scope: Scope, f: GradFlag, g: GradFlag) -> bool:
        """A forward, backward, step, or any call handed the model between the two; a read
        of a ``requires_grad`` flag (the freeze sorts the parameters into groups:
        ``[p for p in model.parameters() if p.requires_grad]``, then the frozen part is
        unfrozen for a group of its own); or a write into its weights' values (the freeze
        lets an in-place edit of a leaf through: ``layer.weight[idx] = 0``)."""
        start, end = f.stmt.end_lineno or f.stmt.lineno, g.stmt.lineno
        base = g.root.partition(".")[0]
        for s in scope.stmts:
            if not start < s.lineno < end or isinstance(
                    s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for n in walk(s):
                if isinstance(n, ast.Attribute) and n.attr == "requires_grad" \
                        and isinstance(n.ctx, ast.Load) or _writes_values(n, base):
                    return True
                if not isinstance(n, ast.Call):
                    continue
                fn = n.func
                if isinstance(fn, ast.Attribute) and fn.attr in ("backward", "step"):
                    return True
                callee = dotted(fn) or ""
                if callee.partition(".")[0] == base and callee.rpartition(".")[2] not in \
                        NOT_RUN:
                    return True  # the model (or a part) is run
                if isinstance(fn, ast.Name) and fn.id in HARMLESS:
                    continue
                if any((dotted(a) or "~").partition(".")[0] == base
                       for a in [*n.args, *(k.value for k in n.keywords)]):
                    return True
        return False


# module methods that neither run the model nor train it (a mode switch, a move, a walk)
NOT_RUN = frozenset({"parameters", "named_parameters", "train", "eval", "to", "cuda", "cpu",
                     "float", "half", "double", "bfloat16", "modules", "named_modules",
                     "children", "named_children"})


def _writes_values(n: ast.AST, base: str) -> bool:
    """``n`` assigns into the values of a tensor of ``base`` (``base.weight[idx] = ...``,
    ``base.weight.data = ...``), which autograd forbids on a leaf that requires grad."""
    targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
        n, ast.AugAssign) else []
    return any((isinstance(t, ast.Subscript) or isinstance(t, ast.Attribute) and t.attr == "data")
               and (dotted(t.value) or "~").partition(".")[0] == base for t in targets)


class FrozenGradRead(Rule):
    """A loop over all parameters reads `p.grad` although some were frozen: it is None there.

    Why: a parameter with `requires_grad=False` never gets a gradient, so its `.grad` stays
    None. `for p in model.parameters(): p.grad.data /= n` (gradient scaling, averaging,
    logging) then raises `AttributeError: 'NoneType' object has no attribute 'data'`.
    Skip them: `if p.grad is not None:` (or iterate over the optimizer's parameters).
    Known limits: the freeze and the loop must be in one function (or script).
    """

    code = "GT433"
    gate_statements = "function"
    name = "frozen-grad-read"
    message = ("`{var}.grad` is None for the parameters of `{part}` frozen at line {line}: "
               "this raises on them; skip parameters whose `.grad` is None")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            for p in model.conv1.parameters():
                p.requires_grad = False
            for x, y in batches:
                loss_fn(model(x), y).backward()
                for p in model.parameters():
                    p.grad.data /= 2
            """, at=(6, 8)),
        Good("""
            for p in model.conv1.parameters():
                p.requires_grad = False
            for x, y in batches:
                loss_fn(model(x), y).backward()
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad.data /= 2
            """),
    ]

    # every finding is a `<var>.grad` read (unguarded_grad_use): none in a file without the
    # attribute's word, where no scope is built (NOTE [word gates])
    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if file_says_word(ctx, "grad"):
            yield from self._scan(ctx.scope(node), ctx)

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if file_says_word(ctx, "grad") and (node_mentions(ctx, node, FLAG)
                                            or declares_frozen(ctx)):
            yield from self._scan(ctx.scope(node), ctx)

    def _scan(self, scope: Scope, ctx: Context) -> Iterator[Finding]:
        flags = grad_flags(scope)
        freezes = [f for f in flags if not f.value]
        declared = declares_frozen(ctx)
        if not freezes and not declared:
            return
        for s in scope.stmts:
            got = param_loop_var(s)
            if got is None:
                continue
            var, owner = got
            f = next((f for f in reversed(freezes) if f.stmt.lineno < s.lineno
                      and covers(owner, f.root) and not scope.exclusive(f.stmt, s)), None)
            if f is None and declared and not any(g.value for g in flags
                                                   if g.stmt.lineno < s.lineno):
                decl = declared_frozen(owner, scope, s.lineno, ctx)
                use = unguarded_grad_use(s, var) if decl is not None else None
                if use is not None:
                    yield self.report(use, ctx, related=[Related(
                        ctx.path, decl.lineno, "a Parameter declared with "
                        "requires_grad=False")], var=var, part=owner, line=decl.lineno)
                continue
            if f is None or any(g.value and g.stmt.lineno > f.stmt.lineno
                                and (covers(g.root, f.root)) for g in flags
                                if g.stmt.lineno < s.lineno):
                continue
            use = unguarded_grad_use(s, var)
            if use is not None:
                yield self.report(use, ctx, related=[Related(
                    ctx.path, _inner_flag_stmt(f).lineno, f"`{f.root}` is frozen here")],
                    var=var, part=f.root, line=_inner_flag_stmt(f).lineno)
