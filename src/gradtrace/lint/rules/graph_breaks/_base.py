"""The shared base of the rules that report a cut on the way to the loss (GT102-GT108).

Each concrete rule says which cut kinds it owns (:mod:`._paths`) and how to name the cut;
the base runs the loss-path analysis once per function and words the consequence from what
real PyTorch does: an error for a fully cut loss (pytorch-facts.md#no-graph-loss), silent
no-training for a partly cut one (pytorch-facts.md#partly-cut-graph) or after a
``requires_grad`` band-aid, zero gradients through ``round``.
"""
from __future__ import annotations

import ast
import bisect
import weakref
from typing import ClassVar, Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.project import handed_mentioning, imported_mentioning
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Rule
from gradtrace.lint.rules.graph_breaks._paths import (
    LOSS_FUNC_RE, Cut, LossPaths, Verdict, loss_paths, runs_layer,
)
from gradtrace.lint.analysis.vocabulary import is_model_name
from gradtrace.lint.names import dotted
from gradtrace.lint.analysis.cuts import is_functional_loss, is_loss_class
from gradtrace.lint.analysis.backpropagated import backpropagated
from gradtrace.lint.analysis.helper_cuts import cut_away, helper_band_aid
from gradtrace.lint.nodes import walk
from gradtrace.lint.excerpt import excerpt as short  # noqa: F401  (re-exported)

ELEMENT0 = ("`RuntimeError: element 0 of tensors does not require grad and does not have a "
            "grad_fn`")
ZERO_GRAD_OPS = frozenset({"round", "sign", "floor", "ceil", "trunc"})
# a file without any of these words holds no loss the analysis could find
# (statement visitors only see functions whose lines hold one: NOTE [triggers]; `forward` and
# `__call__` let the forward of a `*Loss` class in even when its body never says "loss")
SINK_WORDS = ("backward", "loss", "Loss", "criterion", "Criterion", "training_step",
              "forward", "__call__")


def _op_name(c: Cut) -> str:
    node = c.node
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute):
            return f.attr
        return f.id if isinstance(f, ast.Name) else ""
    return ""


class LossCutRule(Rule):
    """Base of the loss-path rules; concrete rules set ``code`` and ``cut_kinds``."""

    cut_kinds: ClassVar[frozenset[str]] = frozenset()
    gate_statements = True  # each function is analysed on its own (NOTE [triggers])
    # words a file must also hold for this rule's cut kinds to be possible at all
    file_needs: ClassVar[tuple[str, ...]] = ()

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        if not worth_reporting(node, ctx) or not (
                _file_has(ctx, self.file_needs) or _calls_away(ctx, node, self.file_needs)):
            return
        lp = loss_paths(ctx, node)
        # per file: a helper's cut is reached from each of its callers (NOTE [helper cuts])
        seen: set[int] = ctx.memo("gt1-reported-" + self.code, ctx.tree, set)
        for v in lp.verdicts:
            for _, cuts in v.cut_terms:  # one finding per term: its first cut of our kinds
                mine = sorted((c for c in cuts if c.kind in self.cut_kinds
                               and not _weight_next_to_cut(c, cuts, lp)),
                              key=lambda c: (not _cuts_model_output(c, lp), c.node.lineno,
                                             c.node.col_offset))
                if mine and id(mine[0].node) not in seen:
                    seen.add(id(mine[0].node))
                    found = self.finding(mine[0], v, lp, ctx)
                    if found is not None:
                        yield found

    def finding(self, c: Cut, v: Verdict, lp: LossPaths, ctx: Context) -> Finding | None:
        """The finding for cut ``c`` of verdict ``v`` (override for other message fields;
        None: not said after all)."""
        away = cut_away(ctx, c.node)  # a cut in another file: its code (NOTE [project index])
        return self.report(c.node, ctx, related=related_for(c, v, ctx),
                           expr=short(away.code if away else ctx.source(c.node)),
                           operand=short(away.operand if away else ctx.source(c.operand)),
                           consequence=consequence(v, lp, ctx))


def _weight_next_to_cut(c: Cut, cuts: tuple[Cut, ...], lp: LossPaths) -> bool:
    """``log_probs * advantages.detach()`` where ``log_probs`` is cut too (another kind): the
    detached factor is a deliberate weight, the other cut is the one that matters."""
    if c.kind != "detach" or all(o.kind == "detach" for o in cuts):
        return False
    st = lp.scope.statement_of(c.node)
    return st is not None and any(
        isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mult, ast.Div))
        and (n.left is c.node or n.right is c.node) for n in walk(st))


def _cuts_model_output(c: Cut, lp: LossPaths) -> bool:
    """The cut takes a model's output itself (``current_q.detach()`` with ``current_q =
    self.critic(s, a)``): when a loss is cut in several places (a TD target detached on purpose,
    and the prediction), that is the one to name."""
    e: ast.AST = c.operand
    if isinstance(e, ast.Name):
        b = lp.scope.binding_before(e.id, c.node.lineno)  # type: ignore[attr-defined]
        e = b.value if b is not None and b.value is not None else e
    if not isinstance(e, ast.Call):
        return False
    callee = dotted(e.func) or ""
    return is_model_name(callee) or runs_layer(e)


_LINES: weakref.WeakKeyDictionary[Context, dict[str, list[int]]] = \
    weakref.WeakKeyDictionary()
_WORTH: weakref.WeakKeyDictionary[Context, dict[int, bool]] = weakref.WeakKeyDictionary()


def _lines_with(ctx: Context, word: str) -> list[int]:
    """Sorted 1-based numbers of the lines holding ``word`` (computed once per file)."""
    per_file = _LINES.get(ctx)
    if per_file is None:
        per_file = _LINES[ctx] = {}
    hit = per_file.get(word)
    if hit is None:
        hit = per_file[word] = []
        text = ctx.code
        pos, line, prev = text.find(word), 1, 0
        while pos != -1:
            line += text.count("\n", prev, pos)
            prev = pos
            if not hit or hit[-1] != line:
                hit.append(line)
            pos = text.find(word, pos + 1)
    return hit


def _has_line(ctx: Context, word: str, start: int, end: int) -> bool:
    lines = _lines_with(ctx, word)
    if not lines:
        return False
    i = bisect.bisect_left(lines, start)
    return i < len(lines) and lines[i] <= end


def _calls_away(ctx: Context, node: ast.AST, words: tuple[str, ...]) -> bool:
    """Whether ``node`` calls a function of another file of the project whose text holds one
    of ``words`` (the cut may be there: NOTE [project index])."""
    if isinstance(node, ast.Module):
        return imported_mentioning(ctx, ctx.code, words)
    text = ctx.memo("gt1-code-of", node, lambda: "\n".join(
        ctx.code_lines[node.lineno - 1:node.end_lineno]))  # type: ignore[attr-defined]
    if imported_mentioning(ctx, text, words) or handed_mentioning(ctx, node, text, words):
        return True
    cls = ctx.analysis.class_of(node) if "self." in text else None  # `self.enc.encode(x)`,
    return cls is not None and imported_mentioning(ctx, ctx.memo(  # `self.enc` made in
        "gt1-code-of", cls.node, lambda: "\n".join(ctx.code_lines[  # another method
            cls.node.lineno - 1:cls.node.end_lineno])), words)


def _file_has(ctx: Context, words: tuple[str, ...]) -> bool:
    """Whether the file holds any of ``words`` (cached per file; empty ``words``: True)."""
    if not words:
        return True
    per_file = _WORTH.get(ctx)
    if per_file is None:
        per_file = _WORTH[ctx] = {}
    key = hash(words)
    hit = per_file.get(key)
    if hit is None:
        hit = per_file[key] = ctx.mentions(*words)
    return hit


def worth_reporting(node: ast.AST, ctx: Context) -> bool:
    """Cheap test before any data flow: could this function hold a loss at all?"""
    per_file = _WORTH.get(ctx)
    if per_file is None:
        per_file = _WORTH[ctx] = {}
    hit = per_file.get(id(node))
    if hit is None:
        hit = per_file[id(node)] = _worth_uncached(node, ctx)
    return hit


def _worth_uncached(node: ast.AST, ctx: Context) -> bool:
    if isinstance(node, ast.Module):  # module-level statements only (defs have their own)
        return bool(_lines_with(ctx, "backward(")) and any(
            _has_line(ctx, "backward(", s.lineno, s.end_lineno or s.lineno)
            for s in node.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                     ast.ClassDef)))
    name = getattr(node, "name", "").lower()
    if LOSS_FUNC_RE.match(name):
        return True
    if name in ("forward", "__call__") and is_loss_class(ctx.class_def, ctx):
        return True
    body = getattr(node, "body", None) or [node]
    start, end = body[0].lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
    if name == "forward" and _has_line(ctx, ".data", start, end):
        return True
    if name == "forward" and _has_line(ctx, "detach", start, end) and any(
            isinstance(n, ast.Call) and is_functional_loss(ctx.qualified_name(n.func) or "")
            for n in walk(node)):  # a loss it may return beside its output
        return True
    return _has_line(ctx, "backward(", start, end) or (
        bool(_lines_with(ctx, "backward(")) and id(node) in backpropagated(ctx))


def bandaid_line(v: Verdict, lp: LossPaths) -> int | None:
    """The line where ``requires_grad`` was forced on the cut loss, if any."""
    for b in band_aids(v, lp):
        return b.lineno  # type: ignore[attr-defined, no-any-return]
    for _, cuts in v.cut_terms:  # inside a helper that cut it (NOTE [helper cuts])
        for c in cuts:
            for name, _ in c.via:
                forced = helper_band_aid(lp.ctx, name[:-2]) if name.endswith("()") else None
                if forced is not None:
                    return forced.lineno  # type: ignore[attr-defined, no-any-return]
    return None


def band_aids(v: Verdict, lp: LossPaths) -> list[ast.AST]:
    """``x.requires_grad = True`` / ``x.requires_grad_()`` / ``requires_grad=True`` re-wraps
    on the names the (fully cut) loss of ``v`` is built from, in source order."""
    if not v.full or v.sink.how != "backward":
        return []
    return _forcings(v, lp)


def _forcings(v: Verdict, lp: LossPaths) -> list[ast.AST]:
    """:func:`band_aids` for a backward or a returned loss (the return statement included)."""
    names = {name for _, cuts in v.cut_terms for c in cuts for name, _ in c.via}
    # the cut itself re-wrapped in place: `torch.as_tensor(helper(x)).requires_grad_()`
    names |= {lp.ctx.source(c.node) for _, cuts in v.cut_terms for c in cuts}
    root = lp.ctx.source(v.sink.value)
    names.add(root)
    line = v.sink.node.lineno  # type: ignore[attr-defined]
    out: list[ast.AST] = []
    for s in lp.scope.stmts:
        if s.lineno > line or s.lineno == line and v.sink.how != "return":
            break
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            t = s.targets[0]
            if isinstance(t, ast.Attribute) and t.attr == "requires_grad" and \
                    lp.ctx.source(t.value) in names and _is_true(s.value):
                out.append(s)
                continue
        for n in walk(s):
            if isinstance(n, ast.Call) and _forces_grad(n, lp, names):
                out.append(n)
    return out


def _is_true(e: ast.expr | None) -> bool:
    return isinstance(e, ast.Constant) and e.value is True


def _forces_grad(n: ast.Call, lp: LossPaths, names: set[str]) -> bool:
    f = n.func
    if isinstance(f, ast.Attribute) and f.attr == "requires_grad_":
        return lp.ctx.source(f.value) in names and (not n.args or _is_true(n.args[0]))
    wraps = (lp.ctx.qualified_name(f) or "") in ("torch.tensor", "torch.as_tensor",
                                                 "torch.autograd.Variable", "torch.Tensor")
    return wraps and bool(n.args) and any(
        k.arg == "requires_grad" and _is_true(k.value) for k in n.keywords) and \
        _derived(lp, n.args[0], n)


def _derived(lp: LossPaths, arg: ast.expr, call: ast.Call) -> bool:
    """Whether a re-wrapped value came from the graph (live, or cut on its way)."""
    t = lp.trace(arg, lp.scope.statement_of(call), call.lineno)
    return t.live or bool(t.cuts)


def consequence(v: Verdict, lp: LossPaths, ctx: Context) -> str:
    """What real PyTorch does with this loss, in words."""
    sink = v.sink
    line = sink.node.lineno  # type: ignore[attr-defined]
    name = short(ctx.source(sink.value), 30)
    if v.part:
        return (f"the copy is a constant in the loss `{name}` (line {line}), added to values "
                f"that keep their graph or taken on one path, so backward runs and nothing "
                f"that made the copied values gets a gradient through it")
    if not v.full:
        return (f"this term of the loss `{name}` (line {line}) has no path left to the model, "
                f"so it adds nothing to any gradient: backward runs and the layers that "
                f"produced it get no gradient from it")
    zero = any(_op_name(c) in ZERO_GRAD_OPS for _, cuts in v.cut_terms for c in cuts)
    if zero:
        return (f"the loss `{name}` (line {line}) reaches the model only through "
                f"rounding/sign steps whose gradient is zero, so backward runs and nothing "
                f"trains")
    if sink.how == "return" and sink.only is not None:
        return (f"`forward` returns it (line {line}) without history, so no layer before it "
                f"gets a gradient through this module's output")
    if sink.how == "return":
        if v.full and _forcings(v, lp):
            return (f"the loss returned at line {line} has no path left to the model and "
                    f"`requires_grad` is forced on it: `backward()` on it runs and no "
                    f"parameter gets a gradient")
        return (f"the loss returned at line {line} has no path left to the model: "
                f"`backward()` on it raises {ELEMENT0}")
    forced = bandaid_line(v, lp)
    if forced is not None:
        return (f"nothing of `{name}` is left on the graph; since `requires_grad` is forced at "
                f"line {forced}, `backward()` (line {line}) runs and no parameter gets a "
                f"gradient")
    if all(c.kind == "number" for _, cuts in v.cut_terms for c in cuts) and \
            _starts_as_number(sink.value, lp):  # `loss = 0` then `loss -= x.item() * r`
        return (f"nothing of `{name}` is left on the graph: `backward()` (line {line}) raises "
                f"`AttributeError: 'float' object has no attribute 'backward'` when it is a "
                f"Python number, {ELEMENT0} when it is a tensor")
    return (f"nothing of `{name}` is left on the graph, so `backward()` (line {line}) raises "
            f"{ELEMENT0}")


def _starts_as_number(value: ast.AST, lp: LossPaths) -> bool:
    """The loss is a name first bound to a Python number (then accumulated)."""
    name = value.id if isinstance(value, ast.Name) else None
    bs = lp.scope.bindings.get(name or "", ())
    return bool(bs) and isinstance(bs[0].value, ast.Constant) and \
        isinstance(bs[0].value.value, (int, float))


def related_for(c: Cut, v: Verdict, ctx: Context) -> tuple[Related, ...]:
    """From the symptom (the backward or return) back along the names to the cut."""
    sink = v.sink
    line = sink.node.lineno  # type: ignore[attr-defined]
    value = short(ctx.source(sink.value), 40)
    if sink.how == "backward":
        what = f"`backward()` is called on `{value}` here"
    elif sink.only is not None:
        what = f"`forward` returns `{value}` here"
    else:
        what = f"the loss `{value}` is returned here"
    out = [Related(ctx.path, line, what, ctx.column(sink.node))]
    for i, (name, ln) in enumerate(c.via):
        nxt = c.via[i + 1][0] if i + 1 < len(c.via) else short(ctx.source(c.node), 40)
        if nxt == name or ln == c.node.lineno:
            continue  # a name built from itself, or the finding's own line
        text = ctx.line_text(ln)
        what = f"`{name}` is called here and returns what `{nxt}` cut" \
            if name.endswith("()") else f"`{name}` is built from `{nxt}` here"
        out.append(Related(ctx.path, ln, what, len(text) - len(text.lstrip())))
    away = cut_away(ctx, c.node)
    if away is not None:  # the cut is in a function of another file (NOTE [project index])
        out.append(Related(away.path, away.line, f"`{away.helper}` cuts the graph here: "
                           f"`{short(away.code, 40)}`"))
    return tuple(out)
