"""GT510-GT511: backward on a per-element loss, and names rebound to a method's ``None``."""
from __future__ import annotations

import ast
import re
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.analysis.reach import live_binding_before
from gradtrace.lint.analysis.steps import BACKWARD_OWNER_RE, optimizer_like
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.rules.training_loop._base import LoopRule, related_at

SCHED_RE = re.compile(r"sched", re.IGNORECASE)


def _unreduced(call: ast.Call) -> bool:
    """The call passes ``reduction='none'`` (or the legacy ``reduce=False``)."""
    for kw in call.keywords:
        v = kw.value
        if kw.arg == "reduction" and isinstance(v, ast.Constant) and v.value == "none":
            return True
        if kw.arg == "reduce" and isinstance(v, ast.Constant) and v.value is False:
            return True
    return False


UNREDUCED_RE = re.compile(
    r"(?m)^\s*([\w.]+)\s*=[^=\n].*\b(?:reduction\s*=\s*['\"]none['\"]|reduce\s*=\s*False)")


def _unreduced_criteria(ctx: Context) -> set[str]:
    """Names assigned *only* loss modules built with ``reduction='none'`` in this file."""
    def make() -> set[str]:
        out: set[str] = set()
        for m in UNREDUCED_RE.finditer(ctx.text):  # the value 'none' is in a string
            name = m.group(1)
            code = ctx.code_line(ctx.text.count("\n", 0, m.start(1)) + 1)  # not in a comment
            if not re.match(rf"\s*{re.escape(name)}\s*=[^=].*\breduc", code):
                continue
            assigned = re.findall(rf"(?m)^\s*{re.escape(name)}\s*=[^=]", ctx.code)
            if len(assigned) == 1:
                out.add(name)
        return out
    return ctx.memo("gt5-unreduced", ctx.tree, make)


class BackwardOnNonScalarLoss(LoopRule):
    """`backward()` without a gradient on a loss computed with `reduction='none'`.

    Why: with `reduction='none'` the loss has one element per sample; `backward()` without a
    `gradient` argument only works on a single-element tensor and raises `RuntimeError: grad
    can be implicitly created only for scalar outputs` (pytorch-facts.md#non-scalar-backward).
    Reduce it
    first (`loss.mean()`, or a masked/weighted sum), or pass `gradient=`.
    Known limits: only a loss bound directly from such a call (or such a criterion) is checked;
    shapes produced by the model are left to the runtime.
    """

    code = "GT510"
    gate_statements = True
    statement_triggers = (".backward(",)  # what wants() needs in the function's own text
    name = "backward-on-non-scalar-loss"
    message = ("`{loss}` was computed with `{how}` (line {line}): it has one value per element, "
               "and `backward()` without `gradient=` raises 'grad can be implicitly created only "
               "for scalar outputs'; reduce it first, e.g. `{loss}.mean().backward()`")
    triggers = ("reduction", "reduce=")
    function_needs = ("backward",)

    def wants(self, text: str) -> bool:
        return ".backward(" in text and ("reduction" in text or "reduce" in text or
                                         "criterion" in text or "loss_f" in text)

    examples = [
        Bad("""
            import torch.nn as nn
            criterion = nn.CrossEntropyLoss(reduction="none")
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
            """, at=(5, 4)),
        Bad("""
            import torch.nn.functional as F
            loss = F.mse_loss(pred, target, reduction="none")
            loss.backward()
            """, at=(3, 0)),
        Good("""
            import torch.nn.functional as F
            loss = F.mse_loss(pred, target, reduction="none")
            loss = (loss * weights).sum() / weights.sum()
            loss.backward()
            """),
        Good("""
            import torch.nn.functional as F
            loss = F.mse_loss(pred, target, reduction="none")
            loss.backward(torch.ones_like(loss))
            """),
    ]

    def check(self, f: LoopFacts, ctx: Context) -> Iterator[Finding]:
        crit = _unreduced_criteria(ctx)
        for b in f.backwards:
            if not b.accumulates or b.loss is None or b.call.keywords or (
                    b.call.args and b.loss is not b.call.args[0]):
                continue
            value, where = b.loss, b.call
            name = dotted(b.loss)
            if name is not None:
                bd = live_binding_before(f.scope, name, b.stmt.lineno)
                if bd is None or bd.value is None:
                    continue
                value, where = bd.value, bd.stmt
            if not isinstance(value, ast.Call):
                continue
            how = self._how(f, value, crit, where.lineno)  # type: ignore[attr-defined]
            if how is None:
                continue
            yield self.report(b.call, ctx, related=(
                related_at(ctx, where, "the per-element loss is made here"),),
                loss=ctx.source(b.loss), how=how, line=where.lineno)  # type: ignore[attr-defined]

    @staticmethod
    def _how(f: LoopFacts, value: ast.Call, crit: set[str], line: int) -> str | None:
        """How ``value`` is unreduced (None: it is not, or we cannot tell)."""
        if _unreduced(value):
            return "reduction='none'"
        name = dotted(value.func)
        if name is None:
            return None
        b = live_binding_before(f.scope, name, line)
        if b is not None:
            ok = isinstance(b.value, ast.Call) and _unreduced(b.value)
            return f"`{name}`, built with reduction='none'" if ok else None
        return f"`{name}`, built with reduction='none'" if name in crit else None


NONE_METHODS = frozenset({"backward", "zero_grad", "step", "load_state_dict"})


class AssignedNoneResult(Rule):
    """A name is rebound to the result of a method that returns None (or not the object).

    Why: `optimizer.step()`, `scheduler.step()`, `optimizer.zero_grad()`, `loss.backward()`
    and `optimizer.load_state_dict()` return None, and `module.load_state_dict()` returns
    the missing/unexpected keys; `opt = opt.step()` therefore loses the optimizer and the next
    `opt.zero_grad()` raises `AttributeError: 'NoneType' object has no attribute
    'zero_grad'` (pytorch-facts.md#none-returning-methods). `.train()`, `.eval()`, `.to()`,
    `.apply()` and
    `requires_grad_()` return the module itself, and `opt.step(closure)` returns the loss:
    those assignments are fine.
    Known limits: a class in the same file that defines its own `step` / `load_state_dict` is
    trusted to return something useful.
    """

    code = "GT511"
    gate_statements = True
    name = "assigned-none-result"
    message = ("`{method}()` returns {returns}, so `{target}` no longer holds the "
               "{what}: {consequence}; call `{call}` without assigning it")
    fix_title = "Call the method without assigning its result"
    fix_safety = "safe"
    triggers = (".step(", ".backward(", ".zero_grad(", ".load_state_dict(")
    examples = [
        Bad("""
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer = optimizer.step()
            """, fixed="""
            for x, y in loader:
                optimizer.zero_grad()
                criterion(model(x), y).backward()
                optimizer.step()
            """, at=(4, 4)),
        Bad("""
            model = model.load_state_dict(torch.load("ckpt.pt"))
            """, fixed="""
            model.load_state_dict(torch.load("ckpt.pt"))
            """, at=(1, 0)),
        Bad("""
            loss = loss.backward()
            """, fixed="""
            loss.backward()
            """),
        Good("""
            loss = optimizer.step(closure)
            model = model.to(device).train()
            """),
        Good("""
            missing = model.load_state_dict(state, strict=False)
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        v = node.value
        if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
                and v.func.attr in NONE_METHODS and len(node.targets) == 1):
            return
        method, recv = v.func.attr, dotted(v.func.value)
        target = dotted(node.targets[0])
        if recv is None or target != recv or not self._returns_nothing(method, recv, v, ctx):
            return
        returns, what, consequence = self._texts(method, recv, ctx)
        related = []
        nxt = self._next_use(target, node, ctx) if "." not in target else None
        if nxt is not None:
            m = re.search(rf"\b{re.escape(target)}\.(\w+)", ctx.code_line(nxt.lineno))
            if m and returns == "None":
                consequence = (f"`{target}.{m.group(1)}` on line {nxt.lineno} raises "
                               f"AttributeError: 'NoneType' object has no attribute "
                               f"'{m.group(1)}'")
            related.append(related_at(ctx, nxt, f"`{target}` is used here"))
        elif "." not in target and ctx.scope().loops_of(node) and returns == "None":
            consequence = (f"on the next pass `{target}.{method}` on this line raises "
                           f"AttributeError: 'NoneType' object has no attribute '{method}'")
        fix = self.fix(ctx.edit(node, ctx.source(v)))
        yield self.report(node, ctx, fix=fix, related=related, method=f"{recv}.{method}",
                          returns=returns,
                          target=target, what=what, consequence=consequence,
                          call=ctx.source(v))

    @staticmethod
    def _next_use(target: str, node: ast.Assign, ctx: Context) -> ast.Name | None:
        """The next load of ``target``: later in the code, else earlier in the same loop."""
        scope = ctx.scope()
        end = node.end_lineno or node.lineno
        later = [n for n in scope.uses_after(target, node.lineno) if n.lineno > end]
        if later:
            return later[0]
        loops = scope.loops_of(node)
        if loops:
            first = loops[-1].lineno
            earlier = [n for n in scope.loads.get(target, ()) if first <= n.lineno < node.lineno]
            return earlier[0] if earlier else None
        return None

    @staticmethod
    def _returns_nothing(method: str, recv: str, call: ast.Call, ctx: Context) -> bool:
        if method in ("step", "load_state_dict") and re.search(
                rf"def\s+{method}\s*\(", ctx.code):
            return False  # a class here defines its own: trust it
        if method == "step":
            return not call.args and not call.keywords and (
                optimizer_like(recv) or bool(SCHED_RE.search(recv.rpartition(".")[2])))
        if method == "backward":
            last = recv.rpartition(".")[2].lower()
            return not (last == "self" or BACKWARD_OWNER_RE.search(last))
        return True

    @staticmethod
    def _texts(method: str, recv: str, ctx: Context) -> tuple[str, str, str]:
        if method == "load_state_dict" and not optimizer_like(recv):
            return ("the missing/unexpected keys", "module",
                    f"calling `{recv}(...)` next raises TypeError")
        what = {"backward": "loss tensor", "step": "optimizer" if optimizer_like(recv)
                else "scheduler"}.get(method, "optimizer" if optimizer_like(recv) else "object")
        return ("None", what, "its next use raises AttributeError: 'NoneType' object has no "
                              "attribute ...")
