"""GT447: the optimizer is built over one instance of a class, the loop trains another."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import ascii_code
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk, scope_nodes
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import file_says
from gradtrace.lint.rules.leaf._tensors import node_mentions
from gradtrace.lint.rules.registration._modules import (
    SELF_RETURNING, covers, optimizer_builds, rebound_between, step_lines,
)


def _spells_parameters(fn: ast.AST, ctx: Context) -> bool:
    """# NOTE [optimizer over no parameters call]
    GT447 names the module an optimizer is built over from a ``.parameters()`` or
    ``.named_parameters()`` call inside the build (``SGD(net.parameters())``); a build
    without one is passed over. A build is a binding of the function (or the module), so in
    code (strings and comments out) whose lines never spell ``parameters`` there is nothing
    to report, known before the function's optimizers are read (``optimizer_builds`` reads
    the kind of each local callee, maybe through other files: ``generation/utils.py``).
    In ASCII code only: Python reads names NFKC-normalised."""
    if not ascii_code(ctx):
        return True
    return ctx.mentions("parameters") if isinstance(fn, ast.Module) \
        else node_mentions(ctx, fn, "parameters")


class OptimizerOverOtherInstance(Rule):
    """The optimizer is built over the parameters of one instance of a model class, and the
    training step runs another instance of the same class.

    Why: `optimizer = SGD(net.parameters())` next to `model = Net()` holds `net`'s tensors.
    When the loop computes the loss with `model(x)`, `model`'s parameters get gradients that
    nothing applies, while `step()` updates `net`, which no loss touches: the model never
    learns, silently (the PyTorch recipe "saving and loading a general checkpoint", reported
    as pytorch/tutorials#1215; checked on torch 2.13). The two names are easy to mix up when a
    script builds the model twice (before and after a checkpoint, a fresh copy for a new run).
    Build the optimizer over the module the loss is computed from.
    Known limits: both must be instances of one class the analysis knows, in one function (or
    script); the optimizer's module must not be called or handed to a call after the
    optimizer is built, and the other module must be in no optimizer there.
    """

    code = "GT447"
    name = "optimizer-over-other-instance"
    message = ("`{opt}` is built over `{a}.parameters()`, but the training step runs `{b}` "
               "(line {line}), another `{cls}`: `{opt}.step()` updates `{a}`, which no loss "
               "uses, and `{b}` never learns; build it over `{b}.parameters()`")
    triggers = ("optim",)
    gate_statements = "function"
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            net = nn.Linear(4, 2)
            model = nn.Linear(4, 2)
            opt = torch.optim.Adam(net.parameters(), lr=1e-3)
            for x, y in loader:
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            """, at=(5, 6)),
        Good("""
            import copy
            import torch
            import torch.nn as nn
            model = nn.Linear(4, 2)
            ema = copy.deepcopy(model)
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            for x, y in loader:
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                print(ema(x).mean())
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _check(self, fn: ast.AST, ctx: Context) -> Iterator[Finding]:
        if not file_says(ctx, "step"):
            return  # no `.step(...)` call in the file: no optimizer is stepped (step_lines)
        if not _spells_parameters(fn, ctx):  # NOTE [optimizer over no parameters call]
            return
        scope = ctx.scope(fn)
        builds = optimizer_builds(scope)
        if not builds:
            return
        an = ctx.analysis
        for ob in builds:
            if len(ob.sources) != 1:
                continue
            a = next(iter(ob.sources))
            src = next((n.func.value for n in bfs_walk(ob.call) if isinstance(n, ast.Call)
                        and isinstance(n.func, ast.Attribute)
                        and n.func.attr in ("parameters", "named_parameters")), None)
            ka = an.kind_in(src, fn, ob.stmt.lineno) if src is not None else None
            if ka is None or ka.what != MODULE or not ka.cls:
                continue
            line = ob.stmt.lineno
            later_builds = [o for o in builds if o.stmt.lineno > line]
            steps = [s for s in step_lines(scope, ob.name) if s > line]
            if not steps or any(rebound_between(scope, ob.name, line, s) for s in steps):
                continue
            if self._a_used(fn, a, ob.call, line):
                continue
            other = self._other_call(fn, a, ka.cls, line, builds, ctx)
            if other is None or any(covers(s, dotted(other.func) or "") for o in later_builds
                                    for s in o.sources):
                continue
            b = dotted(other.func) or "?"
            if _callers_pass(fn, a, b, ctx):
                continue
            yield self.report(ob.call, ctx, related=[Related(
                ctx.path, other.lineno, f"the loss is computed with `{b}` here",
                ctx.column(other))], opt=ob.name, a=a, b=b, line=other.lineno,
                cls=ka.cls.rpartition(".")[2])

    @staticmethod
    def _a_used(fn: ast.AST, a: str, build: ast.Call, line: int) -> bool:
        """``a`` is read after ``line`` other than as the receiver of a method or attribute
        (``a.state_dict()``), or called."""
        inside = {id(n) for n in bfs_walk(build)}
        attr_recv = set()
        for n in scope_nodes(fn):
            if isinstance(n, ast.Attribute) and dotted(n.value) == a:
                attr_recv.add(id(n.value))
        for n in scope_nodes(fn):
            if id(n) in inside or getattr(n, "lineno", 0) < line:
                continue
            if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) == a \
                    and isinstance(getattr(n, "ctx", None), ast.Load) and id(n) not in attr_recv:
                return True
        return False

    @staticmethod
    def _other_call(fn: ast.AST, a: str, cls: str, line: int, builds: list, ctx: Context
                    ) -> ast.Call | None:
        for n in sorted((n for n in scope_nodes(fn) if isinstance(n, ast.Call)
                         and getattr(n, "lineno", 0) > line),
                        key=lambda c: (c.lineno, c.col_offset)):
            f = n.func
            if not isinstance(f, (ast.Name, ast.Attribute)) or not n.args:
                continue
            name = dotted(f)
            if not name or covers(a, name) or covers(name, a) or any(
                    covers(s, name) for o in builds for s in o.sources) \
                    or _same_module(ctx.scope(fn), a, name, n.lineno):
                continue
            k = ctx.analysis.kind_in(f, fn, n.lineno)
            if k is not None and k.what == MODULE and k.cls == cls:
                return n
        return None


def _same_module(scope: Scope, a: str, b: str, line: int) -> bool:
    """``net = self.train()`` (or ``model.to(device).eval()``): ``b`` last bound, before
    ``line``, to a chain of the module methods that return the module itself, on ``a`` (or
    the other way round): one instance under two names (``Module.train()`` returns the
    module, checked on torch 2.13)."""
    for x, y in ((a, b), (b, a)):
        bd = scope.binding_before(y, line)
        e = bd.value if bd is not None else None
        if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
                and e.func.attr in SELF_RETURNING):
            continue
        while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in SELF_RETURNING:
            e = e.func.value
        if dotted(e) == x:
            return True
    return False


def _callers_pass(fn: ast.AST, a: str, b: str, ctx: Context) -> bool:
    """``a`` is a parameter of the function ``fn`` and every call of ``fn`` in the file hands
    it ``b``, the module the step runs (alibi-detect's ``train_model(clf, ...)`` whose body
    calls the global ``clf``): one instance under two names."""
    from gradtrace.lint.analysis.callees import function_sites
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
            a not in {x.arg for x in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}:
        return False
    sites = function_sites(ctx.analysis, fn)
    if not sites:
        return False
    for call, _ in sites:
        binds = ctx.analysis.arguments(fn, call)
        if binds is None or a not in binds or dotted(binds[a]) != b:
            return False
    return True
