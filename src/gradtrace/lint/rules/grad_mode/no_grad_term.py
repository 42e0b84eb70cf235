"""GT218: one term of the loss is built only from a no-grad run of the model the step trains,
or from values with a graph read under no-grad."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.caller_backwards import caller_backwarded
from gradtrace.lint.analysis.cuts import is_loss_callee
from gradtrace.lint.analysis.grad_sources import Dead
from gradtrace.lint.analysis.helper_sources import HelperSources, grad_sources
from gradtrace.lint.analysis.model_calls import module_like
from gradtrace.lint.analysis.ranks import REDUCTIONS
from gradtrace.lint.analysis.reach import reaching
from gradtrace.lint.analysis.steps import backward_loss
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.graph_breaks._base import short
from gradtrace.lint.rules.graph_breaks._paths import loss_paths

GRAD_WORDS = ("no_grad", "inference_mode", "set_grad_enabled")


class NoGradRunOfTrainedModelAsLossTerm(Rule):
    """A term of the loss is built only from outputs of a model run under `no_grad`, while the
    same step also runs that model with grad for another term, or from values that carry a
    graph but are read under `no_grad`.

    Why: inside `torch.no_grad()` (or `inference_mode()`) PyTorch records no graph, so every
    value computed from that run is a constant. When a whole additive term of the loss
    (`loss = ce + 0.5 * consistency(f_u1, f_u2)`) is made only from such values, `backward()`
    runs without error (the other terms have a graph) and that term adds nothing to any
    gradient: the layers only that term was meant to train (a projection head, the unlabeled
    branch of a semi-supervised loss) never learn from it (pytorch-facts.md#partly-cut-graph;
    Ada-CM#8). A no-grad *target* next to a prediction with a graph (`mse(student(x), t)`),
    and a teacher that is never run with grad, are stop-gradients by design and are not
    reported: here the term has no input with a graph at all, and the model it comes from is
    the one the same step trains. The same holds for a term computed under `no_grad` from
    values the step made with grad (`feats = model(x)`, then `with torch.no_grad(): aux =
    head(feats)` added to the loss): the block cuts it from them, e.g. a perceptual loss
    whose features of the generated image are taken under `no_grad`
    (NOTE [term read under no_grad]). Compute those outputs with grad (detach only what must
    be a target, e.g. pseudo-labels from `logits.detach().argmax(1)`). Each such term of one
    loss is reported at its own block (a critic's score and a frozen encoder's embedding).
    Known limits: the no-grad block, the live run and the `backward()` (or the loss a
    Lightning `training_step` returns, or the loss a helper returns to a caller of the file
    that backpropagates it: NOTE [returned loss backpropagated by the caller]) are in one
    function; the term must be an additive part
    of the loss (through names bound once); a term coming from a helper that runs under
    `no_grad` is GT202's.
    """

    code = "GT218"
    name = "no-grad-run-of-trained-model-as-loss-term"
    gate_statements = "function"
    message = ("`{value}` is computed under `{mode}` {how} (line {live}): the loss term "
               "`{term}` is built only from no-grad values, so {sink} (line {line}) runs "
               "and that term trains nothing")
    triggers = ("backward", "training_step")
    # a helper holding the no-grad block returns the loss its caller backpropagates
    # (NOTE [returned loss backpropagated by the caller]): its statements are visited too
    statement_triggers = ("backward", "training_step", "no_grad", "inference_mode")
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F

            def train_step(model, x_l, y_l, x_u, x_u2, opt):
                logits = model(x_l)
                with torch.no_grad():
                    f1 = model(x_u)
                    f2 = model(x_u2)
                loss = F.cross_entropy(logits, y_l) + 0.5 * F.mse_loss(f1, f2)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(6, 4)),
        Bad("""
            import torch
            import torch.nn.functional as F

            def train_step(encoder, classifier, critic, x, y, d, opt):
                feats = encoder(x)
                cls_loss = F.cross_entropy(classifier(feats), y)
                with torch.no_grad():
                    domain_loss = F.binary_cross_entropy_with_logits(critic(feats), d)
                loss = cls_loss + 0.1 * domain_loss
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(7, 4)),
        Good("""
            import torch
            import torch.nn.functional as F

            def train_step(model, x_l, y_l, x_u, x_u2, opt):
                logits = model(x_l)
                with torch.no_grad():
                    target = model(x_u).softmax(-1)
                loss = F.cross_entropy(logits, y_l) + F.mse_loss(model(x_u2).softmax(-1), target)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """),
        Good("""
            import torch
            import torch.nn.functional as F

            def distill(student, teacher, x, y, opt):
                with torch.no_grad():
                    t1 = teacher(x)
                    t2 = teacher(x.flip(0))
                loss = F.cross_entropy(student(x), y) + F.mse_loss(t1, t2)
                loss.backward()
                opt.step()
            """),
    ]

    def visit_Return(self, node: ast.Return, ctx: Context) -> Iterator[Finding]:
        fn = ctx.function
        if fn is not None and fn.name != "training_step" and node.value is not None \
                and _has_no_grad_block(fn, ctx):
            # the caller backpropagates it: NOTE [returned loss backpropagated by the caller]
            part = caller_backwarded(ctx, fn, node)  # type: ignore[arg-type]
            if part is not None:
                yield from self._check(node, part, ctx)
            return
        if fn is not None and fn.name == "training_step" and node.value is not None:
            v = node.value
            if isinstance(v, ast.Dict):
                v = next((val for k, val in zip(v.keys, v.values)
                          if isinstance(k, ast.Constant) and k.value == "loss"), None)
            if v is not None:
                yield from self._check(node, v, ctx)

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if not (isinstance(node.func, ast.Attribute) and "backward" in node.func.attr):
            return
        loss = backward_loss(node, ctx)
        if loss is not None:
            yield from self._check(node, loss, ctx)

    def _check(self, sink: ast.AST, loss: ast.expr, ctx: Context) -> Iterator[Finding]:
        if ctx.grad_disabled is not None or not ctx.mentions(*GRAD_WORDS):
            return
        scope = ctx.scope()
        if not scope.no_grad:
            return
        use = scope.statement_of(sink)
        line = sink.lineno  # type: ignore[attr-defined]
        terms = list(loss_paths(ctx, scope.node).terms(loss, use, line))
        if len(terms) < 2:
            return
        src = grad_sources(ctx, scope.node)
        deps = [src.sources(t, line) for t in terms]
        if not any(d.live for d in deps):
            return  # all dead: GT201's; nothing live: not a training step we can read
        for term, d in zip(terms, deps):
            if d.live or d.unknown or d.explicit_grad or not d.dead \
                    or any(x.helper is not None for x in d.dead):
                continue
            got = _trained_run(d.dead, scope, ctx)
            if got is not None:
                dead, model, live = got
                how = f"by `{model}`, which this step also runs with grad"
                made = f"`{model}` runs with grad here"
            elif _scored(term, d.dead, ctx, scope) and (
                    got := _read_live(d.dead, src, scope, ctx)) is not None:
                dead, model, live = got  # NOTE [term read under no_grad]
                how = f"from `{model}`, which carries a graph"
                made = f"`{model}` is made with grad here"
            else:
                continue
            seen: set[int] = ctx.memo("gt218-reported", ctx.tree, set)
            if id(dead.off) in seen:
                continue
            seen.add(id(dead.off))
            value = _bound_name(dead.expr, scope) or short(ctx.source(dead.expr), 40)
            yield self.report(dead.off, ctx, related=(
                Related(ctx.path, live.lineno, made, ctx.column(live)),
                Related(ctx.path, line, "the loss is returned here to a caller that "
                        "backpropagates it" if isinstance(sink, ast.Return)
                        else "the loss is differentiated here", ctx.column(sink))),
                value=value, mode=_mode_text(dead.off, ctx), how=how, live=live.lineno,
                term=short(ctx.source(term), 40), line=line,
                sink="the caller's backward of what it returns" if isinstance(sink, ast.Return)
                else f"`{short(ctx.source(sink), 30)}`")
            # every term of the loss cut by its own grad-off block is named, not the first
            # only (conditional-musegan: the critic's term and the encoder's embedding term)


def _trained_run(dead: list[Dead], scope: Scope, ctx: Context
                 ) -> tuple[Dead, str, ast.Call] | None:
    """The first no-grad value that calls a model (``model(x)``, ``self.encoder(x)``) which the
    function also calls outside every grad-off region: ``(dead, model, live call)``. The
    callee must be one whose output carries a graph by NOTE [graph-carrying bindings] (bound
    to a module, or spelled like one): a builtin or a tokenizer run both ways
    (``dict(tok(texts))`` under the ``no_grad`` of a locality batch, EasyEdit's DINM) makes
    no graph with grad on either."""
    live_calls: dict[str, ast.Call] = {}
    for s in scope.stmts:
        if scope.grad_off_at(s) is not None or hasattr(s, "body"):
            continue
        for n in walk(s):
            if isinstance(n, ast.Call) and (name := _callee(n)) is not None \
                    and not _builtin(name, scope):
                live_calls.setdefault(name, n)
    for d in dead:
        for n in walk(d.expr):
            if isinstance(n, ast.Call) and (name := _callee(n)) is not None \
                    and name in live_calls and module_like(ctx, scope, name, n.lineno):
                return d, name, live_calls[name]
    return None


def _has_no_grad_block(fn: ast.AST, ctx: Context) -> bool:
    """``fn`` holds a ``with torch.no_grad():`` / ``inference_mode()`` block of its own."""
    def find() -> bool:
        return any(isinstance(n, (ast.With, ast.AsyncWith)) and any(
            (dotted(i.context_expr.func if isinstance(i.context_expr, ast.Call)
                    else i.context_expr) or "").rpartition(".")[2] in GRAD_WORDS[:2]
            for i in n.items) for n in walk(fn))
    return ctx.memo("gt218-no-grad-block", fn, find)


def _builtin(name: str, scope: Scope) -> bool:
    """``dict``, ``list``, ``len``: a Python builtin the function does not rebind."""
    import builtins
    return hasattr(builtins, name) and name not in scope.bindings


def _read_live(dead: list[Dead], src: HelperSources, scope: Scope, ctx: Context
               ) -> tuple[Dead, str, ast.AST] | None:
    """# NOTE [term read under no_grad]
    The first no-grad value (made in the function's own block, not a helper) that reads a
    local name bound outside every grad-off region to a value with a graph and nothing else
    (a model's output, a parameter, a loss): ``(dead, name, that binding's value)``.
    Modules (called or read for their attributes) are not such values; names whose sources
    are partly no-grad are not either; an argument alone is not such a value. The term must
    score something (``_scored``): a frozen model's raw output added to the loss as it comes
    is an offset by design (accelerate's noise model fed the loss)."""
    for d in dead:
        if d.helper is not None or not isinstance(d.off, (ast.With, ast.AsyncWith)):
            continue
        called = {id(n.func) for n in walk(d.expr) if isinstance(n, ast.Call)}
        for n in walk(d.expr):
            if not isinstance(n, ast.Name) or not isinstance(n.ctx, ast.Load) \
                    or id(n) in called or n.id in src.params:
                continue
            line = d.off.lineno
            bs = reaching(scope, n.id, n.lineno, scope.statement_of(n))
            if not bs or any(b.no_grad or b.value is None or b.stmt.lineno >= line
                             or scope.grad_off_at(b.stmt) is not None for b in bs):
                continue
            if module_like(ctx, scope, n.id, line):
                continue
            got = src.sources(n, line)
            if got.live and not got.dead and not got.explicit_grad:
                return d, n.id, bs[0].value
    return None


def _scored(term: ast.AST, dead: list[Dead], ctx: Context, scope: Scope) -> bool:
    """NOTE [term read under no_grad]: the term scores something (a loss function or a
    reduction in it, in the value a name of it is bound to once, or in its no-grad values),
    not a module's raw output added as it comes (a frozen noise model fed the loss: a
    constant offset by design)."""
    bound = [bs[0].value for n in walk(term) if isinstance(n, ast.Name)
             and len(bs := scope.bindings.get(n.id, ())) == 1
             and isinstance(bs[0].value, ast.expr)]
    for e in (term, *bound, *(d.expr for d in dead)):
        for n in walk(e):
            if isinstance(n, ast.Call) and (is_loss_callee(ctx, n.func) or getattr(
                    n.func, "attr", getattr(n.func, "id", None)) in REDUCTIONS):
                return True
    return False


def _callee(call: ast.Call) -> str | None:
    """``model`` for ``model(x)``, ``self.encoder`` for ``self.encoder(x)``: a called object,
    ``self`` for ``self(x)`` in a module's method; not a function of a namespace or a tensor
    method."""
    f = call.func
    name = dotted(f)
    if name is None or name == "super":
        return None
    if isinstance(f, ast.Name):
        return name
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self":
        return name
    return None


def _bound_name(expr: ast.AST, scope: Scope) -> str | None:
    s = scope.statement_of(expr)
    if isinstance(s, ast.Assign) and s.value is expr and len(s.targets) == 1:
        return dotted(s.targets[0]) or None
    return None


def _mode_text(off: ast.AST, ctx: Context) -> str:
    if isinstance(off, (ast.With, ast.AsyncWith)):
        return ctx.source(off.items[0].context_expr)
    return "@" + ctx.source(off)
