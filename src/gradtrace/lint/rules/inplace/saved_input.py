"""GT605: an in-place write into a tensor a layer saved as its *input* for backward."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import ascii_code
from gradtrace.lint.analysis.cuts import NO_HISTORY_METHODS
from gradtrace.lint.analysis.input_writes import first_layer as inplace_first_layer
from gradtrace.lint.analysis.input_writes import spells_inplace_layer
from gradtrace.lint.analysis.module_results import first_layer
from gradtrace.lint.analysis.modules import ClassInfo, _own_statements
from gradtrace.lint.analysis.trained_methods import runs_with_graph
from gradtrace.lint.analysis.paths import place, statement_paths
from gradtrace.lint.analysis.selectors import only_selects
from gradtrace.lint.context import LOOP_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import statements, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.numerics._ops import in_training
from gradtrace.lint.rules.inplace._passed_graph import differentiated_by_caller
from gradtrace.lint.rules.inplace._saving_ops import (
    SAVING_MODULES, _candidates, _has_graph, _own_candidates, _saves_it)
from gradtrace.lint.rules.inplace._self_saves import saved_by, unview as _unview

NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "retain_grad", "record_stream"})


def _written(s: ast.stmt) -> str | None:
    """The name ``s`` writes into in place: ``x += ...``, ``x[i] = ...``, ``x.add_(...)``."""
    if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) \
            and isinstance(s.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        return s.target.id
    if isinstance(s, ast.Assign) and len(s.targets) == 1 \
            and isinstance(s.targets[0], ast.Subscript) \
            and isinstance(s.targets[0].value, ast.Name):
        return s.targets[0].value.id
    if isinstance(s, (ast.Expr, ast.Return)) and isinstance(s.value, ast.Call) \
            and isinstance(s.value.func, ast.Attribute):  # `return x.mul_(w)` writes too
        call = s.value
        while isinstance(call.func.value, ast.Call) and isinstance(  # `x.mul_(a).add_(b)`
                call.func.value.func, ast.Attribute) and _inplace_method(call.func.value):
            call = call.func.value
        if isinstance(call.func.value, ast.Name) and _inplace_method(call):
            return call.func.value.id
    return None


def _inplace_method(call: ast.Call) -> bool:
    attr = call.func.attr  # type: ignore[attr-defined]
    return attr.endswith("_") and not attr.startswith("_") and attr not in NOT_WRITES


def _bound(s: ast.stmt) -> frozenset[str]:
    targets: list[ast.expr] = []
    if isinstance(s, ast.Assign):
        targets = s.targets
    elif isinstance(s, (ast.AnnAssign, *LOOP_TYPES[:2])):
        targets = [s.target]  # type: ignore[list-item]
    return frozenset(n.id for t in targets for n in walk(t)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))


class InplaceWriteToSavedInput(Rule):
    """`x += y` (or `x[i] = v`, `x.add_(...)`) after `x` was the input of a layer whose
    backward needs it: a convolution, `nn.Linear`, a norm layer, `torch.mm(weight, x)`.

    Why: to compute its weight gradient a layer saves its input; writing into that tensor in
    place afterwards bumps its version, and backward raises `RuntimeError: one of the
    variables needed for gradient computation has been modified by an inplace operation`
    (checked on torch 2.13 for Linear, Conv2d, BatchNorm, LayerNorm, `mm`/`*` with a
    Parameter). It happens when a side branch reads a tensor that the main branch then
    updates (`x_p = self.branch(x); x += self.shortcut(inp)`), and in loops that write into
    a tensor a previous pass multiplied (`b[i] = ...; y = y + torch.mm(W, b)`), and in
    one statement: `x += self.attn(self.ln_1(x))` (the norm saved `x`, the add writes it).
    Use the out-of-place form: `x = x + ...`, or `b = b.clone()` before the write.
    An in-place layer spells the write too: `x = self.act(x)` with `self.act =
    nn.ReLU(inplace=True)` (or a block starting with one) after `self.conv(x)` in the same
    block, in a method that runs with the module's graph (NOTE [trained methods]).
    An elementwise op or a reduction whose backward needs its input (`x.norm()`,
    `F.normalize`, `pow`, `log`, `abs`, `clamp`, `F.softplus`, `F.gelu`, `std`... not
    `exp`/`sqrt`/`tanh`/`sigmoid`/`softmax`, which save their output) saves it too, when that
    tensor carries a graph (a layer's result, or a parameter its callers give one:
    NOTE [values that require grad]): `z /= z.norm(dim=-1, keepdim=True)` (APRIL-GAN's patch
    tokens, a list element written through its own spelling), `h[:, 0] *= F.softplus(h[:, 0])`.
    So does a product of the tensor with itself (`h * h`, `h ** 2`) or a helper of the file
    that runs one on its arguments: `h /= torch.sqrt(_dot(h, h))` with `_dot(a, b)` returning
    `torch.sum(a * b, -1)` (kaolin#832); the tensor's graph is followed through the file's
    helper returns to a parameter its callers give one (NOTE [graph through helper returns]).
    A helper's local built by indexing and arithmetic from an argument its callers pass with
    grad, differentiated there by `torch.autograd.grad` (forces from an energy), counts too
    (NOTE [passed graph]): `v = x[i] - x[j]; v /= torch.norm(v, dim=1).unsqueeze(1)`.
    A product saves each operand for the other's gradient: `y = self.fc(x) * m` then
    `m.mul_(0.5)` (or `m.mul_(a).add_(b)`, or `return m.mul_(a)`) writes what `y`'s backward
    needs when the other operand requires grad (NOTE [product saves the other operand]).
    Known limits: the layer must be an `nn` layer (attribute or name) or a Parameter operand
    known in this file, and the saving call and the write must sit in the same block; an
    elementwise op counts only on a value known to require grad.
    """

    code = "GT605"
    name = "inplace-write-to-saved-input"
    message = ("`{write}` writes in place into `{name}`, which `{op}` (line {line}) saved as "
               "its input for backward: backward raises `one of the variables needed for "
               "gradient computation has been modified by an inplace operation`; {remedy}")
    triggers = ("+=", "-=", "*=", "/=", "]=", "] =", "_(")  # `x = self.act(x)`: visit_Module
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def _dot(a, b):
                return torch.sum(a * b, dim=-1, keepdim=True)

            def half_vector(light, view):
                h = light + view
                h /= torch.sqrt(_dot(h, h))
                return h

            light = torch.nn.Parameter(torch.randn(8, 3))
            half_vector(light, torch.randn(8, 3)).sum().backward()
            """, at=(8, 4)),
        Good("""
            import torch

            def _dot(a, b):
                return torch.sum(a * b, dim=-1, keepdim=True)

            def half_vector(light, view):
                h = light + view
                h = h / torch.sqrt(_dot(h, h))
                return h

            light = torch.nn.Parameter(torch.randn(8, 3))
            half_vector(light, torch.randn(8, 3)).sum().backward()
            """),
        Bad("""
            import torch.nn as nn

            class Embed(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = nn.Linear(16, 8)

                def forward(self, x):
                    z = self.proj(x)
                    z /= z.norm(dim=-1, keepdim=True)
                    return z
            """, at=(10, 8)),
        Good("""
            import torch.nn as nn

            class Embed(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = nn.Linear(16, 8)

                def forward(self, x):
                    z = self.proj(x)
                    z = z / z.norm(dim=-1, keepdim=True)
                    return z
            """),
        Bad("""
            import torch.nn as nn

            class TwoBranch(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
                    self.branch = nn.Conv2d(8, 8, 1)
                    self.shortcut = nn.Conv2d(3, 8, 1)

                def forward(self, inp):
                    x = self.conv1(inp)
                    x_p = self.branch(x)
                    x += self.shortcut(inp)
                    return x, x_p
            """, at=(13, 8)),
        Good("""
            import torch.nn as nn

            class TwoBranch(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
                    self.branch = nn.Conv2d(8, 8, 1)
                    self.shortcut = nn.Conv2d(3, 8, 1)

                def forward(self, inp):
                    x = self.conv1(inp)
                    x_p = self.branch(x)
                    x = x + self.shortcut(inp)
                    return x, x_p
            """),
        Good("""
            import torch.nn as nn

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(8, 8, 3, padding=1)

                def forward(self, x):
                    out = self.conv(x)
                    out += x
                    return out
            """),
    ]

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_Return(self, node: ast.Return, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, s: ast.stmt, ctx: Context) -> Iterator[Finding]:
        name = _written(s)
        fn = ctx.function or ctx.tree
        own = _saved_by_own_expr(s, ctx) if name is None or not isinstance(
            s, ast.AugAssign) else None
        if name is None and own is None or ctx.grad_disabled is not None:
            return  # (the grad mode is asked last: it builds the function's scope)
        if own is not None and in_training(ctx, s):
            yield self.report(s, ctx, related=(Related(
                ctx.path, own[1].lineno, f"`{own[0]}` is saved for backward here",  # type: ignore[attr-defined]
                ctx.column(own[1])),), write=ctx.source(s).splitlines()[0][:60],
                name=own[0], op=ctx.source(own[1])[:50], line=own[1].lineno,  # type: ignore[attr-defined]
                remedy=f"write `{own[0]} = {own[0]} / ...` (out of place) instead")
            return
        if name is None:
            return
        got = place(ctx, fn, s)  # (the path's last step, without indexing ``fn``)
        if got is None:
            return
        (pid, field, i), block = got
        hit = _saved_by_own_value(s, name, ctx)  # `x += self.attn(self.ln_1(x))`
        for prev in _before(ctx, fn, s, block[:i], pid) if hit is None else ():
            if name in ctx.memo("gt605-bound", prev, lambda: _bound(prev)):
                break
            hit = self._saved(prev, name, ctx)
            if hit is not None:
                if _output_never_differentiated(prev, hit, fn) or _under_cut(prev, hit) \
                        or only_selects(ctx.scope(), hit):
                    hit = None  # `y = self.ln(x)` read only as `y.detach()`, `x.abs() < eps`:
                    # no backward (NOTE [output never differentiated])
                break
        sym = {ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}.get(type(getattr(s, "op", None)), "+")
        remedy = f"write `{name} = {name} {sym} ...` (out of place) instead"
        if hit is None:  # a loop: saved later in the body, written again on the next pass
            loop = next((x for x in ctx.loops if id(x) == pid and field == "body"), None)
            if loop is None or name in ctx.memo("gt605-loop-bound", loop, lambda: frozenset(
                    ).union(*(_bound(x) for x in statements(loop)))):
                return
            for nxt in block[i + 1:]:
                hit = self._saved(nxt, name, ctx)
                if hit is not None:
                    remedy = (f"clone it first (`{name} = {name}.clone()` before the write) "
                              "or build a new tensor each pass")
                    break
        if hit is None or not (in_training(ctx, s) or ctx.grad_disabled is None
                               and differentiated_by_caller(ctx, ctx.function)):
            return
        yield self.report(s, ctx, related=(Related(
            ctx.path, hit.lineno, f"`{name}` is saved for backward here",  # type: ignore[attr-defined]
            ctx.column(hit)),), write=ctx.source(s).splitlines()[0][:60], name=name,
            op=ctx.source(hit)[:50], line=hit.lineno, remedy=remedy)  # type: ignore[attr-defined]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        """``x = self.act(x)`` with ``self.act`` an in-place layer (``nn.ReLU(inplace=True)``,
        a block starting with one: NOTE [input written in place]) after ``self.conv(x)``
        saved ``x`` in the same block, in a method that runs with the module's graph
        (NOTE [trained methods]): the write is spelt as a layer call, with no trigger word."""
        if not spells_inplace_layer(ctx):
            return
        for cls in ctx.analysis.classes.values():
            if not cls.is_module:
                continue
            for mname, fn in cls.methods.items():
                writes = list(_layer_writes(fn, cls, ctx)) if mname != "__init__" else []
                if not writes or not runs_with_graph(ctx, cls.name, mname):
                    continue
                for s, name in writes:
                    hit = _saved_by_layer_before(ctx, fn, s, name, cls)
                    if hit is None or ctx.scope(fn).grad_off_at(s) is not None:
                        continue
                    yield self.report(s, ctx, related=(Related(
                        ctx.path, hit.lineno, f"`{name}` is saved for backward here",
                        ctx.column(hit)),), write=ctx.source(s).splitlines()[0][:60],
                        name=name, op=ctx.source(hit)[:50], line=hit.lineno,
                        remedy="build the layer with `inplace=False`")

    @staticmethod
    def _saved(s: ast.stmt, name: str, ctx: Context) -> ast.AST | None:
        """The first op of ``s`` that saves ``name`` as its input (the candidates of each
        statement are found once, the kinds asked only for ``name``; not at all when the
        statement's code does not hold the name: NOTE [word gates])."""
        if ascii_code(ctx) and name not in ctx.memo("gt605-code", s, lambda: "\n".join(
                ctx.code_lines[s.lineno - 1:s.end_lineno])):
            return None
        for n, op, test in ctx.memo("gt605-candidates", s, lambda: _own_candidates(s, ctx)):
            if n == name and _saves_it(test, ctx, s.lineno):
                return op
        return None


def _before(ctx: Context, fn: ast.AST, s: ast.stmt, earlier: list[ast.stmt], pid: int
            ) -> Iterator[ast.stmt]:
    """The statements that run before ``s``, nearest first: ``earlier`` (its own block's),
    then, while that block is an arm of an ``if`` (or a ``with``/``try`` body), the statements
    before that ``if`` in its block, and so on out (NOTE [saved before the arm])."""
    yield from reversed(earlier)
    index = statement_paths(ctx, fn)
    path = index.paths.get(id(s), ())
    for depth in range(len(path) - 1, 0, -1):
        holder_id, _, _ = path[depth]
        outer = path[depth - 1]
        holder = index.blocks.get(outer[:2], [])[outer[2]] if outer[:2] in index.blocks else None
        if holder is None or id(holder) != holder_id or not isinstance(
                holder, (ast.If, ast.With, ast.AsyncWith, ast.Try)):
            return  # a loop's body runs again after what follows it: not followed out
        yield from reversed(index.blocks[outer[:2]][:outer[2]])


# NOTE [saved before the arm]
# `h = self.norm(x)` then `if gated: x = x + f(h) else: x += f(h)`: the norm saved `x` before
# the `if`, the arm writes it in place, backward raises (AOT's LSTT block, whose in-place
# branch is the default). An arm runs after everything before its `if`, so the search for the
# op that saved the written name goes on out of the arm, through the enclosing `if`s (and
# `with`/`try` bodies), and stops at a loop: a statement before the loop, in the same block,
# also ran before, but a rebinding later in the loop body is read on the next pass.


def _saved_by_own_value(s: ast.stmt, name: str, ctx: Context) -> ast.AST | None:
    """The op of the written value that saves ``name`` itself: ``x += self.attn(self.ln_1(x))``
    (LayerNorm saves ``x``, then the add writes it: nanoGPT#72), ``x[i] = self.fc(x)[i]``,
    ``x.add_(self.fc(x))``. ``x = x + self.fc(x)`` is no write; ``x += self.drop(x)`` saves no
    ``x`` (checked on torch 2.13)."""
    value = s.value.args if isinstance(s, (ast.Expr, ast.Return)) \
        and isinstance(s.value, ast.Call) \
        else [s.value] if isinstance(s, (ast.AugAssign, ast.Assign)) else []
    for v in value:
        receivers = [r for r in map(_cut_call, walk(v)) if r is not None]
        cut = {id(n) for r in receivers for n in walk(r)}  # `self.ln(x).detach()`
        for n, op, test in _candidates(v, ctx, name):
            if n == name and id(op) not in cut and _saves_it(test, ctx, s.lineno):
                return op
    return None


def _saved_by_own_expr(s: ast.stmt, ctx: Context) -> tuple[str, ast.AST] | None:
    """(the written spelling, the op) for ``t[i] /= t[i].norm(dim=-1, keepdim=True)``: an
    in-place write whose own value holds an op that saves the very tensor it writes
    (NOTE [ops that save the written tensor]; same spelling: a list element, an attribute),
    that tensor carrying a graph. The norm saved ``t[i]``, the division overwrites it: backward raises (APRIL-GAN's
    patch tokens)."""
    if isinstance(s, ast.AugAssign) and isinstance(s.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        target, values = s.target, [s.value]
    elif isinstance(s, (ast.Expr, ast.Assign, ast.Return)) and isinstance(s.value, ast.Call) \
            and isinstance(s.value.func, ast.Attribute) and s.value.func.attr.endswith("_") \
            and not s.value.func.attr.startswith("_") and s.value.func.attr not in NOT_WRITES:
        target, values = s.value.func.value, list(s.value.args)  # `x.div_(x.norm())`
    else:
        return None
    if not isinstance(target, (ast.Name, ast.Subscript, ast.Attribute)):
        return None
    base = _unview(target)  # `h[:, 0]`: a view of `h`, one version counter
    found = [(v, n, saved) for v in values for n in walk(v)
             if (saved := saved_by(n, ctx, base)) is not None]
    if not found:  # most writes: no saving op in their value, no spelling to compare
        return None
    spelt = ctx.source(base)
    for v, n, saved in found:
        cut = {id(x) for r in map(_cut_call, walk(v)) if r is not None for x in walk(r)}
        if id(n) not in cut and ctx.source(saved) == spelt \
                and _has_graph(target, ctx, s.lineno):
            return ctx.source(target), n
    return None


def _cut_call(n: ast.AST) -> ast.expr | None:
    """The receiver of ``r.detach()`` / ``r.item()`` (a result without history), else None."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
            and n.func.attr in NO_HISTORY_METHODS:
        return n.func.value
    return None


def _under_cut(s: ast.stmt, op: ast.AST) -> bool:
    """``op`` is inside the receiver of a cut of its own statement (``stdev =
    torch.sqrt(torch.var(x, 1) + 1e-5).detach()``, scaleformer's FiLM): its result leaves the
    graph there, so backward never runs the op and what it saved is never read."""
    return any(op is n for r in map(_cut_call, walk(s)) if r is not None for n in walk(r))


def _output_never_differentiated(s: ast.stmt, op: ast.AST, fn: ast.AST) -> bool:
    """``y = self.ln(x)`` whose ``y`` the function reads only as ``y.detach()`` (or
    ``.item()``...) or never: backward never runs the layer, so what it saved is never read
    (checked on torch 2.13: ``x += y.detach()`` after ``y = self.ln(x)`` trains)."""
    if not (isinstance(s, ast.Assign) and s.value is op and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)):
        return False
    target = s.targets[0].id
    receivers = {id(_cut_call(n)) for n in walk(fn) if _cut_call(n) is not None}
    return all(id(n) in receivers for n in walk(fn)
               if isinstance(n, ast.Name) and n.id == target and isinstance(n.ctx, ast.Load))


def _layer_writes(fn: ast.AST, cls: ClassInfo, ctx: Context) -> Iterator[tuple[ast.stmt, str]]:
    """(statement, name) for ``x = self.act(x)`` / ``self.act(x)``: a layer of ``cls`` whose
    first layer writes its input in place, given a bare name."""
    for s in _own_statements(fn):
        v = s.value if isinstance(s, (ast.Assign, ast.Expr)) else None
        if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)
                and isinstance(v.func.value, ast.Name) and v.func.value.id == "self"
                and v.args and isinstance(v.args[0], ast.Name)):
            continue
        info = cls.attrs.get(v.func.attr)
        if info is not None and not info.later \
                and inplace_first_layer(info.value, info.method, ctx) is not None:
            yield s, v.args[0].id


def _saved_by_layer_before(ctx: Context, fn: ast.AST, s: ast.stmt, name: str,
                           cls: ClassInfo) -> ast.AST | None:
    """A call ``self.<layer>(name)`` (a layer that saves its input) in a statement before
    ``s`` in its block, ``name`` not bound again in between."""
    got = place(ctx, fn, s)
    if got is None:
        return None
    (_, _, i), block = got
    for prev in reversed(block[:i]):
        if name in _bound(prev):
            return None
        for n, op, test in _own_candidates(prev, ctx):
            if n != name or test[0] != "module":
                continue
            info = cls.attrs.get(getattr(test[1][0], "attr", ""))
            if info is None or info.later or dotted(getattr(test[1][0], "value", None)) != "self":
                continue
            q = ctx.qualified_name(info.value.func) if isinstance(info.value, ast.Call) else None
            if q in SAVING_MODULES or first_layer(info.value, ctx, info.method) \
                    in SAVING_MODULES:
                if not _output_never_differentiated(prev, op, fn):
                    return op
    return None
