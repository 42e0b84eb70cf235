"""What the file's own functions are, for :class:`~.facts.Analysis`: the kind a function
returns (also through a call that passes it the owner), how a call binds its arguments, where
the file calls a function and what it passes, and which optimizers a function steps.

A base of :class:`~.facts.Analysis`, which supplies ``ctx``, ``_kind``, ``class_of``,
``callee``, ``functions`` and the memo dicts ``_returns`` and ``_stepped``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.calls import ascii_code, calls_by_name, named_calls
from gradtrace.lint.analysis.kinds import Kind
from gradtrace.lint.analysis.returned_terms import returns
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope


class FunctionFacts:
    """The function-reading methods of :class:`~.facts.Analysis` (a base class only)."""

    # -- the file's own functions -------------------------------------------------------------
    def returns(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Kind | None:
        """The kind of what ``fn`` returns, when every ``return`` with a value agrees."""
        key = id(fn)
        if key not in self._returns:
            self._returns[key] = None  # recursion guard
            scope = self.ctx.scope(fn)
            kinds = [self._kind(s.value, scope, s.lineno + 1, 1)
                     for s in scope.stmts if isinstance(s, ast.Return) and s.value is not None]
            k = kinds[0] if kinds else None
            if k is not None and all(x is not None and x.what == k.what and x.cls == k.cls
                                     for x in kinds):
                over = frozenset().union(*(x.over for x in kinds if x is not None))
                k = Kind(k.what, k.cls, k.requires_grad, over, k.node)
            else:
                k = None
            self._returns[key] = k
        return self._returns[key]

    def _through(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call,
                 scope: Scope, line: int, depth: int) -> Kind | None:
        p = passed_through(self.ctx, fn)  # `def w(v): return v`: the argument's kind
        if p is not None and (arg := self.arguments(fn, call).get(p)) is not None:
            return self._kind(arg, scope, line, depth + 1)
        k = self.returns(fn)
        if k is None or not k.over:
            return k
        binds = self.arguments(fn, call)
        over = set()
        for o in k.over:
            root, dot, rest = o.partition(".")
            if root in binds:
                actual = dotted(binds[root])
                if actual is None:
                    continue
                over.add(actual + dot + rest)
            elif root == "self" and not (isinstance(call.func, ast.Attribute)
                                         and dotted(call.func.value) == "self"):
                continue  # another object's `self`
            else:
                over.add(o)
        return Kind(k.what, k.cls, k.requires_grad, frozenset(over), k.node)

    @staticmethod
    def arguments(fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call
                  ) -> dict[str, ast.expr]:
        """Parameter name -> argument expression for ``call`` of ``fn`` (``self`` skipped
        for a method called through an attribute)."""
        a = fn.args
        names = [x.arg for x in (*a.posonlyargs, *a.args)]
        if names and names[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
            names = names[1:]
        out: dict[str, ast.expr] = {}
        for n, v in zip(names, call.args):
            if isinstance(v, ast.Starred):
                break
            out[n] = v
        for k in call.keywords:
            if k.arg is not None:
                out[k.arg] = k.value
        return out

    def call_sites(self, fn: ast.FunctionDef | ast.AsyncFunctionDef
                   ) -> list[tuple[ast.Call, ast.AST]]:
        """The calls of ``fn`` in this file and the function (or module) each is made in:
        ``helper(...)`` for a top-level function, ``Cls(...)`` for ``Cls.__init__``."""
        cls = self.class_of(fn)
        if cls is not None and fn.name != "__init__":
            return []
        target = cls.node.name if cls is not None else fn.name
        if cls is None and self.functions.get(fn.name) is not fn:
            return []
        if ascii_code(self.ctx):  # the statements naming it only (NOTE [call sites])
            return list(self.ctx.memo("analysis-call-sites:" + target, self.ctx.tree,
                                      lambda: named_calls(self.ctx, target)))
        memo: dict[str, list[tuple[ast.Call, ast.AST]]] = self.ctx.memo(
            "analysis-call-sites", self.ctx.tree, lambda: calls_by_name(self.ctx.tree))
        return list(memo.get(target, ()))

    def argument_values(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str
                        ) -> list[tuple[ast.expr, ast.AST]]:
        """What the file's calls of ``fn`` pass for its parameter ``name`` (with the function
        or module each call is made in); empty when any call site passes nothing for it."""
        out = []
        shift = self.class_of(fn) is not None  # `Cls(a)` binds `a` to the parameter after self
        for call, where in self.call_sites(fn):
            binds = self.arguments(fn, call)
            if shift:
                a = fn.args
                names = [x.arg for x in (*a.posonlyargs, *a.args)][1:]
                binds = {**dict(zip(names, call.args)),
                         **{k.arg: k.value for k in call.keywords if k.arg is not None}}
                if any(isinstance(x, ast.Starred) for x in call.args):
                    return []
            v = binds.get(name)
            if v is None:
                return []
            out.append((v, where))
        return out

    def stepped_globals(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
        """Module-level names on which ``fn`` calls ``.step()`` (``optimizer.step()`` in a
        ``train()`` of a script that reads the global optimizer)."""
        return _globals_stepped(fn, self.ctx.scope(fn))

    def stepped_params(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
        """Parameters of ``fn`` on which it calls ``.step()`` (``opt.step()``,
        ``scaler.step(opt)``), directly or through another function of the file."""
        key = id(fn)
        if key not in self._stepped:
            self._stepped[key] = frozenset()  # recursion guard
            out: set[str] = set()
            for n in bfs_walk(fn):
                if not isinstance(n, ast.Call):
                    continue
                f = n.func
                if isinstance(f, ast.Attribute) and f.attr == "step":
                    if isinstance(f.value, ast.Name):
                        out.add(f.value.id)
                    if n.args and isinstance(n.args[0], ast.Name):
                        out.add(n.args[0].id)
                inner = self.callee(n, fn)
                if inner is not None and inner is not fn:
                    binds = self.arguments(inner, n)
                    for p in self.stepped_params(inner):
                        v = binds.get(p)
                        if isinstance(v, ast.Name):
                            out.add(v.id)
            self._stepped[key] = frozenset(out & set(_param_names(fn)))
        return self._stepped[key]


def _globals_stepped(fn: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope) -> frozenset[str]:
    """Names ``fn`` calls ``.step()`` on that are neither its parameters nor bound in it."""
    own = set(_param_names(fn)) | set(scope.bindings)
    out = set()
    for m in scope.calls_to("step"):
        if "." not in m.receiver and m.receiver not in own:
            out.add(m.receiver)
        a = m.call.args[0] if m.call.args else None
        if isinstance(a, ast.Name) and a.id not in own:
            out.add(a.id)
    return frozenset(out)


def _param_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    return [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
            if x is not None]


def passed_through(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The parameter that every ``return`` of ``fn`` gives back unchanged (``def w(v): return
    v``, a device-move stub of a CPU port): the call is its argument. None when the parameter
    is rebound, or a return gives anything else."""
    a = fn.args
    names = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    scope = ctx.scope(fn)
    got = {r.value.id if isinstance(r.value, ast.Name) else None
           for r in returns(fn.body)}
    if len(got) != 1:
        return None
    p = got.pop()
    if p is None or p not in names or any(
            b.stmt is not fn for b in scope.bindings.get(p, ())):
        return None
    return p
