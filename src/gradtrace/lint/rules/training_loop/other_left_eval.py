"""GT551: the loop puts one model in train mode; another model it trains was made in eval mode
and stays there."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.registration._modules import covers, optimizer_builds, step_lines
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.rules.training_loop._modes import function_effects, mode_call
from gradtrace.lint.rules.training_loop.modes import _kind_has_mode_layers

# libraries whose `from_pretrained` returns the model in eval mode (transformers'
# PreTrainedModel and diffusers' ModelMixin call `model.eval()`)
EVAL_LOADERS = ("transformers.", "diffusers.")


def _returns_evaluated(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``fn`` puts what it returns in eval mode: ``m.eval(); return m``, ``return m.eval()``."""
    evald = {dotted(n.func.value) for n in walk(fn) if isinstance(n, ast.Call)  # type: ignore
             and mode_call(n) == "eval" and isinstance(n.func, ast.Attribute)}
    for n in walk(fn):
        if isinstance(n, ast.Return) and n.value is not None:
            v = n.value
            if isinstance(v, ast.Call) and mode_call(v) == "eval" or dotted(v) in evald:
                return True
    return False


def _made_in_eval(f: LoopFacts, ctx: Context, name: str, loop: ast.stmt) -> int | None:
    """The line where ``name`` (a module) was made in eval mode before ``loop``: a
    transformers/diffusers ``from_pretrained``, a function or classmethod of the file that
    returns it evaluated, or an explicit ``name.eval()`` before the loop."""
    b = f.scope.binding_before(name, loop.lineno)
    v = b.value if b is not None else None
    if isinstance(v, ast.Call):
        q = ctx.qualified_name(v.func) or ""
        fn = None
        if isinstance(v.func, ast.Attribute) and v.func.attr == "from_pretrained" \
                and q.startswith(EVAL_LOADERS):
            return b.line  # type: ignore[union-attr]
        if isinstance(v.func, ast.Attribute) and isinstance(v.func.value, ast.Name):
            cls = ctx.analysis.classes.get(v.func.value.id)
            fn = cls.methods.get(v.func.attr) if cls is not None else None
        elif isinstance(v.func, ast.Name):
            fn = ctx.analysis.functions.get(v.func.id)
        if fn is not None and _returns_evaluated(fn):
            return b.line  # type: ignore[union-attr]
    for m in f.scope.calls_to("eval"):
        if m.receiver == name and not m.call.args and m.stmt.lineno < loop.lineno \
                and (b is None or m.stmt.lineno > b.line):
            return m.stmt.lineno
    return None


class OtherModelLeftInEvalMode(LoopRule):
    """The training loop puts one model in train mode, but another model it trains (run in
    the loop, held by the optimizer it steps) was made in eval mode and is never put in train
    mode.

    Why: `from_pretrained` of transformers and diffusers returns the model in eval mode. A
    fine-tune that trains two models (`unet` and `text_encoder`) and calls only
    `unet.train()` trains the other one with its dropout off and its batch norm on frozen
    running statistics, silently: not the regularised fine-tune that was meant
    (diffusers' `train_dreambooth.py` with `--train_text_encoder`, fixed by "Set train mode for
    text encoder"; checked on torch 2.13). Call `.train()` on every model that is trained.
    Known limits: one function (or script): the other model must be bound there by a
    transformers/diffusers `from_pretrained`, by a function or classmethod of the file that
    returns it evaluated, or be put in eval mode there before the loop; its class or
    constructor must show dropout or batch norm (a transformers/diffusers model is taken to).
    """

    code = "GT551"
    needs_step = True  # NOTE [step files]
    name = "other-model-left-in-eval-mode"
    message = ("`{call}` puts `{trained}` in train mode, but `{other}`, also trained in this "
               "loop, was made in eval mode (line {line}) and nothing puts it in train mode: "
               "it trains with dropout off; call `{other}.train()` too")
    gate_statements = "function"
    triggers = (".train(",)
    function_needs = ("backward", "step", ".train(")
    examples = [
        Bad("""
            import torch
            import transformers
            enc = transformers.CLIPTextModel.from_pretrained("clip")
            opt = torch.optim.AdamW(list(unet.parameters()) + list(enc.parameters()))
            for epoch in range(3):
                unet.train()
                for ids, x in loader:
                    loss = unet(x, enc(ids)).pow(2).mean()
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
            """, at=(6, 4)),
        Good("""
            import torch
            import transformers
            enc = transformers.CLIPTextModel.from_pretrained("clip")
            opt = torch.optim.AdamW(list(unet.parameters()) + list(enc.parameters()))
            for epoch in range(3):
                unet.train()
                enc.train()
                for ids, x in loader:
                    loss = unet(x, enc(ids)).pow(2).mean()
                    loss.backward()
                    opt.step()
                    opt.zero_grad()
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        trains = [s for s in f.scope.stmts if isinstance(s, ast.Expr) and isinstance(
            s.value, ast.Call) and mode_call(s.value) == "train"]
        if not trains:
            return
        opts = optimizer_builds(f.scope)
        if not opts:
            return
        switched = {r for r, ms in function_effects(ctx, f.node, 0).items() if "train" in ms}
        for s in trains:
            loops = f.loops_of(s)
            trained = dotted(s.value.func.value)  # type: ignore[attr-defined]
            if not loops or not trained:
                continue
            loop = loops[-1]
            got = self._other(f, ctx, loop, trained, switched, opts)
            if got is not None:
                other, line = got
                yield self.report(s.value, ctx, related=(related_at(
                    ctx, loop, f"`{other}` is trained in this loop"),),
                    call=ctx.source(s.value), trained=trained, other=other, line=line)

    def _other(self, f: LoopFacts, ctx: Context, loop: ast.stmt, trained: str,
               switched: set[str], opts) -> tuple[str, int] | None:  # type: ignore[no-untyped-def]
        start, end = loop.lineno, loop.end_lineno or loop.lineno
        stepped = [o for o in opts if any(start <= ln <= end for ln in step_lines(f.scope, o.name))]
        seen: set[str] = set()
        for n in walk(loop):
            if not isinstance(n, ast.Call) or not isinstance(n.func, (ast.Name, ast.Attribute)):
                continue
            d = dotted(n.func)
            if not d or d in seen or covers(trained, d) or covers(d, trained) \
                    or f.scope.grad_off_at(n) is not None:
                continue
            seen.add(d)
            if any(covers(r, d) for r in switched) or not any(
                    covers(src, d) for o in stepped for src in o.sources):
                continue
            line = _made_in_eval(f, ctx, d, loop)
            if line is None:
                continue
            k = ctx.analysis.kind(n.func, f.scope, n.lineno)
            if k is None or k.what != MODULE or not (
                    (k.cls or "").startswith(EVAL_LOADERS) or _kind_has_mode_layers(ctx, k)):
                continue
            return d, line
        return None
