"""GT607: a block whose first layer is an in-place activation overwrites its caller's input,
which something else still reads."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.input_writes import (
    InputWrite, aliased_rewrite, input_writers, reads, spells_inplace_layer,
)
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.modules import _own_statements
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.statement_shapes import exit_after


class InplaceFirstLayerOverwritesInput(Rule):
    """The first layer of a block is an in-place activation (`nn.Sequential(nn.ReLU(inplace=True),
    conv, ...)`), so calling the block overwrites its input, and that input is read again: by
    a skip connection in `forward` (`out = self.conv(x); out += x`) or by other code of the
    caller (`classifier(emb)` next to `F.normalize(emb)`).

    Why: an in-place activation writes its result into the tensor it is given; first in a
    block, that tensor is the block's input, which belongs to the caller. The skip connection
    then adds `relu(x)` instead of `x` (vq-vae-2#60: a residual stack that computes something
    else than intended, silently), and an operation that saved the input for backward makes
    backward raise "one of the variables needed for gradient computation has been modified by
    an inplace operation" (powerful-benchmarker#78). Build the first activation with
    `inplace=False` (in-place activations are safe after a layer that made a new tensor).
    The input may also reach the in-place layer after other uses of it, on one branch, and be
    read again under an alias kept for the skip (`identity = x` / `out = self.relu(x)` /
    `out += identity`: the skip adds `relu(x)`); not when `forward` returns first.
    Known limits: the block must be an attribute of a class of this file called on `forward`'s
    first argument; another reader in the caller is seen only in the
    same function as the call.
    """

    code = "GT607"
    name = "inplace-first-layer-overwrites-input"
    message = ("`{layer}` is the first layer of `{owner}`: calling it overwrites the block's "
               "input in place, and that input ({what}) is read again at line {line}: it sees "
               "the activated values (or backward fails if it saved them); build the first "
               "activation with `inplace=False`")
    triggers = ("inplace", "True")
    examples = [
        Bad("""
            import torch.nn as nn

            class ResBlock(nn.Module):
                def __init__(self, ch):
                    super().__init__()
                    self.conv = nn.Sequential(
                        nn.ReLU(inplace=True),
                        nn.Conv2d(ch, ch, 3, padding=1),
                    )

                def forward(self, x):
                    return self.conv(x) + x
            """, at=(7, 12)),
        Good("""
            import torch.nn as nn

            class ResBlock(nn.Module):
                def __init__(self, ch):
                    super().__init__()
                    self.conv = nn.Sequential(
                        nn.ReLU(),
                        nn.Conv2d(ch, ch, 3, padding=1),
                        nn.ReLU(inplace=True),
                    )

                def forward(self, x):
                    return self.conv(x) + x
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        writers = input_writers(ctx)
        if not writers and not spells_inplace_layer(ctx):
            return
        done: set[str] = set()
        for w in writers.values():
            again = _read_again_in_forward(w, ctx)
            if again is not None:
                done.add(w.cls)
                yield self._report(w, ctx, again, f"`{w.param}` of `{w.cls}.forward`")
        for name, cls in ctx.analysis.classes.items():
            got = aliased_rewrite(cls, ctx) if name not in done else None
            if got is not None:
                done.add(name)
                w, again = got
                alias = f", as `{again.id}`" if again.id != w.param else ""
                yield self._report(w, ctx, again, f"`{w.param}` of `{w.cls}.forward`{alias}")
        if not writers:
            return  # the callers' reads need a call of a writer class
        for fn in walk(node):
            if not isinstance(fn, (ast.Module, *FUNCTION_TYPES)):
                continue
            for call, other in _callers_reading_again(fn, writers, ctx):
                cls = ctx.analysis.kind(call.func, ctx.scope(fn), call.lineno).cls
                w = writers[cls]  # type: ignore[index]
                if w.cls in done:
                    continue
                done.add(w.cls)
                yield self._report(w, ctx, other, f"`{other.id}`, given to "
                                   f"`{ctx.source(call)[:40]}` at line {call.lineno}", call)

    def _report(self, w: InputWrite, ctx: Context, again: ast.Name, what: str,
                call: ast.Call | None = None) -> Finding:
        rel = [Related(ctx.path, again.lineno, f"`{again.id}` is read again here",
                       ctx.column(again))]
        if call is not None:
            rel.insert(0, Related(ctx.path, call.lineno, "the block is called on it here",
                                  ctx.column(call)))
        return self.report(w.layer, ctx, related=tuple(rel), layer=ctx.source(w.layer)[:40],
                           owner=f"{w.cls}.{w.attr}", what=what, line=again.lineno)


def _read_again_in_forward(w: InputWrite, ctx: Context) -> ast.Name | None:
    """A read of the input after the statement that gives it to the block (none when that
    statement, or one before the read, binds the name again, or the flow leaves ``forward``
    first)."""
    cls = ctx.analysis.classes[w.cls]
    fwd = cls.methods["forward"]
    after = False
    end: int | None = None
    scope = ctx.scope(fwd)
    for s in _own_statements(fwd):
        if s is not w.first and scope.exclusive(w.first, s):
            continue  # the other arm of `if self.a == 2: binary(x) / else: self.relu(x)`
        if s is w.first:
            if _binds(s, w.param):
                return None
            others = [r for r in reads(s, w.param) if not _is_block_arg(r, s, w)]
            if others:
                return others[0]
            after = True
            end = s.lineno if isinstance(s, (ast.Return, ast.Raise)) else exit_after(fwd, s)
            continue
        if not after:
            continue
        if end is not None and s.lineno > end:
            return None  # `if self.pre: return self.fc(self.drop(x))`: never read after
        got = reads(s, w.param)
        if got:
            return got[0]
        if _binds(s, w.param):
            return None
    return None


def _is_block_arg(r: ast.Name, s: ast.stmt, w: InputWrite) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == w.attr and dotted(n.func.value) == "self"
               and n.args and n.args[0] is r for n in bfs_walk(s))


def _binds(s: ast.stmt, name: str) -> bool:
    targets: list[ast.AST] = []
    if isinstance(s, ast.Assign):
        targets = list(s.targets)
    elif isinstance(s, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [s.target]
    return any(isinstance(n, ast.Name) and n.id == name for t in targets for n in bfs_walk(t))


def _callers_reading_again(fn: ast.AST, writers: dict[str, InputWrite], ctx: Context
                           ) -> Iterator[tuple[ast.Call, ast.Name]]:
    """Calls ``block(v)`` of a writer class in ``fn`` where the same binding of ``v`` is read
    by another statement of ``fn``."""
    scope = ctx.scope(fn)
    for s in scope.stmts:
        for call in (n for n in bfs_walk(s) if isinstance(n, ast.Call)):
            if not call.args or not isinstance(call.args[0], ast.Name) \
                    or not isinstance(call.func, (ast.Name, ast.Attribute)):
                continue
            k = ctx.analysis.kind(call.func, scope, call.lineno)
            if k is None or k.what != MODULE or k.cls not in writers:
                continue
            v = call.args[0].id
            mine = scope.binding_before(v, call.lineno)
            if mine is None:
                continue
            for s2 in scope.stmts:
                if s2 is s or isinstance(s2, (ast.If, ast.For, ast.While, ast.With, ast.Try,
                                              *FUNCTION_TYPES, ast.ClassDef)):
                    continue
                for r in reads(s2, v):
                    if r is not call.args[0] and scope.binding_before(v, r.lineno) is mine \
                            and not _later_pass(scope, call, mine.stmt, r):
                        yield call, r
                        break
                else:
                    continue
                break


def _later_pass(scope, call: ast.Call, bound: ast.stmt, r: ast.Name) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``r``, after a loop that binds the value and calls the block on it only under
    an ``if`` (DARTS's auxiliary head, on one cell's output of the loop of cells), reads the
    last pass's value, which the block may never have been given."""
    inner = set(map(id, scope.loops_of(r)))
    for loop in scope.loops_of(call):
        if id(loop) in inner or loop not in scope.loops_of(bound):
            continue
        if any(isinstance(n, ast.If) and any(m is call for m in walk(n))
               for n in walk(loop) if n is not loop):
            return True
    return False
