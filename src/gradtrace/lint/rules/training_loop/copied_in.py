"""GT554: other weights copied into the trained model inside the training loop, never copied
back."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.kinds import MODULE, OBJECT
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.context import LOOP_TYPES, Context

WRITES = frozenset({"copy_", "set_"})
Def = ast.FunctionDef | ast.AsyncFunctionDef


def _element_vars(fn: Def, param: str) -> set[str]:
    """The loop variables of ``fn`` that walk the elements of its argument ``param``
    (``for p in param``, ``for s, p in zip(self.shadow, param)``)."""
    out: set[str] = set()
    for n in walk(fn):
        if not isinstance(n, (ast.For, ast.AsyncFor)):
            continue
        it, t = n.iter, n.target
        if isinstance(it, ast.Name) and it.id == param and isinstance(t, ast.Name):
            out.add(t.id)
        elif isinstance(it, ast.Call) and isinstance(it.func, ast.Name) \
                and it.func.id == "zip" and isinstance(t, ast.Tuple) \
                and len(t.elts) == len(it.args):
            out |= {e.id for a, e in zip(it.args, t.elts) if isinstance(a, ast.Name)
                    and a.id == param and isinstance(e, ast.Name)}
    return out


def writes_argument(ctx: Context, fn: Def) -> bool:
    """``fn``'s first argument (after ``self``) is a list of tensors whose elements it
    overwrites with other values (``param.data.copy_(s_param.data)``)."""
    def make() -> bool:
        args = [a.arg for a in fn.args.args]
        if args and args[0] == "self":
            args = args[1:]
        if not args:
            return False
        elems = _element_vars(fn, args[0])
        for n in walk(fn):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in WRITES and n.args:
                recv = n.func.value
                if isinstance(recv, ast.Attribute) and recv.attr == "data":
                    recv = recv.value
                if isinstance(recv, ast.Name) and recv.id in elems:
                    return True
        return False
    return ctx.memo("gt554-writes-arg", fn, make)


class WeightsCopiedInNotRestored(LoopRule):
    """Inside the training loop other weights (an EMA's shadow copy) are copied into the
    trained model's parameters, for a validation, and nothing copies the trained ones back.

    Why: `ema.copy_to(model.parameters())` overwrites the values of the very Parameter
    objects the optimizer holds. Without a restore (`ema.store(...)` before and
    `ema.restore(model.parameters())` after the validation), the next steps start from the
    averaged weights: the optimizer's work since the last average is thrown away at every
    validation and training is pulled toward the slow average, silently
    (PKU-YuanGroup/Open-Sora-Plan#186, checked on torch 2.13). Copy the trained values back
    after the validation, or validate a separate copy of the model.
    Known limits: the copy is a method of a class of this file that overwrites the elements of
    the list it is given (`param.data.copy_(shadow)` in a loop over it), called on
    `model.parameters()` in a loop that steps an optimizer; a second such call (or a
    `load_state_dict`) on the same model in the same pass counts as the restore; the function
    runs the `backward()` too.
    """

    code = "GT554"
    name = "weights-copied-in-not-restored"
    message = ("`{call}` overwrites `{model}`'s parameters in the training loop and nothing "
               "later in the pass copies the trained values back: the next `step()` continues "
               "from the copied weights and the training since then is lost; restore them "
               "after the evaluation")
    triggers = (".parameters())",)  # the call that hands the list to the copy
    function_needs = ("backward", "step")
    examples = [
        Bad("""
            import torch

            class Shadow:
                def __init__(self, params):
                    self.shadow = [p.detach().clone() for p in params]
                def copy_to(self, params):
                    for s, p in zip(self.shadow, params):
                        p.data.copy_(s)

            def train(model, opt, batches):
                shadow = Shadow(model.parameters())
                for i, (x, y) in enumerate(batches):
                    opt.zero_grad()
                    ((model(x) - y) ** 2).mean().backward()
                    opt.step()
                    if i % 100 == 0:
                        shadow.copy_to(model.parameters())
            """, at=(17, 12)),
        Good("""
            import torch

            class Shadow:
                def __init__(self, params):
                    self.shadow = [p.detach().clone() for p in params]
                def copy_to(self, params):
                    for s, p in zip(self.shadow, params):
                        p.data.copy_(s)
                def store(self, params):
                    self.kept = [p.detach().clone() for p in params]
                def restore(self, params):
                    for k, p in zip(self.kept, params):
                        p.data.copy_(k)

            def train(model, opt, batches):
                shadow = Shadow(model.parameters())
                for i, (x, y) in enumerate(batches):
                    opt.zero_grad()
                    ((model(x) - y) ** 2).mean().backward()
                    opt.step()
                    if i % 100 == 0:
                        shadow.store(model.parameters())
                        shadow.copy_to(model.parameters())
                        shadow.restore(model.parameters())
            """),
    ]

    def wants(self, text: str) -> bool:
        """The copy is a call given ``<model>.parameters()`` in the function itself."""
        return ".parameters())" in text and super().wants(text)

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        if not f.steps:
            return
        for s in f.scope.stmts:
            if not isinstance(s, ast.Expr) or not isinstance(s.value, ast.Call):
                continue
            model = self._copied_into(f, ctx, s.value)
            if model is None:
                continue
            loops = [lp for lp in f.loops_of(s) if isinstance(lp, LOOP_TYPES)]
            steps = [st for st in f.steps if loops and f.inside(st.stmt, loops[0])
                     and self._steps_model(f, ctx, st.call, model)]
            if not steps:
                continue
            if any(t is not s and (f.before(s, t) or f.before(t, s))
                   and self._rewrites(f, ctx, t, model) for t in f.scope.stmts):
                continue  # copied in and back (the later of the two is the restore)
            yield self.report(s.value, ctx, related=(related_at(
                ctx, steps[0].call, "the optimizer steps these parameters here"),),
                call=" ".join(ctx.source(s.value).split())[:60], model=model)

    @staticmethod
    def _steps_model(f: LoopFacts, ctx: Context, step: ast.Call, model: str) -> bool:
        """The optimizer ``step`` steps holds ``model``'s parameters (or may: unknown)."""
        recv = step.func.value if isinstance(step.func, ast.Attribute) else None
        k = ctx.analysis.kind(recv, f.scope, step.lineno) if recv is not None else None
        if k is None or not k.over:
            return True
        return any(o == model or model.startswith(o + ".") for o in k.over)

    @staticmethod
    def _copied_into(f: LoopFacts, ctx: Context, call: ast.Call) -> str | None:
        """``model`` when ``call`` is ``obj.method(model.parameters())`` and the method of
        ``obj``'s class (of this file) overwrites the elements it is given."""
        fn = call.func
        if not isinstance(fn, ast.Attribute) or len(call.args) != 1:
            return None
        a = call.args[0]
        if not (isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute)
                and a.func.attr == "parameters"):
            return None
        model = dotted(a.func.value)
        k = ctx.analysis.kind(fn.value, f.scope, call.lineno)
        if model is None or k is None or k.what not in (OBJECT, MODULE) or k.cls is None:
            return None
        info = ctx.analysis.classes.get(k.cls)
        m = info.methods.get(fn.attr) if info is not None else None
        return model if m is not None and writes_argument(ctx, m) else None

    def _rewrites(self, f: LoopFacts, ctx: Context, s: ast.stmt, model: str) -> bool:
        """``s`` copies values into ``model`` again (the restore)."""
        for n in walk(s):
            if not isinstance(n, ast.Call):
                continue
            if isinstance(n.func, ast.Attribute) and n.func.attr == "load_state_dict" \
                    and dotted(n.func.value) == model:
                return True
            if self._copied_into(f, ctx, n) == model:
                return True
        return False
