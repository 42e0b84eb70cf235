"""GT762, GT763: a softmax, or a cross-entropy, over a dimension the file shows has size one."""
from __future__ import annotations

import ast
import bisect
import re
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.nodes import holds_line, scope_nodes_on, statements, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.code_text import line_starts
from gradtrace.lint.rules.numerics._ops import torch_op
from gradtrace.lint.analysis.dims import (SEQUENTIAL, SOFTMAX_MODULES, Dims,
                                                   ShapeReader, arg, int_value)
from gradtrace.lint.excerpt import excerpt

CROSS_ENTROPY = frozenset({"torch.nn.CrossEntropyLoss", "torch.nn.modules.loss.CrossEntropyLoss"})
SOFTMAX_OPS = ("softmax", "log_softmax", "softmin")


def softmax_call(node: ast.Call, ctx: Context, scope: Scope
                 ) -> tuple[ast.expr, ast.expr | None, ast.Call | None] | None:
    """(input, dim, the module's constructor) when ``node`` is a softmax/log_softmax:
    ``torch.softmax(x, d)``, ``F.log_softmax(x, dim=d)``, ``x.softmax(d)`` (no constructor),
    an ``nn.Softmax(dim=d)`` module called (a name, a ``self`` attribute, or built in place)."""
    got = torch_op(node, ctx)
    if got is not None and got[0] in SOFTMAX_OPS:
        if (ctx.qualified_name(node.func) or "").startswith("torch."):
            return (node.args[0], arg(node, 1, "dim"), None) if node.args else None
        return got[1], arg(node, 0, "dim"), None
    ctor = module_ctor(node, ctx, scope, SOFTMAX_MODULES)
    if ctor is None or len(node.args) != 1:
        return None
    return node.args[0], arg(ctor, 0, "dim"), ctor


def module_ctor(node: ast.Call, ctx: Context, scope: Scope,
                classes: frozenset[str]) -> ast.Call | None:
    """The constructor of the module ``node`` calls when it is one of ``classes``: built in
    place (``nn.Softmax(dim=1)(x)``) or a name / ``self`` attribute the analysis knows."""
    f = node.func
    if isinstance(f, ast.Call):
        return f if (ctx.qualified_name(f.func) or "") in classes else None
    if isinstance(f, (ast.Name, ast.Attribute)):
        k = ctx.analysis.kind(f, scope, node.lineno)
        if k is not None and k.what == MODULE and (k.cls or "") in classes \
                and isinstance(k.node, ast.Call):
            return k.node
    return None


def named_calls(ctx: Context, classes: frozenset[str]) -> Iterator[tuple[ast.Call, Scope]]:
    """(call, its scope) for every call of a name or attribute that some assignment of the
    file binds to a constructor of ``classes`` (``self.criterion = nn.CrossEntropyLoss()``
    ... ``self.criterion(out, y)``): the statements of such calls need not spell a trigger
    word (NOTE [triggers])."""
    lasts = {c.rpartition(".")[2] for c in classes}
    if not ctx.mentions(*lasts):  # (cached per word: each rule asks of its classes)
        return  # no constructor of them is spelled (an alias keeps the class's name)
    names = set()
    fns: list[ast.AST] = [ctx.tree]
    for n in statements(ctx.tree):  # one pass: the bindings and the functions
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fns.append(n)
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) \
                and (n.value.func.__class__ is not ast.Attribute  # (its qualified name ends
                     or n.value.func.attr in lasts) \
                and (ctx.qualified_name(n.value.func) or "") in classes:  # in its attribute)
            for t in n.targets:
                if isinstance(t, ast.Name):
                    names.add(t.id)
                elif isinstance(t, ast.Attribute):
                    names.add(t.attr)
    if not names:
        return
    lines = call_lines(ctx, names)
    for fn in fns:
        if fn is not ctx.tree and not holds_line(
                lines, fn.lineno, fn.end_lineno or fn.lineno):  # type: ignore[attr-defined]
            continue
        scope = None
        for n in scope_nodes_on(fn, lines):  # (the statements on a call's line only)
            if isinstance(n, ast.Call) and not isinstance(n.func, ast.Call) and (
                    isinstance(n.func, ast.Name) and n.func.id in names
                    or isinstance(n.func, ast.Attribute) and n.func.attr in names) \
                    and holds_line(lines, n.lineno, n.lineno):
                scope = scope or ctx.scope(fn)
                yield n, scope


def call_lines(ctx: Context, names: set[str]) -> list[int]:
    """The sorted lines holding a call of one of ``names`` (``name(`` / ``name (``, the name a
    whole word). A line is searched only where a name starts a word: a line's match starts
    there (a name holds word characters only, and a line starts after a line break, so
    ``\\b`` holds in the line and in the code alike); one ``str.find`` scan of the code per
    name, the word start checked by hand as ``\\b`` does (a pattern opening with ``\\b`` has no
    first character to skip to: it was tried at every character of the file, 18x slower)."""
    alts = "|".join(map(re.escape, sorted(names)))
    called = re.compile(r"\b(?:%s)\s*\(" % alts)
    starts, code_lines, code = line_starts(ctx), ctx.code_lines, ctx.code
    seen: set[int] = set()
    for name in names:
        first = name[:1].isalnum() or name[:1] == "_"  # (`\w` is `str.isalnum` or `_`)
        pos = code.find(name)
        while pos != -1:
            if (pos > 0 and (code[pos - 1].isalnum() or code[pos - 1] == "_")) != first:
                seen.add(bisect.bisect_right(starts, pos) - 1)
            pos = code.find(name, pos + 1)
    return [i for i in sorted(seen) if called.search(code_lines[i - 1])]


def _callers_input(ctx: Context, seq: ast.Call) -> Dims | None:
    """What the ``nn.Sequential`` built by ``seq`` (assigned to ``self.<attr>``) is called
    with in its class: the first call whose input the file shows something about."""
    stmt = ctx.statement
    cls = ctx.class_def
    if cls is None or not isinstance(stmt, ast.Assign) or stmt.value is not seq \
            or len(stmt.targets) != 1:
        return None
    t = stmt.targets[0]
    if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
            and t.value.id == "self"):
        return None
    reader = ShapeReader(ctx)
    for fn in cls.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for n in walk(fn):
            if isinstance(n, ast.Call) and len(n.args) == 1 and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == t.attr and isinstance(n.func.value, ast.Name) \
                    and n.func.value.id == "self":
                got = reader.dims(n.args[0], ctx.scope(fn), n.lineno)
                if got is not None:
                    return got
    return None


class SoftmaxOverSingletonDim(Rule):
    """A softmax (or log_softmax) over a dimension of size one: every weight is exactly 1.0
    and the scores before it get an exactly zero gradient.

    Why: a softmax over one entry is `exp(s) / exp(s) = 1` whatever `s` is (log_softmax:
    0), so its derivative is 0. An attention scorer that gives one score per position
    (`nn.Linear(d, 1)`, a `Conv1d(c, 1, 1)`, `x @ w` with `w` of shape `(d, 1)`), normalised
    over that last (or channel) dimension of size one instead of over the positions, weighs
    every position 1.0 and never trains: its weights get a gradient of exactly 0 (catalyst
    TemporalAttentionPooling, KEQA, SwiftFormer; checked on torch 2.13). Nothing fails and the
    model still learns through its other paths. Normalise over the positions' dimension, or
    use a sigmoid when one independent score per entry is meant.
    Known limits: the size must be shown by the file (a layer's output features/channels of
    1, `unsqueeze`, `keepdim=True`, `view(..., 1)`, a `(d, 1)` parameter), through names bound
    in the same function and a module attribute's constructor; a front index (`dim=1`) is
    matched to the layer's last dimension only when the rank is shown too (`view(-1, d)`, a
    `transpose(1, 2)` before a Conv1d). A softmax over the batch dimension is not reported.
    """

    code = "GT762"
    name = "softmax-over-singleton-dim"
    message = ("`{src}` normalises over dimension {dim}, which has size 1 here: every weight is "
               "exactly 1.0 (log_softmax: 0.0) whatever the scores, and the gradient into the "
               "scores is exactly zero, so what made them never trains; normalise over the "
               "positions' dimension (or use a sigmoid for one independent score)")
    triggers = ("softmax", "Softmax", "softmin", "Softmin")
    examples = [
        Bad("""
            import torch.nn as nn
            import torch.nn.functional as F

            class Pool(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.score = nn.Linear(d, 1)

                def forward(self, h):
                    w = F.softmax(self.score(h), dim=-1)
                    return (w * h).sum(1)
            """, at=(10, 12)),
        Bad("""
            import torch.nn as nn

            class TemporalPooling(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.attn = nn.Sequential(nn.Conv1d(c, 1, kernel_size=1), nn.Softmax(dim=1))

                def forward(self, x):
                    x = x.transpose(1, 2)
                    return (x * self.attn(x)).sum(-1)
            """, at=(6, 66)),
        Good("""
            import torch.nn as nn
            import torch.nn.functional as F

            class Pool(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.score = nn.Linear(d, 1)

                def forward(self, h):
                    w = F.softmax(self.score(h), dim=1)
                    return (w * h).sum(1)
            """),
        Good("""
            import torch
            import torch.nn as nn

            class Gate(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.score = nn.Linear(d, 1)

                def forward(self, h):
                    return torch.sigmoid(self.score(h)) * h
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if (ctx.qualified_name(node.func) or "") in SEQUENTIAL:
            yield from self._sequential(node, ctx)
            return
        if isinstance(node.func, (ast.Name, ast.Attribute)) and torch_op(node, ctx) is None:
            return  # a module called by name: visit_Module
        yield from self._check(node, ctx, ctx.scope())

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        done: set[int] = set()
        for call, scope in named_calls(ctx, SOFTMAX_MODULES):
            for f in self._check(call, ctx, scope):
                if f.line not in done:  # one finding per constructor
                    done.add(f.line)
                    yield f

    def _check(self, node: ast.Call, ctx: Context, scope: Scope) -> Iterator[Finding]:
        got = softmax_call(node, ctx, scope)
        if got is None:
            return
        x, dim_e, ctor = got
        d = int_value(dim_e)
        if d is None:
            return
        dims = ShapeReader(ctx).dims(x, scope, node.lineno)
        if dims is None or not dims.has_one(d):
            return
        if ctor is None or ctor is node.func:
            yield self.report(node, ctx, src=excerpt(ctx.source(node)), dim=d)
        else:  # the module's dim was chosen where it was built
            yield self.report(ctor, ctx, src=excerpt(ctx.source(ctor)), dim=d, related=[Related(
                ctx.path, node.lineno, "it is called here on an input whose dimension "
                f"{d} has size 1", ctx.column(node))])

    def _sequential(self, seq: ast.Call, ctx: Context) -> Iterator[Finding]:
        """``nn.Sequential(nn.Linear(d, 1), nn.Softmax(dim=-1))``: the softmax layer; a
        front index is read with the rank of what the class calls the Sequential with."""
        if seq.keywords:
            return
        reader = ShapeReader(ctx)
        scope = ctx.scope()
        for i, layer in enumerate(seq.args):
            ctor = reader.ctor_of(layer, scope, seq.lineno)
            if ctor is None:
                return
            if i == 0 or (ctx.qualified_name(ctor.func) or "") not in SOFTMAX_MODULES:
                continue
            d = int_value(arg(ctor, 0, "dim"))
            if d is None:
                return
            base = _prefix(reader, seq, layer, None, scope)
            if base is not None and not base.has_one(d) and d >= 0:
                given = _callers_input(ctx, seq)
                base = _prefix(reader, seq, layer, given, scope) if given else None
            if base is not None and base.has_one(d):
                yield self.report(layer, ctx, src=excerpt(ctx.source(layer)), dim=d)
            return


def _prefix(reader: ShapeReader, seq: ast.Call, stop: ast.AST, given: Dims | None,
            scope: Scope) -> Dims | None:
    """``given`` through the layers of ``seq`` before ``stop``."""
    base: Dims | None = given
    for layer in seq.args:
        if layer is stop:
            return base
        ctor = reader.ctor_of(layer, scope, seq.lineno)
        if ctor is None:
            return None
        base = reader.through(ctor, base, scope, seq.lineno)
    return base


class CrossEntropyOverOneLogit(Rule):
    """`F.cross_entropy` / `nn.CrossEntropyLoss` on logits with a single class: the loss is
    always exactly 0 and nothing trains.

    Why: cross-entropy applies log_softmax over the class dimension (dim 1, or dim 0 for an
    unbatched input); over one class that is `log(1) = 0` for every sample, so the loss is 0
    and every gradient is 0 (checked on torch 2.13). A binary classifier with one output
    (`nn.Linear(d, 1)`) needs `binary_cross_entropy_with_logits` on that score, or two output
    features for cross-entropy.
    Known limits: the rank of the logits must be shown by the file (a `view(-1, 1)`, a
    Linear applied to a `view(b, d)`...), since the class dimension of a rank-3 output is not
    its last.
    """

    code = "GT763"
    name = "cross-entropy-over-one-logit"
    message = ("`{src}` takes cross-entropy over a class dimension of size 1: log_softmax over "
               "one class is 0, so the loss is always exactly 0 and no gradient flows; use "
               "`binary_cross_entropy_with_logits` for one score (or output one logit per class)")
    triggers = ("cross_entropy", "CrossEntropyLoss")
    examples = [
        Bad("""
            import torch.nn as nn
            import torch.nn.functional as F

            def train_step(x, y, head, opt):
                logits = head(x.view(x.size(0), -1)).view(-1, 1)
                loss = F.cross_entropy(logits, y)
                loss.backward()
                opt.step()
            """, at=(6, 11)),
        Bad("""
            import torch
            import torch.nn as nn

            clf = nn.Linear(20, 1)
            criterion = nn.CrossEntropyLoss()
            x = torch.randn(32, 20)
            loss = criterion(clf(x), torch.zeros(32, dtype=torch.long))
            loss.backward()
            """, at=(7, 7)),
        Good("""
            import torch
            import torch.nn as nn

            clf = nn.Linear(20, 2)
            criterion = nn.CrossEntropyLoss()
            x = torch.randn(32, 20)
            loss = criterion(clf(x), torch.zeros(32, dtype=torch.long))
            loss.backward()
            """),
        Good("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F

            clf = nn.Linear(20, 1)
            x = torch.randn(32, 20)
            loss = F.binary_cross_entropy_with_logits(clf(x).squeeze(1), torch.ones(32))
            loss.backward()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        q = ctx.qualified_name(node.func) or ""
        if q == "torch.nn.functional.cross_entropy" or isinstance(node.func, ast.Call):
            yield from self._check(node, ctx, ctx.scope())

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        for call, scope in named_calls(ctx, CROSS_ENTROPY):
            yield from self._check(call, ctx, scope)

    def _check(self, node: ast.Call, ctx: Context, scope: Scope) -> Iterator[Finding]:
        q = ctx.qualified_name(node.func) or ""
        if q != "torch.nn.functional.cross_entropy" \
                and module_ctor(node, ctx, scope, CROSS_ENTROPY) is None:
            return
        x = arg(node, 0, "input")
        if x is None:
            return
        dims = ShapeReader(ctx).dims(x, scope, node.lineno)
        if dims is None or dims.rank is None or dims.rank == 0:
            return
        if dims.has_one(1 if dims.rank >= 2 else 0):
            yield self.report(node, ctx, src=excerpt(ctx.source(node)))
