"""GT120: a loss compares a value with a second computation of the same value.

# NOTE [value computed twice]
Two names bound, in one function, to the same expression (the same ``ast``) over the same
inputs hold equal tensors when the expression is deterministic: only names, attribute reads,
constants, arithmetic, ``torch`` functions and tensor methods, with nothing random
(``dropout``, ``rand*``, sampling...) and no call of a module or of a function of the file (two
forward passes of one model differ under dropout: R-Drop and SimCSE compare them on purpose).
Nothing the expression reads may be rebound between the two bindings, and it must read a
value of the program (two tensors made from constants alone are a test's fixture); neither
name may be changed in place in the function (``append``, ``add_``, ``x[i] = v``, ``+=``), and
a container literal (``reps = []``, filled later) is not such a value. An attribute read
(``model.features_maps``) holds the same value only if nothing calls its object, or a method
of it, between the two bindings: a feature extractor's ``forward`` sets ``self.features_maps``
anew on each input, so ``model(target); t = model.features_maps`` and later ``model(x); s =
model.features_maps`` hold the features of two inputs.
"""
from __future__ import annotations

import ast
import re
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.cuts import is_loss_callee
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Binding, Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule

# random ops (`F.normalize` is not one: `normal` only as torch.normal / `normal_`)
RANDOM_RE = re.compile(r"rand|drop|sample|noise|bernoulli|multinomial|gumbel|shuffle|poisson"
                       r"|^normal_?$|^log_normal_$|exponential_|uniform_|cauchy_|geometric_",
                       re.IGNORECASE)


class LossOfValueAgainstItself(Rule):
    """A loss function is given two names that hold the same value computed twice: the same
    deterministic expression over the same inputs (`soft_targets = log_softmax(t / T)` and
    `soft_prob = log_softmax(t / T)`, then `kl_div(soft_prob, soft_targets)`).

    Why: the loss compares a value with an exact copy of itself (NOTE [value computed twice]):
    a distance (`mse_loss`, `l1_loss`, `kl_div` with `log_target=True`...) is 0 at every step
    and its gradient is 0, and any loss of two equal inputs pulls nothing toward anything. One
    of the two was meant to be computed from another input: labml.ai's distillation
    (annotated_deep_learning_paper_implementations#66) took the student's soft predictions
    from the teacher's logits, so the soft-target term was 0.0 and the student learned from the
    labels alone. The finding is on the first argument's line (the prediction).
    Known limits: both arguments must be names bound once in the function
    (NOTE [value computed twice]); a value computed once and passed twice (`mse(x, x)`) is
    not reported.
    """

    code = "GT120"
    name = "loss-of-value-against-itself"
    message = ("`{first}` (line {line}) and `{second}` (line {other}) are the same computation "
               "of the same values, so `{call}` compares a value with itself: the term measures "
               "no difference and trains nothing; compute `{first}` from the input it was "
               "meant to read")
    triggers = ("loss", "criterion", "kl_div", "mse", "cross_entropy")  # (`l1_loss`: "loss")
    examples = [
        Bad("""
            import torch.nn.functional as F
            def distill(student, teacher, x, y, T=4.0):
                with torch.no_grad():
                    t_logits = teacher(x)
                s_logits = student(x)
                soft_targets = F.log_softmax(t_logits / T, dim=-1)
                soft_prob = F.log_softmax(t_logits / T, dim=-1)
                kd = F.kl_div(soft_prob, soft_targets, log_target=True, reduction="batchmean")
                return kd + F.cross_entropy(s_logits, y)
            """, at=(7, 4)),
        Good("""
            import torch.nn.functional as F
            def distill(student, teacher, x, y, T=4.0):
                with torch.no_grad():
                    t_logits = teacher(x)
                s_logits = student(x)
                soft_targets = F.log_softmax(t_logits / T, dim=-1)
                soft_prob = F.log_softmax(s_logits / T, dim=-1)
                kd = F.kl_div(soft_prob, soft_targets, log_target=True, reduction="batchmean")
                return kd + F.cross_entropy(s_logits, y)
            """),
        Good("""
            import torch.nn.functional as F
            def r_drop(model, x):
                p = F.log_softmax(model(x), dim=-1)
                q = F.log_softmax(model(x), dim=-1)
                return F.kl_div(p, q, log_target=True, reduction="batchmean")
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if len(node.args) < 2 or not all(isinstance(a, ast.Name) for a in node.args[:2]) \
                or node.args[0].id == node.args[1].id:  # type: ignore[attr-defined]
            return
        if not is_loss_callee(ctx, node.func):
            return
        scope = ctx.scope()
        first, second = (_only(scope, a.id) for a in node.args[:2])  # type: ignore[attr-defined]
        if first is None or second is None or first.value is None or second.value is None \
                or first.line == second.line \
                or ast.dump(first.value) != ast.dump(second.value):
            return
        lo, hi = sorted((first, second), key=lambda b: b.line)
        if isinstance(lo.value, (ast.List, ast.Tuple, ast.Dict, ast.Set)) \
                or not _reads_input(lo.value, ctx) or not _deterministic(lo.value, scope, ctx) \
                or _rebound(lo, hi, scope) or _mutated(scope.node, {first.name, second.name}):
            return
        yield self.report(first.stmt, ctx, related=(Related(
            ctx.path, second.line, "the same value is computed here", ctx.column(second.stmt)),
            Related(ctx.path, node.lineno, "and compared with it here", ctx.column(node))),
            first=first.name, second=second.name, line=first.line, other=second.line,
            call=ctx.source(node.func) + "(...)")


def _only(scope: Scope, name: str) -> Binding | None:
    """The one binding of ``name`` in the function, a plain ``name = value``."""
    bs = scope.bindings.get(name, ())
    if len(bs) != 1:
        return None
    b = bs[0]
    s = b.stmt
    ok = isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
    return b if ok else None


def _reads_input(e: ast.AST, ctx: Context) -> bool:
    """The expression computes from a value of the program (a name that is not an imported
    module): two tensors built from constants alone (`torch.zeros((1, 3))` twice, a test's
    fixture checking that a loss of equal inputs is 0) compare equal on purpose."""
    aliases = ctx.imports.aliases
    return any(isinstance(n, ast.Name) and n.id not in aliases for n in ast.walk(e))


def _deterministic(e: ast.AST, scope: Scope, ctx: Context) -> bool:
    """NOTE [value computed twice]: only names, attributes, constants, arithmetic and
    non-random ``torch`` functions or tensor methods (of no module, no function of the file)."""
    for n in ast.walk(e):
        if isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.ListComp,
                          ast.GeneratorExp, ast.DictComp, ast.SetComp)):
            return False
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        q = ctx.qualified_name(f) or ""
        word = q.rpartition(".")[2] or getattr(f, "attr", getattr(f, "id", ""))
        if RANDOM_RE.search(word):
            return False
        if q.startswith("torch."):
            if q.startswith("torch.nn.") and not q.startswith("torch.nn.functional."):
                return False  # builds or runs a layer
            continue
        if not isinstance(f, ast.Attribute) or dotted(f.value) in (None, "self") \
                or isinstance(f.value, ast.Name) and f.value.id in ctx.analysis.functions:
            return False  # a call of a function of the file, of a method of self...
        k = ctx.analysis.kind(f.value, scope, n.lineno)
        if k is not None and k.what == MODULE or \
                k is None and dotted(f.value).startswith("self."):  # type: ignore[union-attr]
            return False  # a module's method (its forward may drop out)
    return True


MUTATORS = frozenset({"append", "extend", "insert", "update", "add", "pop", "remove",
                      "clear", "setdefault"})


def _mutated(fn: ast.AST, names: set[str]) -> bool:
    """One of ``names`` is changed in place in the function (``x.append(...)``, ``x.add_(y)``,
    ``x[i] = v``, ``x += y``): the two values may differ after all."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and isinstance(n.func.value, ast.Name) and n.func.value.id in names \
                and (n.func.attr in MUTATORS or n.func.attr.endswith("_")):
            return True
        t = n.target if isinstance(n, ast.AugAssign) else None
        for x in ([t] if t is not None else n.targets if isinstance(n, ast.Assign) else []):
            if isinstance(x, ast.Subscript) and isinstance(x.value, ast.Name) \
                    and x.value.id in names or isinstance(x, ast.Name) and x.id in names \
                    and isinstance(n, ast.AugAssign):
                return True
    return False


def _rebound(lo: Binding, hi: Binding, scope: Scope) -> bool:
    """A name or attribute the expression reads is assigned between the two bindings, or the
    object an attribute is read from is called (or a method of it) in between
    (NOTE [value computed twice])."""
    read = {dotted(n) for n in ast.walk(lo.value) if isinstance(n, (ast.Name, ast.Attribute))}
    read.discard(None)
    owners = {dotted(n.value) for n in ast.walk(lo.value) if isinstance(n, ast.Attribute)}
    for s in scope.stmts:
        if any(isinstance(n, ast.Call) and lo.line < n.lineno < hi.line and (
                dotted(n.func) in owners or isinstance(n.func, ast.Attribute)
                and dotted(n.func.value) in owners) for n in ast.walk(s)):
            return True  # `model(x)` then `model.feats`: its forward may set the attribute
        if not lo.line < s.lineno < hi.line:
            continue
        targets = s.targets if isinstance(s, ast.Assign) else [getattr(s, "target", None)]
        for t in targets:
            for n in ast.walk(t) if t is not None else ():
                if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) in read:
                    return True
    return False
