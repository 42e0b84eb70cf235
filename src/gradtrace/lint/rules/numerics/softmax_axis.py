"""GT764: softmax weights normalised over one axis and summed over another."""
from __future__ import annotations

import ast
import re
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.nodes import scope_nodes, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import node_mentions
from gradtrace.lint.rules.numerics._ops import torch_op
from gradtrace.lint.analysis.caller_dims import last_axis_single
from gradtrace.lint.analysis.dims import arg, int_value
from gradtrace.lint.analysis.routing import refined_in_loop
from gradtrace.lint.rules.numerics.singleton import softmax_call

WEIGHT_OPS = ("softmax", "softmin")  # (log_softmax gives log-weights, not weights)
WEIGHT_MODULES = frozenset({"torch.nn.Softmax", "torch.nn.Softmin",
                            "torch.nn.modules.activation.Softmax",
                            "torch.nn.modules.activation.Softmin"})
DROPOUTS = frozenset({"torch.nn.Dropout", "torch.nn.modules.dropout.Dropout"})
MATMULS = frozenset({"torch.matmul", "torch.bmm"})
SUMS = ("sum", "mean")
INT_LITERAL = re.compile(r"(?<![\w.\-])-?\d+(?![\w.])")
AXIS_ARG = re.compile(r"\s*(?:dim\s*=\s*)?(-?\d+)\s*$")
USES = ("@", "matmul", "bmm", "sum(", "mean(", "einsum(")  # what a function must spell to sum weights


def _sink(n: ast.AST) -> bool:
    """``n`` may sum weights (by its shape): ``a @ b``, ``matmul``/``bmm``, ``.sum(d)`` or
    ``torch.sum``/``mean`` of a product."""
    if isinstance(n, ast.BinOp):
        return isinstance(n.op, ast.MatMult)
    if not isinstance(n, ast.Call):
        return False
    f = n.func
    name = f.attr if isinstance(f, ast.Attribute) else ""
    if name in ("matmul", "bmm") or name == "einsum" and len(n.args) >= 3:
        return True
    if name in SUMS:
        x = n.args[0] if n.args and not isinstance(f.value, ast.BinOp) else f.value  # type: ignore
        return isinstance(x, ast.BinOp) and isinstance(x.op, ast.Mult)
    return False


def _module_fields(cls: ast.ClassDef, lines: frozenset[int]) -> list[str]:
    """``X`` of each ``self.X = ...`` of the class's methods on one of ``lines`` (a softmax
    module kept on ``self``: the other methods call it)."""
    out = []
    for m in cls.body:
        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for st in m.body:
                if isinstance(st, ast.Assign) and any(
                        st.lineno <= ln <= (st.end_lineno or st.lineno) for ln in lines):
                    out += [t.attr for t in st.targets if isinstance(t, ast.Attribute)
                            and isinstance(t.value, ast.Name) and t.value.id == "self"]
    return out


def _softish(e: ast.AST) -> bool:
    """``e`` holds a call spelled like a softmax, or of a ``self`` attribute (a module)."""
    for n in walk(e):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in WEIGHT_OPS or isinstance(f, ast.Attribute) and isinstance(
                    f.value, ast.Name) and f.value.id == "self":
                return True
    return False


def _weight_names(nodes: list[ast.AST]) -> set[str]:
    """Names bound (by spelling: two steps) from a softmax-like call, or from a call given
    such a name (``w = self.drop(w)``)."""
    assigns = [(t.id, n.value) for n in nodes if isinstance(n, ast.Assign)
               for t in n.targets if isinstance(t, ast.Name)]
    out = {name for name, v in assigns if _softish(v)}
    for name, v in assigns:
        if isinstance(v, ast.Call) and any(isinstance(a, ast.Name) and a.id in out
                                           for a in v.args):
            out.add(name)
    return out


def _operands(n: ast.AST) -> list[ast.AST]:
    if isinstance(n, ast.BinOp):
        return [n.left]
    f = n.func  # type: ignore[attr-defined]
    if f.attr == "einsum":
        return n.args[1:]  # type: ignore[attr-defined]
    if f.attr in SUMS:
        x = n.args[0] if n.args and not isinstance(f.value, ast.BinOp) else f.value  # type: ignore
        return [x.left, x.right]
    return n.args[:1]  # type: ignore[attr-defined]


def _operand_may_weigh(o: ast.AST, names: set[str]) -> bool:
    r = _reshape(o)
    if r is not None:
        o = r[0]
    return isinstance(o, ast.Name) and o.id in names or isinstance(o, ast.Call) and _softish(o)


def _soft_calls(code: str) -> Iterator[int]:
    """The offsets just after each ``softmax(`` / ``Softmax(`` / ``softmin(`` of the code (not
    ``log_softmax(``): ``str.find`` scans, much faster here than a regular expression."""
    i = code.find("oftm")
    while i != -1:
        tail = code[i + 4:i + 7]
        before = code[i - 2] if i >= 2 else " "
        if tail in ("ax(", "in(") and i > 0 and code[i - 1] in "Ss" \
                and not (before.isalnum() or before == "_"):
            yield i + 7
        i = code.find("oftm", i + 4)


def _axis_lines(ctx: Context) -> frozenset[int]:
    """Lines of the file's code that spell a softmax/softmin call or module over a literal
    axis other than -1 (``softmax(x, dim=1)``, ``x.softmax(-2)``, ``nn.Softmax(dim=0)``): by
    spelling only, one scan per file before any walk or data flow."""
    def make() -> frozenset[int]:
        code = ctx.code
        out: set[int] = set()
        for at in _soft_calls(code):
            if not any(x.group() != "-1" for x in INT_LITERAL.finditer(code, at, at + 100)):
                continue  # no literal int but -1 near the call
            depth, i, args, start = 1, at, [], at
            while depth and i < len(code) and i - at < 200:
                c = code[i]
                if c in "([{":
                    depth += 1
                elif c in ")]}":
                    depth -= 1
                if depth == 0 or depth == 1 and c == ",":
                    args.append(code[start:i])
                    start = i + 1
                i += 1
            if any((v := AXIS_ARG.match(x)) is not None and int(v.group(1)) != -1 for x in args):
                out.add(code.count("\n", 0, at) + 1)
        return frozenset(out)
    return ctx.memo("gt764-lines", ctx.tree, make)


def _dropout(call: ast.Call, ctx: Context, scope: Scope) -> bool:
    """``F.dropout(x, ...)`` or a call of an ``nn.Dropout`` module: ``x`` scaled at random."""
    q = ctx.qualified_name(call.func) or ""
    if q in ("torch.nn.functional.dropout", "torch.dropout"):
        return True
    if isinstance(call.func, (ast.Name, ast.Attribute)):
        k = ctx.analysis.kind(call.func, scope, call.lineno)
        return k is not None and k.what == MODULE and (k.cls or "") in DROPOUTS
    return False


def _weights(e: ast.AST, ctx: Context, scope: Scope, line: int
             ) -> tuple[ast.Call, int, ast.AST] | None:
    """(softmax call, its dim, where the dim is written) when ``e`` is a softmax output:
    the call itself, or a name whose last binding before ``line`` is one."""
    for _ in range(4):  # through names and dropout: `w = self.drop(w)`
        if isinstance(e, ast.Name):
            b = scope.binding_before(e.id, line)
            if b is None or not isinstance(b.stmt, ast.Assign) or len(b.stmt.targets) != 1 \
                    or not isinstance(b.stmt.targets[0], ast.Name) or b.value is None:
                return None
            e, line = b.value, b.line
        elif isinstance(e, ast.Call) and e.args and _dropout(e, ctx, scope):
            e = e.args[0]
        else:
            break
    if not isinstance(e, ast.Call):
        return None
    got = softmax_call(e, ctx, scope)
    if got is None:
        return None
    _, dim, ctor = got
    if ctor is not None:
        if (ctx.qualified_name(ctor.func) or "") not in WEIGHT_MODULES:
            return None
    else:
        op = torch_op(e, ctx)
        if op is None or op[0] not in WEIGHT_OPS:
            return None
    d = int_value(dim)
    return None if d is None else (e, d, ctor if ctor is not None else e)


def _bound(e: ast.AST, scope: Scope, line: int) -> tuple[ast.AST, int]:
    """The value a plain name's one-target binding before ``line`` gives it (and that
    binding's line), else ``e`` itself."""
    if isinstance(e, ast.Name):
        b = scope.binding_before(e.id, line)
        if b is not None and isinstance(b.stmt, ast.Assign) and len(b.stmt.targets) == 1 \
                and isinstance(b.stmt.targets[0], ast.Name) and b.value is not None:
            return b.value, b.line
    return e, line


def _reshape(e: ast.AST) -> tuple[ast.expr, list[ast.expr]] | None:
    """(receiver, sizes) of ``x.view(a, b, c)`` / ``x.reshape(a, b, c)``, sizes listed."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in ("view", "reshape") and len(e.args) >= 2 and not e.keywords \
            and not any(isinstance(a, ast.Starred) for a in e.args):
        return e.func.value, e.args
    return None


def _reshaped_weights(e: ast.AST, ctx: Context, scope: Scope, line: int
                      ) -> tuple[ast.Call, int, ast.AST] | None:
    """A softmax over a leading axis of a reshaped score matrix, reshaped back with the same
    last size: ``w = softmax(s.view(b * n, m), dim=0).view(b, n, m)``. The last axis (``m``,
    spelled alike in both reshapes) is the one a matrix product sums; the softmax normalised
    another."""
    e, line = _bound(e, scope, line)
    got = _reshape(e)
    if got is None:
        return None
    w = _weights(got[0], ctx, scope, line)
    if w is None or w[1] < 0:
        return None
    src = softmax_call(w[0], ctx, scope)
    if src is None:
        return None
    inner, _ = _bound(src[0], scope, w[0].lineno)
    before = _reshape(inner)
    if before is None or w[1] >= len(before[1]) - 1 \
            or ast.dump(before[1][-1]) != ast.dump(got[1][-1]) \
            or isinstance(got[1][-1], ast.Constant) and got[1][-1].value == -1:
        return None
    return w


def _convention(ctx: Context, scope: Scope, dim: int) -> bool:
    """The function normalises two or more score tensors over the same axis ``dim``: a
    convention of the code (LightSANs' decoupled attentions), not a slip in one place."""
    def make() -> dict[int, int]:
        out: dict[int, int] = {}
        for n in scope_nodes(scope.node):
            if isinstance(n, ast.Call):
                w = _weights(n, ctx, scope, n.lineno)
                if w is not None and w[0] is n:  # the softmax itself, not a use of it
                    out[w[1]] = out.get(w[1], 0) + 1
        return out
    return ctx.memo("gt764-dims", scope.node, make).get(dim, 0) >= 2


class SoftmaxAxisNotSummed(Rule):
    """Softmax weights normalised over one axis are used to sum over another: the weights of
    each sum do not add up to 1.

    Why: `w = scores.softmax(dim=-2)` makes every *column* sum to 1, but `w @ v` sums over
    the *last* axis of `w` (each row): every output mixes the values with weights that add up
    to anything between 0 and the number of rows, and the scores get the gradient of that
    other normalisation. The same holds for `(w * v).sum(0)` after `Softmax(dim=1)` (the
    vision-transformer tutorial's attention over queries, External-Attention's SKAttention
    across the batch; checked on torch 2.13). Nothing fails: the model trains on a
    different function. Normalise over the axis that is summed (`dim=-1` for `w @ v`).
    Scores flattened to a matrix for the softmax and viewed back are read too:
    `w = softmax(s.view(b * n, m), dim=0).view(b, n, m)` (PyTorch-NLP's attention with
    `nn.Softmax(dim=0)`) normalises down the flattened rows, across the batch, while
    `torch.bmm(w, v)` sums the last axis `m`, which both reshapes spell alike. So is an
    `einsum` whose weights are normalised over a batch axis of the product, one in every
    operand and in the result, while it sums another (`logits.softmax(dim=0)` then
    `einsum("bnd,bnes->besd", x, w)`: each sample's weights depend on the other samples; the
    soft-MoE dispatch, checked on torch 2.13). A soft assignment normalised over clusters and
    summed over descriptors (`einsum("bnk,bnd->bkd", a, x)`, NetVLAD) keeps `k` out of `x`:
    not reported; nor is a mixture, `(p * q).sum(1)` with `p` normalised over dimension 1
    and `q` over another (KernelGAT's evidence weights times per-evidence class
    probabilities: the sum is a distribution over classes).
    Known limits: the weights must be used directly (the softmax call or a name bound to it in
    the same function, an `nn.Softmax(dim=...)` module the analysis knows, one reshape back);
    `w @ v`, `torch.matmul`/`torch.bmm` (the last axis of the left operand), `(w * v).sum(d)`
    with `d` and the softmax's dim literal ints of one sign, `torch.einsum` with a literal
    equation (no `...`) are read. A function that normalises two score tensors over the same
    axis is taken as following a convention.
    """

    code = "GT764"
    name = "softmax-axis-not-summed"
    message = ("`{src}` normalises over dimension {dim}, but {why}: the weights of each sum do "
               "not add up to 1; normalise over the summed axis")
    triggers = ("softmax", "Softmax", "softmin", "Softmin")
    examples = [
        Bad("""
            def attend(q, k, v):
                w = (q @ k.transpose(-2, -1)).softmax(dim=-2)
                return w @ v
            """, at=(2, 8)),
        Good("""
            def attend(q, k, v):
                w = (q @ k.transpose(-2, -1)).softmax(dim=-1)
                return w @ v
            """),
        Bad("""
            import torch
            def attend(scores, context):
                b, n, m = scores.shape
                w = torch.softmax(scores.view(b * n, m), dim=0)
                return torch.bmm(w.view(b, n, m), context)
            """, at=(4, 8)),
        Good("""
            import torch
            def attend(scores, context):
                b, n, m = scores.shape
                w = torch.softmax(scores.view(b * n, m), dim=1)
                return torch.bmm(w.view(b, n, m), context)
            """),
        Bad("""
            import torch
            def dispatch(x, logits):
                w = logits.softmax(dim=0)
                return torch.einsum("bnd,bns->bsd", x, w)
            """, at=(3, 8)),
        Good("""
            import torch
            def vlad(x, logits):
                a = logits.softmax(dim=-1)
                return torch.einsum("bnk,bnd->bkd", a, x)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        lines = _axis_lines(ctx)
        if lines:  # else the file spells no softmax over a literal axis but the last
            yield from self._body(node.body, lines, ctx)

    def _body(self, body: list[ast.stmt], lines: frozenset[int], ctx: Context
              ) -> Iterator[Finding]:
        """The functions of ``body`` (nested ones too) holding one of ``lines``; a class's
        methods all, when the class holds one (a softmax module of `__init__` reaches them)."""
        for s in body:
            if not isinstance(s, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            end = s.end_lineno or s.lineno
            if not any(s.lineno <= ln <= end for ln in lines):
                continue
            if isinstance(s, ast.ClassDef):
                fields = tuple(f"self.{a}(" for a in _module_fields(s, lines))
                for m in s.body:
                    if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        e = m.end_lineno or m.lineno
                        if any(m.lineno <= ln <= e for ln in lines) or fields \
                                and node_mentions(ctx, m, *fields):
                            yield from self._function(m, ctx)
                        yield from self._body(m.body, lines, ctx)
                    elif isinstance(m, ast.ClassDef):
                        yield from self._body([m], lines, ctx)
            else:
                yield from self._function(s, ctx)
                yield from self._body(s.body, lines, ctx)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context
                  ) -> Iterator[Finding]:
        if not node_mentions(ctx, node, *USES):
            return
        every = list(scope_nodes(node))
        nodes = [n for n in every if _sink(n)]
        if not nodes:
            return  # nothing sums weights here: no data flow needed
        names = _weight_names(every)
        if not any(_operand_may_weigh(o, names) for n in nodes for o in _operands(n)):
            return  # no sum reads a softmax or a name bound from one: no data flow needed
        scope = ctx.scope(node)
        for n in nodes:
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
                yield from self._matmul(n, n.left, False, ctx, scope)
            elif isinstance(n, ast.Call):
                yield from self._call(n, ctx, scope)

    def _call(self, node: ast.Call, ctx: Context, scope: Scope) -> Iterator[Finding]:
        q = ctx.qualified_name(node.func) or ""
        if q in MATMULS and len(node.args) == 2:
            yield from self._matmul(node, node.args[0], q == "torch.bmm", ctx, scope)
            return
        if q == "torch.einsum":
            yield from self._einsum(node, ctx, scope)
            return
        f = node.func
        if q in ("torch.sum", "torch.mean") and node.args:
            x, d = node.args[0], arg(node, 1, "dim")
        elif isinstance(f, ast.Attribute) and f.attr in SUMS and not (
                isinstance(f.value, ast.Name) and ctx.imports.is_imported(f.value.id)):
            x, d = f.value, arg(node, 0, "dim")
        else:
            return
        e = int_value(d)
        if e is None or not (isinstance(x, ast.BinOp) and isinstance(x.op, ast.Mult)):
            return
        ws = [_weights(op, ctx, scope, node.lineno) for op in (x.left, x.right)]
        if any(w is not None and w[1] == e for w in ws):
            return  # a mixture: the other factor's weights sum to 1 over `e`, this one is mixed
        for w in ws:
            if w is not None and w[1] != e and (w[1] < 0) == (e < 0):
                yield from self._report(node, w, f"the product is summed over dimension {e}",
                                        ctx, scope)
                return

    def _matmul(self, node: ast.AST, left: ast.AST, bmm: bool, ctx: Context, scope: Scope
                ) -> Iterator[Finding]:
        why = "the matrix product sums the weights' last axis"
        w = _weights(left, ctx, scope, node.lineno)  # type: ignore[attr-defined]
        if w is None:
            w = _reshaped_weights(left, ctx, scope, node.lineno)  # type: ignore[attr-defined]
            if w is not None:
                yield from self._report(node, w, why + " (the reshape keeps it last)",
                                        ctx, scope)
            return
        d = w[1]
        if (d < -1 or bmm and d in (0, 1)) and not last_axis_single(  # one context vector:
                softmax_call(w[0], ctx, scope)[0], scope, w[0].lineno, ctx):  # type: ignore
            yield from self._report(node, w, why, ctx, scope)  # (NOTE [caller dims])

    def _einsum(self, node: ast.Call, ctx: Context, scope: Scope) -> Iterator[Finding]:
        """``torch.einsum("bnd,bnes->besd", x, w)`` with ``w`` normalised over ``b``: a
        batch axis of the product (in every operand and in the result) while ``n`` is summed
        (a NetVLAD soft assignment over clusters, summed over descriptors, has the normalised
        axis in the result but not in the descriptors: not this)."""
        spec = node.args[0]
        if not isinstance(spec, ast.Constant) or not isinstance(spec.value, str) \
                or "->" not in spec.value or "." in spec.value:
            return
        ins, out = spec.value.replace(" ", "").split("->", 1)
        subs = ins.split(",")
        ops = node.args[1:]
        if len(subs) != len(ops) or len(ops) < 2:
            return
        for sub, op in zip(subs, ops):
            w = _weights(op, ctx, scope, node.lineno)
            if w is None or not -len(sub) <= w[1] < len(sub):
                continue
            axis = sub[w[1]]
            summed = [c for c in sub if c not in out]
            if summed and axis in out and all(axis in s for s in subs):
                yield from self._report(node, w, f"the einsum keeps axis `{axis}` as a batch "
                                        f"axis and sums over `{summed[0]}`", ctx, scope)
                return

    def _report(self, node: ast.AST, w: tuple[ast.Call, int, ast.AST], why: str, ctx: Context,
                scope: Scope) -> Iterator[Finding]:
        call, dim, where = w
        if _convention(ctx, scope, dim) or refined_in_loop(scope.node, call):
            return  # (NOTE [routing by agreement])
        said: set[int] = ctx.memo("gt764-said", ctx.tree, set)
        if id(where) in said:
            return
        said.add(id(where))
        yield self.report(where, ctx, related=(Related(
            ctx.path, node.lineno, "the weights are summed here",  # type: ignore[attr-defined]
            ctx.column(node)),), src=ctx.source(call), dim=dim, why=why)
