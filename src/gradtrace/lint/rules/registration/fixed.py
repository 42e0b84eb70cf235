"""GT434, GT440-GT441: what a class or a helper does to ``requires_grad`` across methods: a
fixed ``Parameter`` unfrozen by a whole-model unfreeze, a freeze applied right before the
optimizer step (after backward filled ``.grad``), parameters unfrozen in one method after
another built the optimizer from the trainable ones only."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.params import FLAG, flag_call, param_loop_var
from gradtrace.lint.analysis.setup_order import runs_before_build
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import file_says, says_all
from gradtrace.lint.rules.leaf._tensors import is_false, is_parameter_call, keyword, node_mentions
from gradtrace.lint.rules.registration._grad_flags import grad_flags
from gradtrace.lint.rules.registration.freezing import trainable_only_filter

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
BLOCKS = ("body", "orelse", "finalbody")


def _all_defs(ctx: Context) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return ctx.memo("gt42-all-defs", ctx.tree, lambda: [
        *of_types(ctx.tree, DEFS)])


class UnfrozenAcrossMethods(Rule):
    """A method unfreezes parameters after another method built the optimizer from the
    trainable ones only, and nothing rebuilds it.

    Why: `self.opt = SGD([p for p in self.model.parameters() if p.requires_grad])` holds only
    what was trainable when `freeze()` called it. `unfreeze()` turning `requires_grad` back
    on gives the body gradients, but `self.opt.step()` never updates them: the second stage
    trains the head alone, silently (verified on torch 2.13). Rebuild the optimizer after
    unfreezing (call the method that creates it) or `add_param_group` the unfrozen part.
    Known limits: the methods must be of one class; the unfreeze is a loop over
    `.parameters()`, `requires_grad_()` or a helper of the file that sets the flag. A method
    every call of which runs in an `__init__` before the build (a base class's of another
    file) is left alone: NOTE [run at construction before the build].
    """

    code = "GT440"
    needs_step = True  # NOTE [step files]
    gate_statements = "function"
    name = "unfrozen-across-methods"
    message = ("this unfreezes `{part}`, but `{opt}` was built from the then-trainable "
               "parameters only (line {line}) and `{method}()` never rebuilds it: "
               "`{opt}.step()` will not update them")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch
            class Learner:
                def create_opt(self):
                    params = [p for p in self.model.parameters() if p.requires_grad]
                    self.opt = torch.optim.SGD(params, lr=0.1)
                def freeze(self):
                    self.model.body.requires_grad_(False)
                    self.create_opt()
                def unfreeze(self):
                    self.model.body.requires_grad_(True)
                def fit(self, x, y):
                    self.opt.zero_grad()
                    loss_fn(self.model(x), y).backward()
                    self.opt.step()
            """, at=(10, 8)),
        Good("""
            import torch
            class Learner:
                def create_opt(self):
                    params = [p for p in self.model.parameters() if p.requires_grad]
                    self.opt = torch.optim.SGD(params, lr=0.1)
                def freeze_to(self, n):
                    self.model.body.requires_grad_(n == 0)
                    self.create_opt()
                def unfreeze(self):
                    self.model.body.requires_grad_(True)
                    self.create_opt()
                def fit(self, x, y):
                    self.opt.zero_grad()
                    loss_fn(self.model(x), y).backward()
                    self.opt.step()
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        cls = ctx.analysis.classes.get(node.name)
        if cls is None or cls.node is not node:
            return
        builds = self._filtered_builds(cls, ctx)
        if not builds:
            return
        for m in cls.methods.values():
            if m.name == "__init__" or any(m is b[0] for b in builds.values()):
                continue
            for s, part in self._unfreezes(m, ctx):
                if self._rebuilds(cls, m, builds, set(), ctx):
                    break
                opt, (bm, bs) = next(iter(builds.items()))
                if not self._stepped(cls, opt) or runs_before_build(ctx, cls, m.name, bm.name):
                    break  # NOTE [run at construction before the build]
                yield self.report(s, ctx, related=[Related(
                    ctx.path, bs.lineno, f"`{opt}` is built here", ctx.column(bs))],
                    part=part, opt=opt, line=bs.lineno, method=m.name)
                break

    @staticmethod
    def _filtered_builds(cls, ctx: Context) -> dict:  # type: ignore[no-untyped-def]
        from gradtrace.lint.rules.leaf._tensors import is_optimizer_call
        out = {}
        for m in cls.methods.values():
            if not node_mentions(ctx, m, "requires_grad"):
                continue  # a trainable-only filter is spelled in the method: no scope needed
            scope = ctx.scope(m)
            for s in scope.stmts:
                if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                        and (dotted(s.targets[0]) or "").startswith("self.") \
                        and is_optimizer_call(s.value, ctx) and trainable_only_filter(s.value, scope):
                    out[dotted(s.targets[0])] = (m, s)
        return out if len(out) == 1 else {}

    @staticmethod
    def _unfreezes(m: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context
                   ) -> Iterator[tuple[ast.stmt, str]]:
        scope = ctx.scope(m)
        for f in grad_flags(scope):
            if f.value and not f.conditional and f.root.startswith("self."):
                yield f.stmt, f.root
        for s in scope.stmts:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
                got = flag_call(s.value, ctx)
                if got is not None and got[1] and ctx.source(got[0]).startswith("self."):
                    yield s, ctx.source(got[0])

    def _rebuilds(self, cls, m, builds, seen: set, ctx: Context) -> bool:  # type: ignore[no-untyped-def]
        if m.name in seen:
            return False
        seen.add(m.name)
        for n in walk(m):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if n.func.attr == "add_param_group":
                    return True
                if dotted(n.func.value) == "self" and n.func.attr in cls.methods:
                    callee = cls.methods[n.func.attr]
                    if any(callee is b[0] for b in builds.values()) or self._rebuilds(
                            cls, callee, builds, seen, ctx):
                        return True
        return False

    @staticmethod
    def _stepped(cls, opt: str) -> bool:  # type: ignore[no-untyped-def]
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr == "step" and dotted(n.func.value) == opt
                   for m in cls.methods.values() for n in walk(m))


class FixedParameterUnfrozen(Rule):
    """A `Parameter` kept fixed with `requires_grad=False` is trained after a whole-model
    unfreeze.

    Why: `self.b = nn.Parameter(torch.randn(...) * sigma, requires_grad=False)` stores a
    constant (a random projection, a mask, a table) as a parameter. It is in
    `model.parameters()`, so `model.requires_grad_(True)` (or a loop setting
    `requires_grad = True` on all of them, as a fine-tuning stage does) turns it trainable and
    the optimizer changes it (verified on torch 2.13). Register it as a buffer
    (`self.register_buffer("b", ...)`): buffers never require grad.
    Known limits: the class must be of this file and the unfrozen model built from it in the
    same file.
    """

    code = "GT434"
    gate_statements = "function"
    name = "fixed-parameter-unfrozen"
    message = ("`self.{attr}` is a constant kept as a Parameter with `requires_grad=False`; "
               "`{root}` is unfrozen as a whole at line {line}, which trains it too: "
               "register it as a buffer instead")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            class Fourier(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.b = nn.Parameter(torch.randn(8, 2), requires_grad=False)
            model = nn.Sequential(Fourier(), nn.Linear(16, 1))
            model.requires_grad_(True)
            """, at=(6, 17)),
        Good("""
            import torch
            from torch import nn
            class Fourier(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("b", torch.randn(8, 2))
                    self.s = nn.Parameter(torch.ones(1), requires_grad=False)
            model = nn.Sequential(Fourier(), nn.Linear(16, 1))
            model[1].requires_grad_(True)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        fixed = self._fixed(ctx)
        if not fixed:
            return
        for where in [ctx.tree, *_all_defs(ctx)]:
            if not says_all(ctx, where, (FLAG,)):
                continue  # no unfreeze here: no scope to build (NOTE [word gates])
            scope = ctx.scope(where)
            for f in grad_flags(scope):
                if not f.value or f.conditional:
                    continue
                for cname in self._classes_in(f.root, scope, f.stmt.lineno, ctx):
                    for attr, stmt in fixed.get(cname, ()):
                        yield self.report(stmt.value, ctx, related=[Related(  # type: ignore[attr-defined]
                            ctx.path, f.stmt.lineno, f"`{f.root}` is unfrozen here")],
                            attr=attr, root=f.root, line=f.stmt.lineno)
                    fixed.pop(cname, None)

    @staticmethod
    def _fixed(ctx: Context) -> dict[str, list[tuple[str, ast.stmt]]]:
        out: dict[str, list[tuple[str, ast.stmt]]] = {}
        for name, cls in ctx.analysis.classes.items():
            if not cls.is_module or not node_mentions(ctx, cls.node, FLAG):
                continue  # no `requires_grad=` in the class's code: its attributes not read
            for attr, info in cls.attrs.items():
                v = info.value
                if isinstance(v, ast.Call) and is_parameter_call(v, ctx) and not info.later \
                        and is_false(keyword(v, FLAG)):
                    out.setdefault(name, []).append((attr, info.stmt))
        return out

    @staticmethod
    def _classes_in(root: str, scope, line: int, ctx: Context) -> set[str]:  # type: ignore[no-untyped-def]
        """Classes of the file whose instances are (part of) the module ``root`` at ``line``."""
        if "." in root:
            return set()
        b = scope.binding_before(root, line)
        if b is None or not isinstance(b.value, ast.Call):
            return set()
        out = set()
        classes = ctx.analysis.classes
        todo = [n.func.id for n in walk(b.value) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name) and n.func.id in classes]
        while todo:
            c = todo.pop()
            if c in out:
                continue
            out.add(c)
            for info in classes[c].attrs.values():
                for n in walk(info.value) if info.value is not None else ():
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) \
                            and n.func.id in classes:
                        todo.append(n.func.id)
        return out


def _methods_named(ctx: Context) -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Method name -> the methods of the file's classes with that name (once per file)."""
    def make() -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
        out: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        for c in ctx.analysis.classes.values():
            for n, m in c.methods.items():
                out.setdefault(n, []).append(m)
        return out
    return ctx.memo("gt44-methods-named", ctx.tree, make)


def _freezes(s: ast.stmt, ctx: Context) -> str | None:
    """What ``s`` freezes: a freeze loop or ``requires_grad_(False)``, a helper of the file
    that freezes its argument, or a method of a class of the file (the only one with that
    name) that freezes parameters."""
    if isinstance(s, (ast.For, ast.AsyncFor)):
        got = param_loop_var(s)
        if got is not None:
            var, owner = got
            flags = [n for n in walk(s) if isinstance(n, ast.Assign) and len(n.targets) == 1
                     and dotted(n.targets[0]) == f"{var}.{FLAG}" and is_false(n.value)]
            clears = any(isinstance(n, ast.Assign) and any(dotted(t) == f"{var}.grad"
                                                           for t in n.targets) for n in walk(s))
            return owner if flags and not clears else None
        return None
    if not isinstance(s, ast.Expr) or not isinstance(s.value, ast.Call):
        return None
    call = s.value
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "requires_grad_" and call.args \
            and is_false(call.args[0]):
        return dotted(f.value)
    got = flag_call(call, ctx)
    if got is not None:
        return ctx.source(got[0]) if not got[1] else None
    if isinstance(f, ast.Attribute) and f.attr not in ("step", "backward", "zero_grad"):
        found = _methods_named(ctx).get(f.attr, [])
        if len(found) == 1 and any(not g.value for g in grad_flags(ctx.scope(found[0]))) \
                and not any(isinstance(n, ast.Attribute) and n.attr == "grad"
                            for n in walk(found[0])):
            return ctx.source(call.args[0]) if call.args else ctx.source(f.value)
    return None


def _unfreezes(s: ast.stmt) -> set[str]:
    """# NOTE [freeze closing an unfreeze]
    What ``s`` unfreezes: ``X.requires_grad_(True)`` (or ``requires_grad_()``), or a loop over
    ``X.parameters()`` setting the flag to True. StyleGAN's phases turn a module's gradients on
    before its backward and off right after (``phase.module.requires_grad_(True)``, backward,
    ``phase.module.requires_grad_(False)``, ``phase.opt.step()``): the freeze closes that
    bracket so the next phase's backward does not write into it; this step is meant to apply
    the gradients the bracket let through. GT441 leaves a freeze of a part unfrozen earlier in
    the same block alone."""
    if isinstance(s, (ast.For, ast.AsyncFor)):
        got = param_loop_var(s)
        if got is not None and any(
                isinstance(n, ast.Assign) and len(n.targets) == 1
                and dotted(n.targets[0]) == f"{got[0]}.{FLAG}" and isinstance(n.value, ast.Constant)
                and n.value.value is True for n in walk(s)):
            return {got[1]}
        return set()
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(
            s.value.func, ast.Attribute) and s.value.func.attr == "requires_grad_" and (
            not s.value.args or isinstance(s.value.args[0], ast.Constant)
            and s.value.args[0].value is True):
        return {dotted(s.value.func.value) or ""}
    return set()


class FreezeBeforeStep(Rule):
    """Parameters are frozen between `backward()` and `optimizer.step()`: this step still
    updates them.

    Why: `requires_grad=False` only keeps *future* backward passes from writing `.grad`. The
    gradients the last `backward()` already stored stay, and `optimizer.step()` applies every
    parameter whose `.grad` is not None, so the "frozen" ones take this update (verified on
    torch 2.13); a step wrapper that applies a freeze schedule right before stepping does the
    same. Freeze before the backward, or also set `p.grad = None` for them.
    Known limits: the freeze and the step must be in one block of one function, with no
    backward or `zero_grad` between them.
    """

    code = "GT441"
    gate_statements = "function"
    name = "freeze-before-step"
    message = ("this freezes `{part}` after the gradients were computed; the `step()` at line "
               "{line} still applies them (`requires_grad` only stops future backward passes)")
    triggers = ("step",)
    examples = [
        Bad("""
            for x, y in loader:
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                for p in model.embed.parameters():
                    p.requires_grad = False
                opt.step()
            """, at=(4, 4)),
        Good("""
            for p in model.embed.parameters():
                p.requires_grad = False
            for x, y in loader:
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from self._blocks(node, ctx)

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._blocks(node, ctx)

    def _blocks(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        # every freeze `_freezes` knows sets `requires_grad` (here or in a helper of the
        # file), and the step is in this function (NOTE [word gates])
        if not file_says(ctx, FLAG) or not says_all(ctx, node, ("step",)):
            return
        from gradtrace.lint.analysis.kinds import OPTIMIZER
        from gradtrace.lint.analysis.vocabulary import is_optimizer_name
        todo = [getattr(node, f, None) for f in BLOCKS]
        while todo:
            body = todo.pop()
            if not body or not isinstance(body[0], ast.stmt):
                continue
            for s in body:
                if not isinstance(s, (*DEFS, ast.ClassDef)):
                    todo += [getattr(s, f, None) for f in BLOCKS]
                    todo += [h.body for h in getattr(s, "handlers", ())]
            frozen: tuple[ast.stmt, str] | None = None
            opened: set[str] = set()  # NOTE [freeze closing an unfreeze]
            for s in body:
                text = ctx.source(s) if isinstance(s, ast.Expr) else ""
                if frozen is not None and isinstance(s, ast.Expr) \
                        and isinstance(s.value, ast.Call) \
                        and isinstance(s.value.func, ast.Attribute) \
                        and s.value.func.attr == "step" and not s.value.args:
                    recv = s.value.func.value
                    k = ctx.analysis.kind(recv, ctx.scope(node), s.lineno) \
                        if dotted(recv) else None
                    if (k is not None and k.what == OPTIMIZER) or (
                            k is None and is_optimizer_name(dotted(recv) or "")):
                        yield self.report(frozen[0], ctx, related=[Related(
                            ctx.path, s.lineno, "the step applies the stored gradients")],
                            part=frozen[1], line=s.lineno)
                    frozen = None
                    continue
                if (node_mentions(ctx, s, "backward", "zero_grad") or any(
                        node_mentions(ctx, d, "backward", "zero_grad")  # above `lineno`
                        for d in getattr(s, "decorator_list", ()))) and any(
                        isinstance(n, ast.Attribute) and n.attr in ("backward", "zero_grad")
                        for n in walk(s)) or ".grad" in text:
                    frozen = None
                    continue
                part = _freezes(s, ctx)
                if part is not None and part not in opened:
                    frozen = (s, part)
                opened.update(_unfreezes(s))
