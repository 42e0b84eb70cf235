"""GT619: an in-place write into a tensor made by `expand()` (several elements share one memory
location).

# NOTE [expanded tensors written in place]
``t.expand(g, c, c)`` / ``t.expand_as(x)`` / ``torch.broadcast_to(t, shape)`` give a view
whose broadcast dimensions have stride 0: every element along them is the same memory.
``copy_``, ``add_``, ``clamp_``, ``+=`` into it raise ``RuntimeError: unsupported operation:
more than one element of the written-to tensor refers to a single memory location. Please
clone() the tensor before performing the operation.`` (with grad on or off); a masked or
indexed assignment (``t[mask] = v``) is deprecated there (a warning) and, when ``t`` carries
a graph, its backward raises the same error (checked on torch 2.13). An expand to size 1
(``arange(n).expand(1, -1)``) shares nothing and is not reported; ``.clone()`` /
``.contiguous()`` / ``.repeat()`` copy.
Followed: a name of the function bound to such a view (and written in that function), and a
module attribute set to one (``self.register_buffer('w', eye.expand(g, c, c))``) written
through ``self.w`` in a method, or passed by position to a function of the file, a method
or an ``autograd.Function``'s ``apply`` whose parameter (``forward(ctx, *args)`` unpacked
into names too) is written.
"""
from __future__ import annotations

import ast
import bisect
from dataclasses import replace
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import says_any
from gradtrace.lint.rules.leaf._writes import in_place_writes, own_statements

EXPANDS = frozenset({"expand", "expand_as"})
WORDS = ("expand", "broadcast_to")
CALLS = (".expand(", ".expand_as(", "broadcast_to(")  # the spellings that make one
# in-place methods PyTorch runs on an expand (one value for all: fill_, zero_) or only warns
# about (masked_fill_, index_put_...): checked on torch 2.13
ALLOWED = frozenset({"fill_", "zero_", "masked_fill_", "index_fill_", "index_put_",
                     "masked_scatter_"}) | frozenset({  # and those that change only the shape
    "unsqueeze_", "squeeze_", "t_", "transpose_", "swapdims_", "swapaxes_", "as_strided_"})
KEEPS = frozenset({"transpose", "permute", "unsqueeze", "squeeze", "t", "movedim"})


def statements_holding(ctx: Context, words: tuple[str, ...]
                       ) -> Iterator[tuple[ast.stmt, ast.AST]]:
    """(statement, the function or module it runs in) for every statement (nested ones
    included, compound ones too) whose lines hold one of ``words``; only the statements around
    those lines are entered. Each word is found by its own ``str.find`` scan (a pattern of
    alternatives was tried at every ``.`` of the file): every occurrence, where the pattern
    skipped one inside another's match, which lies on its line (no word holds a line break)."""
    code = ctx.code
    at: list[int] = []
    for w in words:
        p = code.find(w)
        while p != -1:
            at.append(p)
            p = code.find(w, p + 1)
    at.sort()
    lines: list[int] = []
    line, pos = 1, 0
    for p in at:
        line += code.count("\n", pos, p)
        pos = p
        if not lines or lines[-1] != line:
            lines.append(line)
    if not lines:
        return
    tree = ctx.tree
    starts: dict[int, list[int]] = {}
    seen: set[int] = set()
    for line in lines:  # from the module down to the innermost statement holding the line
        body: list[ast.stmt] | None = tree.body  # type: ignore[attr-defined]
        scope: ast.AST = tree
        while body:
            st = starts.get(id(body))
            if st is None:
                st = starts[id(body)] = [c.lineno for c in body]
            i = bisect.bisect_right(st, line) - 1
            if i < 0:
                break
            s = body[i]
            if line > (s.end_lineno or s.lineno):
                break
            if id(s) not in seen:
                seen.add(id(s))
                yield s, scope
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scope = s
            elif isinstance(s, ast.ClassDef):
                scope = tree
            body = next((sub for sub in _bodies(s) if sub[0].lineno <= line
                         <= (sub[-1].end_lineno or sub[-1].lineno)), None)


def _bodies(s: ast.stmt) -> Iterator[list[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        sub = getattr(s, field, None)
        if isinstance(sub, list) and sub:
            yield sub
    for h in getattr(s, "handlers", ()):
        yield h.body
    for c in getattr(s, "cases", ()):
        yield c.body


def scopes_holding(ctx: Context, words: tuple[str, ...]) -> Iterator[ast.AST]:
    """The module, then every function (nested ones included) whose lines hold one of
    ``words``."""
    yield ctx.tree
    for s, _ in statements_holding(ctx, words):
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield s


def _trivial(args: list[ast.expr]) -> bool:
    """``expand(1, -1)``, ``expand((1, -1))``: sizes 1 or -1 only (nothing shared)."""
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = list(args[0].elts)
    return bool(args) and all(
        isinstance(a, ast.Constant) and a.value == 1
        or isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.USub)
        and isinstance(a.operand, ast.Constant) and a.operand.value == 1 for a in args)


def expanded(ctx: Context, v: ast.AST | None) -> bool:
    """``v`` is (a transpose/permute/unsqueeze of) an expand of size above one."""
    while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
            and v.func.attr in KEEPS:
        v = v.func.value
    if not isinstance(v, ast.Call):
        return False
    if isinstance(v.func, ast.Attribute) and v.func.attr in EXPANDS:
        return v.func.attr == "expand_as" or not _trivial(list(v.args))
    return ctx.qualified_name(v.func) == "torch.broadcast_to" and len(v.args) == 2 \
        and not _trivial([v.args[1]])


def _masked(s: ast.Subscript) -> bool:
    """An index that selects by mask or index tensor (not numbers, slices or names)."""
    parts = s.slice.elts if isinstance(s.slice, ast.Tuple) else [s.slice]
    return any(not isinstance(p, (ast.Slice, ast.Constant, ast.Name, ast.UnaryOp))
               for p in parts)


def _writes(stmt: ast.stmt) -> Iterator[ast.expr]:
    """Targets of the in-place writes of ``stmt`` that PyTorch refuses on an expand."""
    for target, what in in_place_writes(stmt):
        if what.strip("`.()") not in ALLOWED:
            yield target


def _written_name(target: ast.expr) -> str | None:
    """The name written as a whole (``t += 1``, ``t.copy_(x)``) or by mask (``t[m] = v``)."""
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
            and _masked(target):
        return target.value.id
    return None


def _self_attr(e: ast.AST) -> str | None:
    if isinstance(e, ast.Subscript) and _masked(e):
        e = e.value
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        return e.attr
    return None


def _writes_of(fn: ast.AST, name: str) -> ast.stmt | None:
    """The first statement of ``fn`` writing ``name`` in place (before any rebinding)."""
    for s in sorted(own_statements(fn.body), key=lambda s: s.lineno):  # type: ignore[attr-defined]
        for target in _writes(s):
            if _written_name(target) == name:
                return s
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                             for t in s.targets):
            return None
    return None


def _param_at(fn: ast.AST, pos: int, skip: int) -> str | None:
    """The parameter of ``fn`` given the ``pos``-th positional argument (``skip`` leading
    parameters: self, ctx), through ``a, b, c = args`` of a ``*args``."""
    a = fn.args  # type: ignore[attr-defined]
    params = [p.arg for p in a.posonlyargs + a.args][skip:]
    if pos < len(params):
        return params[pos]
    if a.vararg is None or params:
        return None
    star = a.vararg.arg
    for s in fn.body:  # type: ignore[attr-defined]
        if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Tuple) and isinstance(s.value, ast.Name) \
                and s.value.id == star and pos < len(s.targets[0].elts):
            t = s.targets[0].elts[pos]
            return t.id if isinstance(t, ast.Name) else None
    return None


class InplaceWriteToExpandedTensor(Rule):  # NOTE [expanded tensors written in place]
    """A tensor made by `expand()` (`torch.eye(c).expand(g, c, c)`, `row.view(1, k).expand(k,
    k)`, `expand_as`, `torch.broadcast_to`) is written in place: `t.copy_(...)`, `t += ...`,
    `t.clamp_(...)`, `t[mask] = v`.

    Why: the expanded dimensions have stride 0, so many elements are one memory location, and
    PyTorch refuses the write: `RuntimeError: unsupported operation: more than one element
    of the written-to tensor refers to a single memory location. Please clone() the tensor
    before performing the operation.` A masked assignment is deprecated there and its
    backward raises the same error when the tensor carries a graph (checked on torch 2.13:
    NOTE [expanded tensors written in place]). A buffer registered as an expand breaks the
    first in-place update of its running statistics (IterNorm's `running_wm`). Clone the
    expand (`.expand(...).clone()`) or build the full tensor (`repeat`).
    Known limits: expands to size 1 only (`expand(1, -1)`) are not reported; a write by
    number or slice index (`t[0] = v`) is not read; `fill_`, `zero_` (one value for every
    element: PyTorch runs them) and `masked_fill_` (a warning) are not reported; an
    attribute must be written through `self.<name>` or passed by position to a function,
    method or `Function.apply` of the file.
    """

    code = "GT619"
    name = "inplace-write-to-expanded-tensor"
    message = ("`{name}` is an `expand()` view (line {line}) whose elements share memory, and "
               "{where} writes it in place: raises `RuntimeError: unsupported operation: more "
               "than one element of the written-to tensor refers to a single memory "
               "location`; clone the expand first")
    message_indexed = (
        "`{name}` is an `expand()` view (line {line}) whose elements share memory, and this "
        "statement writes it by index: every element sharing the written ones changes too "
        "(whole broadcast rows), PyTorch only warns that this is deprecated, and when "
        "`{name}` carries a graph its backward raises `RuntimeError: unsupported operation: "
        "more than one element of the written-to tensor refers to a single memory location`; "
        "clone the expand first")
    triggers = ("expand", "broadcast_to")
    examples = [
        Bad("""
            import torch

            def floor_marginals(p, eps=1e-8):
                k = p.shape[0]
                cols = p.sum(dim=0).view(1, k).expand(k, k)
                cols.clamp_(min=eps)
                return cols
            """, at=(6, 4)),
        Good("""
            import torch

            def floor_marginals(p, eps=1e-8):
                k = p.shape[0]
                cols = p.sum(dim=0).view(1, k).expand(k, k).clone()
                cols.clamp_(min=eps)
                return cols
            """),
        Bad("""
            import torch
            import torch.nn as nn

            class Whitening(nn.Module):
                def __init__(self, groups, c):
                    super().__init__()
                    self.register_buffer("running_wm", torch.eye(c).expand(groups, c, c))

                def forward(self, x, wm):
                    if self.training:
                        with torch.no_grad():
                            self.running_wm.mul_(0.9).add_(0.1 * wm)
                    return x
            """, at=(7, 8)),
        Good("""
            import torch
            import torch.nn as nn

            class Positions(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.register_buffer("ids", torch.arange(n).expand((1, -1)))

                def forward(self, x):
                    self.ids += 0
                    return x
            """),
        Good("""
            import torch

            def positions(start, batch):
                ids = start.reshape(1, 1).expand(batch, 1)
                for step in range(4):
                    ids.fill_(step)
                return ids
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        scopes: list[ast.AST] = []
        attrs = False
        for s, scope in statements_holding(ctx, CALLS):
            if isinstance(s, ast.Assign) and expanded(ctx, s.value):
                if any(isinstance(t, ast.Name) for t in s.targets) and scope not in scopes:
                    scopes.append(scope)
                attrs = attrs or any(isinstance(t, ast.Attribute) for t in s.targets)
            elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                    and any(expanded(ctx, a) for a in s.value.args):
                attrs = True
        for fn in scopes:
            yield from self._locals(fn, ctx)
        if not attrs:
            return
        for cls in ctx.analysis.classes.values():
            if says_any(ctx, cls.node, WORDS):
                yield from self._attrs(cls, ctx)

    def _locals(self, fn: ast.AST, ctx: Context) -> Iterator[Finding]:
        made: dict[str, ast.stmt] = {}
        for s in sorted(own_statements(fn.body), key=lambda s: s.lineno):  # type: ignore[attr-defined]
            for target in _writes(s):
                name = _written_name(target)
                if name in made:
                    origin = made[name]
                    f = self.report(s, ctx, related=[Related(
                        ctx.path, origin.lineno, "the expand")], name=name, line=origin.lineno,
                        where="this statement")
                    if isinstance(target, ast.Subscript):  # NOTE [expanded tensors written in place]
                        f = replace(f, message=self.message_indexed.format(
                            name=name, line=origin.lineno))
                    yield f
            if isinstance(s, ast.Assign):
                for t in s.targets:
                    if isinstance(t, ast.Name):
                        made.pop(t.id, None)
                        if expanded(ctx, s.value):
                            made[t.id] = s

    def _attrs(self, cls: object, ctx: Context) -> Iterator[Finding]:
        made: dict[str, ast.stmt] = {}
        methods = cls.methods  # type: ignore[attr-defined]
        for fn in methods.values():
            if not says_any(ctx, fn, WORDS):
                continue
            for s in own_statements(fn.body):
                if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                        and isinstance(s.value.func, ast.Attribute) \
                        and s.value.func.attr == "register_buffer" \
                        and len(s.value.args) >= 2 \
                        and isinstance(s.value.args[0], ast.Constant) \
                        and isinstance(s.value.args[0].value, str) \
                        and expanded(ctx, s.value.args[1]):
                    made.setdefault(s.value.args[0].value, s)
                elif isinstance(s, ast.Assign) and len(s.targets) == 1:
                    a = _self_attr(s.targets[0]) if isinstance(s.targets[0], ast.Attribute) \
                        else None
                    if a is not None:
                        if expanded(ctx, s.value) and fn.name == "__init__":
                            made.setdefault(a, s)
        if not made:
            return
        for attr, origin in made.items():
            if any(isinstance(s, ast.Assign) and origin is not s and any(
                    _self_attr(t) == attr and isinstance(t, ast.Attribute) for t in s.targets)
                    for fn in methods.values() for s in own_statements(fn.body)):
                continue  # set again somewhere: which value is written is not known
            write = self._attr_write(methods, attr, ctx)
            if write is not None:
                yield self.report(origin, ctx, related=[Related(
                    ctx.path, write.lineno, "the in-place write")], name="self." + attr,
                    line=origin.lineno, where=f"line {write.lineno}")

    def _attr_write(self, methods: dict, attr: str, ctx: Context) -> ast.stmt | None:
        for fn in methods.values():
            for s in own_statements(fn.body):
                for target in _writes(s):
                    if _self_attr(target) == attr and (
                            isinstance(target, ast.Attribute) or isinstance(target,
                                                                             ast.Subscript)):
                        return s
                for call in (n for n in walk(s) if isinstance(n, ast.Call)):
                    for pos, arg in enumerate(call.args):
                        if isinstance(arg, ast.Attribute) and _self_attr(arg) == attr:
                            got = self._callee_write(call, pos, methods, ctx)
                            if got is not None:
                                return got
        return None

    @staticmethod
    def _callee_write(call: ast.Call, pos: int, methods: dict, ctx: Context
                      ) -> ast.stmt | None:
        f = call.func
        target, skip = None, 0
        if isinstance(f, ast.Name):
            defs = [n for n in ctx.tree.body if isinstance(n, ast.FunctionDef)  # type: ignore[attr-defined]
                    and n.name == f.id]
            target = defs[0] if len(defs) == 1 else None
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.value.id == "self":
                target, skip = methods.get(f.attr), 1
            elif f.attr == "apply":
                cls = ctx.analysis.classes.get(f.value.id)
                target = cls.methods.get("forward") if cls is not None else None
                skip = 1
        if target is None:
            return None
        p = _param_at(target, pos, skip)
        return _writes_of(target, p) if p is not None else None
