"""Which submodules of a module class of the file reach what ``forward`` gives back only
through a cut.

# NOTE [forward cuts]
Inside ``forward``, a submodule's output that goes through ``.detach()``, ``.data``, an
``argmax``/comparison/``.long()``, a Python number, a copy into a new tensor
(``torch.tensor([a, b])``, ``torch.Tensor(...)``, ``torch.as_tensor`` of a list), or is
computed under ``torch.no_grad()``
carries no graph past that point (cuts.py names every cut). When every path from a
submodule's calls to every value ``forward`` returns (or stores on ``self``) passes such a
cut, a loss on the model's outputs never reaches that submodule's parameters: their ``.grad``
stays None and the optimizer never moves them. The walk is one pass over ``forward`` in
source order (loop bodies twice), tracking for each local name the submodules whose output
reaches it live and those that reach it only through a cut (with the cut's node). A call of
another method of the class counts every submodule that method touches as live: the answer
errs toward "reaches".
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import CUT_FUNCS, CUT_METHODS, INTEGER_METHODS, REBUILD_FUNCS
from gradtrace.lint.analysis.keyed_children import child_path
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER
from gradtrace.lint.analysis.module_results import forward_of
from gradtrace.lint.analysis.off_forwards import off_forward
from gradtrace.lint.analysis.reach import disables_grad
from gradtrace.lint.nodes import bfs_walk, child_nodes

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

CUTS = frozenset(CUT_METHODS) | INTEGER_METHODS | {"detach_"}
# container methods that put their arguments into the receiver
FILLS = frozenset({"append", "extend", "insert", "update", "add", "__setitem__", "setdefault"})


@dataclass
class Flow:
    """Submodules whose output reaches a value live, and those reaching it only cut."""

    live: set[str] = field(default_factory=set)
    cut: dict[str, ast.AST] = field(default_factory=dict)

    def merge(self, other: Flow) -> None:
        self.live |= other.live
        for k, v in other.cut.items():
            self.cut.setdefault(k, v)

    def severed(self, at: ast.AST) -> Flow:
        out = Flow(set(), dict(self.cut))
        for k in self.live:
            out.cut.setdefault(k, at)
        return out


@dataclass
class ForwardCuts:
    """``cut``: submodule (or parameter) -> the node that cuts its only paths to
    ``forward``'s outputs; ``called``: those ``forward`` runs or reads; ``groups``: id of a
    cut node -> the ``no_grad`` block it sits in (one cause for several calls)."""

    cut: dict[str, ast.AST]
    called: set[str]
    groups: dict[int, ast.AST]
    walked: list[ast.AST]  # forward and the methods it runs, as walked


def forward_cuts(ctx: Context, cls: ClassInfo) -> ForwardCuts | None:
    """NOTE [forward cuts] for the module class ``cls`` (None: no ``forward``, nor a
    ``__call__`` defined instead: NOTE [module results])."""
    fwd = forward_of(cls)
    if fwd is None or not cls.is_module:
        return None
    def make() -> ForwardCuts:
        walked: list[ast.AST] = [fwd]
        w = _Walk(ctx, cls, set(), {}, (fwd,), walked)
        w.block(fwd.body)
        out = w.ret
        out.merge(w.kept)
        cut = {k: v for k, v in out.cut.items() if k not in out.live}
        return ForwardCuts(cut, w.called, w.groups, walked)
    return ctx.memo("forward-cuts", fwd, make)


class _Walk:
    def __init__(self, ctx: Context, cls: ClassInfo, called: set[str],
                 groups: dict[int, ast.AST], stack: tuple[ast.AST, ...],
                 walked: list[ast.AST]) -> None:
        self.ctx = ctx
        self.cls = cls
        self.env: dict[str, Flow] = {}
        self.ret = Flow()   # what the function returns
        self.kept = Flow()  # what it stores on ``self``
        self.called = called
        self.groups = groups
        self.stack = stack
        self.walked = walked
        self.off: list[ast.AST] = []

    def submodule(self, attr: str) -> bool:
        k = self.cls.attr_kind(attr)
        if k is not None and k.what == PARAMETER:
            info = self.cls.attrs.get(attr)
            return not (info is not None and isinstance(info.value, ast.Call) and any(
                kw.arg == "requires_grad" for kw in info.value.keywords))
        if k is None:  # `self.encoder = encoder` (GT115 asks what every site hands it:
            info = self.cls.attrs.get(attr)  # NOTE [handed a fresh module])
            return info is not None and not info.later and isinstance(info.value, ast.Name) \
                and getattr(info.method, "name", "") == "__init__"
        return k.what == MODULE

    # -- statements -------------------------------------------------------------------------
    def block(self, body: list[ast.stmt]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None:
            v = self.value(s.value)
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                self.bind(t, v)
        elif isinstance(s, ast.AugAssign):
            v = self.value(s.value)
            v.merge(self.value(s.target))
            self.bind(s.target, v)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.ret.merge(self.value(s.value))
        elif isinstance(s, ast.Expr):
            v = self.value(s.value)
            c = s.value
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                    and c.func.attr in FILLS:
                self.bind(c.func.value, v, merge=True)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            off = any(disables_grad(i.context_expr, self.ctx) for i in s.items)
            if off:
                self.off.append(s)
            self.block(s.body)
            if off:
                self.off.pop()
        elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            if isinstance(s, (ast.For, ast.AsyncFor)):
                self.bind(s.target, self.value(s.iter))
            for _ in range(2):
                self.block(s.body)
            self.block(s.orelse)
        elif isinstance(s, ast.If):
            self.value(s.test)
            self.block(s.body)
            self.block(s.orelse)
        elif isinstance(s, ast.Try):
            self.block(s.body)
            for h in s.handlers:
                self.block(h.body)
            self.block(s.orelse)
            self.block(s.finalbody)
        else:
            for c in child_nodes(s):
                if isinstance(c, ast.expr):
                    self.value(c)

    def bind(self, t: ast.expr, v: Flow, merge: bool = False) -> None:
        if self.off:
            v = v.severed(self.off[-1])
        if isinstance(t, ast.Name):
            if merge and t.id in self.env:
                self.env[t.id].merge(v)
            else:
                self.env[t.id] = Flow(set(v.live), dict(v.cut))
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self.bind(e.value if isinstance(e, ast.Starred) else e, v, merge)
        elif isinstance(t, ast.Subscript):
            self.bind(t.value, v, merge=True)
        elif isinstance(t, ast.Attribute):
            if isinstance(t.value, ast.Name) and t.value.id == "self":
                self.kept.merge(v)  # kept on the module: read elsewhere
            else:
                self.bind(t.value, v, merge=True)

    # -- expressions ------------------------------------------------------------------------
    def value(self, e: ast.expr) -> Flow:
        kid = self.keyed(e)
        if kid is not None:
            return self.live_or_cut(kid, e)
        if isinstance(e, ast.Name):
            got = self.env.get(e.id)
            return Flow(set(got.live), dict(got.cut)) if got is not None else Flow()
        if isinstance(e, ast.Attribute):
            if isinstance(e.value, ast.Name) and e.value.id == "self":
                if not self.submodule(e.attr):
                    return Flow()
                self.called.add(e.attr)
                return self.live_or_cut(e.attr, e)
            inner = self.value(e.value)
            return inner.severed(e) if e.attr == "data" else inner
        if isinstance(e, ast.Compare):
            v = self.children(e)
            return v.severed(e)
        if isinstance(e, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp,
                          ast.DictComp)):
            return self.children(e)
        if isinstance(e, ast.Call):
            return self.call(e)
        return self.children(e)

    def keyed(self, e: ast.AST) -> str | None:
        """``"body.embed"`` for a run or read of ``self.body.embed``
        (NOTE [keyed children]), marked as called."""
        kid = child_path(self.ctx, self.cls, e) \
            if isinstance(e, (ast.Attribute, ast.Subscript)) else None
        if kid is not None and self.submodule(kid.partition(".")[0]):
            self.called.add(kid)
            return kid
        return None

    def live_or_cut(self, attr: str, e: ast.AST) -> Flow:
        """A submodule run (or a parameter read) here: cut at once under ``no_grad``."""
        if not self.off:
            return Flow({attr})
        self.groups[id(e)] = self.off[-1]
        return Flow(set(), {attr: e})

    def inline(self, m: ast.FunctionDef | ast.AsyncFunctionDef, e: ast.Call) -> Flow:
        """``self.m(args)``: ``m`` walked with its parameters bound to the arguments' flows."""
        w = _Walk(self.ctx, self.cls, self.called, self.groups, (*self.stack, m), self.walked)
        if m not in self.walked:
            self.walked.append(m)
        names = [a.arg for a in (*m.args.posonlyargs, *m.args.args)][1:]
        for n, a in zip(names, e.args):
            if isinstance(a, ast.Starred):
                break
            w.env[n] = self.value(a)
        for k in e.keywords:
            if k.arg is not None:
                w.env[k.arg] = self.value(k.value)
        deco = next((d for d in m.decorator_list if disables_grad(d, self.ctx)), None)
        if deco is not None:  # `@torch.no_grad()` on the method: its whole body runs so
            w.off.append(deco)
        w.block(m.body)
        self.kept.merge(w.kept)
        out = w.ret
        return out.severed(self.off[-1]) if self.off else out

    def children(self, e: ast.AST) -> Flow:
        v = Flow()
        for c in child_nodes(e):
            if isinstance(c, ast.expr):
                v.merge(self.value(c))
            elif isinstance(c, ast.comprehension):
                v.merge(self.value(c.iter))
                for x in c.ifs:
                    self.value(x)
                self.bind(c.target, self.value(c.iter))
            elif isinstance(c, ast.keyword):
                v.merge(self.value(c.value))
        return v

    def call(self, e: ast.Call) -> Flow:
        f = e.func
        args = Flow()
        for a in (*e.args, *(k.value for k in e.keywords)):
            args.merge(self.value(a.value if isinstance(a, ast.Starred) else a))
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id == "self":
            if self.submodule(f.attr):
                self.called.add(f.attr)
                off = None if self.off else off_forward(self.ctx, self.cls, f.attr)
                # its class's `forward` runs with grad off: NOTE [grad-off submodule]
                args.merge(self.live_or_cut(f.attr, e) if off is None
                           else Flow(set(), {f.attr: off}))
                return args
            m = self.cls.methods.get(f.attr)
            if m is not None and m not in self.stack and len(self.stack) < 4:
                return self.inline(m, e)
            if m is not None:  # another method: every submodule it touches may flow
                if m not in self.walked:
                    self.walked.append(m)
                for n in bfs_walk(m):
                    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                            and n.value.id == "self" and self.submodule(n.attr):
                        args.live.add(n.attr)
                        if isinstance(n.ctx, ast.Load):
                            self.called.add(n.attr)
                return args
        kid = self.keyed(f)
        if kid is not None:
            args.merge(self.live_or_cut(kid, e))
            return args
        q = self.ctx.qualified_name(f) or ""
        if q in CUT_FUNCS or q in REBUILD_FUNCS or q == "torch.as_tensor" and e.args \
                and isinstance(e.args[0], (ast.List, ast.Tuple)):
            return args.severed(e)  # `torch.Tensor([a, b])` copies values: a new leaf
        if isinstance(f, ast.Attribute):
            recv = self.value(f.value)
            if f.attr in CUTS:
                return recv.severed(e)
            recv.merge(args)
            return recv
        args.merge(self.value(f))
        return args
