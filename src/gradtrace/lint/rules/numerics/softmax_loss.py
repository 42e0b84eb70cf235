"""GT758: probabilities given to a loss that wants logits or log-probabilities: a softmax into
`cross_entropy` / `nll_loss` / `kl_div`, a sigmoid into `binary_cross_entropy_with_logits`."""
from __future__ import annotations

import ast
from typing import Any, Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.module_outputs import (
    argument_sink, bound_value, forward_of, holders_of, same_made,
    unpacked_output)
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.call_words import call_counts
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.words import holds
from gradtrace.lint.rules.numerics._loss_lines import (
    BCEL, CE, FUNCS, KL, LOSS_CLASSES, NLL, _candidate_lines)
from gradtrace.lint.rules.numerics._model_probs import model_made
from gradtrace.lint.rules.numerics._ops import never_differentiated, strip
from gradtrace.lint.rules.numerics.sigmoid import SIGMOID_MODULES, _sigmoid
from gradtrace.lint.rules.numerics.softmax import SOFTMAX_MODULES, _softmax

_F = "torch.nn.functional."
_M = ("torch.nn.", "torch.nn.modules.loss.")
LOSS_FUNCS = {_F + k: k for k in (CE, NLL, KL, BCEL)}
LOSS_MODULES = {m + c: k for c, k in LOSS_CLASSES.items() for m in _M}
# what each loss must not be given: (the call that makes it, the module classes that do)
WRONG_INPUT = {CE: (_softmax, SOFTMAX_MODULES), NLL: (_softmax, SOFTMAX_MODULES),
               KL: (_softmax, SOFTMAX_MODULES), BCEL: (_sigmoid, SIGMOID_MODULES)}
WHY = {CE: "applies log_softmax to its input again: the loss cannot reach 0 and its gradients "
           "shrink",
       NLL: "wants log-probabilities: it minimises -p instead of -log p",
       KL: "wants log-probabilities as its input: fed probabilities it computes "
           "sum(t * (log t - p)), which goes negative and is not least at p = t",
       BCEL: "applies the sigmoid itself: the probabilities are squeezed again into "
             "[0.5, 0.73], the loss cannot reach 0 and its gradients shrink"}
WANT = {CE: "logits", NLL: "log_softmax of the logits", KL: "log_softmax of the logits",
        BCEL: "logits (drop the sigmoid, or use binary_cross_entropy on the probabilities)"}


def _loss_kind(call: ast.Call, scope: Scope, ctx: Context, wrapped: bool = False) -> str | None:
    """``cross_entropy`` / ``nll_loss`` when ``call`` computes one (the function, or a module
    built from ``nn.CrossEntropyLoss`` / ``nn.NLLLoss`` and called); with ``wrapped``, also a
    loss class or function of the file that hands its prediction to one (:func:`_wrappers`)."""
    q = ctx.qualified_name(call.func) or ""
    if q in LOSS_FUNCS:
        return LOSS_FUNCS[q]
    if isinstance(call.func, ast.Call):  # `nn.CrossEntropyLoss()(out, y)`
        return LOSS_MODULES.get(ctx.qualified_name(call.func.func) or "")
    if isinstance(call.func, (ast.Name, ast.Attribute)):
        runs = call.func.value if isinstance(call.func, ast.Attribute) \
            and call.func.attr == "forward" else call.func  # `criterion.forward(out, y)`
        k = ctx.analysis.kind(runs, scope, call.lineno)
        if k is not None and k.what == MODULE:
            got = LOSS_MODULES.get(k.cls or "")
            return got if got is not None or not wrapped else _wrappers(ctx)[0].get(k.cls or "")
        if wrapped and isinstance(call.func, ast.Name) and call.func.id in _wrappers(ctx)[1]:
            fn = called_function(call, scope, call.lineno)
            return _wrappers(ctx)[1].get(call.func.id) if fn is not None else None
    return None


def _wrappers(ctx: Context, found: dict[ast.AST, set[int]] | None = None
              ) -> tuple[dict[str, str], dict[str, str]]:
    """(module classes, functions) of the file that hand their first argument, through views,
    to one of these losses as its input (NOTE [module outputs]: GSCNN's ``JointEdgeSegLoss``
    whose ``forward`` passes ``edgein`` to ``self.bce2d``, which gives it, reshaped, to
    ``binary_cross_entropy_with_logits``), each with the loss it computes. Read from the
    functions that hold a loss line (``found``, by :func:`_candidate_lines`; asked first with
    them, once per file): a module class with one of them as a method, one of them."""
    def find() -> tuple[dict[str, str], dict[str, str]]:
        def accept(call: ast.Call, scope: Scope) -> str | None:
            return _loss_kind(call, scope, ctx)
        fns = [f for f in (found or {}) if isinstance(f, FUNCS)]
        lines = frozenset().union(*(found or {}).values())
        holders = holders_of(fns, ctx)
        names = [c.node.name if (c := ctx.analysis.class_of(f)) else f.name  # type: ignore
                 for f in fns]  # (the counts of `name(`: NOTE [called words])
        calls = call_counts(ctx.code, names)
        used = [f for f, n in zip(fns, names) if calls[n] >= 2]  # defined and called in the file
        fns = used
        owners = {c.node.name: c for f in fns if (c := ctx.analysis.class_of(f)) is not None}
        classes = {name: k for name, info in owners.items() if info.is_module
                   and (fwd := forward_of(info)) is not None
                   and (k := argument_sink(fwd, ctx, layout, accept, lines, holders))
                   is not None}
        funcs = {f.name: k for f in fns if ctx.analysis.functions.get(f.name) is f  # type: ignore
                 and (k := argument_sink(f, ctx, layout, accept, lines, holders)) is not None}
        return classes, funcs
    return ctx.memo("gt758-wrappers", ctx.tree, find)  # type: ignore[no-any-return]


LAYOUT = frozenset({"transpose", "permute", "t", "view_as"})


def layout(e: ast.AST) -> ast.AST:
    """:func:`strip`, also through transposes and permutes (the same values, laid out
    otherwise)."""
    while True:
        e = strip(e)
        if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
                and e.func.attr in LAYOUT):
            return e
        e = e.func.value


def _model_softmax(call: ast.Call, scope: Scope, ctx: Context, made: Any = _softmax,
                   classes: frozenset[str] = SOFTMAX_MODULES) -> ast.AST | None:
    """NOTE [model probabilities]: ``model_made`` with the softmax as default."""
    return model_made(call, scope, ctx, made, classes)


class ProbabilitiesIntoCrossEntropy(Rule):
    """Probabilities are given to a loss that wants logits or log-probabilities: a softmax
    into `cross_entropy` / `CrossEntropyLoss` (logits), `nll_loss` / `NLLLoss` or `kl_div` /
    `KLDivLoss` (log-probabilities), a sigmoid into `binary_cross_entropy_with_logits` /
    `BCEWithLogitsLoss` (logits).

    Why: `cross_entropy` applies `log_softmax` itself, so a model whose output is already a
    softmax is normalised twice: its inputs are squeezed into [0, 1], the loss of a perfect
    prediction stays at `log(1 + (C - 1) / e)` (1.04 for 6 classes) instead of 0 and the
    gradients shrink, so training stalls early (Deep-learning-activity-recognition#10).
    `nll_loss` only picks `-input[target]`: fed probabilities, it minimises `-p`, not `-log p`.
    `kl_div(input, target)` computes `target * (log target - input)`: fed probabilities it
    goes negative and pushes all the mass onto the target's largest class instead of matching
    the target. A sigmoid into `BCEWithLogitsLoss` is applied twice: the predictions live in
    [0.5, 0.73]. Nothing fails. Return the logits from the model (and apply softmax or
    sigmoid only for predictions), or use `log_softmax` with `nll_loss` and `kl_div`.
    Known limits: the softmax must be the loss's input directly, through one local name, or
    what every `return` of the called model's `forward` (a class of the file) or the last
    layer of an `nn.Sequential` gives back (also one element of the tuple it returns:
    `edge_out, cs = net(x)`). The loss may be a loss class or function of the file that hands
    its first argument, reshaped or through its own methods, to one of these losses.
    """

    code = "GT758"
    name = "probabilities-into-cross-entropy"
    message = ("`{softmax}` gives probabilities, and `{loss}` (line {line}) {why}; give "
               "the loss the {want}")
    triggers = ("cross_entropy", "CrossEntropyLoss", "nll_loss", "NLLLoss", "kl_div",
                "KLDivLoss", "binary_cross_entropy_with_logits", "BCEWithLogitsLoss")
    examples = [
        Bad("""
            import torch.nn as nn
            import torch.nn.functional as F

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 4)

                def forward(self, x):
                    return F.softmax(self.fc(x), dim=1)

            model = Net()
            criterion = nn.CrossEntropyLoss()
            loss = criterion(model(x), y)
            loss.backward()
            """, at=(10, 15)),
        Bad("""
            import torch
            import torch.nn.functional as F

            def step(model, x, y):
                probs = torch.softmax(model(x), -1)
                F.nll_loss(probs, y).backward()
            """, at=(5, 12)),
        Good("""
            import torch.nn as nn
            import torch.nn.functional as F

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 4)

                def forward(self, x):
                    return self.fc(x)

            model = Net()
            loss = nn.CrossEntropyLoss()(model(x), y)
            loss.backward()
            probs = F.softmax(model(x), dim=1)
            """),
        Good("""
            import torch.nn.functional as F

            def step(model, x, y):
                F.nll_loss(F.log_softmax(model(x), -1), y).backward()
            """),
        Bad("""
            import torch.nn as nn

            head = nn.Sequential(nn.Linear(16, 8), nn.Softmax(dim=-1))
            kl = nn.KLDivLoss(reduction="batchmean")
            div = kl(head(feats), teacher_probs)
            div.backward()
            """, at=(3, 39)),
        Good("""
            import torch.nn.functional as F

            def distill(student, teacher_logits, x, t=2.0):
                log_p = F.log_softmax(student(x) / t, dim=1)
                q = F.softmax(teacher_logits / t, dim=1)
                return F.kl_div(log_p, q, reduction="batchmean")
            """),
        Bad("""
            import torch
            import torch.nn.functional as F

            def disc_loss(d, real):
                score = torch.sigmoid(d(real))
                return F.binary_cross_entropy_with_logits(score, torch.ones_like(score))
            """, at=(5, 12)),
        Good("""
            import torch
            import torch.nn.functional as F

            def disc_loss(d, real):
                logit = d(real)
                acc = (torch.sigmoid(logit) > 0.5).float().mean()
                return F.binary_cross_entropy_with_logits(logit, torch.ones_like(logit)), acc
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        seen: set[int] = set()
        found = _candidate_lines(node, ctx)
        classes, funcs = _wrappers(ctx, found) if found else ({}, {})
        if classes or funcs:  # the lines that call a loss class or function of the file
            for fn, more in _candidate_lines(node, ctx, tuple(funcs), classes).items():
                found.setdefault(fn, set()).update(more)
        for fn, lines in found.items():
            if never_differentiated(ctx, fn):
                continue  # nothing minimises it: no -p for -log p to replace
            scope = ctx.scope(fn)
            ordered = sorted(lines)  # (bisected: a script holds thousands of statements)
            stmts = [st for st in scope.stmts if not hasattr(st, "body")
                     and holds(ordered, st.lineno, st.end_lineno or st.lineno)]
            for call in (n for st in stmts for n in walk(st)):
                if not isinstance(call, ast.Call) or call.lineno not in lines or not call.args:
                    continue
                loss = _loss_kind(call, scope, ctx, True)
                if loss is None:
                    continue
                made, layers = WRONG_INPUT[loss]
                first = strip(bound_value(strip(call.args[0]), scope, call.lineno))
                sm, direct = None, False
                if isinstance(first, ast.Call):  # the layer that makes it, when a model does
                    sm = _model_softmax(first, scope, ctx, made, layers)
                    if sm is None:
                        sm = made(first, ctx)
                        direct = sm is not None
                elif (got := unpacked_output(first, scope, ctx, strip)) is not None:
                    sm = same_made(got[1], made, ctx, got[0])  # `probs, feats = model(x)`
                if sm is None or id(sm) in seen:
                    continue
                seen.add(id(sm))
                arg = strip(call.args[0])
                if direct and isinstance(arg, ast.Name) and _kept(arg, call, scope, fn):
                    # the probabilities serve elsewhere too: the loss's input is what changes
                    where, rel = call, Related(ctx.path, sm.lineno, "the probabilities are "
                                               "made here", ctx.column(sm))
                else:
                    where, rel = sm, Related(ctx.path, call.lineno,
                                             "the loss is computed from it here",
                                             ctx.column(call))
                yield self.report(where, ctx, related=[rel], softmax=ctx.source(sm)[:50],
                    loss=dotted(call.func) or loss, line=call.lineno, why=WHY[loss],
                    want=WANT[loss])


def _kept(name: ast.Name, call: ast.Call, scope: Scope, fn: ast.AST) -> bool:
    """Whether the value ``name`` holds at ``call`` is read elsewhere in ``fn`` too (the
    probabilities also weight a focal term, or are returned as predictions): then the fix is
    to give the loss the logits, not to drop the softmax."""
    b = scope.binding_before(name.id, call.lineno)
    if b is None:
        return False
    inside = {id(n) for n in walk(call)}
    return any(isinstance(n, ast.Name) and n.id == name.id and isinstance(n.ctx, ast.Load)
               and id(n) not in inside and scope.binding_before(n.id, n.lineno) is b
               for n in walk(fn))


BCE = "binary_cross_entropy"
BCE_CALLS = {_F + BCE} | {m + "BCELoss" for m in _M}
AFFINE = frozenset(m + c for m in ("torch.nn.", "torch.nn.modules.linear.",
                                   "torch.nn.modules.conv.")
                   for c in ("Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d",
                             "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"))


def _layer_class(e: ast.AST, ctx: Context) -> str | None:
    """The class of the module ``e`` calls (``self.fc(h)`` read from the class's ``__init__``),
    or None."""
    if not isinstance(e, ast.Call) or not isinstance(e.func, (ast.Name, ast.Attribute)):
        return None
    f = e.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
        own = next((c for c in ctx.analysis.classes.values() if c.node.lineno <= e.lineno
                    <= (c.node.end_lineno or 0)), None)
        k = own.attr_kind(f.attr) if own is not None else None
    else:
        k = ctx.analysis.kind(f, None, e.lineno)
    return k.cls if k is not None and k.what == MODULE else None


def _affine(e: ast.AST, ctx: Context, scope: Scope | None = None) -> ast.Call | None:
    """``e`` when it calls a Linear / Conv layer."""
    return e if (_layer_class(e, ctx) or "") in AFFINE else None  # type: ignore[return-value]


class LogitsIntoBinaryCrossEntropy(Rule):
    """The raw output of a model that ends in a Linear or Conv layer is given to
    `binary_cross_entropy` / `BCELoss`, which wants probabilities.

    Why: `BCELoss` takes probabilities in [0, 1] and checks them: a score map straight out of
    a `Conv2d` or `Linear` layer holds values outside that range, and the first batch raises
    `RuntimeError: all elements of input should be between 0 and 1` (FCN's `BCELoss` on the
    classifier's scores). Give the loss `torch.sigmoid(model(x))`, or better keep the logits
    and use `BCEWithLogitsLoss`, which is also stable where the sigmoid saturates.
    Known limits: the model is a class of the file whose `forward` returns a Linear/Conv
    layer's output on every `return`, or an `nn.Sequential` whose last layer is one; the loss
    takes it directly or through one local name.
    """

    code = "GT760"
    name = "logits-into-binary-cross-entropy"
    message = ("`{model}` gives the raw output of its last `{layer}` layer, and `{loss}` (line "
               "{line}) wants probabilities in [0, 1]: it raises on the first batch whose "
               "values leave that range; apply torch.sigmoid here, or keep the logits and use "
               "BCEWithLogitsLoss")
    triggers = ("binary_cross_entropy", "BCELoss")
    examples = [
        Bad("""
            import torch.nn as nn

            net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
            criterion = nn.BCELoss()
            for x, y in loader:
                out = net(x)
                loss = criterion(out, y)
                loss.backward()
            """, at=(6, 10)),
        Good("""
            import torch
            import torch.nn as nn

            net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
            criterion = nn.BCELoss()
            for x, y in loader:
                out = torch.sigmoid(net(x))
                loss = criterion(out, y)
                loss.backward()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        lines_by_fn = _candidate_lines(node, ctx, (BCE,), ("BCELoss",))
        for fn, lines in lines_by_fn.items():
            scope = ctx.scope(fn)
            for call in (n for n in walk(fn) if isinstance(n, ast.Call) and n.lineno in lines
                         and n.args):
                q = ctx.qualified_name(call.func) or ""
                loss = q in BCE_CALLS
                if not loss and isinstance(call.func, ast.Call):
                    loss = (ctx.qualified_name(call.func.func) or "") in BCE_CALLS
                if not loss and isinstance(call.func, (ast.Name, ast.Attribute)):
                    k = ctx.analysis.kind(call.func, scope, call.lineno)
                    loss = k is not None and k.what == MODULE and (k.cls or "") in BCE_CALLS
                if not loss:
                    continue
                first = strip(bound_value(strip(call.args[0]), scope, call.lineno))
                if not isinstance(first, ast.Call) or _sigmoid(first, ctx) is not None:
                    continue
                layer = _model_softmax(first, scope, ctx, _affine, AFFINE)
                if layer is None:
                    continue
                cls = (_layer_class(layer, ctx) or ctx.qualified_name(
                    getattr(layer, "func", layer)) or "Linear").rpartition(".")[2]
                yield self.report(first, ctx, model=ctx.source(first)[:40], layer=cls,
                                  loss=dotted(call.func) or BCE, line=call.lineno,
                                  related=[Related(ctx.path, call.lineno,
                                                   "the loss that wants probabilities",
                                                   ctx.column(call))])
