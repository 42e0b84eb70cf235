"""GT622: a block whose ``forward`` writes its input in place, handed a tensor that a layer of
the caller saved for backward."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import named_calls
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.steps import backward_of
from gradtrace.lint.analysis.write_spelling import body_may_write
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.inplace._ops import _statements
from gradtrace.lint.rules.inplace._saved import _eval_branch, _path_to, _rebinds
from gradtrace.lint.rules.inplace._saving_ops import SAVING_MODULES


@dataclass(frozen=True)
class BlockWrite:
    """``forward``'s first argument ``param`` is written in place by ``write``, under the
    name ``name`` (``param`` itself, or a plain alias bound at ``alias``)."""

    param: str
    name: str
    write: ast.stmt
    alias: ast.stmt | None


def _in_place(s: ast.stmt) -> str | None:
    """The name ``s`` writes in place: ``x += v``, ``x[i] = v``, ``x.add_(v)`` (a statement
    or a return)."""
    if isinstance(s, ast.AugAssign):
        t = s.target
        return dotted(t.value if isinstance(t, ast.Subscript) else t)
    if isinstance(s, ast.Assign) and len(s.targets) == 1 \
            and isinstance(s.targets[0], ast.Subscript):
        return dotted(s.targets[0].value)
    v = s.value if isinstance(s, (ast.Expr, ast.Return)) else None
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute):
        m = v.func.attr
        if m.endswith("_") and not m.startswith("_") and m not in (
                "requires_grad_", "retain_grad", "share_memory_", "record_stream"):
            return dotted(v.func.value)
    return None


def block_write(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> BlockWrite | None:
    """# NOTE [block writes its input]
    The first in-place write into ``forward``'s first argument, or into a plain alias of it
    (``out = x``), while the name still holds the caller's tensor: no rebinding of it (nor of
    the alias) comes first in the body's order, and the write is not in an eval-only branch."""
    a = fn.args
    params = [p.arg for p in (*a.posonlyargs, *a.args)][1:2]
    if not params:
        return None
    param = params[0]
    names: dict[str, ast.stmt | None] = {param: None}
    for s in _statements(fn.body):
        w = _in_place(s)
        if w in names and not _eval_branch(_path_to(fn.body, s)):
            return BlockWrite(param, w, s, names[w])
        if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Name) \
                and s.value.id in names:
            names[s.targets[0].id] = s
            continue
        for n in list(names):
            if _rebinds(s, n):
                del names[n]
        if not names:
            return None
    return None


def _writers(ctx: Context) -> dict[str, BlockWrite]:
    def make() -> dict[str, BlockWrite]:  # no word search of the argument's lines (it cost
        # more than reading each forward's statements: lead38); the forward's code spelling
        # no in-place write at all holds none (NOTE [write spelling]: three scans in C)
        out: dict[str, BlockWrite] = {}
        for name, info in ctx.analysis.classes.items():
            fwd = info.methods.get("forward")
            if info.is_module and fwd is not None and body_may_write(ctx, fwd):
                got = block_write(fwd)
                if got is not None:
                    out[name] = got
        return out
    return ctx.memo("gt622-writers", ctx.tree, make)


class BlockWritesSavedInput(Rule):
    """A block whose `forward` writes its input in place (`x += pos`, `out = x; out[:, :, :h]
    = ...`) is handed a tensor that a layer of the caller has already read:
    `a = self.conv(x); b = self.block(x)` (NOTE [block writes its input]).

    Why: a convolution, a Linear or a norm layer saves its input for the weight gradient;
    the block then writes that very tensor (its argument is the caller's object, and
    `out = x` is another name for it, not a copy), so backward raises `one of the variables
    needed for gradient computation has been modified by an inplace operation` (TSAN's CSB
    block writes its quadrants back into its input after the parallel branch's convolution
    read it; checked on torch 2.13). Copy first (`out = x.clone()`) or write out of place.
    The layer that saved it may be the block itself: the tensor handed to a writing block
    whose `forward` then passes it to one of its layers, and handed to a writing block
    again (two decoders on one code: NOTE [block saves what it wrote]); reported at the write.
    Known limits: the block must be a module class of the file called on a plain name, and
    the saving layer (a torch.nn layer of the file's classes, an attribute or a local) must
    read the same name earlier in the same function, with no rebinding in between.
    """

    code = "GT622"
    name = "block-writes-saved-input"
    message = ("`{block}.forward` writes its input in place ({how}), and `{arg}` was saved "
               "for backward by `{saver}` (line {line}) before `{call}` hands it over: "
               "backward raises 'one of the variables needed for gradient computation has "
               "been modified by an inplace operation'; copy it first (`.clone()`)")
    triggers = ("+=", "-=", "*=", "/=", "]=", "] =", "_(")
    examples = [
        Bad("""
            import torch.nn as nn

            class Shift(nn.Module):
                def forward(self, x):
                    out = x
                    out[:, 0] = 0.0
                    return out

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                    self.shift = Shift()

                def forward(self, x):
                    a = self.fc(x)
                    return a + self.shift(x)
            """, at=(5, 8)),
        Good("""
            import torch.nn as nn

            class Shift(nn.Module):
                def forward(self, x):
                    out = x.clone()
                    out[:, 0] = 0.0
                    return out

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                    self.shift = Shift()

                def forward(self, x):
                    a = self.fc(x)
                    return a + self.shift(x)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        writers = _writers(ctx)
        if not writers:
            return
        done: set[str] = set()
        for fn, spelt, cls in _uses(ctx, writers):
            for call in _own_calls(fn):
                if dotted(call.func) != spelt or not call.args \
                        or not isinstance(call.args[0], ast.Name) or cls in done:
                    continue
                scope = ctx.scope(fn)
                stmt = scope.statement_of(call)
                arg = call.args[0].id
                saver = _saved_before(arg, stmt, scope, ctx) if stmt is not None else None
                if saver is None and stmt is not None:  # NOTE [block saves what it wrote]
                    saver = _written_before(arg, call, stmt, scope, ctx, fn, writers)
                if saver is None or scope.grad_off_at(stmt) is not None \
                        or not _trained_at(fn, call, ctx):
                    continue
                done.add(cls)
                w = writers[cls]
                at = w.alias if w.alias is not None else w.write
                how = f"`{ctx.source(w.write).splitlines()[0][:40]}`" + (
                    f" through `{ctx.source(w.alias)}`" if w.alias is not None else "")
                yield self.report(at, ctx, related=(
                    Related(ctx.path, saver.lineno, f"`{arg}` is saved for backward here",
                            ctx.column(saver)),
                    Related(ctx.path, call.lineno, "the block is handed the saved tensor here",
                            ctx.column(call))),
                    block=cls, how=how, arg=arg, saver=ctx.source(saver)[:40],
                    line=saver.lineno, call=ctx.source(call)[:40])


def _uses(ctx: Context, writers: dict[str, BlockWrite]) -> list[tuple[ast.AST, str, str]]:
    """(a function to scan, how a call of an instance is spelt there, the writer class): an
    instance built as ``self.<attr> = Cls(...)`` is called as ``self.<attr>(...)`` in the
    methods of that class, one bound as ``blk = Cls(...)`` as ``blk(...)`` where it is bound
    (read from the construction sites: no other function is scanned)."""
    out: list[tuple[ast.AST, str, str]] = []
    for cls in writers:
        for call, where in named_calls(ctx, cls):
            stmt = ctx.scope(where).statement_of(call)
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and stmt.value is call):
                continue
            t = dotted(stmt.targets[0])
            if t and t.startswith("self.") and t.count(".") == 1:
                info = ctx.analysis.class_of(where)
                out.extend((m, t, cls) for m in (info.methods.values() if info else ()))
            elif isinstance(stmt.targets[0], ast.Name):
                out.append((where, t, cls))  # type: ignore[arg-type]
    return out


def _own_calls(fn: ast.AST) -> list[ast.Call]:
    """The calls of ``fn``'s own body (not of the functions and classes it defines)."""
    out: list[ast.Call] = []
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        n = todo.pop()
        if isinstance(n, (*FUNCTION_TYPES, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Call):
            out.append(n)
        todo.extend(ast.iter_child_nodes(n))
    return out


def _trained_at(fn: ast.AST, call: ast.Call, ctx: Context) -> bool:
    """``call`` runs with a graph that is differentiated: in the ``forward`` of a module class
    of the file, or before a ``backward()`` of the same function (or module body)."""
    if isinstance(fn, FUNCTION_TYPES) and fn.name == "forward":
        info = ctx.analysis.class_of(fn)
        return info is not None and info.is_module
    return any(n.lineno > call.lineno and backward_of(n, ctx) is not None
               for n in _own_calls(fn))


def _saved_before(name: str, stmt: ast.stmt, scope: object, ctx: Context) -> ast.Call | None:
    """A call of a saving torch.nn layer on ``name`` (``self.conv(x)``, ``conv(x)``) in a
    statement before ``stmt`` of the same function, ``name`` bound no later than it."""
    b = scope.binding_before(name, stmt.lineno)  # type: ignore[attr-defined]
    start = b.line if b is not None else 0
    for s in scope.stmts:  # type: ignore[attr-defined]
        if s.lineno >= stmt.lineno:
            break
        if s.lineno <= start or scope.grad_off_at(s) is not None:  # type: ignore[attr-defined]
            continue  # the binding's own reads see the value the name held before it
            # (`h = self.norm(h); h = self.block(h)`: the norm saved the old `h`)
        for n in ast.walk(s):
            if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name) \
                    and n.args[0].id == name and n is not stmt:
                k = ctx.analysis.kind(n.func, scope, n.lineno)
                if k is not None and k.what == MODULE and (k.cls or "") in SAVING_MODULES:
                    return n
    return None


def _written_before(name: str, call: ast.Call, stmt: ast.stmt, scope: object, ctx: Context,
                    fn: ast.AST, writers: dict[str, BlockWrite]) -> ast.Call | None:
    """# NOTE [block saves what it wrote]
    An earlier call, in the same function, of an instance of a writing block (the same one or
    another) on ``name``, whose ``forward`` hands the tensor it wrote to one of its layers
    (``token += self.pos; x = self.transformer(token)``): that layer saved the caller's tensor,
    and the second block's write changes it (two decoders run on one quantized code; checked
    on torch 2.13). ``name`` is not rebound between the two calls (the first may sit earlier in
    the same statement: ``left(code).sum() + right(code).sum()``)."""
    b = scope.binding_before(name, stmt.lineno)  # type: ignore[attr-defined]
    start = b.line if b is not None else 0
    spelt = {t: c for f, t, c in _uses(ctx, writers) if f is fn and _feeds_layer(ctx, c)}
    if not spelt:
        return None
    here = (call.lineno, call.col_offset)
    for s in scope.stmts:  # type: ignore[attr-defined]
        if s.lineno > stmt.lineno:
            break
        if s.lineno <= start and s is not stmt \
                or scope.grad_off_at(s) is not None:  # type: ignore[attr-defined]
            continue
        for n in ast.walk(s):
            if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name) \
                    and n.args[0].id == name and dotted(n.func) in spelt \
                    and (n.lineno, n.col_offset) < here:
                return n
    return None


def _feeds_layer(ctx: Context, cls: str) -> bool:
    """``cls.forward`` passes the tensor it wrote in place to a layer (``self.<attr>(x)``
    whose kind is a module), before binding that name anew."""
    def make() -> bool:
        w = _writers(ctx)[cls]
        fwd = ctx.analysis.classes[cls].methods["forward"]
        scope = ctx.scope(fwd)
        after = False
        for s in _statements(fwd.body):
            if s is w.write:
                after = True
                continue
            if not after:
                continue
            for n in ast.walk(s):
                if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name) \
                        and n.args[0].id == w.name:
                    k = ctx.analysis.kind(n.func, scope, n.lineno)
                    if k is not None and k.what == MODULE:
                        return True
            if _rebinds(s, w.name):
                return False
        return False
    return ctx.memo("gt622-feeds:" + cls, ctx.tree, make)
